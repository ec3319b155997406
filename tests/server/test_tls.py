"""TLS end to end with a certificate from a private CA made at test time
(docs/team-server.md, "TLS"): ``serve --tls-cert/--tls-key`` on a LAN bind; the CLI and
the MCP bridge work with ``--ca-file`` and refuse without it; a LAN bind without TLS
starts only with ``--insecure-http`` and says so."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import httpx
import pytest
from support import MCP_HEADERS, own_address

from tests.serverproc import ServerProcess, free_port
from tests.support import run_cli

pytest.importorskip("cryptography", reason="the test CA is made with cryptography")

from tests.tlskit import Pki, make_pki  # noqa: E402

INIT = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-06-18",
        "capabilities": {},
        "clientInfo": {"name": "t", "version": "1"},
    },
}
HEADER_TIMEOUT = 3.0


@pytest.fixture(scope="module")
def tls(tmp_path_factory: pytest.TempPathFactory):
    root = tmp_path_factory.mktemp("tls")
    own = own_address()
    names = ["127.0.0.1", "localhost", socket.gethostname()] + ([own] if own else [])
    pki = make_pki(root / "pki", names)
    args = ["--host", "0.0.0.0", "--tls-cert", str(pki.cert), "--tls-key", str(pki.key)]
    env = {"WIKI_MEMORY_HEADER_TIMEOUT_SECONDS": str(HEADER_TIMEOUT)}
    with ServerProcess(root / "data", args=args, ca_file=pki.ca, env=env) as srv:
        yield srv, pki, own


@pytest.mark.process
def test_lan_bind_over_tls_own_address_and_foreign_host(tls: tuple[ServerProcess, Pki, str]):
    srv, pki, own = tls
    if own is None:
        pytest.skip("this machine has no non-loopback address to reach itself by")
    base = f"https://{own}:{srv.port}"
    h = srv.headers
    v = srv.verify
    r = httpx.post(base + "/v1/recall", json={"query": "x"}, headers=h, verify=v, timeout=60)
    assert r.status_code == 200, r.text
    assert httpx.get(base + "/pages", headers=h, verify=v, timeout=60).status_code == 200
    r = httpx.post(base + "/mcp", json=INIT, headers={**h, **MCP_HEADERS}, verify=v, timeout=60)
    assert r.status_code == 200
    evil = {**h, "Host": f"evil.example:{srv.port}"}
    r = httpx.get(base + "/v1/pages", headers=evil, verify=v, timeout=60)
    assert r.status_code == 421 and r.json()["error"] == "wrong_host"
    r = httpx.post(base + "/mcp", json=INIT, headers={**evil, **MCP_HEADERS}, verify=v, timeout=60)
    assert r.status_code == 421
    assert httpx.get(base + "/pages", headers=evil, verify=v, timeout=60).status_code == 421
    # plain HTTP on the TLS port is not served
    with pytest.raises(httpx.HTTPError):
        httpx.get(f"http://{own}:{srv.port}/v1/pages", headers=h, timeout=10).raise_for_status()


@pytest.mark.process
def test_cli_trusts_the_private_ca_only_with_ca_file(tls: tuple[ServerProcess, Pki, str]):
    srv, pki, _ = tls
    ok = run_cli(srv.data_dir, "--ca-file", str(pki.ca), "recall", "anything", "--url", srv.url)
    assert ok.returncode == 0, ok.stderr
    env = {"WIKI_MEMORY_CA_FILE": str(pki.ca)}
    ok = run_cli(srv.data_dir, "recall", "anything", "--url", srv.url, env=env)
    assert ok.returncode == 0, ok.stderr
    bad = run_cli(srv.data_dir, "recall", "anything", "--url", srv.url)
    assert bad.returncode != 0
    assert "certificate" in bad.stderr.lower(), bad.stderr
    # the scheme in capitals is HTTPS too: still checked, the token never sent unchecked
    shout = srv.url.replace("https://", "HTTPS://", 1)
    bad = run_cli(srv.data_dir, "recall", "anything", "--url", shout)
    assert bad.returncode != 0
    assert "certificate" in bad.stderr.lower(), bad.stderr


@pytest.mark.process
def test_mcp_bridge_trusts_the_private_ca_only_with_ca_file(
    tls: tuple[ServerProcess, Pki, str], tmp_path: Path
):
    srv, pki, _ = tls
    token_file = tmp_path / "token"
    token_file.write_text(srv.token)
    env = {k: v for k, v in os.environ.items() if not k.startswith("WIKI_MEMORY_")}
    msgs = [INIT, {"jsonrpc": "2.0", "method": "notifications/initialized"}]
    stdin = "".join(json.dumps(m) + "\n" for m in msgs).encode()

    def bridge(*pre: str) -> subprocess.CompletedProcess[bytes]:
        cmd = [sys.executable, "-m", "wiki_memory.cli.main", *pre, "mcp"]
        cmd += ["--url", srv.url, "--token-file", str(token_file), "--wait", "3"]
        return subprocess.run(cmd, input=stdin, capture_output=True, env=env, timeout=120)

    ok = bridge("--ca-file", str(pki.ca))
    assert ok.returncode == 0, ok.stderr
    first = json.loads(ok.stdout.decode().splitlines()[0])
    assert first["result"]["serverInfo"]["name"] == "wiki-memory"
    bad = bridge()
    assert bad.returncode == 1 and bad.stdout == b""
    assert b"certificate" in bad.stderr.lower(), bad.stderr


@pytest.mark.process
def test_lan_bind_without_tls_needs_insecure_http(tmp_path: Path) -> None:
    port = str(free_port())
    r = run_cli(tmp_path / "d", "serve", "--host", "0.0.0.0", "--port", port)
    assert r.returncode == 2 and "--insecure-http" in r.stderr and "refusing" in r.stderr
    r = run_cli(tmp_path / "d", "serve", "--host", "0.0.0.0", "--tls-cert", "x.pem")
    assert r.returncode == 2 and "go together" in r.stderr


@pytest.mark.process
def test_insecure_http_lan_bind_says_so(tmp_path: Path) -> None:
    srv = ServerProcess(tmp_path / "d", args=["--host", "0.0.0.0", "--insecure-http"]).start()
    try:
        assert "plain HTTP on 0.0.0.0" in srv.stderr()
    finally:
        srv.stop()


@pytest.mark.process
def test_installed_hook_over_tls_with_and_without_ca_file(
    tls: tuple[ServerProcess, Pki, str], tmp_path: Path, shared: Path
) -> None:
    from tests.hookkit import (
        HOOKS,
        hook_env,
        installed_command,
        outbox_dir,
        pending,
        run_hook,
        wait_idle,
        wait_until,
    )

    srv, pki, _ = tls
    token_file = tmp_path / "token"
    token_file.write_text(srv.token)
    env = hook_env(
        tmp_path,
        url=srv.url,
        WIKI_MEMORY_TOKEN_FILE=str(token_file),
        WIKI_MEMORY_HOOK_BACKOFF_SECONDS="2",
        WIKI_MEMORY_HOOK_BACKOFF_MAX_SECONDS="2",
    )
    folder = shared / "data" / "hooks" / "claude-code"
    start = json.loads((folder / "SessionStart.json").read_text())
    prompt = json.loads((folder / "UserPromptSubmit.json").read_text())

    # installed with --ca-file: SessionStart gets its brief, a capture is delivered
    cmd = installed_command("claude-code", tmp_path, "SessionStart", ca_file=pki.ca)
    assert "--ca-file" in cmd
    r = run_hook(cmd, start, env)
    assert r.rc == 0 and "hookSpecificOutput" in json.loads(r.stdout), r
    cmd = installed_command("claude-code", tmp_path, "UserPromptSubmit", ca_file=pki.ca)
    r = run_hook(cmd, prompt, env)
    assert r.rc == 0 and r.stdout == b"", r
    if pending(tmp_path):
        # a machine busy enough makes the hook give up on a slow answer and keep the
        # events in its outbox (the agent is never held up); what counts here is that they
        # reach the server over TLS: past the back-off, the next run sends what waits
        wait_idle(tmp_path)
        outbox = HOOKS.Outbox(str(outbox_dir(tmp_path)))
        assert wait_until(lambda: HOOKS.in_backoff(outbox) is None, 60)
        r = run_hook(cmd, {**prompt, "prompt": "and once more"}, env)
        assert r.rc == 0 and r.stdout == b"", r
    assert wait_until(lambda: not pending(tmp_path), 60), pending(tmp_path)
    spooled = b"".join(p.read_bytes() for p in (srv.data_dir / "spool").rglob("*.jsonl"))
    assert start["session_id"].encode() in spooled

    # installed without it: the private certificate is refused, the event waits in the
    # outbox, and the agent is never blocked
    other = tmp_path / "other"
    env2 = hook_env(other, url=srv.url, WIKI_MEMORY_TOKEN_FILE=str(token_file))
    cmd = installed_command("claude-code", other, "UserPromptSubmit")
    assert "--ca-file" not in cmd
    r = run_hook(cmd, {**prompt, "session_id": "tls-refused"}, env2)
    assert r.rc == 0 and r.stdout == b"", r
    assert any("tls-refused" in json.dumps(e) for e in pending(other))
    cmd = installed_command("claude-code", other, "SessionStart")
    r = run_hook(cmd, {**start, "session_id": "tls-refused-start"}, env2)
    assert r.rc == 0, r
    # the agent is told, not blocked: the refused certificate reads as an unreachable server
    assert "unreachable" in json.loads(r.stdout)["hookSpecificOutput"]["additionalContext"]
    assert any("tls-refused-start" in json.dumps(e) for e in pending(other))
    spooled = b"".join(p.read_bytes() for p in (srv.data_dir / "spool").rglob("*.jsonl"))
    assert b"tls-refused" not in spooled


@pytest.mark.process
def test_a_tls_handshake_that_never_comes_is_cut(tls: tuple[ServerProcess, Pki, str]) -> None:
    """A connection that never starts its TLS handshake is closed after the header
    timeout, not asyncio's 60 s (it reaches the header timer only after a handshake)."""
    import time

    srv, _, _ = tls
    with socket.create_connection(("127.0.0.1", srv.port)) as s:
        s.settimeout(60)
        start = time.monotonic()
        try:
            got = s.recv(1)
        except ConnectionResetError:
            got = b""
        took = time.monotonic() - start
    assert got == b""
    assert HEADER_TIMEOUT - 0.5 <= took <= HEADER_TIMEOUT + 10, took
