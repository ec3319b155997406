"""install-mcp / uninstall-mcp on a temporary HOME, per client, against golden files in
each client's documented shape; idempotence, backups, no token in client files, and
uninstall that removes only our entry."""

from __future__ import annotations

import json
import os
import tomllib
from pathlib import Path
from typing import Any

import pytest
from clikit import run_in_process

from wiki_memory.harness.mcp_install import CLIENTS

pytestmark = pytest.mark.process

GOLDEN = Path(__file__).resolve().parent / "golden" / "mcp"
PY = "/usr/bin/python3"
SCRIPT = "/opt/wm/wiki_memory/cli_mcp.py"
FILES = {
    "claude-code": (".claude.json", "claude-code.claude.json"),
    "codex": (".codex/config.toml", "codex.config.toml"),
    "gemini-cli": (".gemini/settings.json", "gemini-cli.settings.json"),
    "cursor": (".cursor/mcp.json", "cursor.mcp.json"),
}
BASE = ["--python", PY, "--bridge-script", SCRIPT]


def cli(home: Path, *args: str, cwd: Path | None = None, **env: str) -> Any:
    """``wiki-memory ARGS...`` as the user of ``home`` runs it from ``cwd`` (default:
    ``home``), in this process: what is checked is the files it writes, not its process."""
    e = {k: v for k, v in os.environ.items() if not k.startswith(("WIKI_MEMORY_", "CODEX_"))}
    e.update(HOME=str(home), XDG_DATA_HOME=str(home / ".local" / "share"), **env)
    home.mkdir(parents=True, exist_ok=True)
    before = Path.cwd()
    os.chdir(cwd or home)
    try:
        return run_in_process(list(args), e)
    finally:
        os.chdir(before)


def backups(path: Path) -> list[Path]:
    return sorted(path.parent.glob(path.name + ".wiki-memory-backup-*"))


def load(path: Path) -> dict[str, Any]:
    text = path.read_text(encoding="utf-8")
    return tomllib.loads(text) if path.suffix == ".toml" else json.loads(text)


def servers(path: Path) -> dict[str, Any]:
    doc = load(path)
    return doc.get("mcp_servers" if path.suffix == ".toml" else "mcpServers", {})


def add_user_server(path: Path) -> None:
    """The user adds a server of their own (by hand, as their docs show)."""
    if path.suffix == ".toml":
        with path.open("a", encoding="utf-8") as f:
            f.write(
                '\n# my docs server\n[mcp_servers.docs]\ncommand = "npx"\nargs = ["-y", "docs-mcp"]\n'
            )
    else:
        obj = json.loads(path.read_text())
        obj["mcpServers"]["docs"] = {"command": "npx", "args": ["-y", "docs-mcp"]}
        path.write_text(json.dumps(obj, indent=4) + "\n")


@pytest.mark.parametrize("client", list(CLIENTS))
def test_install_matches_golden_is_idempotent_and_uninstall_keeps_user_edits(tmp_path, client):
    home = tmp_path / "home"
    home.mkdir()
    rel, golden = FILES[client]
    path = home / rel

    dry = cli(home, "install-mcp", "--client", client, *BASE)
    assert dry.returncode == 0, dry.stderr
    assert str(path) in dry.stdout and "--apply" in dry.stdout and SCRIPT in dry.stdout
    assert not path.exists()

    first = cli(home, "install-mcp", "--client", client, *BASE, "--apply")
    assert first.returncode == 0, first.stderr
    assert path.read_text() == (GOLDEN / golden).read_text()
    stamp = path.stat().st_mtime_ns

    second = cli(home, "install-mcp", "--client", client, *BASE, "--apply")
    assert second.returncode == 0 and "nothing to change" in second.stdout
    assert path.stat().st_mtime_ns == stamp and backups(path) == []

    add_user_server(path)
    edited = path.read_text()
    third = cli(home, "install-mcp", "--client", client, *BASE, "--apply")
    assert "nothing to change" in third.stdout and path.read_text() == edited

    un = cli(home, "uninstall-mcp", "--client", client, "--apply")
    assert un.returncode == 0, un.stderr
    assert set(servers(path)) == {"docs"}
    assert servers(path)["docs"]["args"] == ["-y", "docs-mcp"]
    if client == "codex":
        assert "# my docs server" in path.read_text()
    [backup] = backups(path)
    assert backup.read_text() == edited
    again = cli(home, "uninstall-mcp", "--client", client, "--apply")
    assert again.returncode == 0 and "nothing to change" in again.stdout


@pytest.mark.parametrize("client", list(CLIENTS))
def test_existing_config_kept_exactly(tmp_path, client):
    home = tmp_path / "home"
    rel, _ = FILES[client]
    path = home / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    if client == "codex":
        original = (
            '# my Codex settings\nmodel = "o4"  # keep\n\n[mcp_servers.github]\n'
            'command = "gh-mcp"\n\n[profiles.fast]\nmodel = "mini"\n'
        )
    else:
        original = (
            json.dumps(
                {"theme": "dark", "mcpServers": {"github": {"command": "gh-mcp"}}, "n": [1, 2]},
                indent=2,
            )
            + "\n"
        )
    path.write_text(original)
    path.chmod(0o640)
    r = cli(home, "install-mcp", "--client", client, *BASE, "--apply")
    assert r.returncode == 0, r.stderr
    assert set(servers(path)) == {"github", "wiki-memory"}
    assert (path.stat().st_mode & 0o777) == 0o640
    [backup] = backups(path)
    assert backup.read_text() == original
    if client == "codex":
        doc = load(path)
        assert doc["model"] == "o4" and doc["profiles"]["fast"]["model"] == "mini"
        assert path.read_text().startswith(original.rstrip("\n").split("[profiles")[0].rstrip())
    un = cli(home, "uninstall-mcp", "--client", client, "--apply")
    assert un.returncode == 0, un.stderr
    if client == "codex":
        assert path.read_text() == original
    else:
        assert json.loads(path.read_text()) == json.loads(original)


@pytest.mark.parametrize("client", ["cursor", "codex"])
def test_uninstall_leaves_an_entry_the_user_changed(tmp_path, client):
    home = tmp_path / "home"
    rel, _ = FILES[client]
    path = home / rel
    assert cli(home, "install-mcp", "--client", client, *BASE, "--apply").returncode == 0
    if client == "codex":
        path.write_text(path.read_text() + 'env = { "WIKI_MEMORY_URL" = "http://x" }\n')
    else:
        obj = json.loads(path.read_text())
        obj["mcpServers"]["wiki-memory"]["env"] = {"WIKI_MEMORY_URL": "http://x"}
        path.write_text(json.dumps(obj, indent=2) + "\n")
    changed = path.read_text()
    un = cli(home, "uninstall-mcp", "--client", client, "--apply")
    assert un.returncode == 0 and "changed by hand" in un.stdout
    assert path.read_text() == changed
    forced = cli(home, "uninstall-mcp", "--client", client, "--apply", "--force")
    assert forced.returncode == 0
    assert "wiki-memory" not in servers(path) if path.exists() else True


def test_uninstall_removes_a_file_only_we_created(tmp_path):
    home = tmp_path / "home"
    path = home / ".cursor" / "mcp.json"
    assert cli(home, "install-mcp", "--client", "cursor", *BASE, "--apply").returncode == 0
    assert path.exists()
    assert cli(home, "uninstall-mcp", "--client", "cursor", "--apply").returncode == 0
    assert not path.exists()
    assert len(backups(path)) == 1


def test_no_token_in_client_files_and_data_dir_pinned(tmp_path):
    home = tmp_path / "home"
    data = tmp_path / "data"
    (data / "auth").mkdir(parents=True)
    token = "wm_" + "s3cr3t" * 8
    (data / "auth" / "owner.token").write_text(token)
    r = cli(
        home, "--data-dir", str(data), "install-mcp", "--client", "claude-code", *BASE, "--apply"
    )
    assert r.returncode == 0, r.stderr
    text = (home / ".claude.json").read_text()
    assert token not in text and token not in r.stdout
    args = json.loads(text)["mcpServers"]["wiki-memory"]["args"]
    assert args[:5] == ["-S", SCRIPT, "--data-dir", str(data.resolve()), "mcp"]
    assert args[5:] == ["--harness", "claude-code"]
    # the record of what was written lives in that data directory
    assert (data / "mcp-installs.json").exists()
    # WIKI_MEMORY_HOME pins it too (a client does not always pass the shell's env on)
    r = cli(home, "install-mcp", "--client", "cursor", *BASE, "--apply", WIKI_MEMORY_HOME=str(data))
    assert (
        "--data-dir"
        in json.loads((home / ".cursor/mcp.json").read_text())["mcpServers"]["wiki-memory"]["args"]
    )


def test_team_server_needs_a_token_file(tmp_path):
    home = tmp_path / "home"
    url = "http://wiki.lan:8765"
    r = cli(home, "install-mcp", "--client", "gemini-cli", *BASE, "--url", url, "--apply")
    assert r.returncode == 1 and "--token-file" in r.stderr
    assert not (home / ".gemini" / "settings.json").exists()
    tf = tmp_path / "team.token"
    tf.write_text("wm_team_token_value\n")
    r = cli(home, "install-mcp", "--client", "gemini-cli", *BASE, "--url", url,
            "--token-file", str(tf), "--apply")  # fmt: skip
    assert r.returncode == 0, r.stderr
    text = (home / ".gemini" / "settings.json").read_text()
    assert "wm_team_token_value" not in text
    args = json.loads(text)["mcpServers"]["wiki-memory"]["args"]
    assert args[-4:] == ["--url", url, "--token-file", str(tf.resolve())]


def test_project_scope_and_codex_home(tmp_path):
    home = tmp_path / "home"
    proj = tmp_path / "proj"
    proj.mkdir()
    r = cli(home, "install-mcp", "--client", "claude-code", "--scope", "project", *BASE,
            "--apply", cwd=proj)  # fmt: skip
    assert r.returncode == 0, r.stderr
    assert "wiki-memory" in json.loads((proj / ".mcp.json").read_text())["mcpServers"]
    assert not (home / ".claude.json").exists()
    ch = tmp_path / "codex-home"
    r = cli(home, "install-mcp", "--client", "codex", *BASE, "--apply", CODEX_HOME=str(ch))
    assert r.returncode == 0 and (ch / "config.toml").exists()


def test_unusable_files_are_refused(tmp_path):
    home = tmp_path / "home"
    (home / ".cursor").mkdir(parents=True)
    (home / ".cursor" / "mcp.json").write_text('{"mcpServers": [1, 2]}')
    r = cli(home, "install-mcp", "--client", "cursor", *BASE, "--apply")
    assert r.returncode == 1 and "mcpServers" in r.stderr
    (home / ".codex").mkdir()
    (home / ".codex" / "config.toml").write_text(
        "mcp_servers = { wiki-memory = { command = 'x' } }\n"
    )
    r = cli(home, "install-mcp", "--client", "codex", *BASE, "--apply")
    assert r.returncode == 1 and "by hand" in r.stderr
    (home / ".codex" / "config.toml").write_text("not = [valid\n")
    r = cli(home, "install-mcp", "--client", "codex", *BASE, "--apply")
    assert r.returncode == 1 and "TOML" in r.stderr
