"""CLI subcommands of the MCP face: ``mcp`` (the stdio bridge), ``install-mcp``,
``uninstall-mcp``.

``wiki-memory mcp`` is for MCP clients that spawn a server process and talk JSON-RPC over
its stdin/stdout. It is a transport bridge, not a second server: every message read on
stdin is POSTed to the running server's streamable HTTP endpoint (``/mcp``) and every
message that comes back is written to stdout, one JSON-RPC message per line. The tools,
the sessions and both protocol eras (the ``initialize`` handshake and the 2026-07-28
per-request envelope) are the server's; the bridge carries the session id and protocol
headers between messages, sends a stable id for its process (``X-Wiki-Memory-Bridge``,
the default session id of the tools), the harness ``install-mcp`` wrote into its
arguments (``--harness``, sent as ``X-Wiki-Memory-Harness``) and its working directory
(``X-Wiki-Memory-Cwd``, from which the server resolves the project) and its time zone
(``X-Wiki-Memory-TZ``: :func:`wiki_memory.zones.local_zone_name`, whose days
"yesterday" means), and re-opens the session once if the server restarted under it.

Stdout carries protocol frames and nothing else. The first thing the bridge does is move
the real stdout to a private file descriptor and point descriptor 1 at stderr, so that
``print()``, warnings, and banners that libraries print when imported all end up on
stderr. The configuration ``install-mcp`` writes runs this file as a script with ``-S``
(``python -S .../wiki_memory/cli_mcp.py mcp``): then even code that Python runs at start
up (``sitecustomize``, ``.pth`` files) runs after that switch.

Where the server is: ``--url`` (or ``WIKI_MEMORY_URL``), else the address the server on
the data directory wrote (``server.json``). The token: ``--token-file`` (or
``WIKI_MEMORY_TOKEN``), else the local owner's token in the data directory (so no token is
ever written into a client's configuration for a local server). A startup failure (no
data directory, no server, a refused token) exits non-zero with the reason on stderr and
nothing on stdout.
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any

#: the fd the bridge writes protocol frames to, once stdout has been guarded
_protocol_fd: int | None = None

BRIDGE_HEADER = "X-Wiki-Memory-Bridge"
#: the harness ``install-mcp`` wrote into the bridge's arguments (``--harness``)
HARNESS_HEADER = "X-Wiki-Memory-Harness"
#: the bridge's working directory, percent-encoded: the server resolves the project
CWD_HEADER = "X-Wiki-Memory-Cwd"
#: the bridge's time zone (an IANA name or an offset): the caller's days in recall
TZ_HEADER = "X-Wiki-Memory-TZ"
#: the repository id of the working directory (as the hook sends ``repo_id``)
REPO_HEADER = "X-Wiki-Memory-Repo"
PROTOCOL_VERSION_META_KEY = "io.modelcontextprotocol/protocolVersion"
#: method -> params key mirrored in the ``Mcp-Name`` header (as the SDK's client does)
NAME_BEARING_METHODS = {"tools/call": "name", "prompts/get": "name", "resources/read": "uri"}


def guard_stdout() -> int:
    """Keep the real stdout for protocol frames only: returns a private duplicate of fd 1
    and points fd 1 (and so ``sys.stdout``, ``print()`` and C libraries) at stderr.
    Idempotent."""
    global _protocol_fd
    if _protocol_fd is not None:
        return _protocol_fd
    try:
        sys.stdout.flush()
    except (OSError, ValueError, AttributeError):
        pass
    _protocol_fd = os.dup(1)
    os.dup2(2, 1)
    return _protocol_fd


def encode_header_value(value: str) -> str:
    """A header-safe form of ``value``: printable ASCII as is, else ``=?base64?…?=``
    (the SDK's ``mcp.shared.inbound.encode_header_value``; a test keeps them equal)."""
    import base64
    import re

    if (
        re.fullmatch(r"[\x20-\x7e]*", value)
        and value == value.strip()
        and not re.fullmatch(r"=\?base64\?.*\?=", value)
    ):
        return value
    return f"=?base64?{base64.b64encode(value.encode('utf-8')).decode('ascii')}?="


class BridgeError(Exception):
    """The bridge cannot start; the message says why (printed on stderr)."""


class Bridge:
    """Forwards JSON-RPC messages between stdio and the server's ``/mcp`` endpoint."""

    def __init__(
        self,
        url: str,
        token: str | None,
        out_fd: int,
        read_timeout: float = 600,
        harness: str | None = None,
        cwd: str | None = None,
        verify: Any = True,
        repo_id: str | None = None,
    ) -> None:
        import logging
        import threading
        import uuid
        from concurrent.futures import ThreadPoolExecutor

        import httpx

        self.log = logging.getLogger("wiki_memory.mcp.bridge")
        self.base = url.rstrip("/")
        self.endpoint = self.base + "/mcp"
        self.token = token
        self.out_fd = out_fd
        # verify: httpx's ``verify=`` (True, or an SSLContext trusting --ca-file)
        self.client = httpx.Client(timeout=httpx.Timeout(30, read=read_timeout), verify=verify)
        self.bridge_id = uuid.uuid4().hex
        self.harness = harness
        self.cwd = cwd
        self.repo_id = repo_id
        from wiki_memory.zones import local_zone_name

        self.tz = local_zone_name()
        self.session_id: str | None = None
        self.protocol: str | None = None  # negotiated by an initialize handshake
        self.modern: str | None = None  # the 2026-07-28+ version the client stamps
        self.init_message: dict[str, Any] | None = None
        self._out_lock = threading.Lock()
        self._session_lock = threading.Lock()
        self.pool = ThreadPoolExecutor(max_workers=8, thread_name_prefix="mcp-bridge")

    # -- output ------------------------------------------------------------------------
    def emit(self, message: Any) -> None:
        """Write one JSON-RPC message as one line (pure ASCII: no line break can hide in
        it)."""
        import json

        data = (json.dumps(message, ensure_ascii=True, separators=(",", ":")) + "\n").encode()
        with self._out_lock:
            view = memoryview(data)
            while view:
                n = os.write(self.out_fd, view)
                view = view[n:]

    def error_reply(self, request: Any, code: int, message: str) -> None:
        if isinstance(request, dict) and "id" in request and "method" in request:
            self.emit(
                {
                    "jsonrpc": "2.0",
                    "id": request["id"],
                    "error": {"code": code, "message": message},
                }
            )
        else:
            self.log.warning("wiki-memory mcp: %s", message)

    # -- input ---------------------------------------------------------------------------
    def run(self, stdin: Any) -> int:
        """Read messages until EOF; returns the exit status (0)."""
        import json

        try:
            for raw in stdin:
                if not raw.strip():
                    continue
                try:
                    msg = json.loads(raw)
                except ValueError:
                    self.emit(
                        {
                            "jsonrpc": "2.0",
                            "id": None,
                            "error": {"code": -32700, "message": "Parse error: not JSON"},
                        }
                    )
                    continue
                request = isinstance(msg, dict) and "method" in msg and "id" in msg
                if request and msg["method"] not in ("initialize", "server/discover"):
                    self.pool.submit(self.forward, msg)
                else:
                    # the handshake, notifications and replies go in order
                    self.forward(msg)
        finally:
            self.pool.shutdown(wait=True)
            self.close()
        return 0

    def close(self) -> None:
        if self.session_id:
            try:
                self.client.delete(self.endpoint, headers=self.headers({}), timeout=2)
            except Exception:  # noqa: BLE001 - best effort on the way out
                pass
        self.client.close()

    # -- forwarding ----------------------------------------------------------------------
    def headers(self, msg: Any) -> dict[str, str]:
        h = {
            "Accept": "application/json, text/event-stream",
            "Content-Type": "application/json",
            BRIDGE_HEADER: self.bridge_id,
        }
        if self.harness:
            h[HARNESS_HEADER] = self.harness
        if self.cwd:
            from urllib.parse import quote

            h[CWD_HEADER] = quote(self.cwd, safe="/")
        if self.repo_id:
            h[REPO_HEADER] = self.repo_id
        if self.token:
            h["Authorization"] = f"Bearer {self.token}"
        if self.tz:
            h[TZ_HEADER] = self.tz
        if self.session_id:
            h["Mcp-Session-Id"] = self.session_id
        method = msg.get("method") if isinstance(msg, dict) else None
        params = msg.get("params") if isinstance(msg, dict) else None
        meta = params.get("_meta") if isinstance(params, dict) else None
        version = meta.get(PROTOCOL_VERSION_META_KEY) if isinstance(meta, dict) else None
        if isinstance(version, str) and isinstance(method, str) and "id" in msg:
            # a 2026-07-28+ request: self-contained, routed by its headers
            self.modern = version
            h["MCP-Protocol-Version"] = version
            h["Mcp-Method"] = method
            key = NAME_BEARING_METHODS.get(method)
            if key and isinstance(params, dict) and isinstance(params.get(key), str):
                h["Mcp-Name"] = encode_header_value(params[key])
        elif method != "initialize":
            version = self.protocol or self.modern
            if version:
                h["MCP-Protocol-Version"] = version
        return h

    def forward(self, msg: Any, retried: bool = False) -> None:
        """POST one message and relay what comes back."""
        import json

        import httpx

        is_init = isinstance(msg, dict) and msg.get("method") == "initialize"
        if is_init:
            self.init_message = msg
            self.session_id = None
        body = json.dumps(msg, ensure_ascii=False).encode("utf-8")
        try:
            with self.client.stream(
                "POST", self.endpoint, content=body, headers=self.headers(msg)
            ) as r:
                if r.status_code == 404 and self.session_id and not is_init and not retried:
                    r.read()
                    if self.reopen():
                        self.forward(msg, retried=True)
                        return
                sid = r.headers.get("mcp-session-id")
                if is_init and sid:
                    self.session_id = sid
                ctype = r.headers.get("content-type", "")
                if ctype.startswith("text/event-stream"):
                    for data in _sse_data(r.iter_lines()):
                        self.relay(data, msg)
                    return
                raw = r.read()
                if r.status_code in (202, 204) or not raw.strip():
                    if r.status_code >= 400:
                        self.error_reply(msg, -32603, f"the server answered {r.status_code}")
                    return
                try:
                    parsed = json.loads(raw)
                except ValueError:
                    parsed = None
                if isinstance(parsed, dict) and parsed.get("jsonrpc") == "2.0":
                    self.relay(parsed, msg)
                elif isinstance(parsed, list):
                    for m in parsed:
                        self.relay(m, msg)
                else:
                    text = raw.decode("utf-8", errors="replace").strip()[:300]
                    self.error_reply(
                        msg, -32603, f"the wiki-memory server answered {r.status_code}: {text}"
                    )
        except httpx.HTTPError as exc:
            self.log.warning("wiki-memory mcp: cannot reach %s: %s", self.endpoint, exc)
            self.error_reply(
                msg, -32603, f"cannot reach the wiki-memory server at {self.base}: {exc}"
            )

    def relay(self, message: Any, request: Any) -> None:
        """Pass a server message on; an error without an id answers ``request``."""
        if isinstance(message, str):
            import json

            try:
                message = json.loads(message)
            except ValueError:
                self.log.warning("wiki-memory mcp: dropped a message that is not JSON")
                return
        if not isinstance(message, dict):
            return
        if (
            "error" in message
            and message.get("id") is None
            and isinstance(request, dict)
            and "id" in request
            and "method" in request
        ):
            message = {**message, "id": request["id"]}
        result = message.get("result")
        if (
            isinstance(request, dict)
            and request.get("method") == "initialize"
            and message.get("id") == request.get("id")
            and isinstance(result, dict)
            and isinstance(result.get("protocolVersion"), str)
        ):
            self.protocol = result["protocolVersion"]
        self.emit(message)

    def reopen(self) -> bool:
        """The server forgot our session (it restarted): run the client's handshake
        again, quietly, so that the message that got 404 can be retried once."""
        import json

        with self._session_lock:
            if self.init_message is None:
                return False
            init = {**self.init_message, "id": f"wiki-memory-bridge-{self.bridge_id[:8]}"}
            self.session_id = None
            try:
                r = self.client.post(
                    self.endpoint,
                    content=json.dumps(init).encode(),
                    headers=self.headers(init),
                )
                sid = r.headers.get("mcp-session-id")
                if r.status_code >= 400 or not sid:
                    return False
                self.session_id = sid
                note = {"jsonrpc": "2.0", "method": "notifications/initialized"}
                self.client.post(
                    self.endpoint, content=json.dumps(note).encode(), headers=self.headers(note)
                )
            except Exception as exc:  # noqa: BLE001 - the retry then fails the usual way
                self.log.warning("wiki-memory mcp: cannot re-open the session: %s", exc)
                return False
            self.log.warning("wiki-memory mcp: the server restarted; session re-opened")
            return True


def _sse_data(lines: Any) -> Any:
    """The ``data`` of each ``message`` event in a text/event-stream."""
    data: list[str] = []
    event = "message"
    for line in lines:
        if line == "":
            if data and event == "message":
                yield "\n".join(data)
            data, event = [], "message"
            continue
        if line.startswith(":"):
            continue
        field, _, value = line.partition(":")
        value = value[1:] if value.startswith(" ") else value
        if field == "data":
            data.append(value)
        elif field == "event":
            event = value or "message"
    if data and event == "message":
        yield "\n".join(data)


def _local_address(url: str) -> str:
    """A server address as a client should dial it (a wildcard bind → loopback)."""
    for wild, local in (("//0.0.0.0", "//127.0.0.1"), ("//[::]", "//[::1]")):
        url = url.replace(wild, local)
    return url


def resolve_target(args: argparse.Namespace) -> tuple[str | None, str | None]:
    """``(url or None, token or None)`` from the flags, the environment and the data
    directory. Raises BridgeError when the data directory does not exist."""
    from pathlib import Path

    from wiki_memory.config import default_data_dir

    data_dir = Path(args.data_dir).expanduser() if args.data_dir else default_data_dir()
    url = args.url or os.environ.get("WIKI_MEMORY_URL")
    token = os.environ.get("WIKI_MEMORY_TOKEN")
    if args.token_file:
        try:
            token = Path(args.token_file).expanduser().read_text(encoding="utf-8").strip()
        except OSError as exc:
            raise BridgeError(f"cannot read the token file {args.token_file}: {exc}") from None
    if url and token:
        return url, token
    if not data_dir.is_dir():
        raise BridgeError(
            f"the data directory {data_dir} does not exist: start the server once with "
            "`wiki-memory serve` (or pass --data-dir, or --url and --token-file for a team "
            "server)"
        )
    if not token:
        from wiki_memory.auth import TokenStore

        token = TokenStore(data_dir / "auth").owner_token()
    if not url:
        from wiki_memory.datadir import server_address

        url = server_address(data_dir)
    return url, token


def _ca_verify(args: argparse.Namespace) -> Any:
    """httpx's ``verify=`` for the bridge: ``--ca-file`` or ``WIKI_MEMORY_CA_FILE``
    trusted besides the system's CAs. Raises BridgeError for an unreadable file."""
    from wiki_memory.config import tls_verify

    try:
        return tls_verify(getattr(args, "ca_file", None) or os.environ.get("WIKI_MEMORY_CA_FILE"))
    except ValueError as exc:
        raise BridgeError(str(exc)) from None


def _wait_for_server(args: argparse.Namespace) -> tuple[str, str | None]:
    """``(base URL, token)`` once the server's ``/v1/health`` answers, re-reading the data
    directory while waiting (a server that is starting writes its address, and on its
    first run the owner's token, as it comes up). Raises BridgeError after ``--wait``
    seconds, or when the token is refused."""
    import time

    import httpx

    verify = _ca_verify(args)
    deadline = time.monotonic() + max(0.0, args.wait)
    last = "no server has written its address into the data directory"
    while True:
        url, token = resolve_target(args)
        if url is not None:
            base = _local_address(url).rstrip("/")
            try:
                r = httpx.get(base + "/v1/health", timeout=2, verify=verify)
                if r.status_code == 200:
                    headers = {"Authorization": f"Bearer {token}"} if token else {}
                    probe = httpx.get(
                        base + "/v1/pages?limit=1", headers=headers, timeout=5, verify=verify
                    )
                    if probe.status_code != 401:
                        return base, token
                    last = f"the server at {base} refused the token" + (
                        "" if token else " (none was found: use --token-file)"
                    )
                    if args.token_file or os.environ.get("WIKI_MEMORY_TOKEN"):
                        raise BridgeError(last)
                else:
                    last = f"{base}/v1/health answered {r.status_code}"
            except httpx.HTTPError as exc:
                last = f"cannot reach {base}: {exc}"
        if time.monotonic() >= deadline:
            raise BridgeError(
                f"no wiki-memory server answers ({last}); start it with `wiki-memory serve`"
            )
        time.sleep(0.2)


def repo_of(cwd: str | None) -> str | None:
    """The repository id of the git repository holding ``cwd`` (None inside a folder a
    ``.wiki-memory.toml`` names a project for, as the hook sends none then, and outside
    any repository), sent with every request so that a write without ``project`` is
    filed under that repository's project (docs/mcp.md "Project"). Runs
    ``git rev-list`` once, at most 1 s."""
    if not cwd:
        return None
    from wiki_memory.capture.project import repo_identity, resolve_project

    found = resolve_project(cwd)
    if found.source != "git" or not found.root:
        return None
    return repo_identity(found.root).get("id") or None


def cmd_mcp(args: argparse.Namespace) -> int:
    """Run the stdio bridge until stdin closes."""
    out_fd = guard_stdout()
    import logging
    import warnings

    logging.basicConfig(
        stream=sys.stderr, level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s"
    )
    warnings.simplefilter("default")
    try:
        base, token = _wait_for_server(args)
    except BridgeError as exc:
        print(f"wiki-memory mcp: {exc}", file=sys.stderr)
        return 1
    try:
        cwd: str | None = os.getcwd()
    except OSError:
        cwd = None
    bridge = Bridge(
        base,
        token,
        out_fd,
        harness=getattr(args, "harness", None),
        cwd=cwd,
        verify=_ca_verify(args),
        repo_id=repo_of(cwd),
    )
    return bridge.run(sys.stdin.buffer)
