"""The hook when its sanitizer cannot be loaded (DESIGN.md invariants 4 and 10).

The installed hook command runs the way a harness runs it (``sh -c``, event JSON on
stdin) with ``wiki_memory.capture.sanitize`` made to fail for real: a shadow
``wiki_memory`` package first on ``PYTHONPATH`` (``-S`` still honours it) that lacks
the module ("an import moved") or whose ``redact_obj`` raises, or a copy of the hooks
folder run by an interpreter that has no wiki-memory at all. The run still exits 0,
says so once on stderr, and no fake secret reaches the outbox or a server.

The fake secrets are assembled at run time so that this file holds none (the
sanitizer's false-positive test scans the tests).
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest
from hookkit import (
    HOOKS,
    StubServer,
    free_port,
    hook_env,
    installed_command,
    outbox_dir,
    pending,
    run_hook,
    wait_idle,
)
from support import REPO, all_text_under

from wiki_memory.harness.hooks_install import hook_command

FELL_BACK = b"redaction fell back to the hook's built-in rules"

AWS_ID = "AK" + "IA" + "Q7F4K2M9X3B8N5V1"
GH_TOKEN = "gh" + "p_" + ("FAKEfake0123456789" * 2)
PASSWORD = "hunter2" + ".example"
KEY_LINE = "b3BlbnNzaC1rZXktdjEAAAAA" + "BG5vbmUAAAAEbm9uZQAAAAAAAAABAAAAMwAAAAtzc2gtZW"
BEGIN = "-----BEGIN OPENSSH " + "PRIVATE KEY-----"
END = "-----END OPENSSH " + "PRIVATE KEY-----"
SHORT_KEY = f"{BEGIN}\n{KEY_LINE[:40]}\n{END}"  # under the fallback's length bound
LONG_KEY = BEGIN + "\n" + "\n".join([KEY_LINE] * 12) + "\n" + END
ENV_LINE = "DB_PASS" + "WORD=" + PASSWORD
SSHPASS = "sshpass -p "

#: What must never be written or sent (pieces, so a partial leak is caught too).
SECRETS = [AWS_ID, GH_TOKEN, PASSWORD, KEY_LINE[:24], KEY_LINE[24:48], "OPENSSH PRIVATE"]


def events(sid: str = "fb-1") -> list[dict[str, Any]]:
    base = {"session_id": sid, "cwd": "/home/dev/demo", "transcript_path": "/tmp/t.jsonl"}
    return [
        {
            **base,
            "hook_event_name": "UserPromptSubmit",
            "prompt": f"deploy with {AWS_ID} and {GH_TOKEN}; {ENV_LINE} is in .env",
        },
        {
            **base,
            "hook_event_name": "UserPromptSubmit",
            "prompt": f"here is the key:\n{SHORT_KEY}\nuse it",
        },
        {
            **base,
            "hook_event_name": "PostToolUse",
            "tool_name": "Bash",
            "tool_use_id": "toolu_fb_1",
            "tool_input": {"command": "cat deploy/secrets.txt", "description": "show secrets"},
            "tool_response": {
                "stdout": f"{ENV_LINE}\nAWS_ACCESS_KEY_ID={AWS_ID}\n{GH_TOKEN}\n{LONG_KEY}\n",
                "stderr": "",
                "interrupted": False,
            },
        },
    ]


def shadow(tmp: Path, kind: str) -> Path:
    """A directory holding a ``wiki_memory`` package in which the sanitizer import fails
    (``moved``: no ``capture/sanitize.py``) or redaction raises (``raises``)."""
    root = tmp / f"shadow-{kind}"
    cap = root / "wiki_memory" / "capture"
    cap.mkdir(parents=True)
    (root / "wiki_memory" / "__init__.py").write_text("")
    (cap / "__init__.py").write_text("")
    if kind == "raises":
        (cap / "sanitize.py").write_text(
            textwrap.dedent(
                """\
                def redact_obj(obj, extra_patterns=()):
                    raise RuntimeError("the detector table moved")
                """
            )
        )
    return root


def blob_of(tmp: Path) -> str:
    d = outbox_dir(tmp)
    if not d.is_dir():
        return ""
    return "".join(f.read_text() for f in sorted(d.iterdir()) if f.is_file())


def assert_no_secret(text: str, where: str) -> None:
    for s in SECRETS:
        assert s not in text, (s, where)


def assert_fell_back_once(stderr: bytes) -> None:
    assert stderr.count(FELL_BACK) == 1, stderr


def check_fallback_events(evs: list[dict[str, Any]]) -> None:
    """The events still show what happened: short text kept (redacted), long text a
    counted placeholder, and a ``wiki_memory_redaction`` record on each payload."""
    by_kind = {(e["event"], e["payload"].get("tool_name")): e for e in evs}
    assert len(evs) == 3
    prompts = sorted(e["payload"]["prompt"] for e in evs if e["event"] == "UserPromptSubmit")
    assert prompts[0].startswith("deploy with [REDACTED:")
    assert "DB_PASSWORD=[REDACTED:" in prompts[0]
    assert "[REDACTED:private-key]" in prompts[1] and prompts[1].endswith("use it")
    tool = by_kind[("PostToolUse", "Bash")]["payload"]
    assert tool["tool_input"]["command"] == "cat deploy/secrets.txt"
    out = tool["tool_response"]["stdout"]
    assert out.startswith("[wiki-memory hook: ") and "characters dropped" in out, out
    rec = tool["wiki_memory_redaction"]
    assert rec["mode"] == "hook-fallback"
    assert rec["dropped_strings"] == 1 and rec["dropped_chars"] > 256
    for e in evs:
        assert e["payload"]["wiki_memory_redaction"]["mode"] == "hook-fallback"
        assert e["cwd"] == "/home/dev/demo"


# ----------------------------------------------------------------------------- the hook command


@pytest.mark.process
@pytest.mark.parametrize("kind", ["moved", "raises"])
def test_server_down_outbox_holds_no_secret(tmp_path: Path, kind: str) -> None:
    env = hook_env(
        tmp_path, f"http://127.0.0.1:{free_port()}", PYTHONPATH=str(shadow(tmp_path, kind))
    )
    cmd = installed_command("claude-code", tmp_path)
    for ev in events():
        r = run_hook(cmd, ev, env)
        assert r.rc == 0, r
        assert r.stdout == b""
        assert_fell_back_once(r.stderr)
        why = b"could not be imported" if kind == "moved" else b"the sanitizer failed"
        assert why in r.stderr, r.stderr
        assert_no_secret(r.stderr.decode(), "stderr")
    wait_idle(tmp_path)
    assert_no_secret(blob_of(tmp_path), "outbox")
    check_fallback_events(pending(tmp_path))


@pytest.mark.process
def test_server_up_receives_no_secret(tmp_path: Path) -> None:
    with StubServer() as srv:
        env = hook_env(tmp_path, srv.url, PYTHONPATH=str(shadow(tmp_path, "moved")))
        cmd = installed_command("claude-code", tmp_path)
        for ev in events():
            r = run_hook(cmd, ev, env)
            assert r.rc == 0, r
            assert_fell_back_once(r.stderr)
        wait_idle(tmp_path)
        posts = srv.observation_posts()
    assert len(posts) == 3
    assert_no_secret(json.dumps(posts), "what the server received")
    check_fallback_events(list(srv.stored.values()))
    assert pending(tmp_path) == []


@pytest.mark.process
def test_real_server_spool_and_recall_hold_no_secret(tmp_path: Path) -> None:
    from serverproc import ServerProcess

    data = tmp_path / "data"
    with ServerProcess(data) as srv:
        env = hook_env(tmp_path, PYTHONPATH=str(shadow(tmp_path, "moved")))
        cmd = installed_command("claude-code", tmp_path)
        for ev in events("fb-real"):
            r = run_hook(cmd, ev, env)
            assert r.rc == 0, r
            assert_fell_back_once(r.stderr)
        wait_idle(tmp_path)
        assert pending(tmp_path) == []
        spool = all_text_under(data / "spool").decode("utf-8", "replace")
        assert "hook-fallback" in spool  # the events did arrive
        replies = [
            srv.post("/v1/recall", {"query": q, "budget_tokens": 2000}).text
            for q in ("deploy", "key", "secrets")
        ]
    # The full sanitizer once kept PASSWORD's dotted value after DB_PASSWORD= (it read
    # as a dotted name; the server's door redacts it as well now); this test
    # still shows that the hook's fallback alone keeps it out of the spool.
    assert_no_secret(spool, "spool")
    assert_no_secret("".join(replies), "recall")


@pytest.mark.process
def test_hook_copied_away_from_its_repository(tmp_path: Path) -> None:
    """A copy of hooks/ run by an interpreter without wiki-memory: nothing to import."""
    base = getattr(sys, "_base_executable", None) or sys.executable
    probe = subprocess.run(
        [base, "-c", "import wiki_memory"],
        capture_output=True,
        env=hook_env(tmp_path),
        cwd=tmp_path,
    )
    if probe.returncode == 0:
        pytest.skip(f"{base} can import wiki_memory")
    copy = tmp_path / "elsewhere" / "hooks"
    shutil.copytree(REPO / "hooks", copy, ignore=shutil.ignore_patterns("__pycache__"))
    cmd = hook_command("claude-code", python=base, script=copy / "wiki_memory_hook.py")
    env = hook_env(tmp_path, f"http://127.0.0.1:{free_port()}")
    for ev in events():
        r = run_hook(cmd, ev, env, cwd=str(tmp_path))
        assert r.rc == 0, r
        assert_fell_back_once(r.stderr)
        assert b"could not be imported" in r.stderr
    wait_idle(tmp_path)
    assert_no_secret(blob_of(tmp_path), "outbox")
    check_fallback_events(pending(tmp_path))


@pytest.mark.process
def test_normal_path_uses_the_full_sanitizer(tmp_path: Path) -> None:
    env = hook_env(tmp_path, f"http://127.0.0.1:{free_port()}")
    cmd = installed_command("claude-code", tmp_path)
    for ev in events():
        r = run_hook(cmd, ev, env)
        assert r.rc == 0, r
        assert FELL_BACK not in r.stderr, r.stderr
    wait_idle(tmp_path)
    blob = blob_of(tmp_path)
    for kind in ("aws-access-key", "github-token", "private-key"):
        assert f"[REDACTED:{kind}]" in blob, kind
    for s in (AWS_ID, GH_TOKEN, KEY_LINE[:24], "OPENSSH PRIVATE"):
        assert s not in blob, s
    assert "wiki_memory_redaction" not in blob and "characters dropped" not in blob
    evs = pending(tmp_path)
    tool = next(e for e in evs if e["event"] == "PostToolUse")
    # long output is kept (redacted), not dropped
    assert (
        "AWS_ACCESS_KEY_ID=[REDACTED:aws-access-key]" in tool["payload"]["tool_response"]["stdout"]
    )


@pytest.mark.process
def test_normal_path_never_compiles_the_fallback(tmp_path: Path) -> None:
    """The fallback costs nothing on the normal path: its rules are not compiled."""
    code = (
        "import sys; sys.path.insert(0, sys.argv[1]); import wiki_memory_hooklib as h; "
        "print(h.redact({'p': sys.argv[2]})[1], len(h._FALLBACK_RULES), h._FALLBACK_WARNED)"
    )
    out = subprocess.run(
        [sys.executable, "-S", "-c", code, str(REPO / "hooks"), "x=1 " + GH_TOKEN],
        capture_output=True,
        text=True,
        env=hook_env(tmp_path),
        check=True,
    )
    assert out.stdout.split() == ["1", "0", "False"], out


@pytest.mark.process
def test_sanitizer_loads_from_the_standard_library_under_python_s(tmp_path: Path) -> None:
    """The hook's first import attempt finds the sanitizer beside it, under ``-S``, with
    nothing but the standard library: no site-packages rescue (``site``) was needed."""
    code = (
        "import sys; sys.path.insert(0, sys.argv[1]); import wiki_memory_hooklib as h; "
        "mod = h._sanitizer(); "
        "names = {m.split('.')[0] for m in sys.modules}; "
        "print(bool(mod), 'site' in sys.modules, "
        "sorted(names - sys.stdlib_module_names - {'__main__', 'wiki_memory', 'wiki_memory_hooklib'}))"
    )
    out = subprocess.run(
        [sys.executable, "-S", "-c", code, str(REPO / "hooks")],
        capture_output=True,
        text=True,
        env=hook_env(tmp_path),
        cwd=tmp_path,
        check=True,
    )
    assert out.stdout.strip() == "True False []", out


# ----------------------------------------------------------------------------- the fallback itself


@pytest.fixture
def no_sanitizer(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(HOOKS, "_SANITIZE", False)
    monkeypatch.setattr(HOOKS, "_SANITIZE_ERROR", "ModuleNotFoundError: test")
    monkeypatch.setattr(HOOKS, "_FALLBACK_WARNED", False)


AWS_LETTERS = "AK" + "IA" + "QWEGRSKPZNWXHBPL"  # 16 base32 letters, no digit


@pytest.mark.parametrize(
    ("text", "kept"),
    [
        (f"use {AWS_ID} now", "use [REDACTED:token] now"),
        (f"export {ENV_LINE} && make", "export DB_PASSWORD=[REDACTED:generic-secret] && make"),
        ('{"api_key": "' + "abc" + "123def" + '"}', '{"api_key": "[REDACTED:generic-secret]"}'),
        ("x: " + ENV_LINE, "x: DB_PASSWORD=[REDACTED:generic-secret]"),
        ("--pass" + "word " + PASSWORD + " -v", "--password [REDACTED:generic-secret] -v"),
        (SSHPASS + PASSWORD + " ssh h", "sshpass -p [REDACTED:cli-password] ssh h"),
        ("mysql -u r" + " -p" + PASSWORD + " db", "mysql -u r -p[REDACTED:cli-password] db"),
        ("mkdir -p build/out", None),
        (
            "curl -H 'Authorization: " + "Bearer " + "abcdefgh12345'",
            "curl -H 'Authorization: Bearer [REDACTED:auth-header]'",
        ),
        (
            "psql postgres://app:" + "FAKEpw99" + "@db.internal:5432/app",
            "psql postgres://app:[REDACTED:url-password]@db.internal:5432/app",
        ),
        (SHORT_KEY + "\nafter", "[REDACTED:private-key]\nafter"),
        (BEGIN + "\n" + KEY_LINE, "[REDACTED:private-key]"),  # no END line
        ("id " + "Zq8" + "x" * 14 + "Lp3Wv", "id [REDACTED:high-entropy]"),
        # kept: paths, SHAs, UUIDs, words
        ("cat /home/dev/project/tests/test_hooks_2.py", None),
        ("git show " + "0123456789abcdef" * 2 + "01234567", None),
        ("session 123e4567-e89b-12d3-a456-426614174000", None),
        ("Please fix the failing test and run ruff", None),
        ("cp config/global_settings.yaml build/ && hf_hub_download", None),
        ("gl" + "pat-" + "Fake0Example0Fake00000", "[REDACTED:token]"),
        ("xo" + "xb-" + "000000000000-FAKEexample", "[REDACTED:token]"),
        # an AWS key id of letters only (1 in 28 of them) where no boundary comes first
        ("tar xf backup_" + AWS_LETTERS + ".tar", "tar xf backup_[REDACTED:token].tar"),
        ("log: x\\n" + AWS_LETTERS + " done", "log: x\\n[REDACTED:token] done"),
        ("cols\\t" + AWS_LETTERS, "cols\\t[REDACTED:token]"),
        ("_" + AWS_LETTERS.replace("AK", "AS", 1) + "_", "_[REDACTED:token]_"),
        ("claim wmo_" + "qwertyuiopasdfghjklzxcvbnm now", "claim [REDACTED:token] now"),
        (
            "X-Amz-Credential%3D" + AWS_LETTERS + "%2F2024",
            "X-Amz-Credential%3D[REDACTED:token]%2F2024",
        ),
    ],
)
def test_fallback_rules(text: str, kept: str | None) -> None:
    out, n = HOOKS.fallback_redact_text(text)
    assert out == (text if kept is None else kept)
    assert (n > 0) == (kept is not None)


def test_fallback_drops_long_strings_and_counts_them() -> None:
    long_text = "word " * 100
    obj = {
        "prompt": long_text,
        "n": 3,
        "ok": True,
        "none": None,
        "nested": [{"name": "DB_" + "PASSWORD", "value": "abc"}, {"password": "pw"}],
        long_text: "long key",
        long_text + " ": "another long key",
        "max_tokens": 512,
    }
    stats: dict[str, Any] = {}
    clean, n = HOOKS.fallback_redact(obj, stats)
    placeholder = HOOKS.FALLBACK_DROPPED.format(chars=len(long_text))
    assert clean["prompt"] == placeholder
    assert clean[placeholder] == "long key"
    assert clean[HOOKS.FALLBACK_DROPPED.format(chars=len(long_text) + 1)] == "another long key"
    assert clean["nested"] == [
        {"name": "DB_PASSWORD", "value": "[REDACTED:generic-secret]"},
        {"password": "[REDACTED:generic-secret]"},
    ]
    assert (clean["n"], clean["ok"], clean["none"], clean["max_tokens"]) == (3, True, None, 512)
    assert stats == {
        "dropped_strings": 3,
        "dropped_chars": 3 * len(long_text) + 1,
        "redacted": 2,
    }
    assert n == 5
    assert obj["prompt"] == long_text  # a copy: the input is untouched


def test_redact_falls_back_and_warns_once(
    no_sanitizer: None, capfd: pytest.CaptureFixture[str]
) -> None:
    stats: dict[str, Any] = {}
    clean, n = HOOKS.redact({"prompt": f"key {GH_TOKEN}"}, stats)
    assert clean == {"prompt": "key [REDACTED:token]"} and n == 1
    assert HOOKS.redact("cwd")[0] == "cwd"
    assert stats["fallback"] == "the sanitizer could not be imported"
    err = capfd.readouterr().err
    assert err.count("redaction fell back") == 1
    assert "ModuleNotFoundError: test" in err


def test_redact_falls_back_when_the_sanitizer_raises(
    monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]
) -> None:
    class Broken:
        @staticmethod
        def redact_obj(obj: object) -> tuple[object, int]:
            raise ValueError(GH_TOKEN)  # the message may hold the text: never shown

    monkeypatch.setattr(HOOKS, "_SANITIZE", Broken)
    monkeypatch.setattr(HOOKS, "_FALLBACK_WARNED", False)
    ev = HOOKS.build_event(
        "claude-code",
        "UserPromptSubmit",
        {"session_id": "s", "cwd": "/p", "prompt": f"tok {GH_TOKEN}"},
        b"{}",
        None,
        256 * 1024,
        0.0,
    )
    assert ev["payload"]["prompt"] == "tok [REDACTED:token]"
    assert ev["payload"]["wiki_memory_redaction"] == {
        "mode": "hook-fallback",
        "reason": "the sanitizer failed",
        "dropped_strings": 0,
        "dropped_chars": 0,
        "redacted": 1,
    }
    err = capfd.readouterr().err
    assert err.count("redaction fell back") == 1 and "ValueError" in err
    assert GH_TOKEN not in err
