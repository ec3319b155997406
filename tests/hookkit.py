"""Helpers for the hook tests: run the installed command as a harness does, and
tiny stand-in servers (recording, 500, slow, black hole, refused)."""

from __future__ import annotations

import http.server
import json
import os
import socket
import subprocess
import threading
import time
from pathlib import Path
from typing import Any

from wiki_memory.harness.hooks_install import AGENTS, apply, plan_install
from wiki_memory.harness.outbox import HOOK_SCRIPT, load_hooklib

HOOKS = load_hooklib()

#: The hook's documented bound (docs/hooks.md "Never in the agent's way"): it ends within
#: ``deadline_seconds`` counted from its own start.
HOOK_DEADLINE_SECONDS = float(HOOKS.DEFAULTS["deadline_seconds"])
#: What a run timed from outside adds to that: ``sh -c`` and the interpreter's start, which
#: a busy shared machine stretches far past the usual ~50 ms.
START_MARGIN_SECONDS = 2.0
#: The bound the tests hold a hook run to: the contract plus the margin. A hook that waits
#: on a dead server without a deadline never gets under it (run_hook's own timeout: 15 s).
HOOK_BOUND_SECONDS = HOOK_DEADLINE_SECONDS + START_MARGIN_SECONDS


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def hook_env(tmp: Path, url: str | None = None, **extra: str) -> dict[str, str]:
    """The environment a harness would give the hook: a temporary HOME and data dir."""
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith("WIKI_MEMORY_") and k not in ("XDG_DATA_HOME",)
    }
    env["HOME"] = str(tmp / "home")
    env["WIKI_MEMORY_HOME"] = str(tmp / "data")
    if url:
        env["WIKI_MEMORY_URL"] = url
    env.update(extra)
    return env


def install(agent: str, home: Path, **kw: Any) -> dict[str, Any]:
    """Run install-hooks --apply for ``agent`` on ``home``; return the written JSON."""
    plan = plan_install(agent, home=home, **kw)
    apply(plan)
    return json.loads(plan.path.read_text())


def installed_command(agent: str, tmp: Path, event: str | None = None, **kw: Any) -> str:
    """The command string install-hooks writes for ``agent`` (on ``tmp/home``)."""
    cfg = install(agent, tmp / "home", **kw)
    ev = event or AGENTS[agent].events[0]
    for group in cfg["hooks"][ev]:
        for h in group["hooks"]:
            if "wiki_memory_hook" in h["command"]:
                return str(h["command"])
    raise AssertionError(f"no wiki-memory handler for {ev}")


class HookRun:
    def __init__(self, rc: int, stdout: bytes, stderr: bytes, seconds: float) -> None:
        self.rc = rc
        self.stdout = stdout
        self.stderr = stderr
        self.seconds = seconds

    def json(self) -> Any:
        return json.loads(self.stdout)

    def __repr__(self) -> str:
        return f"HookRun(rc={self.rc}, {self.seconds:.2f}s, out={self.stdout[:200]!r}, err={self.stderr[-300:]!r})"


def run_hook(
    command: str, payload: Any, env: dict[str, str], timeout: float = 15, cwd: str | None = None
) -> HookRun:
    """Run ``command`` through ``sh -c`` with ``payload`` (dict, str or bytes) on stdin."""
    if isinstance(payload, dict):
        data = json.dumps(payload).encode()
    elif isinstance(payload, str):
        data = payload.encode()
    else:
        data = payload
    t0 = time.monotonic()
    p = subprocess.run(
        ["sh", "-c", command],
        input=data,
        capture_output=True,
        env=env,
        timeout=timeout,
        cwd=cwd,
    )
    return HookRun(p.returncode, p.stdout, p.stderr, time.monotonic() - t0)


def outbox_dir(tmp: Path) -> Path:
    return tmp / "data" / "outbox"


def pending(tmp: Path) -> list[dict[str, Any]]:
    d = outbox_dir(tmp)
    if not d.is_dir():
        return []
    # a background drainer may remove or replace a file between listing and reading:
    # list again until one listing reads whole
    for _ in range(50):
        names = sorted(n for n in os.listdir(d) if n.endswith(".json") and n[:1].isdigit())
        try:
            return [json.loads((d / n).read_text()) for n in names]
        except FileNotFoundError:
            time.sleep(0.05)
    raise AssertionError("the outbox kept changing under the test")


def wait_idle(tmp: Path, timeout: float = 15.0) -> None:
    """Wait until no background drainer holds the outbox lock."""
    ob = HOOKS.Outbox(str(outbox_dir(tmp)))
    if not outbox_dir(tmp).is_dir():
        return
    fd = ob.lock(timeout)
    assert fd is not None, "a background drainer is still running"
    os.close(fd)


def wait_until(pred: Any, timeout: float = 15.0, step: float = 0.05) -> bool:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if pred():
            return True
        time.sleep(step)
    return bool(pred())


class StubServer:
    """A stand-in for ``/v1/observations`` and ``/v1/brief`` on 127.0.0.1.

    ``mode``: ``ok`` (202, durable dedup by event_id like the real server), ``500``,
    ``slow`` (stores, then answers after ``slow_seconds``), ``reject`` (400 for events
    whose payload has ``"reject": true``; others ok). ``brief``: text for /v1/brief,
    or None for 404. Every request is kept in ``requests``; accepted events in
    ``stored`` (event_id → event), in arrival order.
    """

    def __init__(self, port: int | None = None, mode: str = "ok", brief: str | None = None) -> None:
        self.port = port or free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.mode = mode
        self.brief = brief
        self.slow_seconds = 30.0
        self.limit_bytes = 0
        self.requests: list[tuple[str, Any]] = []
        self.stored: dict[str, dict[str, Any]] = {}
        self.duplicates = 0
        self.lock = threading.Lock()
        self.stop_event = threading.Event()
        stub = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *a: Any) -> None:
                pass

            def do_POST(self) -> None:  # noqa: N802
                n = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(n)
                try:
                    body = json.loads(raw)
                except ValueError:
                    body = None
                status, reply = stub.handle(self.path, body, self.headers.get("Authorization"))
                if status == -1:
                    return
                out = json.dumps(reply).encode()
                try:
                    self.send_response(status)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(out)))
                    self.send_header("Connection", "close")
                    self.end_headers()
                    self.wfile.write(out)
                except OSError:
                    pass

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", self.port), Handler)
        self.httpd.daemon_threads = True
        # serve_forever looks for shutdown() every poll_interval (0.5 s by default), which
        # every test using a stub waited out at its end
        self.thread = threading.Thread(
            target=self.httpd.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True
        )

    def handle(self, path: str, body: Any, auth: str | None) -> tuple[int, Any]:
        with self.lock:
            self.requests.append((path, body))
        if path == "/v1/brief":
            if self.brief is None:
                return 404, {"error": "not_found"}
            return 200, {"text": self.brief}
        if path != "/v1/observations":
            return 404, {"error": "not_found"}
        if self.mode == "500":
            return 500, {"error": "internal"}
        if self.limit_bytes and len(json.dumps(body).encode()) > self.limit_bytes:
            return 413, {"error": "too_large"}
        events = body if isinstance(body, list) else [body]
        if self.mode == "reject" and any(
            isinstance(e, dict) and (e.get("payload") or {}).get("reject") for e in events
        ):
            return 400, {"error": "bad_request", "field": "payload"}
        results = []
        with self.lock:
            for ev in events:
                eid = ev.get("event_id")
                dup = eid in self.stored
                if dup:
                    self.duplicates += 1
                else:
                    self.stored[eid] = ev
                results.append({"id": f"o{len(self.stored)}", "duplicate": dup})
        if self.mode == "slow":
            self.stop_event.wait(self.slow_seconds)
        if isinstance(body, list):
            return 202, {"accepted": results}
        return 202, results[0]

    def observation_posts(self) -> list[Any]:
        with self.lock:
            return [b for p, b in self.requests if p == "/v1/observations"]

    def __enter__(self) -> StubServer:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop_event.set()
        self.httpd.shutdown()
        self.httpd.server_close()


class BlackHole:
    """A port that accepts TCP connections (kernel backlog) and never answers."""

    def __init__(self, port: int | None = None) -> None:
        self.sock = socket.socket()
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind(("127.0.0.1", port or 0))
        self.sock.listen(128)
        self.port = int(self.sock.getsockname()[1])
        self.url = f"http://127.0.0.1:{self.port}"

    def __enter__(self) -> BlackHole:
        return self

    def __exit__(self, *exc: object) -> None:
        self.sock.close()


def payload_file(*parts: str) -> dict[str, Any]:
    from conftest import shared_path

    return dict(json.loads(shared_path("data", "hooks", *parts).read_text()))


__all__ = [
    "HOOKS",
    "HOOK_SCRIPT",
    "BlackHole",
    "HookRun",
    "StubServer",
    "free_port",
    "hook_env",
    "install",
    "installed_command",
    "outbox_dir",
    "payload_file",
    "pending",
    "run_hook",
    "wait_idle",
    "wait_until",
]
