"""Network git steps in a child process that can be killed (docs/operations.md, "A
remote that never answers").

Every fetch, push and ref listing a sync makes runs in ``python -m
wiki_memory.wiki.netchild``, a child in a session of its own, so that:

* a remote that accepts the connection and never answers cannot hang the server: the
  child's sockets give up after ``connect`` seconds to connect and ``progress`` seconds
  without data, and the parent kills the child's whole process group (ssh included) when
  the step passes ``whole`` seconds;
* shutdown never waits for the network: :meth:`NetRunner.kill_all` kills every child;
* nothing asks for a password: the child has no terminal and no stdin to read from,
  ``GIT_TERMINAL_PROMPT=0``, no ``SSH_ASKPASS``/``DISPLAY``, and ssh runs with
  ``BatchMode=yes`` and ``ConnectTimeout``.

The child does the step with :mod:`wiki_memory.wiki.replicate` on the same repository
(a fetch adds its pack and moves the tracking ref there; the parent reads them after)
and answers one JSON line: ``{"ok": value}`` or ``{"error": kind, "message": text}``.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from wiki_memory.wiki import replicate as rp

__all__ = ["NetRunner", "Timeouts"]


@dataclass(frozen=True)
class Timeouts:
    """Seconds: to connect, without progress, for the whole step."""

    connect: float = 10.0
    progress: float = 60.0
    whole: float = 600.0


class NetRunner:
    """Runs network git steps in children (see the module); thread-safe."""

    def __init__(self, timeouts: Timeouts) -> None:
        self.timeouts = timeouts
        self._lock = threading.Lock()
        self._procs: set[subprocess.Popen[bytes]] = set()
        self._stopping = False

    def run(self, op: str, wiki_dir: Path, **args: Any) -> Any:
        """Run ``op`` (``fetch``, ``fetch_prefixed``, ``push``, ``remote_head``) for the
        repository in ``wiki_dir``; its value. Raises what :mod:`replicate` raises
        (FetchTooLarge, LeaseFailed, RemoteError), RemoteError on a timeout or a kill."""
        t = self.timeouts
        request = {
            "op": op,
            "wiki": str(wiki_dir),
            "connect": t.connect,
            "progress": t.progress,
            **args,
        }
        env = {k: v for k, v in os.environ.items() if k not in ("SSH_ASKPASS", "DISPLAY")}
        env.update(GIT_TERMINAL_PROMPT="0", GIT_ASKPASS="", SSH_ASKPASS_REQUIRE="never")
        with self._lock:
            if self._stopping:
                raise rp.RemoteError("the server is stopping")
            proc = subprocess.Popen(
                [sys.executable, "-m", "wiki_memory.wiki.netchild"],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                env=env,
                start_new_session=True,
            )
            self._procs.add(proc)
        try:
            try:
                out, err = proc.communicate(json.dumps(request).encode(), timeout=t.whole)
            except subprocess.TimeoutExpired:
                _kill(proc)
                proc.communicate()
                raise rp.RemoteError(
                    f"no answer within {t.whole:g} s (sync_timeout_seconds): gave up"
                ) from None
        finally:
            _kill(proc)
            with self._lock:
                self._procs.discard(proc)
        if self._stopping and proc.returncode and proc.returncode < 0:
            raise rp.RemoteError("stopped: the server is shutting down")
        try:
            answer = json.loads(out.decode("utf-8").strip().splitlines()[-1])
        except (ValueError, IndexError):
            tail = err.decode("utf-8", "replace").strip().splitlines()[-1:] or ["no answer"]
            raise rp.RemoteError(f"the network step failed: {tail[0][:200]}") from None
        if "error" in answer:
            kind = {"FetchTooLarge": rp.FetchTooLarge, "LeaseFailed": rp.LeaseFailed}
            raise kind.get(answer["error"], rp.RemoteError)(answer.get("message", ""))
        return answer.get("ok")

    def kill_all(self) -> None:
        """Kill every running child (and what it started); later runs fail at once."""
        with self._lock:
            self._stopping = True
            procs = list(self._procs)
        for proc in procs:
            _kill(proc)


def _kill(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is not None:
        try:
            os.killpg(proc.pid, signal.SIGKILL)  # an ssh it started may outlive it
        except (ProcessLookupError, PermissionError):
            pass
        return
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        proc.kill()
    proc.wait()


# --------------------------------------------------------------------------- the child


def _limit_sockets(connect: float, progress: float) -> None:
    """Every socket of this process: ``connect`` seconds to connect, then ``progress``
    seconds per read or write."""
    socket.setdefaulttimeout(progress)
    original = socket.socket.connect

    def connect_with_deadline(self: socket.socket, address: Any) -> None:
        before = self.gettimeout()
        self.settimeout(connect)
        try:
            original(self, address)
        finally:
            self.settimeout(before if before is not None else progress)

    socket.socket.connect = connect_with_deadline  # type: ignore[method-assign,assignment]


def _step(req: dict[str, Any]) -> Any:
    from dulwich.objects import ObjectID
    from dulwich.repo import Repo

    op = req["op"]
    if op == "remote_head":
        sha = rp.remote_head(req["url"])
        return None if sha is None else sha.decode()
    with Repo(req["wiki"]) as repo:
        if op == "fetch":
            got = rp.fetch(repo, req["name"], max_bytes=req.get("max_bytes"))
            return None if got is None else got.decode()
        if op == "fetch_prefixed":
            refs = rp.fetch_prefixed(
                repo, req["name"], req["prefix"].encode(), req.get("max_bytes")
            )
            return {k.decode(): v.decode() for k, v in refs.items()}
        if op == "push":
            expected = req.get("expected")
            rp.push(
                repo,
                req["name"],
                ObjectID(req["sha"].encode()),
                None if expected is None else ObjectID(expected.encode()),
                extra={k.encode(): ObjectID(v.encode()) for k, v in req.get("extra", {}).items()},
            )
            return None
    raise rp.RemoteError(f"unknown network step {op!r}")


def main() -> None:
    req = json.loads(sys.stdin.read())
    _limit_sockets(float(req["connect"]), float(req["progress"]))
    rp.SSH_OPTIONS = (
        f"ssh -o BatchMode=yes -o ConnectTimeout={int(req['connect']) or 1} "
        f"-o ServerAliveInterval={max(1, int(req['progress']) // 4)} -o ServerAliveCountMax=4"
    )
    try:
        answer: dict[str, Any] = {"ok": _step(req)}
    except rp.RemoteError as exc:
        answer = {"error": type(exc).__name__, "message": str(exc)}
    except Exception as exc:  # noqa: BLE001 - every transport has its own errors
        answer = {"error": "RemoteError", "message": f"{type(exc).__name__}: {exc}"}
    sys.stdout.write(json.dumps(answer) + "\n")
    sys.stdout.flush()


if __name__ == "__main__":
    main()
