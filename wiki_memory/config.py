"""Settings: the data directory, the bind address and the tunables.

Precedence: command-line flags > environment variables (``WIKI_MEMORY_*``) >
``<data_dir>/config.toml`` > defaults. Durations are in seconds, sizes in bytes.
"""

from __future__ import annotations

import functools
import os
import tomllib
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any

import platformdirs

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8765


def default_data_dir() -> Path:
    """Return ``$WIKI_MEMORY_HOME``, else the platform's user data dir (``~/.local/share/wiki-memory``)."""
    env = os.environ.get("WIKI_MEMORY_HOME")
    if env:
        return Path(env).expanduser()
    return Path(platformdirs.user_data_dir("wiki-memory", appauthor=False))


#: the values of the setting ``vectors_model`` (docs/ranking.md#vectors); the first is its
#: default. ``index/vectors.py`` holds each one's model.
VECTORS_MODELS = ("wordllama", "minilm")


@dataclass(frozen=True)
class Settings:
    """Every tunable of a server, with its default.

    Units: ``*_seconds`` are seconds, ``*_bytes`` are bytes, ``*_tokens`` are BPE tokens
    (cl100k_base).
    """

    data_dir: Path = field(default_factory=default_data_dir)
    host: str = DEFAULT_HOST
    port: int = DEFAULT_PORT
    auth: bool = True
    max_body_bytes: int = 1024 * 1024
    idle_seconds: float = 30 * 60
    idle_check_seconds: float = 5.0
    #: how often a running server looks in its own data directory's hook outbox
    outbox_drain_seconds: float = 5.0
    commit_delay_seconds: float = 0.25
    #: how long a commit waits for a lock another git holds before it fails (docs/git.md)
    git_lock_wait_seconds: float = 5.0
    #: a rebuild of the index at start runs before the server answers on a wiki of fewer
    #: pages than this (a few seconds), on a thread while it answers from this many on
    rebuild_background_pages: int = 5000
    #: the pause before a group whose commit failed is tried again
    commit_retry_seconds: float = 5.0
    #: while commits stall, the start-up recovery is tried at most this often
    stall_recover_seconds: float = 30.0
    hand_edit_settle_seconds: float = 1.0
    spool_keep_seconds: float = 7 * 24 * 3600
    #: the scheduled (daily) run that condenses cold session pages (docs/knowledge.md)
    condense_sessions: bool = False
    #: a session page whose ``ended`` and ``updated`` are older than this is cold
    condense_after_days: float = 90.0
    tool_output_excerpt_bytes: int = 2000
    #: arrival numbers per part of a long session's timeline (0: one page, no parts;
    #: docs/sessions.md, "Parts")
    session_part_events: int = 600
    default_budget_tokens: int = 1000
    #: recall ranks every match in Python (the plain path) instead of the optimized one;
    #: both give the same replies (docs/ranking.md, "The optimized path")
    recall_plain: bool = False
    pack_every_commits: int = 500
    watch: bool = True
    #: sync with every git remote this often (0: only when `wiki-memory sync` runs)
    sync_interval_seconds: float = 0.0
    #: the largest file a hub's commit may bring in (bytes); a bigger one is refused and
    #: the rest of the sync goes on (docs/team-server.md, "Threat model")
    max_incoming_blob_bytes: int = 50 * 1024 * 1024
    #: the most bytes one fetch from a hub may receive (its pack); a bigger fetch is
    #: aborted and nothing of it is used
    max_fetch_bytes: int = 1024 * 1024 * 1024
    #: the key a purging server signs its purge announcement with, and a follower checks
    #: it with (set the same on every server of one hub; empty: no purge is announced or
    #: followed without an admin)
    sync_purge_secret: str = ""
    #: a merge that would delete more than this share of the shared pages stops
    sync_max_delete_fraction: float = 0.2
    #: a merge that would delete more than this many shared pages stops
    sync_max_delete_pages: int = 50
    #: network git steps: seconds to connect, without progress, and in all
    sync_connect_timeout_seconds: float = 10.0
    sync_progress_timeout_seconds: float = 60.0
    sync_timeout_seconds: float = 600.0
    #: serve an existing vault folder instead of ``<data_dir>/wiki`` (``serve --wiki PATH``)
    wiki_path: Path | None = None
    #: the most tokens one MCP tool result may hold, structured and text parts together
    mcp_max_result_tokens: int = 20_000
    #: extra Host names (comma-separated, ``name`` or ``name:port``) every route
    #: (``/v1``, ``/mcp``, the web view) accepts besides the bind address, loopback and
    #: this machine's names; ``*`` = any (:mod:`wiki_memory.hosts`)
    allowed_hosts: str = ""
    #: the older name of ``allowed_hosts`` (both are read; their names add up)
    mcp_allowed_hosts: str = ""

    #: a connection that has not sent a complete request head this long after it was
    #: accepted (or after its previous response) is closed (docs/team-server.md)
    header_timeout_seconds: float = 10.0
    #: connections one client address may hold that are waiting or slow; over it, its
    #: oldest waiting one goes, else its slowest body (those being answered never count)
    max_connections_per_address: int = 128
    #: open connections in all (0: the soft file-descriptor limit minus a quarter of it)
    max_connections: int = 0
    #: a request body is judged this long after its head arrived: from then on one
    #: arriving slower than ``min_body_bytes_per_second`` is closed (docs/team-server.md)
    body_grace_seconds: float = 5.0
    #: the slowest a request body may arrive, averaged since its head (bytes a second)
    min_body_bytes_per_second: int = 4096
    #: a request body not complete this long after its head is closed
    body_timeout_seconds: float = 60.0
    #: a reply whose reader has not taken 64 KiB of it for this long is closed
    write_timeout_seconds: float = 30.0
    #: the most links, backlinks and attachments one page reply names (the rest: a
    #: ``links_truncated`` / ``backlinks_truncated`` flag) and wikilinks the web view
    #: renders as links in one page
    max_links_per_reply: int = 1000
    #: the most bytes of a page's rendered HTML the web view sends (the rest: a notice)
    max_page_html_bytes: int = 1024 * 1024

    #: the server's TLS certificate chain and private key (PEM; ``serve --tls-cert/--tls-key``)
    tls_cert: Path | None = None
    tls_key: Path | None = None
    #: serve plain HTTP on a non-loopback address (``serve --insecure-http``)
    insecure_http: bool = False
    #: for clients (CLI, MCP bridge, hook): a PEM file of the CA that signed the server's
    #: certificate, trusted besides the system's (``--ca-file``)
    ca_file: Path | None = None

    #: reverse proxies (comma-separated addresses or networks) whose ``X-Forwarded-For``
    #: names the client for the audit log; their own connections skip the per-address cap
    trusted_proxies: str = ""

    #: the web view lets the local owner in without a token, on a loopback server only
    web_local_owner: bool = False
    #: Snowball stemmers (comma-separated names or codes, or a TOML list) for pages without
    #: a frontmatter ``lang``; queries are stemmed with these and every page ``lang``
    stem_languages: str = "english"
    #: the ``dense`` recall signal (docs/ranking.md#vectors): store a dense vector of every
    #: section at index time and rank by it; needs the ``vectors`` extra
    #: (``pip install 'wiki-memory[vectors]'``), without which it is off whatever this
    #: says. Off by default: on LoCoMo it did not add the 0.02 turn R@10 it was meant to add
    vectors: bool = False
    #: topic pages (docs/sessions.md#topic-pages): when a session ends, compile its
    #: project's ``projects/<p>/topics/`` pages in the same commit. Off by default: on
    #: LoCoMo they moved session R@5 down (docs/benchmarks.md)
    topic_pages: bool = False
    #: the model of the ``dense`` signal: ``wordllama`` (static word vectors) or
    #: ``minilm`` (the sentence model all-MiniLM-L6-v2, whose weights package is
    #: installed apart: docs/ranking.md#vectors); changing it rebuilds the index
    vectors_model: str = "wordllama"
    #: who creates a project by capturing into a name that does not exist yet:
    #: ``members`` (members, admins, the owner; the creator gets a write grant) or
    #: ``admins`` (admins and the owner only)
    project_creation: str = "members"
    #: also write reads, listings and recalls to logs/audit.jsonl (changes always are)
    audit_reads: bool = False

    @property
    def stem_language_names(self) -> tuple[str, ...]:
        """``stem_languages`` split on commas and whitespace (``"english, german"``)."""
        return tuple(self.stem_languages.replace(",", " ").split())

    @property
    def wiki_dir(self) -> Path:
        return self.wiki_path if self.wiki_path is not None else self.data_dir / "wiki"

    @property
    def spool_dir(self) -> Path:
        return self.data_dir / "spool"

    @property
    def auth_dir(self) -> Path:
        return self.data_dir / "auth"

    @property
    def index_path(self) -> Path:
        return self.data_dir / "index.db"

    @property
    def logs_dir(self) -> Path:
        return self.data_dir / "logs"


_ENV_PREFIX = "WIKI_MEMORY_"


_TRUE = frozenset({"1", "true", "yes", "on"})
_FALSE = frozenset({"0", "false", "no", "off", ""})


def _coerce(value: Any, like: Any) -> Any:
    """``value`` (TOML, environment text or an override) as the type of the default
    ``like``. Raises ValueError when it does not convert: a switch is one of
    ``true/false``, ``1/0``, ``yes/no``, ``on/off`` (any case; empty text is false), so a
    typo such as ``auth = "ture"`` stops the start instead of turning a switch off."""
    if isinstance(like, bool):
        if isinstance(value, bool):
            return value
        text = str(value).strip().lower()
        if text in _TRUE or text in _FALSE:
            return text in _TRUE
        raise ValueError(f"expected true or false, got {value!r}")
    if isinstance(like, int):
        return int(value)
    if isinstance(like, float):
        return float(value)
    if isinstance(like, Path) or like is None:  # None: an optional path (wiki_path)
        return Path(str(value)).expanduser()
    if isinstance(value, list | tuple):  # a TOML list of names
        return ",".join(str(v) for v in value)
    return str(value)


def tls_verify(ca_file: Path | str | None) -> Any:
    """What an HTTPS client (httpx ``verify=``) should trust: an ``ssl.SSLContext``
    trusting ``ca_file`` (PEM) besides the system's CAs, else :func:`default_tls`.
    Raises ValueError when ``ca_file`` cannot be read as PEM certificates."""
    if not ca_file:
        return default_tls()
    import ssl

    ctx = ssl.create_default_context()
    try:
        ctx.load_verify_locations(cafile=str(Path(ca_file).expanduser()))
    except (OSError, ssl.SSLError) as exc:
        raise ValueError(f"--ca-file {ca_file}: {exc}") from None
    return ctx


@functools.cache
def default_tls() -> Any:
    """httpx's default ``ssl.SSLContext`` (certifi's CAs, or ``SSL_CERT_FILE``'s), made
    once per process and shared by its clients: loading the CAs takes 15–50 ms, which a
    client made per request (``httpx.get``) otherwise pays each time, TLS or not."""
    import httpx

    return httpx.create_ssl_context()


def load_settings(data_dir: Path | None = None, **overrides: Any) -> Settings:
    """Build :class:`Settings` from defaults, ``config.toml``, the environment and ``overrides``.

    Raises ValueError when ``config.toml`` is not valid TOML or a value has the wrong type.
    """
    base = Settings() if data_dir is None else Settings(data_dir=Path(data_dir))
    values: dict[str, Any] = {}
    cfg = base.data_dir / "config.toml"
    if cfg.exists():
        try:
            values.update(tomllib.loads(cfg.read_text(encoding="utf-8")))
        except tomllib.TOMLDecodeError as exc:
            raise ValueError(f"{cfg}: {exc}") from exc
    for f in fields(Settings):
        env = os.environ.get(_ENV_PREFIX + f.name.upper())
        if env is not None and f.name != "data_dir":
            values[f.name] = env
    values.update({k: v for k, v in overrides.items() if v is not None})
    known = {f.name: getattr(base, f.name) for f in fields(Settings)}
    clean: dict[str, Any] = {}
    for k, v in values.items():
        if k in known:
            try:
                clean[k] = _coerce(v, known[k])
            except ValueError as exc:
                raise ValueError(f"setting {k}: {exc}") from None
    settings = replace(base, **clean)
    if not 0 <= settings.port <= 65535:
        raise ValueError(f"setting port: {settings.port} is not a TCP port (0 to 65535)")
    if settings.vectors and settings.vectors_model not in VECTORS_MODELS:
        raise ValueError(
            f"setting vectors_model: {settings.vectors_model!r} is not a model; expected one "
            f"of {', '.join(VECTORS_MODELS)}"
        )
    return settings
