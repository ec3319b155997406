"""What the ``wiki-memory`` subcommands share: the one-line error (:class:`CliError`),
the settings of ``--data-dir``, and talking to the running server (its address, the
token, and turning its error answers into the exit status
:data:`wiki_memory.errors.TABLE` gives)."""

from __future__ import annotations

import argparse
import os
from pathlib import Path
from typing import Any

from wiki_memory.config import Settings, load_settings

__all__ = [
    "CliError",
    "add_url",
    "add_wiki",
    "call_json",
    "cli_settings",
    "given",
    "post_json",
    "server_client",
    "server_error",
    "wiki_option",
]


class CliError(Exception):
    """A user-facing failure: printed as one line, exit status ``code``."""

    def __init__(self, message: str, code: int = 1) -> None:
        super().__init__(message)
        self.code = code


def cli_settings(args: argparse.Namespace, **extra: Any) -> Settings:
    data_dir = Path(args.data_dir).expanduser() if getattr(args, "data_dir", None) else None
    try:
        return load_settings(data_dir, **extra)
    except ValueError as exc:
        raise CliError(f"bad configuration: {exc}") from None


def wiki_option(args: argparse.Namespace) -> Path | None:
    """The folder ``--wiki PATH`` names (user expanded, resolved); None when the command
    has no ``--wiki`` or it was not given. Raises CliError (exit 2) when it is not a
    folder."""
    if not getattr(args, "wiki", None):
        return None
    wiki = Path(args.wiki).expanduser().resolve()
    if not wiki.is_dir():
        raise CliError(f"--wiki {args.wiki}: not a folder", 2)
    return wiki


def add_wiki(parser: Any, help: str = "the wiki folder (default <data-dir>/wiki)") -> None:
    """Add ``--wiki PATH`` to a subcommand's ``parser``: a wiki folder other than
    ``<data-dir>/wiki`` (read back by :func:`wiki_option`); ``help`` is its line in the
    command's help."""
    parser.add_argument("--wiki", metavar="PATH", help=help)


def add_url(parser: Any) -> None:
    """Add ``--url`` to a subcommand's ``parser``: the server it talks to, by default
    the one running on the data directory (:func:`server_client`)."""
    parser.add_argument("--url", help="server URL (default: the one running on the data directory)")


def given(args: argparse.Namespace, *names: str, **renamed: str) -> dict[str, Any]:
    """The options of ``args`` the user gave (any value but None, False, 0, "" and []),
    for a request body: each of ``names`` under its own name, each ``key=option`` of
    ``renamed`` under ``key``; in that order."""
    pairs = [(n, n) for n in names] + list(renamed.items())
    return {key: getattr(args, opt) for key, opt in pairs if getattr(args, opt)}


def server_client(args: argparse.Namespace) -> tuple[str, dict[str, str]]:
    from wiki_memory.auth import TokenStore
    from wiki_memory.datadir import server_address

    settings = cli_settings(args)
    # the owner's token goes only to the address the data directory's live server wrote
    # (or one the user named): never to a default port another process may hold
    url = getattr(args, "url", None) or os.environ.get("WIKI_MEMORY_URL")
    url = url or server_address(settings.data_dir)
    if not url:
        raise CliError(
            f"cannot reach the server: none is running on {settings.data_dir} "
            "(start it with `wiki-memory serve`, or pass --url)"
        )
    token = os.environ.get("WIKI_MEMORY_TOKEN") or TokenStore(settings.auth_dir).owner_token()
    if not token:
        raise CliError("no token: run `wiki-memory serve` once, or set WIKI_MEMORY_TOKEN")
    return url.rstrip("/"), {"Authorization": f"Bearer {token}"}


def request_verify(args: argparse.Namespace) -> Any:
    """httpx's ``verify=`` for this command: trust ``--ca-file`` (or the ``ca_file``
    setting, ``WIKI_MEMORY_CA_FILE``) besides the system's CAs."""
    from wiki_memory.config import tls_verify

    ca = getattr(args, "ca_file", None) or cli_settings(args).ca_file
    try:
        return tls_verify(ca)
    except ValueError as exc:
        raise CliError(str(exc), 2) from None


def post_json(args: argparse.Namespace, path: str, body: Any, timeout: float = 30) -> Any:
    """POST ``body`` as JSON to ``path`` of the server with the CLI's token; the JSON
    answer, or CliError."""
    return call_json(args, "POST", path, timeout, json=body)


def get_json(
    args: argparse.Namespace, path: str, params: dict[str, str], timeout: float = 30
) -> Any:
    """GET ``path`` of the server with the CLI's token; the JSON answer, or CliError."""
    return call_json(args, "GET", path, timeout, params=params)


def call_json(args: argparse.Namespace, method: str, path: str, timeout: float, **kw: Any) -> Any:
    """``method`` on ``path`` of the server with the CLI's token, ``kw`` as httpx takes
    them (``json=``, ``params=``), waiting at most ``timeout`` seconds; the JSON answer.
    Raises CliError: the server cannot be reached (exit 1), or its error answer
    (:func:`server_error`: the exit status its ``error`` code has)."""
    import httpx

    url, headers = server_client(args)
    # plain HTTP has no certificate to check: no CAs are loaded for it (15-50 ms a command);
    # any other scheme, in any case (``HTTPS://``), is checked (fails closed)
    plain = url[:7].lower() == "http://"
    verify = False if plain else request_verify(args)
    try:
        r = httpx.request(method, url + path, headers=headers, timeout=timeout, verify=verify, **kw)
    except httpx.HTTPError as exc:
        raise CliError(f"cannot reach the server at {url}: {exc}") from None
    if r.status_code >= 400:
        raise server_error(r)
    return r.json()


def server_error(r: Any) -> CliError:
    """A CliError for a server's error answer (an ``httpx.Response``): its message, and
    the exit status :data:`wiki_memory.errors.TABLE` gives its ``error`` code."""
    from wiki_memory.errors import exit_status

    try:
        body = r.json()
        msg, code = str(body.get("message", r.text)), body.get("error")
    except (ValueError, AttributeError):
        msg, code = r.text, None
    return CliError(f"server said {r.status_code}: {msg}", exit_status(code, r.status_code))
