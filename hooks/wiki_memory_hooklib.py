"""The wiki-memory hook: capture one harness event, keep it in the outbox, send it.

Over 600 lines on purpose: one file, so that a hook run under ``python -S`` imports one
module of its own (each further module is paid again at every harness event).

Standard library only, and only what each event needs, so that a hook run costs
little more than the interpreter's own start (run it with ``python -S``).

One run (``main(["--harness", "claude-code"])``, event JSON on stdin):

1. Read stdin to EOF (never the environment; Codex ``notify`` JSON comes as the
   last argument and stdin is not touched then).
2. Find the project by the one order of ``wiki_memory/capture/project.py``:
   ``project =`` in the nearest ``.wiki-memory.toml`` upward from the event's
   ``cwd``, else the git repository (a worktree maps to its main repository), else
   none (``project_from: "none"``: the server files the event under the session's
   current project, or none). Apply the nearest ``.wiki-memory.toml``'s ``[capture]``
   rules (``enabled``, ``ignore_paths``, ``mode = "allowlist"`` + ``paths``).
3. Build the observation ``{harness, event, session_id, project, cwd, event_id,
   ts, payload}``; truncate long strings so that it stays under
   ``max_event_bytes``; redact secrets with ``wiki_memory.capture.sanitize``.
   When it cannot be imported (or raises), the text is never kept as it is: a
   small built-in fallback redacts short strings and drops longer ones (see
   :func:`redact`), and one line on stderr says so.
4. Write it to the outbox (``<data_dir>/outbox/``, 0700 directory, 0600 files,
   fsynced) and send it: only to an address named for it (``--url``, hook.toml's
   ``url``) or to the one the data directory's live server wrote in ``server.json``
   (``wiki_memory/liveserver.py``); with neither, the server is away and the event
   waits in the outbox (never a default port: whatever holds it is not this store). On a 2xx reply the file is removed; when older events
   wait in the outbox, a detached drainer sends them all in order instead.
   After a refused or timed-out delivery the outbox records it (``.unreachable``)
   and every run skips the network for a back-off period (30 s, doubling to 5 min);
   the server drains its own data directory's outbox when it is back.
5. On ``SessionStart`` ask ``POST /v1/brief`` and print exactly one JSON object
   in the harness's format; on every other event print nothing. When the server is
   unreachable, the context is one line composed from the outbox's state instead.

Every error is caught; the run exits 0 within ``deadline_seconds`` (default
2 s, counted from the start of the process; 1.2 s for ``SessionEnd``, 1 s for
``SessionStart``).
"""

from __future__ import annotations

import json
import os
import sys
import time

#: ``typing`` is not imported when the hook runs (its start-up cost is paid on every
#: event); the type checker reads these names, the annotations are never evaluated
TYPE_CHECKING = False
if TYPE_CHECKING:
    import _socket
    import re
    from types import ModuleType
    from typing import Any, Literal

_T0 = time.monotonic()

VERSION = "1"
HARNESSES = ("claude-code", "codex", "gemini-cli")
APP_NAME = "wiki-memory"
REPO_CONFIG = ".wiki-memory.toml"

#: Defaults of the tunables; ``<data_dir>/hook.toml`` and ``WIKI_MEMORY_HOOK_*``
#: environment variables override them. Seconds, bytes, events, tokens.
DEFAULTS: dict[str, float | int] = {
    "deadline_seconds": 2.0,
    "session_end_deadline_seconds": 1.2,
    "max_event_bytes": 256 * 1024,
    "max_batch_bytes": 960 * 1024,
    "outbox_max_events": 5000,
    "outbox_max_bytes": 64 * 1024 * 1024,
    "drain_request_seconds": 5.0,
    "drain_max_seconds": 120.0,
    "drain_batch_events": 200,
    "brief_budget_tokens": 1000,
    "brief_max_chars": 9000,
    "session_start_deadline_seconds": 1.0,
    "backoff_seconds": 30.0,
    "backoff_max_seconds": 300.0,
}

#: Replies that say "try again later", not "this event is bad": never dropped.
RETRY_STATUSES = frozenset({401, 403, 404, 405, 407, 408, 409, 421, 423, 425, 429})

#: What an event is cut to after a 413 from a server with a lower limit than ours.
SHRUNK_EVENT_BYTES = 64 * 1024

TRUNCATION_MARK = (
    "\n[... truncated by wiki-memory hook: {omitted} of {total} characters left out ...]\n"
)

_EMITTED = False
_PENDING_OUTPUT = ""
_IS_DRAINER = False
_WARNED = False


class Config:
    """Where to send and the tunables (see :data:`DEFAULTS`)."""

    def __init__(self, data_dir: str) -> None:
        self.data_dir = data_dir
        #: where events go; "" when no server of this data directory runs (away)
        self.url = ""
        self.token: str | None = None
        self.token_file = os.path.join(data_dir, "auth", "owner.token")
        #: PEM CA trusted (besides the system's) for an https:// server
        self.ca_file: str | None = None
        self.values: dict[str, float | int] = dict(DEFAULTS)

    def get(self, name: str) -> float:
        return float(self.values[name])

    def geti(self, name: str) -> int:
        return int(self.values[name])

    @property
    def outbox_dir(self) -> str:
        return os.path.join(self.data_dir, "outbox")


# --------------------------------------------------------------------------- config


def default_data_dir(env: dict[str, str] | os._Environ[str] | None = None) -> str:
    """``$WIKI_MEMORY_HOME``, else the platform's user data dir, as platformdirs has it.

    Linux/BSD: ``$XDG_DATA_HOME/wiki-memory`` or ``~/.local/share/wiki-memory``;
    macOS: ``~/Library/Application Support/wiki-memory``; Windows:
    ``%LOCALAPPDATA%\\wiki-memory``.
    """
    env = os.environ if env is None else env
    home = env.get("WIKI_MEMORY_HOME")
    if home:
        return os.path.expanduser(home)
    if sys.platform == "darwin":
        return os.path.expanduser("~/Library/Application Support/" + APP_NAME)
    if sys.platform == "win32":
        base = env.get("LOCALAPPDATA") or os.path.expanduser("~\\AppData\\Local")
        return os.path.join(base, APP_NAME)
    xdg = (env.get("XDG_DATA_HOME") or "").strip()
    base = xdg if xdg else os.path.expanduser("~/.local/share")
    return os.path.join(base, APP_NAME)


_LIVE: object = None


def live_address(data_dir: str) -> str | None:
    """The address of the server running on ``data_dir``: the one its ``server.json``
    names while that server lives and listens (``wiki_memory/liveserver.py``, the one
    rule the CLI and the MCP bridge follow too), else None. Without that module (the
    hook copied away from its repository), the same rule built in here."""
    global _LIVE
    if _LIVE is None:
        _repo_on_path()
        try:
            from wiki_memory import liveserver as mod

            _LIVE = mod
        except (Exception, SystemExit):
            _LIVE = False
    try:
        if not _LIVE:
            return _live_address_builtin(data_dir)
        addr = _LIVE.live_address(data_dir)  # type: ignore[attr-defined]
    except Exception:
        return None
    return addr if isinstance(addr, str) else None


def _live_address_builtin(data_dir: str) -> str | None:
    """``wiki_memory/liveserver.py``'s ``live_address``, for a hook that cannot import
    it: the address of ``server.json`` only while its pid is this user's live process,
    started when the file says (``/proc``), and listening. Kept in step with the module
    by ``tests/base/test_liveserver.py``."""
    try:
        with open(os.path.join(data_dir, "server.json"), "rb") as f:
            info = json.loads(f.read())
    except (OSError, ValueError):
        return None
    if not isinstance(info, dict):
        return None
    pid, addr = info.get("pid"), info.get("address")
    if type(pid) is not int or pid <= 0 or info.get("listening") is False:
        return None
    if not isinstance(addr, str) or not addr.startswith(("http://", "https://")):
        return None
    if os.name != "nt":
        try:
            os.kill(pid, 0)
        except OSError:
            return None
    recorded = info.get("process_start")
    if recorded is not None:
        try:
            with open(f"/proc/{pid}/stat", "rb") as f:
                stat = f.read()
            fields = stat[stat.rfind(b")") + 2 :].split()
            now = fields[19].decode("ascii", "replace") if len(fields) > 19 else None
        except OSError:
            now = None
        if now != recorded:
            return None
    return addr


def _read_toml(path: str) -> dict[str, Any]:
    import tomllib

    with open(path, "rb") as f:
        return tomllib.load(f)


def load_config(
    data_dir: str | None = None,
    url: str | None = None,
    token_file: str | None = None,
    pinned: bool = False,
    ca_file: str | None = None,
) -> Config:
    """Resolve the server URL, token and tunables.

    Precedence: arguments > ``WIKI_MEMORY_URL`` / ``WIKI_MEMORY_TOKEN_FILE`` /
    ``WIKI_MEMORY_TOKEN`` / ``WIKI_MEMORY_HOOK_<NAME>`` > ``<data_dir>/hook.toml``
    (``url``, ``token_file`` and any key of :data:`DEFAULTS`) > the address of the data
    directory's live server (:func:`live_address`) > none: ``cfg.url`` is ``""`` and
    nothing is sent (no default port). A bad hook.toml is ignored (with a warning).
    ``pinned`` (the installed command names its ``--data-dir`` or ``--url``): the
    ``WIKI_MEMORY_URL`` and ``WIKI_MEMORY_TOKEN*`` variables are ignored, so that no
    environment a harness passes redirects the events.

    The CA file for an ``https://`` server: ``ca_file`` > ``WIKI_MEMORY_CA_FILE`` >
    ``ca_file`` in hook.toml.
    """
    cfg = Config(data_dir or default_data_dir())
    env: dict[str, str] | os._Environ[str] = os.environ
    if pinned:
        env = {
            k: v
            for k, v in os.environ.items()
            if k not in ("WIKI_MEMORY_URL", "WIKI_MEMORY_TOKEN", "WIKI_MEMORY_TOKEN_FILE")
        }
    hook_toml = os.path.join(cfg.data_dir, "hook.toml")
    file_cfg: dict[str, Any] = {}
    if os.path.exists(hook_toml):
        try:
            file_cfg = _read_toml(hook_toml)
        except Exception as exc:
            warn(f"ignoring {hook_toml}: {exc}")
    if isinstance(file_cfg.get("url"), str):
        cfg.url = file_cfg["url"]
    if isinstance(file_cfg.get("token_file"), str):
        cfg.token_file = os.path.expanduser(file_cfg["token_file"])
    for name, default in DEFAULTS.items():
        raw = env.get("WIKI_MEMORY_HOOK_" + name.upper(), file_cfg.get(name))
        if raw is None or isinstance(raw, bool):
            continue
        try:
            cfg.values[name] = type(default)(raw)
        except (TypeError, ValueError):
            warn(f"ignoring {name}={raw!r}: not a number")
    cfg.url = url or env.get("WIKI_MEMORY_URL") or cfg.url or live_address(cfg.data_dir) or ""
    file_ca = file_cfg.get("ca_file") if isinstance(file_cfg.get("ca_file"), str) else None
    cfg.ca_file = ca_file or env.get("WIKI_MEMORY_CA_FILE") or file_ca or None
    cfg.url = cfg.url.rstrip("/")
    cfg.token_file = token_file or env.get("WIKI_MEMORY_TOKEN_FILE") or cfg.token_file
    cfg.token = (
        env.get("WIKI_MEMORY_TOKEN")
        if not (token_file or env.get("WIKI_MEMORY_TOKEN_FILE"))
        else None
    )
    if not cfg.token:
        try:
            with open(os.path.expanduser(cfg.token_file), encoding="utf-8") as f:
                cfg.token = f.read().strip() or None
        except OSError:
            cfg.token = None
    return cfg


# --------------------------------------------------------------------------- output


def warn(msg: str, once: bool = False) -> None:
    """One line on stderr (never stdout: that belongs to the harness). With ``once``,
    nothing is written if this run already warned (one line per failure, not two)."""
    global _WARNED
    if once and _WARNED:
        return
    _WARNED = True
    try:
        os.write(
            2,
            ("wiki-memory hook: " + msg.replace("\n", " ")[:500] + "\n").encode("utf-8", "replace"),
        )
    except OSError:
        pass


def session_start_output(harness: str, text: str) -> str:
    """The one JSON object a harness accepts as SessionStart context.

    Claude Code and Codex: ``{"hookSpecificOutput": {"hookEventName": "SessionStart",
    "additionalContext": text}}``; Gemini CLI: ``{"hookSpecificOutput":
    {"additionalContext": text}}``. ``text`` may be empty.
    """
    if harness == "gemini-cli":
        out = {"hookSpecificOutput": {"additionalContext": text}}
    else:
        out = {"hookSpecificOutput": {"hookEventName": "SessionStart", "additionalContext": text}}
    return json.dumps(out, ensure_ascii=False)


def _emit() -> None:
    """Write the pending stdout once (the whole of stdout), in one write."""
    global _EMITTED
    if _EMITTED or _IS_DRAINER:
        return
    _EMITTED = True
    if not _PENDING_OUTPUT:
        return
    data = (_PENDING_OUTPUT + "\n").encode("utf-8")
    try:
        while data:
            n = os.write(1, data)
            data = data[n:]
    except OSError:
        pass


#: ``(cfg, outbox)`` while this run delivers its event: a deadline reached then counts
#: as a timed-out delivery (the back-off starts)
_SENDING: tuple[Config, Outbox] | None = None


def _on_deadline(signum: int, frame: object) -> None:
    if _IS_DRAINER:
        os._exit(0)
    warn("deadline reached; the event stays in the outbox")
    if _SENDING is not None:
        try:
            note_unreachable(_SENDING[0], _SENDING[1], "no reply before the hook's deadline")
        except Exception:
            pass
    _emit()
    os._exit(0)


def _arm(seconds: float) -> None:
    try:
        import _signal  # the C module: ``signal`` adds enum wrappers (~1 ms)

        _signal.signal(_signal.SIGALRM, _on_deadline)
        _signal.setitimer(_signal.ITIMER_REAL, max(seconds, 0.01))
    except (ImportError, AttributeError, ValueError, OSError):
        pass


# --------------------------------------------------------------------------- input


def read_stdin(idle_seconds: float, max_seconds: float = 30.0) -> bytes:
    """All of stdin up to EOF. Gives up after ``idle_seconds`` without a byte or
    ``max_seconds`` in total (a writer that never closes its end)."""
    fd = 0
    chunks: list[bytes] = []
    try:
        import select
    except ImportError:  # pragma: no cover
        try:
            return sys.stdin.buffer.read()
        except (OSError, ValueError, AttributeError):
            return b""
    end = time.monotonic() + max_seconds
    try:
        if os.isatty(fd):
            return b""
        while True:
            wait = min(idle_seconds, end - time.monotonic())
            if wait <= 0:
                warn(f"stdin still open after {max_seconds:.0f} s; reading stopped")
                break
            try:
                ready, _, _ = select.select([fd], [], [], wait)
            except (OSError, ValueError):
                ready = [fd]
            if not ready:
                warn(f"stdin idle for {idle_seconds:.1f} s before EOF; reading stopped")
                break
            b = os.read(fd, 1 << 20)
            if not b:
                break
            chunks.append(b)
    except OSError:
        pass
    return b"".join(chunks)


def parse_args(argv: list[str]) -> dict[str, Any]:
    """``--harness NAME``, ``--event NAME``, ``--data-dir D``, ``--url U``,
    ``--token-file F``, ``--ca-file F``, ``--deadline S``, ``--drain``, ``--notify`` and, for Codex
    notify, the JSON argument (any argument starting with ``{``)."""
    opts: dict[str, Any] = {
        "harness": None,
        "event": None,
        "data_dir": None,
        "url": None,
        "token_file": None,
        "ca_file": None,
        "deadline": None,
        "drain": False,
        "notify_json": None,
    }
    i = 0
    valued = {
        "--harness",
        "--event",
        "--data-dir",
        "--url",
        "--token-file",
        "--ca-file",
        "--deadline",
    }
    while i < len(argv):
        a = argv[i]
        if a.startswith("{"):
            opts["notify_json"] = a
        elif a in valued and i + 1 < len(argv):
            opts[a[2:].replace("-", "_")] = argv[i + 1]
            i += 1
        elif a.startswith("--") and "=" in a and a.split("=", 1)[0] in valued:
            k, v = a.split("=", 1)
            opts[k[2:].replace("-", "_")] = v
        elif a == "--drain":
            opts["drain"] = True
        elif a == "--notify":
            pass
        i += 1
    return opts


# --------------------------------------------------------------------------- project & rules


def find_repo_config(cwd: str) -> tuple[str | None, dict[str, Any]]:
    """The nearest ``.wiki-memory.toml`` at or above ``cwd``: ``(its directory, parsed)``,
    or ``(None, {})``. A file that does not parse is reported and treated as
    ``[capture] enabled = false`` (the safe reading of a privacy setting)."""
    d = os.path.abspath(cwd)
    while True:
        p = os.path.join(d, REPO_CONFIG)
        if os.path.isfile(p):
            try:
                return d, _read_toml(p)
            except Exception as exc:
                warn(f"{p} does not parse ({exc}); capture is off for this repository")
                return d, {"capture": {"enabled": False}}
        parent = os.path.dirname(d)
        if parent == d:
            return None, {}
        d = parent


def git_toplevel(cwd: str) -> str | None:
    """The nearest directory at or above ``cwd`` holding ``.git`` (a directory, or the
    file of a worktree or submodule), without running git."""
    d = os.path.abspath(cwd)
    while True:
        if os.path.exists(os.path.join(d, ".git")):
            return d
        parent = os.path.dirname(d)
        if parent == d:
            return None
        d = parent


_PROJECT: object = None
#: the repository root the last :func:`resolve_project` decided by (``git`` only)
_ROOT: list[str] = []
#: the repository id this event went with (the brief asks for its project)
_REPO: list[dict[str, Any]] = []


def resolve_project(cwd: str | None, repo_cfg: dict[str, Any]) -> tuple[str | None, str]:
    """``(project or None, source)`` of an event in ``cwd``, by the one documented order of
    ``wiki_memory/capture/project.py`` (configuration file, git repository with worktrees
    mapped to their main repository; never a bare folder name). ``none`` leaves the
    choice to the server: the session's current project, or no project. Without that
    module: ``project`` of the parsed ``repo_cfg``, else the git top-level's name."""
    global _PROJECT
    if _PROJECT is None:
        _sanitizer()  # puts the repository (or the installed package) on sys.path
        try:
            from wiki_memory.capture import project as mod

            _PROJECT = mod
        except (Exception, SystemExit):
            _PROJECT = False
    if _PROJECT:
        try:
            res = _PROJECT.resolve_project(cwd)  # type: ignore[attr-defined]
            _ROOT[:] = [res.root] if res.source == "git" and res.root else []
            return res.name, res.source
        except Exception:
            pass
    name = repo_cfg.get("project")
    if isinstance(name, str) and name.strip():
        return name.strip(), "config"
    top = git_toplevel(cwd) if cwd else None
    if top:
        return os.path.basename(top.rstrip("/\\")) or None, "git"
    return None, "none"


_PATH_KEYS = (
    "file_path",
    "filePath",
    "path",
    "notebook_path",
    "absolute_path",
    "dir_path",
    "directory",
    "target_file",
    "old_path",
    "new_path",
    "source",
    "destination",
)
_COMMAND_KEYS = ("command", "cmd")


def event_paths(payload: dict[str, Any]) -> list[str]:
    """File paths an event is about: path fields of ``tool_input``/``tool_response``,
    ``apply_patch`` file headers and the words of a shell command."""
    found: list[str] = []
    for key in ("tool_input", "tool_response"):
        obj = payload.get(key)
        if not isinstance(obj, dict):
            continue
        for k in _PATH_KEYS:
            v = obj.get(k)
            if isinstance(v, str) and v:
                found.append(v)
            elif isinstance(v, list):
                found.extend(x for x in v if isinstance(x, str))
        for k in _COMMAND_KEYS:
            v = obj.get(k)
            if isinstance(v, list):
                v = " ".join(x for x in v if isinstance(x, str))
            if isinstance(v, str) and v:
                found.extend(_command_words(v))
    return found


def _command_words(cmd: str) -> list[str]:
    words: list[str] = []
    for line in cmd.splitlines():
        for marker in ("*** Update File:", "*** Add File:", "*** Delete File:", "*** Move to:"):
            if line.startswith(marker):
                words.append(line[len(marker) :].strip())
    import shlex

    try:
        toks = shlex.split(cmd, comments=False, posix=True)
    except ValueError:
        toks = cmd.split()
    for t in toks:
        t = t.lstrip("<>|&;(0123456789").rstrip(";|&)")
        if t and not t.startswith("-"):
            words.append(t)
            if "=" in t:
                words.append(t.split("=", 1)[1])
    return words


_GLOB_CACHE: dict[str, re.Pattern[str]] = {}


def _glob_regex(pat: str) -> re.Pattern[str]:
    import re

    rx = _GLOB_CACHE.get(pat)
    if rx is not None:
        return rx
    out: list[str] = []
    i = 0
    while i < len(pat):
        c = pat[i]
        if c == "*":
            if pat.startswith("**", i):
                if pat.startswith("**/", i):
                    out.append("(?:.*/)?")
                    i += 3
                    continue
                out.append(".*")
                i += 2
                continue
            out.append("[^/]*")
        elif c == "?":
            out.append("[^/]")
        elif c == "[":
            j = pat.find("]", i + 1)
            if j == -1:
                out.append(re.escape(c))
            else:
                body = pat[i + 1 : j].replace("\\", "\\\\")
                if body.startswith("!"):
                    body = "^" + body[1:]
                out.append("[" + body + "]")
                i = j
        else:
            out.append(re.escape(c))
        i += 1
    rx = re.compile("".join(out) + "(?:/.*)?$", re.DOTALL)
    _GLOB_CACHE[pat] = rx
    return rx


def path_matches(path: str, patterns: list[str], root: str | None) -> bool:
    """gitignore-like matching: a pattern without ``/`` matches any path component (and
    what is below it); one with ``/`` is anchored at the directory of
    ``.wiki-memory.toml``; ``**`` crosses directories; a match on a directory covers the
    files under it."""
    p = path.replace("\\", "/")
    if root and os.path.isabs(p):
        r = root.replace("\\", "/").rstrip("/") + "/"
        if p.startswith(r):
            p = p[len(r) :]
    while p.startswith("./"):
        p = p[2:]
    comps = [c for c in p.split("/") if c and c != "."]
    for raw in patterns:
        if not isinstance(raw, str) or not raw.strip():
            continue
        pat = raw.strip()
        anchored = "/" in pat.rstrip("/")
        pat = pat.strip("/") if anchored else pat.rstrip("/")
        rx = _glob_regex(pat)
        if anchored:
            if rx.match("/".join(comps)):
                return True
        else:
            for k in range(len(comps)):
                if rx.match("/".join(comps[k:])):
                    return True
    return False


def capture_decision(
    payload: dict[str, Any], repo_cfg: dict[str, Any], root: str | None
) -> str | None:
    """None to capture the event, else the reason it stays on this machine.

    ``[capture] enabled = false`` → nothing; ``ignore_paths`` → events about a matching
    file are dropped; ``mode = "allowlist"`` → tool events are kept only when they are
    about a file matching ``paths`` (prompts, replies and session events are kept).
    """
    cap = repo_cfg.get("capture")
    if not isinstance(cap, dict):
        return None
    if cap.get("enabled") is False:
        return "capture disabled"
    ignore = cap.get("ignore_paths") or []
    allow_mode = cap.get("mode") == "allowlist"
    if not ignore and not allow_mode:
        return None
    paths = event_paths(payload)
    if ignore and isinstance(ignore, list):
        for p in paths:
            if path_matches(p, ignore, root):
                return "ignored path"
    if allow_mode and payload.get("tool_name") is not None:
        allow = cap.get("paths") or []
        if not any(path_matches(p, allow, root) for p in paths):
            return "not in allowlist"
    return None


# --------------------------------------------------------------------------- the observation


def _sha(data: bytes) -> str:
    try:
        from _sha256 import sha256
    except ImportError:  # pragma: no cover
        from hashlib import sha256
    digest: str = sha256(data).hexdigest()
    return digest


def event_id_for(harness: str, event: str, payload: dict[str, Any], raw: bytes, now: float) -> str:
    """A stable id per event, the server's dedup key.

    Tool events: ``<event>:<tool_use_id>`` (Pre and Post share the id, the event tells
    them apart). Codex notify: ``agent-turn-complete:<turn-id>``. Otherwise
    ``<event>:<24 hex>`` of SHA-256 over harness, event and the raw payload bytes, plus
    the second when the payload carries no time or turn of its own, so that the same
    hook installed twice (user and project settings) yields one observation.
    """
    tuid = payload.get("tool_use_id")
    if isinstance(tuid, str) and tuid:
        return f"{event}:{tuid}"
    turn = payload.get("turn-id")
    if event == "agent-turn-complete" and isinstance(turn, str) and turn:
        return f"{event}:{turn}"
    salt = b""
    if not any(payload.get(k) for k in ("timestamp", "turn_id", "prompt_id")):
        salt = str(int(now)).encode()
    h = _sha(harness.encode() + b"\0" + event.encode() + b"\0" + salt + b"\0" + raw)
    return f"{event}:{h[:24]}"


def _iso(ts: float) -> str:
    t = time.gmtime(ts)
    return time.strftime("%Y-%m-%dT%H:%M:%S", t) + f".{int((ts % 1) * 1000):03d}Z"


def _iso_local(ts: float) -> str:
    """``ts`` in this machine's local time with its UTC offset
    (``2026-03-15T00:20:00.000+09:00``): an event's time as the user lived it; the
    server keeps the offset for the session page and converts to UTC for everything
    else."""
    t = time.localtime(ts)
    off = t.tm_gmtoff // 60
    sign = "-" if off < 0 else "+"
    return (
        time.strftime("%Y-%m-%dT%H:%M:%S", t)
        + f".{int((ts % 1) * 1000):03d}{sign}{abs(off) // 60:02d}:{abs(off) % 60:02d}"
    )


def _size(obj: object) -> int:
    return len(json.dumps(obj, ensure_ascii=False, separators=(",", ":")).encode("utf-8"))


def _cut(s: str, keep: int) -> str:
    """``s`` cut to about ``keep`` characters: the first three quarters and the last
    quarter (where a log's error usually is), joined by a visible marker. Each cut
    backs off to whitespace (at most 200 characters) so that no fragment of a token
    is left at either edge."""
    if keep >= len(s):
        return s
    keep = max(keep, 0)
    head = keep * 3 // 4
    j = head
    lo = max(head - 200, 0)
    while j > lo and not s[j - 1].isspace():
        j -= 1
    if j > lo:
        head = j
    start = len(s) - (keep - keep * 3 // 4)
    k = start
    hi = min(start + 200, len(s))
    while k < hi and not s[k - 1].isspace():
        k += 1
    if k < hi:
        start = k
    start = max(start, head)
    return s[:head] + TRUNCATION_MARK.format(omitted=start - head, total=len(s)) + s[start:]


def _long_strings(o: object, out: list[tuple[int, int, object, object]]) -> None:
    """Append ``(json bytes, chars, container, key)`` for every string over 256 chars."""
    items = o.items() if isinstance(o, dict) else enumerate(o) if isinstance(o, list) else ()
    for k, v in items:
        if isinstance(v, str):
            if len(v) > 256:
                out.append((_size(v), len(v), o, k))
        elif isinstance(v, dict | list):
            _long_strings(v, out)


def truncate_event(ev: dict[str, Any], max_bytes: int) -> bool:
    """Shorten the longest strings of ``ev["payload"]`` in place until ``ev`` serializes
    to at most ``max_bytes`` UTF-8 bytes; each cut ends with a visible marker.
    Returns True when anything was cut."""
    size = _size(ev)
    if size <= max_bytes:
        return False
    payload = ev.get("payload")
    for _ in range(4):
        leaves: list[tuple[int, int, object, object]] = []
        _long_strings(payload, leaves)
        if not leaves:
            break
        excess = size - max_bytes + 200 * len(leaves) + 1024
        enc = sorted((x[0] for x in leaves), reverse=True)
        cap = 256.0
        total = 0
        for k, e in enumerate(enc, 1):
            total += e
            c = (total - excess) / k
            nxt = enc[k] if k < len(enc) else 0
            if c >= nxt:
                cap = max(c, 256.0)
                break
        for e, n, cont, key in leaves:
            if e > cap:
                keep = int(n * cap / e)
                cont[key] = _cut(cont[key], keep)  # type: ignore[index]
        size = _size(ev)
        if size <= max_bytes:
            return True
    if size > max_bytes:  # pathological (huge number of small strings): keep a stub
        ev["payload"] = {
            k: v
            for k, v in (payload or {}).items()
            if isinstance(v, str | int | float | bool) and _size(v) < 512
        }
        ev["payload"]["wiki_memory_truncated"] = f"payload of {size} bytes dropped by the hook"
    return True


# --------------------------------------------------------------------------- redaction

_SANITIZE: ModuleType | Literal[False] | None = None
_SANITIZE_ERROR = ""


_ON_PATH = False


def _repo_on_path() -> None:
    """Put the folder holding ``wiki_memory`` on ``sys.path``: a source checkout
    (``<repo>/hooks``) or an installed package (``site-packages/wiki_memory/_hooks``)."""
    global _ON_PATH
    if _ON_PATH:
        return
    _ON_PATH = True
    here = os.path.dirname(os.path.abspath(__file__))
    for root in (os.path.dirname(here), os.path.dirname(os.path.dirname(here))):
        if os.path.isdir(os.path.join(root, "wiki_memory")) and root not in sys.path:
            sys.path.append(root)


def _sanitizer() -> ModuleType | Literal[False]:
    """``wiki_memory.capture.sanitize`` when importable (from the repository this hook
    lives in, or an installed wiki-memory), else False (the reason is kept for the
    warning)."""
    global _SANITIZE, _SANITIZE_ERROR
    if _SANITIZE is not None:
        return _SANITIZE
    _repo_on_path()
    for attempt in range(2):
        try:
            from wiki_memory.capture import sanitize

            _SANITIZE = sanitize
            return sanitize
        except (Exception, SystemExit) as exc:
            _SANITIZE_ERROR = f"{type(exc).__name__}: {exc}"
            if attempt == 0 and sys.flags.no_site:
                try:
                    import site

                    site.main()
                    continue
                except Exception:
                    pass
            break
    _SANITIZE = False
    return False


#: Fallback redaction, used only when the sanitizer cannot be imported or raises:
#: strings longer than this are never sent, not even to the outbox; each becomes
#: :data:`FALLBACK_DROPPED`. Shorter strings (commands, paths, tool names, short
#: prompts) pass the built-in rules of :func:`fallback_redact_text`.
FALLBACK_KEEP_CHARS = 256
FALLBACK_DROPPED = "[wiki-memory hook: {chars} characters dropped; no sanitizer to redact them]"

_FALLBACK_WARNED = False
_FALLBACK_RULES: list[
    tuple[str, re.Pattern[str]]
] = []  # [(kind, compiled regex)], compiled on first fallback use

# The token rule's prefixes are generated from the sanitizer's provider rows and gitleaks'
# generated rules (one source for hook and server; tests/capture/test_hook_fallback_table.py
# checks the block and names what is left out).
# --- GENERATED fallback prefixes (scripts/gen_hook_fallback.py): do not edit ---
# fmt: off
#: fixed prefixes of the sanitizer's provider rows, as written
_FALLBACK_PREFIXES = (
    '4b1d',
    'A3-',
    'A3T',
    'AAAAAAAAAAAAAAAAAAAAA',
    'ABIA',
    'ABSK',
    'ACCA',
    'AGE-SECRET-KEY-1',
    'AIza',
    'AKCp',
    'AKIA',
    'API-',
    'AQVN',
    'ASIA',
    'ATATT3',
    'ATBB',
    'ATCTT3',
    'CCIPAT_',
    'CFPAT-',
    'CLOJARS_',
    'EAAA',
    'EAAC',
    'EAAM',
    'EZAK',
    'EZTK',
    'FLWSECK-',
    'FLWSECK_TEST-',
    'GOCSPX-',
    'GR1348941',
    'HRKU-AA',
    'LTAI',
    'NRAK-',
    'NRII-',
    'NRJS-',
    'PMAK-',
    'SG.',
    'access-development-',
    'access-production-',
    'access-sandbox-',
    'api_org_',
    'bedrock-api-key-',
    'bkua_',
    'cmVmd',
    'dckr_oat_',
    'dckr_pat_',
    'dnkey-',
    'doo_v1_',
    'dop_v1_',
    'dor_v1_',
    'dp.audit.',
    'dp.ct.',
    'dp.pt.',
    'dp.sa.',
    'dp.scim.',
    'dp.st.',
    'dt0c01.',
    'duffel_live_',
    'duffel_test_',
    'eyJ',
    'eyJrIjoi',
    'figd_',
    'fio-u-',
    'fm1a_',
    'fm1r_',
    'fm2_',
    'fo1_',
    'gho_',
    'ghp_',
    'ghr_',
    'ghs_',
    'ghu_',
    'github_pat_',
    'glagent-',
    'glc_',
    'glcbt-',
    'gldt-',
    'glffct-',
    'glft-',
    'glimt-',
    'gloas-',
    'glpat-',
    'glptt-',
    'glrt-',
    'glsa_',
    'glsoat-',
    'gsk_',
    'hf_',
    'hvb.',
    'hvr.',
    'hvs.',
    'ico-',
    'lin_api_',
    'lsv2_pt_',
    'lsv2_sk_',
    'npm_',
    'ntn_',
    'nvapi-',
    'ops_eyJ',
    'p8e-',
    'pat.',
    'pcsk_',
    'pnu_',
    'pplx-',
    'pscale_oauth_',
    'pscale_pw_',
    'pscale_tkn_',
    'pul-',
    'pypi-AgEIcHlwaS5vcmc',
    'pypi-AgENdGVzdC5weXBpLm9yZw',
    'r8_',
    'rdme_',
    'rk_live_',
    'rk_prod_',
    'rk_test_',
    'rubygems_',
    's-s4t2af-',
    's-s4t2ud-',
    'sat.',
    'sb_secret_',
    'sbp_',
    'sgp_',
    'sha256~',
    'shippo_live_',
    'shippo_test_',
    'shpat_',
    'shpca_',
    'shppa_',
    'shpss_',
    'sk-',
    'sk-ant-',
    'sk-or-v1-',
    'sk.eyJ',
    'sk_live_',
    'sk_prod_',
    'sk_test_',
    'sl.',
    'sm_aat_',
    'sm_pat_',
    'sm_sat_',
    'sntrys_',
    'sntryu_',
    'sq0atp-',
    'sq0csp-',
    'sqa_',
    'sqp_',
    'squ_',
    'tfp_',
    'tk-us-',
    'tskey-',
    'tvly-',
    'v1.0-',
    'whsec_',
    'wmo_',
    'xai-',
    'xapp-',
    'xkeysib-',
    'xoxa-',
    'xoxb-',
    'xoxe-',
    'xoxe.xox',
    'xoxo-',
    'xoxp-',
    'xoxr-',
    'xoxs-',
    'xsmtpsib-',
    'ya29.',
)
#: gitleaks' rules' fixed prefixes that the rows lack (lowercase; any case matches)
_FALLBACK_PREFIXES_ANYCASE = (
    'authress_',
    'flwpubk_test-',
    'scauth_',
    'xoxe',
)
#: (rule, why the fallback does not take it): every other rule's prefixes are above
_FALLBACK_LEFT_OUT = (
    ('adafruit-api-key', 'no fixed prefix (a name beside the value, or an infix)'),
    ('adobe-client-id', 'no fixed prefix (a name beside the value, or an infix)'),
    ('airtable-api-key', 'no run of 20 token characters sure in its matches (a command, URL, block or short value)'),
    ('airtable-personnal-access-token', "prefix 'pat' starts ordinary identifiers (the random-run rule covers it)"),
    ('airtable-token', "prefix 'pat' starts ordinary identifiers (the random-run rule covers it)"),
    ('algolia-api-key', 'no fixed prefix (a name beside the value, or an infix)'),
    ('alibaba-secret-key', 'no fixed prefix (a name beside the value, or an infix)'),
    ('asana-client-id', 'no run of 20 token characters sure in its matches (a command, URL, block or short value)'),
    ('asana-client-secret', 'no fixed prefix (a name beside the value, or an infix)'),
    ('authress-service-client-access-key', "prefix 'ext_' starts ordinary identifiers (the random-run rule covers it)"),
    ('authress-service-client-access-key', "prefix 'sc_' starts ordinary identifiers (the random-run rule covers it)"),
    ('azure-ad-client-secret', 'no fixed prefix (a name beside the value, or an infix)'),
    ('beamer-api-token', 'no fixed prefix (a name beside the value, or an infix)'),
    ('bitbucket-client-id', 'no fixed prefix (a name beside the value, or an infix)'),
    ('bitbucket-client-secret', 'no fixed prefix (a name beside the value, or an infix)'),
    ('bittrex-access-key', 'no fixed prefix (a name beside the value, or an infix)'),
    ('bittrex-secret-key', 'no fixed prefix (a name beside the value, or an infix)'),
    ('cisco-meraki-api-key', 'no fixed prefix (a name beside the value, or an infix)'),
    ('cloudflare-api-key', 'no fixed prefix (a name beside the value, or an infix)'),
    ('cloudflare-global-api-key', 'no fixed prefix (a name beside the value, or an infix)'),
    ('codecov-access-token', 'no fixed prefix (a name beside the value, or an infix)'),
    ('cohere-api-token', 'no fixed prefix (a name beside the value, or an infix)'),
    ('coinbase-access-token', 'no fixed prefix (a name beside the value, or an infix)'),
    ('confluent-access-token', 'no run of 20 token characters sure in its matches (a command, URL, block or short value)'),
    ('confluent-secret-key', 'no fixed prefix (a name beside the value, or an infix)'),
    ('contentful-delivery-api-token', 'no fixed prefix (a name beside the value, or an infix)'),
    ('curl-auth-header', 'no run of 20 token characters sure in its matches (a command, URL, block or short value)'),
    ('curl-auth-user', 'no run of 20 token characters sure in its matches (a command, URL, block or short value)'),
    ('databricks-api-token', "prefix 'dapi' starts ordinary identifiers (the random-run rule covers it)"),
    ('databricks-token', "prefix 'dapi' starts ordinary identifiers (the random-run rule covers it)"),
    ('datadog-access-token', 'no fixed prefix (a name beside the value, or an infix)'),
    ('defined-networking-api-token', 'no fixed prefix (a name beside the value, or an infix)'),
    ('discord-api-token', 'no fixed prefix (a name beside the value, or an infix)'),
    ('discord-client-id', 'no run of 20 token characters sure in its matches (a command, URL, block or short value)'),
    ('discord-client-secret', 'no fixed prefix (a name beside the value, or an infix)'),
    ('droneci-access-token', 'no fixed prefix (a name beside the value, or an infix)'),
    ('dropbox-api-token', 'no run of 20 token characters sure in its matches (a command, URL, block or short value)'),
    ('dropbox-long-lived-api-token', 'no fixed prefix (a name beside the value, or an infix)'),
    ('dropbox-short-lived-api-token', 'no fixed prefix (a name beside the value, or an infix)'),
    ('etsy-access-token', 'no fixed prefix (a name beside the value, or an infix)'),
    ('facebook-access-token', 'no fixed prefix (a name beside the value, or an infix)'),
    ('facebook-secret', 'no fixed prefix (a name beside the value, or an infix)'),
    ('fastly-api-token', 'no fixed prefix (a name beside the value, or an infix)'),
    ('finicity-api-token', 'no fixed prefix (a name beside the value, or an infix)'),
    ('finicity-client-secret', 'no fixed prefix (a name beside the value, or an infix)'),
    ('finnhub-access-token', 'no fixed prefix (a name beside the value, or an infix)'),
    ('flickr-access-token', 'no fixed prefix (a name beside the value, or an infix)'),
    ('freemius-secret-key', 'applies only to a file path, which the fallback does not know'),
    ('freshbooks-access-token', 'no fixed prefix (a name beside the value, or an infix)'),
    ('gitlab-session-cookie', "prefix '_gitlab_session=' is not a token's start"),
    ('gitter-access-token', 'no fixed prefix (a name beside the value, or an infix)'),
    ('gocardless-api-token', 'no fixed prefix (a name beside the value, or an infix)'),
    ('hashicorp-tf-api-token', 'no fixed prefix (a name beside the value, or an infix)'),
    ('hashicorp-tf-password', 'applies only to a file path, which the fallback does not know'),
    ('heroku-api-key', 'no fixed prefix (a name beside the value, or an infix)'),
    ('hubspot-api-key', 'no fixed prefix (a name beside the value, or an infix)'),
    ('intercom-api-key', 'no fixed prefix (a name beside the value, or an infix)'),
    ('jfrog-api-key', 'no fixed prefix (a name beside the value, or an infix)'),
    ('jfrog-identity-token', 'no fixed prefix (a name beside the value, or an infix)'),
    ('jwt', "prefix 'ey' is shorter than 3 characters (the random-run rule covers it)"),
    ('jwt-base64', 'no run of 20 token characters sure in its matches (a command, URL, block or short value)'),
    ('kraken-access-token', 'no fixed prefix (a name beside the value, or an infix)'),
    ('kubernetes-secret-yaml', 'applies only to a file path, which the fallback does not know'),
    ('kucoin-access-token', 'no fixed prefix (a name beside the value, or an infix)'),
    ('kucoin-secret-key', 'no fixed prefix (a name beside the value, or an infix)'),
    ('launchdarkly-access-token', 'no fixed prefix (a name beside the value, or an infix)'),
    ('linear-client-secret', 'no fixed prefix (a name beside the value, or an infix)'),
    ('linkedin-client-id', 'no run of 20 token characters sure in its matches (a command, URL, block or short value)'),
    ('linkedin-client-secret', 'no run of 20 token characters sure in its matches (a command, URL, block or short value)'),
    ('lob-api-key', 'no fixed prefix (a name beside the value, or an infix)'),
    ('lob-pub-api-key', 'no fixed prefix (a name beside the value, or an infix)'),
    ('looker-client-id', 'no fixed prefix (a name beside the value, or an infix)'),
    ('looker-client-secret', 'no fixed prefix (a name beside the value, or an infix)'),
    ('mailchimp-api-key', 'no fixed prefix (a name beside the value, or an infix)'),
    ('mailgun-private-api-token', 'no fixed prefix (a name beside the value, or an infix)'),
    ('mailgun-pub-key', 'no fixed prefix (a name beside the value, or an infix)'),
    ('mailgun-signing-key', 'no fixed prefix (a name beside the value, or an infix)'),
    ('mapbox-api-token', 'no fixed prefix (a name beside the value, or an infix)'),
    ('mattermost-access-token', 'no fixed prefix (a name beside the value, or an infix)'),
    ('maxmind-license-key', 'no fixed prefix (a name beside the value, or an infix)'),
    ('messagebird-api-token', 'no fixed prefix (a name beside the value, or an infix)'),
    ('messagebird-client-id', 'no fixed prefix (a name beside the value, or an infix)'),
    ('microsoft-teams-webhook', "prefix 'https://' is not a token's start"),
    ('netlify-access-token', 'no fixed prefix (a name beside the value, or an infix)'),
    ('new-relic-browser-api-token', 'no fixed prefix (a name beside the value, or an infix)'),
    ('new-relic-insert-key', 'no fixed prefix (a name beside the value, or an infix)'),
    ('new-relic-user-api-id', 'no fixed prefix (a name beside the value, or an infix)'),
    ('new-relic-user-api-key', 'no fixed prefix (a name beside the value, or an infix)'),
    ('notion-token', "prefix 'secret_' starts ordinary identifiers (the random-run rule covers it)"),
    ('nuget-config-password', 'applies only to a file path, which the fallback does not know'),
    ('nytimes-access-token', 'no fixed prefix (a name beside the value, or an infix)'),
    ('okta-access-token', 'no fixed prefix (a name beside the value, or an infix)'),
    ('plaid-api-token', 'no fixed prefix (a name beside the value, or an infix)'),
    ('plaid-client-id', 'no fixed prefix (a name beside the value, or an infix)'),
    ('plaid-secret-key', 'no fixed prefix (a name beside the value, or an infix)'),
    ('private-key', 'no run of 20 token characters sure in its matches (a command, URL, block or short value)'),
    ('privateai-api-token', 'no fixed prefix (a name beside the value, or an infix)'),
    ('rapidapi-access-token', 'no fixed prefix (a name beside the value, or an infix)'),
    ('sendbird-access-id', 'no fixed prefix (a name beside the value, or an infix)'),
    ('sendbird-access-token', 'no fixed prefix (a name beside the value, or an infix)'),
    ('sentry-access-token', 'no fixed prefix (a name beside the value, or an infix)'),
    ('sidekiq-secret', 'no fixed prefix (a name beside the value, or an infix)'),
    ('sidekiq-sensitive-url', 'no run of 20 token characters sure in its matches (a command, URL, block or short value)'),
    ('slack-app-token', 'no run of 20 token characters sure in its matches (a command, URL, block or short value)'),
    ('slack-legacy-token', 'no run of 20 token characters sure in its matches (a command, URL, block or short value)'),
    ('slack-legacy-workspace-token', 'no run of 20 token characters sure in its matches (a command, URL, block or short value)'),
    ('slack-webhook-url', "prefix 'hooks' starts ordinary identifiers (the random-run rule covers it)"),
    ('slack-webhook-url', "prefix 'http://hooks' is not a token's start"),
    ('slack-webhook-url', "prefix 'https://hooks' is not a token's start"),
    ('snyk-api-token', 'no fixed prefix (a name beside the value, or an infix)'),
    ('sonar-api-token', 'no fixed prefix (a name beside the value, or an infix)'),
    ('squarespace-access-token', 'no fixed prefix (a name beside the value, or an infix)'),
    ('stripe-access-token', 'no run of 20 token characters sure in its matches (a command, URL, block or short value)'),
    ('sumologic-access-id', 'no run of 20 token characters sure in its matches (a command, URL, block or short value)'),
    ('sumologic-access-token', 'no fixed prefix (a name beside the value, or an infix)'),
    ('telegram-bot-api-token', 'no fixed prefix (a name beside the value, or an infix)'),
    ('travisci-access-token', 'no fixed prefix (a name beside the value, or an infix)'),
    ('twilio-api-key', "prefix 'sk' is shorter than 3 characters (the random-run rule covers it)"),
    ('twilio-key', "prefix 'SK' is shorter than 3 characters (the random-run rule covers it)"),
    ('twitch-api-token', 'no fixed prefix (a name beside the value, or an infix)'),
    ('twitter-access-secret', 'no fixed prefix (a name beside the value, or an infix)'),
    ('twitter-access-token', 'no fixed prefix (a name beside the value, or an infix)'),
    ('twitter-api-key', 'no fixed prefix (a name beside the value, or an infix)'),
    ('twitter-api-secret', 'no fixed prefix (a name beside the value, or an infix)'),
    ('twitter-bearer-token', 'no fixed prefix (a name beside the value, or an infix)'),
    ('typeform-api-token', 'no fixed prefix (a name beside the value, or an infix)'),
    ('vault-service-token', "prefix 's.' is shorter than 3 characters (the random-run rule covers it)"),
    ('yandex-access-token', 'no fixed prefix (a name beside the value, or an infix)'),
    ('yandex-api-key', 'no fixed prefix (a name beside the value, or an infix)'),
    ('yandex-aws-access-token', 'no fixed prefix (a name beside the value, or an infix)'),
    ('zendesk-secret-key', 'no fixed prefix (a name beside the value, or an infix)'),
)
# fmt: on
# --- end of GENERATED fallback prefixes ---


def _alternation(prefixes: tuple[str, ...], least: int, most: int = 1 << 16) -> str:
    """A regex alternation of the literal ``prefixes`` of ``least`` to ``most``
    characters, longest first."""
    import re

    kept = [p for p in prefixes if least <= len(p) <= most]
    return "|".join(re.escape(p) for p in sorted(kept, key=lambda p: (-len(p), p)))


def _fallback_rules() -> list[tuple[str, re.Pattern[str]]]:
    """The built-in rules, compiled once (only a run that falls back pays for them).

    Broad on purpose: in this mode a false positive costs a word of a session page,
    a miss costs a secret. The group ``s``, or else the whole match, is replaced.
    """
    if _FALLBACK_RULES:
        return _FALLBACK_RULES
    import re

    value = r"(?!\[REDACTED|(?:bearer|basic)\s)[^\s\"'\\,;&<>|`]{3,}"
    table = (
        (
            "private-key",
            r"-----BEGIN[A-Z0-9 ]{0,40}PRIVATE KEY[A-Z ]{0,10}-----.*?"
            r"(?:-----END[A-Z0-9 ]{0,40}PRIVATE KEY[A-Z ]{0,10}-----|\Z)",
            re.S,
        ),
        (
            "token",
            # an AWS key id with no boundary before it: glued by _ or -, after a literal
            # \n or \t, a percent-escape (%3D) or a \u escape; letters only or mixed
            # then a generated prefix (longest first) and at least 8 more characters; after
            # a prefix of 3 characters or fewer (hf_, sk-), 16 with a digit (hf_hub_download)
            r"(?:A3T[A-Z0-9]|AKIA|ASIA|ABIA|ACCA)[A-Z0-9]{16}(?![A-Za-z0-9])"
            r"|\beyJ[\w-]{8,}\.[\w.-]+|\b(?:(?:" + _alternation(_FALLBACK_PREFIXES, 4) + ")"
            r"|(?i:" + _alternation(_FALLBACK_PREFIXES_ANYCASE, 4) + r"))[\w.-]{8,}"
            r"|\b(?:" + _alternation(_FALLBACK_PREFIXES, 1, 3) + r")(?=[\w.-]{0,64}\d)[\w.-]{16,}",
            0,
        ),
        ("webhook-url", r"https?://(?:hooks\.slack\.com|[\w.]*discord(?:app)?\.com/api)/\S+", 0),
        ("url-password", r"(?i)\b[a-z][a-z0-9+.-]*://[^\s:/@]*:(?P<s>[^\s@/]+)@", 0),
        ("auth-header", r"(?i)\b(?:bearer|basic)\s+(?P<s>[\w~+/.=-]{6,})", 0),
        ("auth-header", r"(?:\s-u\s*|--user[=\s]\s*)[^\s:]+:(?P<s>\S+)", 0),
        # a password flag after its command on the same line (sshpass -p, * login -p,
        # mysql -p<pw>, redis-cli -a); the gap is bounded, so the rule stays linear
        (
            "cli-password",
            r"(?i)\b(?:sshpass|login|mysql|mariadb|redis-cli)\b[^\n]{0,200}?\s-[pa]"
            r"(?:[ \t]+|=)?(?P<s>(?!-)" + value + ")",
            0,
        ),
        # NAME=value, NAME: value, "NAME": "value", --NAME value; the name is checked
        # by _secret_name(broad=True) (a name found by a regex backtracks badly)
        (
            "generic-secret",
            r"(?i)(?<![\w.-])(?P<n>[\w.-]+)(?:\\?[\"'])?\s*(?::=|=>|[:=])\s*(?:\\?[\"'])?"
            r"(?P<s>" + value + ")",
            0,
        ),
        ("generic-secret", r"(?i)(?<![\w-])--?(?P<n>[\w-]+)\s+(?P<s>(?!-)" + value + ")", 0),
    )
    _FALLBACK_RULES.extend((kind, re.compile(rx, flags)) for kind, rx, flags in table)
    _FALLBACK_RULES.append(("high-entropy", re.compile(r"[A-Za-z0-9+/=_-]{20,}")))
    return _FALLBACK_RULES


def _random_run(run: str) -> bool:
    """A run of token characters (20 or more) that reads as a key, not as a name:
    letters and digits mixed, or upper and lower case over 32 characters. UUIDs and
    git SHAs stay (as with the full sanitizer)."""
    if len(run) < 20:
        return False
    if len(run) in (40, 64) and all(c in "0123456789abcdef" for c in run):
        return False
    if len(run) == 36 and run.count("-") == 4 and all(c in "0123456789abcdef-" for c in run):
        return False
    letters = any(c.isalpha() for c in run)
    if letters and any(c.isdigit() for c in run):
        return True
    return len(run) > 32 and any(c.isupper() for c in run) and any(c.islower() for c in run)


def fallback_redact_text(text: str) -> tuple[str, int]:
    """``text`` through the built-in rules: ``(redacted, hits)``.

    Private-key blocks (to the END line, or to the end of the text), well-known token
    prefixes (AWS, GitHub, GitLab, Slack, Stripe, OpenAI, npm, PyPI, Google, Hugging
    Face, JWTs), webhook URLs, URL passwords, ``Bearer``/``Basic`` credentials and
    ``curl -u``, the value of ``NAME=value``/``NAME: value``/``--name value`` where
    NAME mentions secret, token, password, key, auth, ..., and any run of 20 or more
    token characters mixing letters and digits (an absolute path is judged one
    component at a time). Each becomes ``[REDACTED:<kind>]``. Meant for short strings
    (:func:`fallback_redact` drops long ones before this runs).
    """
    hits = 0
    for kind, rx in _fallback_rules():
        repl = "[REDACTED:" + kind + "]"
        if kind == "high-entropy":

            def sub(m: re.Match[str], repl: str = repl) -> str:
                nonlocal hits
                run = m.group(0)
                if run.startswith("/"):  # a path: each component on its own
                    parts = run.split("/")
                    out = [repl if _random_run(p) else p for p in parts]
                    hits += sum(1 for a, b in zip(parts, out, strict=True) if a != b)
                    return "/".join(out)
                if _random_run(run):
                    hits += 1
                    return repl
                return run

            text = rx.sub(sub, text)
            continue
        named, grouped = "n" in rx.groupindex, "s" in rx.groupindex
        out: list[str] = []
        pos = 0
        while pos <= len(text):
            m = rx.search(text, pos)
            if m is None:
                break
            if named and not _secret_name(m.group("n"), broad=True):
                # not a secret's name: look again right after it (the value may
                # itself be an assignment: ``x: DB_PASSWORD=...``)
                out.append(text[pos : m.end("n")])
                pos = m.end("n")
                continue
            start, end = m.span("s") if grouped else m.span()
            out.append(text[pos:start] + repl)
            hits += 1
            pos = max(end, pos + 1) if end == start else end
        out.append(text[pos:])
        text = "".join(out)
    return text, hits


_SECRET_KEY_WORDS = (
    "secret",
    "token",
    "passw",
    "pwd",
    "passphrase",
    "apikey",
    "api_key",
    "api-key",
    "private",
    "credential",
    "access_key",
    "accesskey",
)


#: Added for names in text (``NAME=value``), where a miss costs more than a word.
_SECRET_NAME_WORDS_BROAD = ("key", "auth", "cookie", "signature")


def _secret_name(name: object, broad: bool = False) -> bool:
    """True when ``name`` (a dict key, or with ``broad`` a name in text) names a secret."""
    if not isinstance(name, str):
        return False
    low = name.lower()
    if any(w in low for w in _SECRET_KEY_WORDS):
        return True
    return broad and (low.endswith("pass") or any(w in low for w in _SECRET_NAME_WORDS_BROAD))


def fallback_redact(obj: object, stats: dict[str, Any] | None = None) -> tuple[object, int]:
    """A redacted deep copy of a JSON value without the sanitizer: ``(copy, count)``.

    Every string (dict keys included) longer than :data:`FALLBACK_KEEP_CHARS` is
    replaced whole by :data:`FALLBACK_DROPPED` (counted); shorter strings go through
    :func:`fallback_redact_text`; a string under a key that names a secret
    (``password``, ``api_key``, ... or the ``value`` beside such a ``name``) becomes
    ``[REDACTED:generic-secret]``. Numbers, booleans and null stay. ``stats`` (when
    given) is updated: ``dropped_strings``, ``dropped_chars``, ``redacted``.
    """
    st = stats if stats is not None else {}
    for k in ("dropped_strings", "dropped_chars", "redacted"):
        st.setdefault(k, 0)

    def text(s: str) -> str:
        if len(s) > FALLBACK_KEEP_CHARS:
            st["dropped_strings"] += 1
            st["dropped_chars"] += len(s)
            return FALLBACK_DROPPED.format(chars=len(s))
        out, n = fallback_redact_text(s)
        st["redacted"] += n
        return out

    def walk(o: object, secret: bool) -> object:
        if isinstance(o, str):
            if secret and o:
                st["redacted"] += 1
                return "[REDACTED:generic-secret]"
            return text(o)
        if isinstance(o, dict):
            pair = any(_secret_name(o.get(n)) for n in ("name", "key", "Name", "Key"))
            out: dict[str, Any] = {}
            for k, v in o.items():
                nk = text(k) if isinstance(k, str) else k
                base, i = nk, 2
                while nk in out:
                    nk = f"{base}#{i}"
                    i += 1
                hint = secret or _secret_name(k) or (pair and str(k).lower() == "value")
                out[nk] = walk(v, hint)
            return out
        if isinstance(o, list | tuple):
            return [walk(x, secret) for x in o]
        return o

    res = walk(obj, False)
    return res, st["redacted"] + st["dropped_strings"]


def _warn_fallback(reason: str) -> None:
    """The one stderr line of a run whose redaction fell back (it does not count as
    the run's warning for ``warn(..., once=True)``)."""
    global _FALLBACK_WARNED, _WARNED
    if _FALLBACK_WARNED:
        return
    _FALLBACK_WARNED = True
    before = _WARNED
    warn(
        f"redaction fell back to the hook's built-in rules: {reason}; strings over "
        f"{FALLBACK_KEEP_CHARS} characters are dropped, not sent"
    )
    _WARNED = before


def redact(obj: object, stats: dict[str, Any] | None = None) -> tuple[object, int]:
    """``obj`` with secrets redacted: ``(copy, count)``.

    ``sanitize.redact_obj`` when the sanitizer can be imported and works. Otherwise
    (it cannot be imported, or it raises) never ``obj`` as it is: :func:`fallback_redact`,
    with one line on stderr per run; ``stats`` (when given) then gets ``fallback``
    (why) and the counts of :func:`fallback_redact`. The server redacts again in
    any case.
    """
    mod = _sanitizer()
    if mod:
        try:
            res = mod.redact_obj(obj)
            return res[0], int(res[1])
        except Exception as exc:
            reason = f"the sanitizer failed ({type(exc).__name__})"
    else:
        reason = f"the sanitizer could not be imported ({_SANITIZE_ERROR or 'not found'})"
    _warn_fallback(reason)
    if stats is not None:
        stats["fallback"] = reason.split(" (")[0]
    return fallback_redact(obj, stats)


_SPANS_MODULE: ModuleType | Literal[False] | None = None


def _private() -> ModuleType | Literal[False]:
    """``wiki_memory.capture.private`` (the one rule for ``<private>`` spans), imported
    like the sanitizer; False when it cannot be."""
    global _SPANS_MODULE
    if _SPANS_MODULE is None:
        _sanitizer()  # puts the repository (or the installed package) on sys.path
        try:
            from wiki_memory.capture import private

            _SPANS_MODULE = private
        except (Exception, SystemExit):
            _SPANS_MODULE = False
    return _SPANS_MODULE


def strip_private(obj: object) -> object:
    """``obj`` without ``<private>…</private>`` spans in any string (see
    ``wiki_memory/capture/private.py``). Without that module, any string holding a
    ``private`` tag is replaced whole by ``[private]``: never kept as it is."""
    mod = _private()
    if mod:
        try:
            return mod.strip_private_obj(obj)[0]
        except Exception:
            pass
    import re

    tag = re.compile(r"<\s*/?\s*private\s*>", re.I)

    def walk(o: object) -> object:
        if isinstance(o, str):
            return "[private]" if tag.search(o) else o
        if isinstance(o, dict):
            return {walk(k): walk(v) for k, v in o.items()}
        if isinstance(o, list):
            return [walk(x) for x in o]
        return o

    return walk(obj)


# ------------------------------------------------------------------ repository id


def _repo_cache_path(cfg: Config, root: str) -> str:
    return os.path.join(
        cfg.data_dir, "repo-ids", _sha(root.encode("utf-8", "surrogateescape"))[:24]
    )


def _repo_stamp(root: str, kind: str | None) -> list[int]:
    """What the cached id of ``root`` is valid for: ``.git/HEAD``'s inode and mtime (a
    provisional id also ``refs/heads``'s mtime: the first commit does not touch HEAD)."""
    gd = os.path.join(root, ".git")
    if not os.path.isdir(gd) and _PROJECT:
        gd = _PROJECT.git_dir(root) or gd  # type: ignore[attr-defined]
    try:
        st = os.stat(os.path.join(gd, "HEAD"))
        stamp = [st.st_ino, st.st_mtime_ns]
        if kind == "new":
            stamp.append(os.stat(os.path.join(gd, "refs", "heads")).st_mtime_ns)
        return stamp
    except OSError:
        return []


def cached_repo(cfg: Config, root: str) -> tuple[dict[str, Any] | None, bool]:
    """The cached id of the repository at ``root`` (``{"id", "origin", "prev"}``) and
    whether it is current (its stamp matches); ``(None, False)`` when none is cached.
    One small file read and one or two ``stat`` calls: the hot path's whole cost."""
    try:
        with open(_repo_cache_path(cfg, root), encoding="utf-8") as f:
            entry = json.load(f)
    except (OSError, ValueError):
        return None, False
    if not isinstance(entry, dict) or entry.get("root") != root:
        return None, False
    return entry, entry.get("stamp") == _repo_stamp(root, entry.get("kind"))


def compute_repo(cfg: Config, root: str, timeout: float = 1.0) -> dict[str, Any]:
    """Work out the id of the repository at ``root`` (``git rev-list``, at most
    ``timeout`` s) and cache it; ``{}`` when it has none (or git is missing or slow)."""
    if not _PROJECT:
        return {}
    try:
        ident = _PROJECT.repo_identity(root, timeout)  # type: ignore[attr-defined]
    except Exception:
        return {}
    if not ident.get("id"):
        return {}
    entry = {"root": root, "stamp": _repo_stamp(root, ident.get("kind")), **ident}
    path = _repo_cache_path(cfg, root)
    try:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        tmp = f"{path}.{os.getpid()}.tmp"
        with open(tmp, "w", encoding="utf-8") as f:
            json.dump(entry, f)
        os.replace(tmp, path)
    except OSError:
        pass
    return entry


def refresh_repo_later(cfg: Config, root: str) -> None:
    """Work the id out again in a detached child (a stale cache: HEAD moved); the event
    at hand goes with the cached id, which a checkout does not change."""
    if not hasattr(os, "fork"):  # pragma: no cover - Windows: at the next SessionStart
        return
    pid = os.fork()
    if pid:
        return
    global _IS_DRAINER
    _IS_DRAINER = True  # no output, no warnings: a background child
    try:
        os.setsid()
        null = os.open(os.devnull, os.O_RDWR)
        for std in (0, 1, 2):
            os.dup2(null, std)
        compute_repo(cfg, root)
    except BaseException:
        pass
    finally:
        os._exit(0)


def set_repo(ev: dict[str, Any], entry: dict[str, Any] | None) -> None:
    """Put the repository's id on ``ev`` (``repo_id``, ``repo_origin``, ``repo_prev``)."""
    if entry and entry.get("id"):
        ev["repo_id"] = entry["id"]
        for key in ("origin", "prev"):
            if entry.get(key):
                ev["repo_" + key] = entry[key]


def fill_repo(cfg: Config, ev: dict[str, Any]) -> None:
    """An outbox event whose repository id was not known when it was written
    (``repo_root``): its id, from the cache or worked out now (the drainer runs in the
    background)."""
    root = ev.pop("repo_root", None)
    if not isinstance(root, str) or "repo_id" in ev:
        return
    entry, _fresh = cached_repo(cfg, root)
    if not entry:
        entry = compute_repo(cfg, root)
    set_repo(ev, entry)


def build_event(
    harness: str,
    event: str,
    payload: dict[str, Any],
    raw: bytes,
    project: str | None,
    max_bytes: int,
    now: float,
) -> dict[str, Any]:
    """The observation sent to ``POST /v1/observations``: ``<private>`` spans removed
    first (:func:`strip_private`), then redacted, then truncated (a cut inside a private
    key would leave a tail no detector recognises, a cut inside a private span would
    leave half of it). When the
    sanitizer could not run (see :func:`redact`), the payload gets a
    ``wiki_memory_redaction`` entry: ``{mode: "hook-fallback", reason,
    dropped_strings, dropped_chars, redacted}``."""
    session_id = payload.get("session_id") or payload.get("thread-id") or payload.get("thread_id")
    cwd = payload.get("cwd") if isinstance(payload.get("cwd"), str) else None
    ev = {
        "harness": harness,
        "event": event,
        "session_id": session_id if isinstance(session_id, str) else None,
        "project": project,
        "cwd": cwd,
        "event_id": event_id_for(harness, event, payload, raw, now),
        "ts": _iso_local(now),
        "payload": payload,
    }
    if isinstance(payload.get("timestamp"), str):
        ev["ts"] = payload["timestamp"]
    ev["payload"] = strip_private(ev["payload"])
    if ev["cwd"]:
        ev["cwd"] = strip_private(ev["cwd"])
    stats: dict[str, Any] = {}
    clean, _ = redact(ev["payload"], stats)
    ev["payload"] = clean
    if ev["cwd"]:
        ev["cwd"] = redact(ev["cwd"], stats)[0]
    if stats.get("fallback") and isinstance(ev["payload"], dict):
        # the sanitizer could not run: say so in the event, with what was dropped
        ev["payload"]["wiki_memory_redaction"] = {
            "mode": "hook-fallback",
            "reason": stats["fallback"],
            "dropped_strings": stats.get("dropped_strings", 0),
            "dropped_chars": stats.get("dropped_chars", 0),
            "redacted": stats.get("redacted", 0),
        }
    truncate_event(ev, max_bytes)
    return ev


# --------------------------------------------------------------------------- outbox


class Outbox:
    """Events not yet accepted by the server: one fsynced JSON file per event.

    Names sort in write order (``<time ns>-<pid>-<rand>.json``); temp files start with
    ``.tmp-``. Bounded by ``max_events`` and ``max_bytes`` (oldest dropped first);
    every dropped event is counted as one line of ``dropped.jsonl``.
    """

    def __init__(self, path: str, max_events: int = 5000, max_bytes: int = 64 << 20) -> None:
        self.path = path
        self.max_events = max_events
        self.max_bytes = max_bytes

    def _ensure(self) -> None:
        if not os.path.isdir(self.path):
            os.makedirs(self.path, mode=0o700, exist_ok=True)
        try:
            if os.stat(self.path).st_mode & 0o077:
                os.chmod(self.path, 0o700)
        except OSError:
            pass

    def _fsync_dir(self) -> None:
        try:
            fd = os.open(self.path, os.O_RDONLY)
        except OSError:
            return
        try:
            os.fsync(fd)
        except OSError:
            pass
        finally:
            os.close(fd)

    def write(self, ev: dict[str, Any]) -> str:
        """Store ``ev`` durably; returns its file name. Enforces the bounds after."""
        self._ensure()
        name = f"{time.time_ns():020d}-{os.getpid():07d}-{os.urandom(3).hex()}.json"
        tmp = os.path.join(self.path, ".tmp-" + name)
        data = json.dumps(ev, ensure_ascii=False, separators=(",", ":")).encode("utf-8")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        try:
            try:
                view = memoryview(data)
                while view:
                    n = os.write(fd, view)
                    view = view[n:]
                os.fsync(fd)
            finally:
                os.close(fd)
            os.replace(tmp, os.path.join(self.path, name))
        except OSError:
            # a full disk (or quota): no fragment stays behind, the outbox holds whole
            # events only
            try:
                os.unlink(tmp)
            except OSError:
                pass
            raise
        self._fsync_dir()
        self.enforce_bounds()
        return name

    def pending(self) -> list[str]:
        """File names of waiting events, oldest first."""
        try:
            names = os.listdir(self.path)
        except OSError:
            return []
        return sorted(n for n in names if n.endswith(".json") and n[:1].isdigit())

    def read(self, name: str) -> dict[str, Any] | None:
        try:
            with open(os.path.join(self.path, name), "rb") as f:
                obj = json.loads(f.read())
            return obj if isinstance(obj, dict) else None
        except (OSError, ValueError):
            return None

    def remove(self, name: str) -> None:
        try:
            os.unlink(os.path.join(self.path, name))
        except FileNotFoundError:
            pass

    def rewrite(self, name: str, ev: dict[str, Any]) -> None:
        tmp = os.path.join(self.path, ".tmp-" + name)
        data = json.dumps(ev, ensure_ascii=False, separators=(",", ":")).encode("utf-8")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        try:
            os.write(fd, data)
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, os.path.join(self.path, name))

    def drop(
        self, name: str, reason: str, status: int | None = None, ev: dict[str, Any] | None = None
    ) -> None:
        """Remove ``name`` and count it in ``dropped.jsonl``."""
        if ev is None:
            ev = self.read(name) or {}
        line = (
            json.dumps(
                {
                    "ts": _iso(time.time()),
                    "reason": reason,
                    "status": status,
                    "file": name,
                    "event": ev.get("event"),
                    "event_id": ev.get("event_id"),
                }
            )
            + "\n"
        )
        try:
            fd = os.open(
                os.path.join(self.path, "dropped.jsonl"),
                os.O_WRONLY | os.O_CREAT | os.O_APPEND,
                0o600,
            )
            try:
                os.write(fd, line.encode())
            finally:
                os.close(fd)
        except OSError:
            pass
        self.remove(name)

    def refused(self, ev: dict[str, Any], status: int, message: str) -> None:
        """Count an event the server refused for good (``capture_refused``: the caller
        may not write its project) in ``refused.json``, per project: ``{count, status,
        message, last}``. The next SessionStart of that project names it."""
        project = str(ev.get("project") or "?")
        path = os.path.join(self.path, "refused.json")
        state = read_refused(self.path)
        entry = state.get(project)
        if not isinstance(entry, dict):
            entry = {}
        entry = {
            "count": int(entry.get("count") or 0) + 1,
            "status": status,
            "message": message[:300],
            "last": _iso(time.time()),
        }
        state[project] = entry
        try:
            self._ensure()
            tmp = path + f".{os.getpid()}.tmp"
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            with os.fdopen(fd, "w", encoding="utf-8") as f:
                json.dump(state, f)
            os.replace(tmp, path)
        except OSError:
            pass

    def accepted(self, project: object) -> None:
        """Capture into ``project`` works again (a grant came): forget its refusal."""
        state = read_refused(self.path)
        if str(project) in state:
            del state[str(project)]
            try:
                tmp = os.path.join(self.path, f"refused.json.{os.getpid()}.tmp")
                fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
                with os.fdopen(fd, "w", encoding="utf-8") as f:
                    json.dump(state, f)
                os.replace(tmp, os.path.join(self.path, "refused.json"))
            except OSError:
                pass

    def dropped_counts(self) -> dict[str, int]:
        """How many events were dropped, by reason (``overflow``, ``rejected``, ``corrupt``)."""
        counts: dict[str, int] = {}
        try:
            with open(os.path.join(self.path, "dropped.jsonl"), encoding="utf-8") as f:
                for line in f:
                    try:
                        r = json.loads(line).get("reason", "?")
                    except ValueError:
                        continue
                    counts[r] = counts.get(r, 0) + 1
        except OSError:
            pass
        return counts

    def enforce_bounds(self) -> None:
        names = self.pending()
        over = len(names) - self.max_events
        for n in names[: max(over, 0)]:
            self.drop(n, "overflow")
        names = names[max(over, 0) :]
        if len(names) <= 16:
            return
        sizes = []
        for n in names:
            try:
                sizes.append(os.stat(os.path.join(self.path, n)).st_size)
            except OSError:
                sizes.append(0)
        total = sum(sizes)
        i = 0
        while total > self.max_bytes and i < len(names) - 1:
            self.drop(names[i], "overflow")
            total -= sizes[i]
            i += 1

    def clean_tmp(self, older_than: float = 600.0) -> None:
        try:
            names = os.listdir(self.path)
        except OSError:
            return
        now = time.time()
        for n in names:
            if n.startswith(".tmp-"):
                p = os.path.join(self.path, n)
                try:
                    if now - os.stat(p).st_mtime > older_than:
                        os.unlink(p)
                except OSError:
                    pass

    def try_lock(self) -> int | None:
        """Take the drain lock without waiting: an open fd holding ``flock``, or None
        when another process drains. The lock lives as long as any copy of the fd."""
        self._ensure()
        try:
            import fcntl
        except ImportError:  # pragma: no cover - no flock: no concurrent drainers guard
            return os.open(os.path.join(self.path, ".drain.lock"), os.O_RDWR | os.O_CREAT, 0o600)
        fd = os.open(os.path.join(self.path, ".drain.lock"), os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            os.close(fd)
            return None
        return fd

    def lock(self, timeout: float) -> int | None:
        """Take the drain lock, waiting up to ``timeout`` seconds."""
        end = time.monotonic() + timeout
        while True:
            fd = self.try_lock()
            if fd is not None or time.monotonic() >= end:
                return fd
            time.sleep(0.05)


# --------------------------------------------------------------------------- HTTP


class HttpError(OSError):
    """No usable reply: refused, timed out, cut off, or not HTTP."""


_ZONE: list[str] = []
_ZONE_CHARS = set("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_+-/")


def local_zone() -> str:
    """This machine's time zone, sent as ``X-Wiki-Memory-TZ`` with every request (the
    days of "yesterday" in the brief and in recall are the user's): the IANA name in
    ``TZ``, else the one ``/etc/localtime`` links to, else the current UTC offset. The
    same rule as ``wiki_memory.recall.zones.local_zone_name``; worked out once a process
    (an environment read and one ``readlink``)."""
    if _ZONE:
        return _ZONE[0]
    env = (os.environ.get("TZ") or "").lstrip(":").strip()
    name = ""
    if env.upper() in ("UTC", "GMT", "UTC0", "GMT0"):
        name = "UTC"
    elif env and "/" in env and not env.startswith("/") and ".." not in env:
        name = env
    elif not env:
        try:
            link = os.path.realpath("/etc/localtime")
            if "zoneinfo/" in link:
                name = link.rsplit("zoneinfo/", 1)[1]
        except OSError:
            pass
    if not name or len(name) > 64 or not set(name) <= _ZONE_CHARS:
        off = -(time.altzone if time.localtime().tm_isdst > 0 else time.timezone)
        name = f"{'-' if off < 0 else '+'}{abs(off) // 3600:02d}:{abs(off) % 3600 // 60:02d}"
    _ZONE.append(name)
    return name


def http_post(
    base_url: str,
    path: str,
    token: str | None,
    body: bytes,
    deadline: float,
    ca_file: str | None = None,
) -> tuple[int, bytes]:
    """POST ``body`` (JSON) to ``base_url + path``; returns ``(status, body)``.

    ``deadline`` is a ``time.monotonic()`` instant bounding connect, send and receive.
    Plain ``http`` uses a raw socket (a fraction of ``http.client``'s import cost);
    ``https`` uses ``http.client`` (and so ``ssl``, imported only then), trusting
    ``ca_file`` (PEM) besides the system's CAs. Raises :class:`HttpError` (an OSError)
    otherwise.
    """
    remaining = deadline - time.monotonic()
    if remaining <= 0.005:
        raise HttpError("no time left")
    scheme, sep, rest = base_url.partition("://")
    if not sep:
        raise HttpError(f"bad server URL {base_url!r}")
    hostport, _, prefix = rest.partition("/")
    full_path = ("/" + prefix.strip("/") if prefix.strip("/") else "") + path
    headers = {
        "Content-Type": "application/json",
        "Content-Length": str(len(body)),
        "Connection": "close",
        "User-Agent": "wiki-memory-hook/" + VERSION,
        "X-Wiki-Memory-TZ": local_zone(),
    }
    if token:
        headers["Authorization"] = "Bearer " + token
    if scheme == "https":
        import http.client

        try:
            context = None
            if ca_file:
                import ssl

                try:
                    context = ssl.create_default_context(cafile=os.path.expanduser(ca_file))
                except ssl.SSLError as exc:
                    raise HttpError(f"ca_file {ca_file}: {exc}") from exc
            conn = http.client.HTTPSConnection(hostport, timeout=remaining, context=context)
            conn.request("POST", full_path, body=body, headers=headers)
            resp = conn.getresponse()
            return resp.status, resp.read()
        except (OSError, http.client.HTTPException) as exc:
            raise HttpError(str(exc)) from exc
    if scheme != "http":
        raise HttpError(f"unsupported scheme {scheme!r}")
    if hostport.startswith("["):
        host, _, port_s = hostport[1:].partition("]")
        port_s = port_s.lstrip(":")
    else:
        host, _, port_s = hostport.partition(":")
    port = int(port_s) if port_s else 80
    head = f"POST {full_path} HTTP/1.1\r\nHost: {hostport}\r\n"
    head += "".join(f"{k}: {v}\r\n" for k, v in headers.items()) + "\r\n"
    try:
        sock = _connect(host, port, deadline)
    except OSError as exc:
        raise HttpError(f"cannot connect to {base_url}: {exc}") from exc
    try:
        sock.settimeout(max(deadline - time.monotonic(), 0.005))
        sock.sendall(head.encode("latin-1") + body)
        buf = bytearray()
        need: int | None = None
        hdr_end = -1
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise HttpError("timed out waiting for the reply")
            sock.settimeout(left)
            chunk = sock.recv(65536)
            if not chunk:
                break
            buf += chunk
            if hdr_end < 0:
                hdr_end = buf.find(b"\r\n\r\n")
                if hdr_end >= 0:
                    for line in bytes(buf[:hdr_end]).split(b"\r\n")[1:]:
                        k, _, v = line.partition(b":")
                        if k.strip().lower() == b"content-length":
                            need = hdr_end + 4 + int(v.strip())
            if need is not None and len(buf) >= need:
                break
    except (OSError, ValueError) as exc:
        raise HttpError(str(exc) or type(exc).__name__) from exc
    finally:
        sock.close()
    if hdr_end < 0:
        raise HttpError("connection closed before a reply")
    status_line = bytes(buf[: buf.find(b"\r\n")]).split(None, 2)
    try:
        status = int(status_line[1])
    except (IndexError, ValueError) as exc:
        raise HttpError("not an HTTP reply") from exc
    headers_raw = bytes(buf[:hdr_end]).lower()
    data = bytes(buf[hdr_end + 4 : need] if need is not None else buf[hdr_end + 4 :])
    if b"transfer-encoding: chunked" in headers_raw:
        data = _dechunk(data)
    return status, data


def _connect(host: str, port: int, deadline: float) -> _socket.socket:
    """A connected TCP socket to ``host:port`` before ``deadline``.

    Uses ``_socket`` (the C module): ``socket.py`` costs ~3 ms of imports at every
    hook start (``selectors``, enums). An ASCII host goes to getaddrinfo as bytes,
    which skips the idna codec (~2 ms more)."""
    import _socket

    addr = host.encode("ascii") if host.isascii() else host
    infos = _socket.getaddrinfo(addr, port, 0, _socket.SOCK_STREAM)
    err: OSError | None = None
    for family, type_, proto, _, sa in infos:
        left = deadline - time.monotonic()
        if left <= 0:
            break
        sock = _socket.socket(family, type_, proto)
        try:
            sock.settimeout(left)
            sock.connect(sa)
            return sock
        except OSError as exc:
            err = exc
            sock.close()
    raise err or OSError("timed out connecting")


def _dechunk(data: bytes) -> bytes:
    out = bytearray()
    i = 0
    while i < len(data):
        j = data.find(b"\r\n", i)
        if j < 0:
            break
        size = int(data[i:j].split(b";")[0] or b"0", 16)
        if size == 0:
            break
        out += data[j + 2 : j + 2 + size]
        i = j + 2 + size + 2
    return bytes(out)


# --------------------------------------------------------------------------- delivery


def read_refused(outbox_dir: str) -> dict[str, Any]:
    """``refused.json`` of an outbox: project -> ``{count, status, message, last}``
    (``{}`` when none or unreadable)."""
    try:
        with open(os.path.join(outbox_dir, "refused.json"), encoding="utf-8") as f:
            data = json.load(f)
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def refusal_of(status: int, reply: bytes) -> str | None:
    """The message of a ``capture_refused`` answer (403 or 404: the caller may not write
    the project; final, never retried), else None."""
    if status not in (403, 404):
        return None
    try:
        body = json.loads(reply)
    except ValueError:
        return None
    if isinstance(body, dict) and body.get("error") == "capture_refused":
        return str(body.get("message") or "capture refused")
    return None


def refusal_notice(outbox_dir: str, project: str | None) -> str:
    """The lines a SessionStart brief opens with when capture for ``project`` is
    refused by the server ("" otherwise)."""
    entry = read_refused(outbox_dir).get(str(project)) if project else None
    if not isinstance(entry, dict):
        return ""
    return (
        f"wiki-memory: capture for project {project} is refused by the server: "
        f"{entry.get('message')} ({entry.get('count')} event(s) dropped, not retried). "
        "Nothing from this session is remembered; ask an admin for a write grant "
        "(`wiki-memory token grant --user <you> --project "
        f"{project}`)."
    )


def classify(status: int) -> str:
    """``ok`` (2xx), ``rejected`` (a 4xx about the event itself: dropped and counted) or
    ``retry`` (5xx, auth, rate limits, wrong URL: kept for later)."""
    if 200 <= status < 300:
        return "ok"
    if 400 <= status < 500 and status not in RETRY_STATUSES:
        return "rejected"
    return "retry"


def deliver_one(cfg: Config, ob: Outbox, name: str, ev: dict[str, Any], deadline: float) -> str:
    """Send one stored event: ``ok``, ``rejected`` and ``refused`` (``capture_refused``:
    counted in ``refused.json``) remove it from the outbox, ``shrunk`` means it was cut
    smaller after a 413 and waits, ``retry`` keeps it."""
    body = json.dumps(ev, ensure_ascii=False, separators=(",", ":")).encode("utf-8")
    status, reply = http_post(cfg.url, "/v1/observations", cfg.token, body, deadline, cfg.ca_file)
    note_reachable(ob)
    refused = refusal_of(status, reply)
    if refused is not None:
        # final: the caller may not write this project; dropped, counted, never retried
        ob.drop(name, "refused", status, ev)
        ob.refused(ev, status, refused)
        warn(f"server refused capture for {ev.get('project')} ({status}): {refused}; dropped")
        return "refused"
    verdict = classify(status)
    if verdict == "ok":
        ob.remove(name)
        ob.accepted(ev.get("project"))
    elif verdict == "rejected":
        if status == 413 and _size(ev) > SHRUNK_EVENT_BYTES:
            # The server's limit is lower than ours: shrink once, send again later.
            small = json.loads(json.dumps(ev))
            truncate_event(small, SHRUNK_EVENT_BYTES)
            ob.rewrite(name, small)
            warn(f"server said 413; {ev.get('event')} cut to {SHRUNK_EVENT_BYTES} bytes")
            return "shrunk"
        ob.drop(name, "rejected", status, ev)
        warn(f"server rejected {ev.get('event')} ({status}); dropped")
    else:
        warn(f"server answered {status}; the event stays in the outbox")
    return verdict


def settle_batch(
    ob: Outbox, batch: list[tuple[str, dict[str, Any]]], reply: bytes, stats: dict[str, int]
) -> int:
    """Settle a batch the server answered with a 2xx: each event by its own entry of the
    reply's ``accepted`` list (docs/api.md): a 2xx entry is accepted and leaves the
    outbox, a ``capture_refused`` entry is dropped and counted in ``refused.json``, any
    other 4xx entry is dropped as rejected, and an entry asking for a retry (5xx, 429)
    stays. A reply without per-event entries (a server of an earlier release) accepted
    the whole batch. Returns how many events stay."""
    try:
        acc = json.loads(reply).get("accepted")
    except (ValueError, AttributeError):
        acc = None
    if not isinstance(acc, list) or len(acc) != len(batch):
        acc = [{} for _ in batch]
    kept = 0
    for (n, ev), a in zip(batch, acc, strict=True):
        a = a if isinstance(a, dict) else {}
        status = a.get("status", 202)
        status = status if isinstance(status, int) else 202
        verdict = classify(status)
        if verdict == "ok":
            ob.accepted(ev.get("project"))
            if a.get("duplicate"):
                stats["duplicates"] += 1
            ob.remove(n)
            stats["sent"] += 1
        elif a.get("error") == "capture_refused":
            message = str(a.get("message") or "capture refused")
            ob.drop(n, "refused", status, ev)
            ob.refused(ev, status, message)
            warn(f"server refused capture for {ev.get('project')} ({status}): {message}; dropped")
            stats["refused"] += 1
        elif verdict == "rejected":
            ob.drop(n, "rejected", status, ev)
            warn(f"server rejected {ev.get('event')} ({status}): {a.get('message')}; dropped")
            stats["rejected"] += 1
        else:
            kept += 1
    return kept


def drain(cfg: Config, ob: Outbox, max_seconds: float, request_seconds: float) -> dict[str, int]:
    """Send every waiting event, oldest first, in batches (``POST`` of a list). The
    caller holds the drain lock. Stops at the first failure that is not the event's
    fault. Returns counts: ``sent``, ``duplicates``, ``rejected``, ``refused``,
    ``corrupt``, ``left``,
    ``failed`` (1 when it stopped on an unreachable or failing server)."""
    stats = {
        "sent": 0,
        "duplicates": 0,
        "rejected": 0,
        "refused": 0,
        "corrupt": 0,
        "left": 0,
        "failed": 0,
    }
    end = time.monotonic() + max_seconds
    ob.clean_tmp()
    if not cfg.url:  # no server of this data directory runs: nothing is sent anywhere
        stats["failed"] = 1
        stats["left"] = len(ob.pending())
        return stats
    max_batch = cfg.geti("drain_batch_events")
    max_bytes = cfg.geti("max_batch_bytes")
    while time.monotonic() < end:
        names = ob.pending()
        if not names:
            break
        batch: list[tuple[str, dict[str, Any]]] = []
        size = 2
        for n in names[:max_batch]:
            ev = ob.read(n)
            if ev is not None and "repo_root" in ev:
                fill_repo(cfg, ev)
            if ev is None:
                try:
                    age = time.time() - os.stat(os.path.join(ob.path, n)).st_mtime
                except OSError:
                    continue
                if age > 60:
                    ob.drop(n, "corrupt")
                    stats["corrupt"] += 1
                continue
            s = _size(ev) + 1
            if batch and size + s > max_bytes:
                break
            batch.append((n, ev))
            size += s
        if not batch:
            if all(ob.read(n) is None for n in names):
                break
            continue
        deadline = min(time.monotonic() + request_seconds, end)
        try:
            if len(batch) == 1:
                n, ev = batch[0]
                verdict = deliver_one(cfg, ob, n, ev, deadline)
                if verdict == "ok":
                    stats["sent"] += 1
                elif verdict in ("rejected", "refused"):
                    stats[verdict] += 1
                elif verdict == "shrunk":
                    continue  # rewritten smaller after a 413: send it again
                else:
                    stats["failed"] = 1
                    break
                continue
            body = (
                "["
                + ",".join(
                    json.dumps(ev, ensure_ascii=False, separators=(",", ":")) for _, ev in batch
                )
                + "]"
            ).encode("utf-8")
            status, reply = http_post(
                cfg.url, "/v1/observations", cfg.token, body, deadline, cfg.ca_file
            )
        except HttpError as exc:
            warn(f"server unreachable ({exc}); {len(names)} event(s) stay in the outbox")
            note_unreachable(cfg, ob, str(exc))
            stats["failed"] = 1
            break
        note_reachable(ob)
        verdict = "rejected" if refusal_of(status, reply) is not None else classify(status)
        if verdict == "ok":
            if settle_batch(ob, batch, reply, stats):
                warn(f"server answered {status} with events to retry; they stay in the outbox")
                stats["failed"] = 1
                break
        elif verdict == "rejected":
            # The whole list was refused (a server of an earlier release refuses a list
            # for one bad event or one refused project): send them one by one.
            for n, ev in batch:
                try:
                    v = deliver_one(cfg, ob, n, ev, min(time.monotonic() + request_seconds, end))
                    if v == "shrunk":  # send the smaller copy now, to keep the order
                        small = ob.read(n)
                        if small is not None:
                            v = deliver_one(
                                cfg, ob, n, small, min(time.monotonic() + request_seconds, end)
                            )
                except HttpError:
                    stats["failed"] = 1
                    break
                if v == "ok":
                    stats["sent"] += 1
                elif v in ("rejected", "refused"):
                    stats[v] += 1
                elif v != "shrunk":
                    stats["failed"] = 1
                    break
            if stats["failed"]:
                break
        else:
            warn(f"server answered {status}; {len(names)} event(s) stay in the outbox")
            stats["failed"] = 1
            break
    stats["left"] = len(ob.pending())
    return stats


# --------------------------------------------------------------------------- back-off

#: ``<outbox>/.unreachable``: when the last delivery was refused or timed out
#: ``{"since": epoch s of the first failure, "until": epoch s the back-off ends,
#: "failures": consecutive failures, "url": the server, "error": the last reason}``.
BACKOFF_FILE = ".unreachable"


def read_backoff(ob: Outbox) -> dict[str, Any] | None:
    """The outbox's back-off state, or None when the server was last reachable."""
    try:
        with open(os.path.join(ob.path, BACKOFF_FILE), "rb") as f:
            st = json.loads(f.read())
    except (OSError, ValueError):
        return None
    return st if isinstance(st, dict) and isinstance(st.get("until"), int | float) else None


def in_backoff(ob: Outbox, now: float | None = None) -> dict[str, Any] | None:
    """The back-off state while it lasts (the network is skipped then), else None."""
    st = read_backoff(ob)
    now = time.time() if now is None else now
    return st if st is not None and now < float(st["until"]) else None


def note_unreachable(cfg: Config, ob: Outbox, reason: str) -> dict[str, Any]:
    """Record a refused or timed-out delivery: the back-off doubles with each consecutive
    failure, from ``backoff_seconds`` up to ``backoff_max_seconds``. Returns the state."""
    now = time.time()
    old = read_backoff(ob) or {}
    n = int(old.get("failures") or 0) + 1
    wait = min(cfg.get("backoff_seconds") * (2 ** min(n - 1, 16)), cfg.get("backoff_max_seconds"))
    st = {
        "since": float(old.get("since") or now),
        "until": now + wait,
        "failures": n,
        "url": cfg.url,
        "error": reason[:200],
    }
    try:
        ob._ensure()
        tmp = os.path.join(ob.path, f".tmp-{BACKOFF_FILE}-{os.getpid()}")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        try:
            os.write(fd, json.dumps(st).encode())
        finally:
            os.close(fd)
        os.replace(tmp, os.path.join(ob.path, BACKOFF_FILE))
    except OSError:
        pass
    return st


def note_reachable(ob: Outbox) -> None:
    """The server answered: end the back-off."""
    try:
        os.unlink(os.path.join(ob.path, BACKOFF_FILE))
    except OSError:
        pass


def unreachable_line(cfg: Config, st: dict[str, Any] | None, queued: int) -> str:
    """The one line a SessionStart returns when no brief could be fetched, composed from
    the outbox's state: ``wiki-memory: memory server unreachable since 14:02
    (http://127.0.0.1:8765); 37 events queued; they will be sent when it is back``."""
    since = ""
    if st and isinstance(st.get("since"), int | float):
        since = " since " + time.strftime("%H:%M", time.localtime(float(st["since"])))
    url = (st or {}).get("url") or cfg.url
    n = f"{queued} event{'s' if queued != 1 else ''} queued"
    return (
        f"wiki-memory: memory server unreachable{since} ({url}); brief unavailable; "
        f"{n}; they will be sent when it is back"
    )


def not_running_line(cfg: Config, queued: int) -> str:
    """The one line a SessionStart returns when no server of the data directory runs."""
    n = f"{queued} event{'s' if queued != 1 else ''} queued"
    return (
        f"wiki-memory: memory server not running (no server on {cfg.data_dir}); "
        f"brief unavailable; {n}; they will be sent when it starts"
    )


def spawn_drainer(cfg: Config, ob: Outbox) -> bool:
    """Start a detached background drainer unless one already runs (never without a
    server to send to). The lock is taken
    here and handed to the child (an ``flock`` lives with the open file), so two
    drainers never overlap. The child is in its own session with stdio on /dev/null,
    so the harness waits neither for it nor for its pipes. Returns True if started."""
    if not cfg.url:
        return False
    fd = ob.try_lock()
    if fd is None:
        return False
    if not hasattr(os, "fork"):  # pragma: no cover - Windows: a detached process
        os.close(fd)
        import subprocess

        here = os.path.join(os.path.dirname(os.path.abspath(__file__)), "wiki_memory_hook.py")
        flags = getattr(subprocess, "DETACHED_PROCESS", 0) | getattr(
            subprocess, "CREATE_NEW_PROCESS_GROUP", 0
        )
        cmd = [sys.executable, here, "--drain", "--data-dir", cfg.data_dir, "--url", cfg.url]
        if cfg.ca_file:
            cmd += ["--ca-file", cfg.ca_file]
        subprocess.Popen(
            cmd,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            creationflags=flags,
            close_fds=True,
        )
        return True
    pid = os.fork()
    if pid:
        os.close(fd)  # the child's copy keeps the lock
        return True
    global _IS_DRAINER
    _IS_DRAINER = True
    try:
        os.setsid()
        null = os.open(os.devnull, os.O_RDWR)
        for std in (0, 1, 2):
            os.dup2(null, std)
        _arm(cfg.get("drain_max_seconds") + 5)
        drain(cfg, ob, cfg.get("drain_max_seconds"), cfg.get("drain_request_seconds"))
    except BaseException:
        pass
    finally:
        os._exit(0)


def instruction_files(cwd: str) -> list[dict[str, str]]:
    """``[{"source", "hash"}]`` of the instruction and memory files present in ``cwd``
    and above and in the home folder (``wiki_memory/capture/agentfiles.py``, docs/agent-files.md);
    ``[]`` when that module cannot be loaded or anything goes wrong."""
    try:
        from wiki_memory.capture import agentfiles

        return agentfiles.report(cwd)[:64]
    except Exception:
        return []


class BriefUnavailable(Exception):
    """The server answered, but without a brief (an error status, a timeout mid-reply)."""


def fetch_brief(
    cfg: Config,
    harness: str,
    project: str | None,
    session_id: str | None,
    deadline: float,
    cwd: str | None = None,
    source: str | None = None,
) -> str:
    """``POST /v1/brief`` → its ``text``, cut to ``brief_max_chars`` ("" for no brief:
    404, or no text). Raises :class:`HttpError` when the server cannot be reached (refused,
    no route, a connect that timed out) and :class:`BriefUnavailable` when it answered
    without a brief or too slowly."""
    ask: dict[str, Any] = {
        "project": project,
        "cwd": cwd,
        "harness": harness,
        "session_id": session_id,
        "budget_tokens": cfg.geti("brief_budget_tokens"),
    }
    if source:
        ask["source"] = source  # startup, resume, clear, compact: a shorter brief on the last
    files = instruction_files(cwd) if cwd else []
    if files:
        ask["instruction_files"] = files  # the brief leaves out what the harness has already
    if _REPO and _REPO[0].get("id"):
        ask["repo_id"] = _REPO[0]["id"]
        if _REPO[0].get("origin"):
            ask["repo_origin"] = _REPO[0]["origin"]  # a new one's folder may be api-<owner>
    body = json.dumps(ask).encode()
    try:
        status, reply = http_post(cfg.url, "/v1/brief", cfg.token, body, deadline, cfg.ca_file)
    except HttpError as exc:
        warn(f"no brief ({exc})", once=True)
        if str(exc).startswith("cannot connect"):
            raise
        raise BriefUnavailable("the server did not answer in time") from exc
    if not 200 <= status < 300:
        if status != 404:
            warn(f"no brief (server answered {status})", once=True)
            raise BriefUnavailable(f"the server answered {status}")
        return ""
    try:
        text = json.loads(reply).get("text") or ""
    except (ValueError, AttributeError):
        return ""
    if not isinstance(text, str):
        return ""
    limit = cfg.geti("brief_max_chars")
    if len(text) > limit:
        cut = text.rfind("\n", 0, limit)
        text = text[: cut if cut > limit // 2 else limit]
    return text


#: how often a hook run rewrites its harness's ``ran-<harness>.json`` (seconds)
RAN_EVERY = 30.0


def note_ran(outbox_dir: str, harness: str, event: str) -> None:
    """Record that this harness ran our hook (``<outbox>/ran-<harness>.json``: the event
    and the time), at most every :data:`RAN_EVERY` seconds: ``doctor`` tells a hook the
    harness never ran (an untrusted Codex hook, hooks switched off) from one that runs,
    and names the last event per harness. Never raises."""
    name = "".join(c for c in harness if c.isalnum() or c in "-_")[:40] or "unknown"
    path = os.path.join(outbox_dir, f"ran-{name}.json")
    try:
        if time.time() - os.stat(path).st_mtime < RAN_EVERY:
            return
    except OSError:
        pass
    try:
        tmp = path + f".{os.getpid()}.tmp"
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)  # owner-only, as the outbox
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(json.dumps({"harness": harness, "event": event, "time": time.time()}))
        os.replace(tmp, path)
    except OSError:
        pass


def on_path(name: str, path: str | None = None) -> bool:
    """True when ``name`` is an executable file in a folder of ``path`` (``$PATH``)."""
    for d in (os.environ.get("PATH", "") if path is None else path).split(os.pathsep):
        full = os.path.join(d or ".", name)
        if os.path.isfile(full) and os.access(full, os.X_OK):
            return True
    return False


def local_commands(text: str, exe: str | None = None, path: str | None = None) -> str:
    """``text`` with each command ``wiki-memory …`` it quotes in backticks spelled as the
    console script beside this hook's interpreter, when ``wiki-memory`` is not on the
    agent's ``PATH`` (a venv install puts it on no PATH): the commands the brief prints
    then run in the agent's shell. Unchanged when the name resolves, or no script is
    there."""
    if "`wiki-memory " not in text or on_path("wiki-memory", path):
        return text
    script = os.path.join(os.path.dirname(exe or sys.executable), "wiki-memory")
    if not (os.path.isfile(script) and os.access(script, os.X_OK)):
        return text
    safe = all(c.isalnum() or c in "/._-+:@%" for c in script)
    spelled = script if safe else "'" + script.replace("'", "'\\''") + "'"
    return text.replace("`wiki-memory ", "`" + spelled + " ")


# --------------------------------------------------------------------------- main


def run(argv: list[str]) -> None:
    global _PENDING_OUTPUT, _SENDING
    opts = parse_args(argv)
    pinned = bool(opts["data_dir"] or opts["url"])
    if opts["drain"]:
        cfg = load_config(
            opts["data_dir"], opts["url"], opts["token_file"], pinned, opts["ca_file"]
        )
        ob = Outbox(cfg.outbox_dir, cfg.geti("outbox_max_events"), cfg.geti("outbox_max_bytes"))
        fd = ob.lock(5.0)
        if fd is not None:
            drain(cfg, ob, cfg.get("drain_max_seconds"), cfg.get("drain_request_seconds"))
        return
    harness = opts["harness"] or "claude-code"
    harness = {"gemini": "gemini-cli", "claude": "claude-code"}.get(harness, harness)
    deadline_s = float(
        opts["deadline"]
        or os.environ.get("WIKI_MEMORY_HOOK_DEADLINE_SECONDS")
        or DEFAULTS["deadline_seconds"]
    )
    if opts["notify_json"] is not None:
        raw = opts["notify_json"].encode("utf-8", "surrogatepass")
    else:
        raw = read_stdin(idle_seconds=deadline_s)
    try:
        payload = json.loads(raw.decode("utf-8", "replace")) if raw.strip() else None
    except ValueError:
        payload = None
    if not isinstance(payload, dict):
        if opts["event"] == "SessionStart":
            _PENDING_OUTPUT = session_start_output(harness, "")
        warn("no event JSON on stdin; nothing captured")
        return
    event = payload.get("hook_event_name") or payload.get("type") or opts["event"] or "unknown"
    if not isinstance(event, str):
        event = str(event)
    is_start = event == "SessionStart"
    if is_start:
        # what the agent reads if the deadline strikes first: never silently empty
        _PENDING_OUTPUT = session_start_output(
            harness,
            "wiki-memory: the memory server did not answer in time; brief unavailable; "
            "this session's events are kept and sent later",
        )
    # The hard deadline counts from the process start; a slow stdin writer still
    # leaves a moment to store the event.
    now_m = time.monotonic()
    cfg = load_config(opts["data_dir"], opts["url"], opts["token_file"], pinned, opts["ca_file"])
    if opts["deadline"]:
        deadline_s = float(opts["deadline"])
    else:
        deadline_s = cfg.get("deadline_seconds")
    if event == "SessionEnd":
        deadline_s = min(deadline_s, cfg.get("session_end_deadline_seconds"))
    hard = max(_T0 + deadline_s - 0.15, now_m + 0.3)
    _arm(hard - time.monotonic())
    net_deadline = hard - 0.1
    if is_start:
        # The agent waits for SessionStart: its network part ends within the (shorter)
        # session-start budget. Storing the event is not cut short by it: on a machine
        # too busy to start the hook in time, the event still reaches the outbox.
        net_deadline = min(net_deadline, _T0 + cfg.get("session_start_deadline_seconds") - 0.1)
    cwd = payload.get("cwd") if isinstance(payload.get("cwd"), str) else None
    root, repo_cfg = find_repo_config(cwd) if cwd and os.path.isdir(cwd) else (None, {})
    cap = repo_cfg.get("capture")
    if isinstance(cap, dict) and cap.get("enabled") is False:
        if is_start:
            _PENDING_OUTPUT = session_start_output(harness, "")
        return
    project, project_from = resolve_project(cwd, repo_cfg)
    session_id = payload.get("session_id") or payload.get("thread-id")
    source = payload.get("source")  # SessionStart: startup, resume, clear, compact
    reason = capture_decision(payload, repo_cfg, root)
    ob = Outbox(cfg.outbox_dir, cfg.geti("outbox_max_events"), cfg.geti("outbox_max_bytes"))
    note_ran(cfg.outbox_dir, harness, event)
    stopped = not cfg.url  # no server of this data directory runs: no address to send to
    away = None if stopped else in_backoff(ob)
    refused = False  # the server answered, but did not take the event (5xx, auth)
    if reason is None:
        ev = build_event(
            harness, event, payload, raw, project, cfg.geti("max_event_bytes"), time.time()
        )
        ev["project_from"] = project_from
        pending_id = False
        if project_from == "git" and _ROOT:
            entry, fresh = cached_repo(cfg, _ROOT[0])
            if is_start and (entry is None or not fresh):
                # 1 s at most, once per repository (and after HEAD moved: a first
                # commit turns a provisional id into the real one here)
                entry = compute_repo(cfg, _ROOT[0]) or entry or {}
            elif entry is not None and not fresh:
                refresh_repo_later(cfg, _ROOT[0])
            if entry:
                set_repo(ev, entry)
                _REPO[:] = [entry]
            elif entry is None and _PROJECT and _PROJECT.has_head(_ROOT[0]):  # type: ignore[attr-defined]
                # first seen mid-session: the drainer works the id out in the background
                # and sends the event with it (never filed under the bare name)
                ev["repo_root"] = _ROOT[0]
                pending_id = not stopped
        try:
            name = ob.write(ev)
        except OSError as exc:
            # the outbox's disk is full: the event is sent now when a server takes it,
            # else it is lost, and the hook says so (it never fails the harness)
            name, unkept = "", exc.strerror or str(exc)
        names = ob.pending()
        late = pending_id or net_deadline - time.monotonic() < 0.05
        if not name:
            sent = False
            if not stopped and away is None:
                try:
                    sent = deliver_one(cfg, ob, "unkept.json", ev, net_deadline) == "ok"
                except HttpError as exc:
                    away = note_unreachable(cfg, ob, str(exc))
            if not sent:
                warn(
                    f"the outbox cannot keep this event ({unkept} in {ob.path}): it is lost; "
                    f"{len(names)} earlier event(s) still queued"
                )
        elif stopped:
            # Never a default port: the event waits for this data directory's server,
            # which drains its outbox when it starts.
            warn(
                f"no server running on {cfg.data_dir}; {len(names)} event(s) queued in the outbox",
                once=True,
            )
        elif away is not None:
            # The server was unreachable a moment ago: no connection until the back-off
            # ends; the outbox keeps the event and the server drains it when it is back.
            warn(f"server unreachable; {len(names)} event(s) queued in the outbox", once=True)
        elif late or (names and names[0] < name):
            # Older events wait: a drainer sends everything in order, this one included.
            started = spawn_drainer(cfg, ob)
            if not pending_id or len(names) > 1:
                # an event that only waits for its repository's id is the ordinary
                # path of a new folder mid-session: nothing to tell the agent
                warn(
                    f"{len(names)} event(s) waiting in the outbox; "
                    + (
                        "sending them in the background"
                        if started
                        else "a drainer is already sending"
                    )
                )
        else:
            send_deadline = net_deadline
            if is_start:
                send_deadline = time.monotonic() + (net_deadline - time.monotonic()) * 0.5
            _SENDING = (cfg, ob)
            try:
                if deliver_one(cfg, ob, name, ev, send_deadline) == "retry":
                    refused = True
            except HttpError as exc:
                if str(exc) != "no time left":
                    away = note_unreachable(cfg, ob, str(exc))
                warn(f"server unreachable ({exc}); the event stays in the outbox")
            finally:
                _SENDING = None
    if is_start:
        if stopped:
            text = not_running_line(cfg, len(ob.pending()))
        elif away is not None:
            text = unreachable_line(cfg, away, len(ob.pending()))
        elif net_deadline - time.monotonic() < 0.05:
            text = (
                "wiki-memory: brief skipped (the hook started too slowly for the session-start "
                "budget); this session's events are sent in the background"
            )
        else:
            # a repository whose id is not known yet: a brief that names no project (its
            # name alone may be another repository's project)
            unknown = (
                project_from == "git"
                and bool(_ROOT)
                and not _REPO
                and bool(_PROJECT)
                and _PROJECT.has_head(_ROOT[0])  # type: ignore[attr-defined]
            )
            try:
                text = fetch_brief(
                    cfg,
                    harness,
                    None if unknown else project,
                    session_id if isinstance(session_id, str) else None,
                    net_deadline,
                    None if unknown else cwd,
                    source if isinstance(source, str) else None,
                )
            except HttpError as exc:
                away = note_unreachable(cfg, ob, str(exc))
                text = unreachable_line(cfg, away, len(ob.pending()))
            except BriefUnavailable as exc:
                text = f"wiki-memory: brief unavailable ({exc}) from {cfg.url}"
            if refused and not text:
                n = len(ob.pending())
                text = (
                    f"wiki-memory: the memory server at {cfg.url} is not accepting events; "
                    f"brief unavailable; {n} event{'s' if n != 1 else ''} queued"
                )
        notice = refusal_notice(cfg.outbox_dir, project)
        if notice:
            text = notice + ("\n\n" + text if text else "")
        _PENDING_OUTPUT = session_start_output(harness, local_commands(text))


def main(argv: list[str]) -> int:
    """Run one hook event; always returns 0 (every error is reported on stderr)."""
    try:
        run(argv)
    except BaseException as exc:  # noqa: BLE001 - a hook never fails the harness
        if _IS_DRAINER:
            os._exit(0)
        warn(f"error ({type(exc).__name__}: {exc}); the agent continues")
    _emit()
    try:
        import _signal

        _signal.setitimer(_signal.ITIMER_REAL, 0)
    except Exception:
        pass
    return 0
