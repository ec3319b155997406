"""The server in this process: ``create_app`` over a data directory, behind Starlette's
``TestClient`` entered as a context manager, so the app's lifespan runs (the Memory with
its writer and watcher, the hooks' outbox drainer, the MCP session manager), as
``wiki-memory serve`` runs it, without a process, a port or a socket.

``AppServer`` answers like ``serverproc.ServerProcess`` (``url``, ``token``, ``headers``,
``post``, ``get``, ``start``/``stop``, a context manager), and ``client`` is the
``httpx.Client`` to send anything else through (``srv.client.put(srv.url + path, ...)``).
Use a real process only where the process is the point: signals, kill -9, TLS, ports,
slow clients, hooks, start-up messages."""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
from starlette.testclient import TestClient

from wiki_memory.auth import TokenStore
from wiki_memory.config import load_settings
from wiki_memory.core.memory import Memory
from wiki_memory.datadir import ensure_layout
from wiki_memory.server.app import create_app


@contextmanager
def _environ(env: dict[str, str]) -> Iterator[None]:
    """``env`` set in ``os.environ`` for the block (settings read ``WIKI_MEMORY_*`` there)."""
    saved = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    try:
        yield
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


class AppServer:
    """The app of ``wiki-memory serve`` over ``data_dir``, in this process. ``env`` holds
    ``WIKI_MEMORY_*`` settings as the server process would read them; ``settings`` are
    ``load_settings`` keywords on top."""

    def __init__(self, data_dir: Path, env: dict[str, str] | None = None, **settings: Any) -> None:
        self.data_dir = Path(data_dir)
        self.extra_env = dict(env or {})
        self.overrides = settings
        self.memory: Memory | None = None
        self.tokens: TokenStore | None = None
        self._client: TestClient | None = None
        self.url = "http://127.0.0.1:8767"

    @property
    def token(self) -> str:
        return (self.data_dir / "auth" / "owner.token").read_text().strip()

    @property
    def headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.token}"}

    @property
    def client(self) -> TestClient:
        assert self._client is not None, "start() the AppServer first"
        return self._client

    def start(self) -> AppServer:
        # the environment holds for the start only (settings, the owner's name from USER)
        with _environ(self.extra_env):
            return self._start()

    def _start(self) -> AppServer:
        settings = load_settings(self.data_dir, **self.overrides)
        ensure_layout(settings)
        self.tokens = TokenStore(settings.auth_dir)
        self.tokens.ensure_owner()
        self.memory = Memory(settings, owner_user=self.tokens.owner_name(), directory=self.tokens)
        self.tokens.upgrade(self.memory.projects())
        app = create_app(self.memory, self.tokens, manage_memory=True)
        self.url = f"http://127.0.0.1:{settings.port}"
        # a loopback client, as a local hook or browser is
        self._client = TestClient(
            app,
            base_url=self.url,
            client=("127.0.0.1", 50000),
            raise_server_exceptions=False,
            follow_redirects=False,  # as httpx's own calls
        )
        self._client.__enter__()  # the lifespan: starts the Memory and the MCP manager
        return self

    def stop(self) -> None:
        """Runs the lifespan's shutdown: queued compiles run, pending groups commit."""
        if self._client is not None:
            client, self._client = self._client, None
            client.__exit__(None, None, None)

    def new_client(self, **kw: Any) -> Any:
        """Another client of the same running app, with its own cookies and headers
        (``httpx.Client``'s keywords: ``headers``, ``follow_redirects``, ...)."""
        import httpx2

        kw.pop("verify", None)
        kw.setdefault("base_url", self.url)
        return httpx2.Client(transport=self.client._transport, **kw)

    def token_for(self, user: str, role: str | None = None, projects: tuple[str, ...] = ()) -> str:
        """A new token for ``user`` (``wiki-memory token create --user USER [--role ROLE]
        [--project P]...`` without the process)."""
        return TokenStore(self.data_dir / "auth").create(user, role, projects)

    def sign_in(self, token: str | None = None) -> Any:
        """This app's client signed in to the web view with ``token`` (default: the
        owner's) through the sign-in form, as a browser is (earlier cookies cleared)."""
        c = self.client
        c.cookies.clear()
        r = c.get(self.url + "/login")
        csrf = re.search(r'name="csrf" value="([^"]+)"', r.text)
        assert csrf is not None, r.text[:500]
        r = c.post(
            self.url + "/login",
            data={"csrf": csrf[1], "token": token or self.token, "next": "/"},
            headers={"Origin": self.url},
        )
        assert r.status_code in (200, 303), r.text
        return c

    def post(self, path: str, body: Any, **kw: Any) -> httpx.Response:
        kw.setdefault("headers", self.headers)
        return self.client.post(self.url + path, json=body, **kw)

    def get(self, path: str, **kw: Any) -> httpx.Response:
        kw.setdefault("headers", self.headers)
        return self.client.get(self.url + path, **kw)

    def __enter__(self) -> AppServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


class _Client:
    """``httpx``'s module-level calls (``get``, ``post``, ``put``, ``delete``, ``request``)
    sent through an ``AppServer``'s client; ``timeout`` and ``verify``, which only a real
    connection has, are dropped."""

    def __init__(self, client: TestClient) -> None:
        self._client = client

    def request(self, method: str, url: str, **kw: Any) -> httpx.Response:
        kw.pop("timeout", None)
        kw.pop("verify", None)
        return self._client.request(method, url, **kw)

    def get(self, url: str, **kw: Any) -> httpx.Response:
        return self.request("GET", url, **kw)

    def post(self, url: str, **kw: Any) -> httpx.Response:
        return self.request("POST", url, **kw)

    def put(self, url: str, **kw: Any) -> httpx.Response:
        return self.request("PUT", url, **kw)

    def delete(self, url: str, **kw: Any) -> httpx.Response:
        return self.request("DELETE", url, **kw)


def http(srv: Any) -> Any:
    """What to send a request to ``srv`` with, called like ``httpx.get(url, ...)``: an
    ``AppServer``'s client, else ``httpx`` itself (a real server process), so one helper
    serves both."""
    return _Client(srv.client) if isinstance(srv, AppServer) else httpx
