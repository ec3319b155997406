"""Run a real ``wiki-memory serve`` process on 127.0.0.1 and a free port, for tests."""

from __future__ import annotations

import functools
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx

from wiki_memory.config import default_tls


@functools.cache
def _ca_context(ca_file: str) -> Any:
    """An ``ssl.SSLContext`` trusting the test CA ``ca_file``, made once per file."""
    import ssl

    return ssl.create_default_context(cafile=ca_file)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class ServerProcess:
    """A server subprocess over ``data_dir``. ``start()`` waits until /v1/health answers."""

    def __init__(
        self,
        data_dir: Path,
        port: int | None = None,
        env: dict[str, str] | None = None,
        args: list[str] | None = None,
        fd_limit: int | None = None,
        ca_file: Path | None = None,
    ) -> None:
        self.data_dir = Path(data_dir)
        self.port = port or free_port()
        #: with ``ca_file`` the server is expected to speak TLS (``--tls-cert`` in args)
        self.ca_file = ca_file
        scheme = "https" if ca_file else "http"
        self.url = f"{scheme}://127.0.0.1:{self.port}"
        self.extra_env = env or {}
        self.args = args or []
        #: the server's soft RLIMIT_NOFILE (``ulimit -n``), when set
        self.fd_limit = fd_limit
        self.proc: subprocess.Popen[bytes] | None = None
        self.stderr_path = self.data_dir.parent / f"server-{self.port}.stderr"

    @property
    def token(self) -> str:
        return (self.data_dir / "auth" / "owner.token").read_text().strip()

    @property
    def headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.token}"}

    def start(self, timeout: float = 120) -> ServerProcess:
        if self.proc is not None and self.proc.poll() is None:
            # already running: ``with ServerProcess(...).start() as srv`` enters after a
            # start, and a second process would be left behind when the first is stopped
            return self
        env = dict(os.environ)
        env.update({"WIKI_MEMORY_HOME": str(self.data_dir), "PYTHONUNBUFFERED": "1"})
        env.update(self.extra_env)
        self.stderr_path.parent.mkdir(parents=True, exist_ok=True)
        self._err = open(self.stderr_path, "ab")
        self.proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "wiki_memory.cli.main",
                "--data-dir",
                str(self.data_dir),
                "serve",
                "--port",
                str(self.port),
                *self.args,
            ],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=self._err,
            preexec_fn=self._limit if self.fd_limit else None,
        )
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"server exited with {self.proc.returncode}: {self.stderr()}")
            try:
                if (
                    httpx.get(self.url + "/v1/health", timeout=1, verify=self.verify).status_code
                    == 200
                ):
                    return self
            except httpx.HTTPError:
                pass
            time.sleep(0.05)
        raise RuntimeError(f"server did not come up: {self.stderr()}")

    @property
    def verify(self) -> Any:
        """httpx's ``verify=`` for this server: its test CA, else the default, each a
        context made once (loading CAs costs 15–50 ms a client: ``config.default_tls``)."""
        if self.ca_file is None:
            return default_tls()
        return _ca_context(str(self.ca_file))

    def _limit(self) -> None:
        import resource

        _soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        resource.setrlimit(resource.RLIMIT_NOFILE, (self.fd_limit, hard))

    def stderr(self) -> str:
        try:
            return self.stderr_path.read_text(errors="replace")
        except OSError:
            return ""

    def stop(self, sig: int = signal.SIGTERM, timeout: float = 30) -> int | None:
        if self.proc is None:
            return None
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self._err.close()
        return self.proc.returncode

    def kill(self) -> None:
        self.stop(signal.SIGKILL)

    def post(self, path: str, body: Any, **kw: Any) -> httpx.Response:
        kw.setdefault("verify", self.verify)
        return httpx.post(self.url + path, json=body, headers=self.headers, timeout=60, **kw)

    def get(self, path: str, **kw: Any) -> httpx.Response:
        kw.setdefault("verify", self.verify)
        return httpx.get(self.url + path, headers=self.headers, timeout=60, **kw)

    def __enter__(self) -> ServerProcess:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
