"""Issue "Secrets from a well-kept rule set", end to end: the eleven formats that once
reached git (fresh values) and one sample per gitleaks rule go through the installed hook
(prompt, tool input, tool output), ``POST /v1/observations`` and ``PUT /v1/pages``; none
of the eleven, and at least 97 % of the gitleaks samples, reach any stored byte."""

from __future__ import annotations

import base64
import json
import random
import string
from pathlib import Path

import background
import httpx
import pytest
from dulwich.repo import Repo
from gitleaks_samples import flagged
from hookkit import hook_env, installed_command, outbox_dir, run_hook, wait_idle
from serverproc import ServerProcess
from support import all_text_under, git_objects

from wiki_memory.capture import leaks

pytestmark = pytest.mark.process

ALNUM = string.ascii_letters + string.digits


def _r(n: int, alphabet: str = ALNUM) -> str:
    rnd = random.SystemRandom()
    both = any(c.isdigit() for c in alphabet) and any(c.isalpha() for c in alphabet)
    while True:
        v = "".join(rnd.choice(alphabet) for _ in range(n))
        if not both or (any(c.isdigit() for c in v) and any(c.isalpha() for c in v)):
            return v


def eleven() -> list[tuple[str, str, str]]:
    """(format, text, value that must go), fresh on every call."""
    pw = _r(14)
    b = base64.b64encode(f"admin:{pw}".encode()).decode()
    k8s = base64.b64encode(_r(18).encode()).decode()
    nuget = "oy2" + _r(43, string.ascii_lowercase + string.digits)
    mg = "key-" + _r(32, "0123456789abcdef")
    discord = f"M{_r(25)}.{_r(6)}.{_r(38, ALNUM + '_-')}"
    notion = f"ntn_{_r(11, string.digits)}{_r(35)}"
    heroku = "HRKU-AA" + _r(58, ALNUM + "_-")
    return [
        (
            "kubernetes",
            "apiVersion: v1\nkind: Secret\nmetadata:\n  name: db\ntype: Opaque\ndata:\n"
            f"  username: YWRtaW4=\n  db-creds: {k8s}\n",
            k8s,
        ),
        ("docker", json.dumps({"auths": {"registry.example.com": {"auth": b}}}, indent=2), b),
        ("nuget", f"dotnet nuget push pkg.1.0.0.nupkg -k {nuget} -s https://nuget.org", nuget),
        ("mailgun", f"MG={mg} ./send.sh", mg),
        ("discord", f"client.run('{discord}')", discord),
        ("notion", f"notion: {notion}", notion),
        ("heroku", f"heroku authorizations\n{heroku}", heroku),
        ("base64", f"echo {b} | base64 -d", b),
        ("netrc", f"machine api.example.com login deploy password {pw}", pw),
        ("openssl", f"openssl pkcs12 -export -in c.pem -out c.p12 -passout pass:{pw}x", pw + "x"),
        ("npmrc", f"registry=https://registry.npmjs.org/\n_auth={b}x\nalways-auth=true", b + "x"),
    ]


def gitleaks_samples() -> list[tuple[str, str, str]]:
    """(rule id, text, secret) for one sample per rule that gitleaks itself flags, searched
    with a fresh seed (in a whole-suite run, the run's, in the background: background.py);
    path rules are covered by the unit samples with a path."""
    out = []
    seed = background.seed()
    for rid, text in background.result("samples", lambda: background.samples(seed)):
        rule = leaks.BY_ID[rid]
        if text is None:
            continue
        spans = flagged(rule, text)
        secret = max((text[s:e] for s, e in spans), key=len)
        if len(secret) >= 8:
            out.append((rule.id, text.replace("\x00", " "), secret))
    return out


def events(texts: list[str], sid: str, cwd: str) -> list[dict]:
    base = {"session_id": sid, "cwd": cwd, "transcript_path": "/tmp/t.jsonl"}
    joined = "\n".join(texts)
    return [
        {**base, "hook_event_name": "UserPromptSubmit", "prompt": f"Use these:\n{joined}\n"},
        {
            **base,
            "hook_event_name": "PreToolUse",
            "tool_name": "Write",
            "tool_use_id": f"w-{sid}",
            "tool_input": {"file_path": f"{cwd}/config.txt", "content": joined},
        },
        {
            **base,
            "hook_event_name": "PostToolUse",
            "tool_name": "Bash",
            "tool_use_id": f"b-{sid}",
            "tool_input": {"command": "cat config.txt"},
            "tool_response": {"stdout": joined, "stderr": ""},
        },
        {**base, "hook_event_name": "SessionEnd", "reason": "other"},
    ]


@pytest.mark.timeout(1200)
def test_eleven_formats_and_gitleaks_samples_stored_nowhere(tmp_path: Path) -> None:
    fresh = eleven()
    samples = gitleaks_samples()
    assert len(samples) >= 200
    data = tmp_path / "data"
    repo = tmp_path / "work" / "leaky"
    repo.mkdir(parents=True)
    Repo.init(str(repo)).close()
    groups = [[t for _, t, _ in fresh]]
    texts = [t for _, t, _ in samples]
    groups += [texts[i : i + 20] for i in range(0, len(texts), 20)]
    with ServerProcess(data) as srv:
        env = hook_env(tmp_path)
        cmd = installed_command("claude-code", tmp_path)
        for n, group in enumerate(groups):
            for ev in events(group, f"hook-{n}", str(repo)):
                r = run_hook(cmd, ev, env)
                assert r.rc == 0, r
            for ev in events(group, f"api-{n}", str(repo)):
                r = srv.post("/v1/observations", {"harness": "claude-code", "payload": ev})
                assert r.status_code == 202, r.text
            put = httpx.put(
                f"{srv.url}/v1/pages/projects/leaky/notes/n{n}.md",
                content="# Notes\n\n" + "\n\n".join(group) + "\n",
                headers=srv.headers,
                verify=srv.verify,
                timeout=60,
            )
            assert put.status_code in (200, 201), put.text
        wait_idle(tmp_path)
    stored = {
        "outbox": all_text_under(outbox_dir(tmp_path)),
        "spool": all_text_under(data / "spool"),
        "pages": all_text_under(data / "wiki"),
        "index": b"".join(f.read_bytes() for f in data.glob("index.db*")),
        "git objects": git_objects(data / "wiki"),
    }

    def where(value: str) -> list[str]:
        forms = {value.encode(), json.dumps(value)[1:-1].encode()}
        return [w for w, blob in stored.items() if any(f in blob for f in forms)]

    leaked = [(name, where(v)) for name, _, v in fresh if where(v)]
    assert leaked == []
    missed = [(rid, secret[:40], where(secret)) for rid, _, secret in samples if where(secret)]
    share = 1 - len(missed) / len(samples)
    print(f"gitleaks samples redacted: {share:.1%} of {len(samples)}; missed: {missed}")
    assert share >= 0.97, missed
