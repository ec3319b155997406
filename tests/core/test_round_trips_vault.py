"""Round trips over a real vault (the shared failure case C68's comparisons, on the
Obsidian Tasks documentation vault in ``/work/shared/data/vaults``): export → import
and backup → restore give the same files byte for byte with their file times, and the
same recall answers (ids in order) for 20 fixed queries taken from the vault's own page
names, and the same page list. Skips when the shared data is absent."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest
from appkit import AppServer
from clikit import run_cli_here
from support import files_of, refs_of, run_cli, shared_path

pytestmark = pytest.mark.process

NOW = "2026-12-01T12:00:00Z"


def vault() -> Path:
    root = shared_path("data", "vaults", "obsidian-tasks-docs", "vault")
    if not root.is_dir():
        pytest.skip(f"the shared vault is absent ({root}): set WIKI_MEMORY_SHARED")
    return root


def queries(wiki: Path) -> list[str]:
    """20 queries: the names of every sixth page of the vault, by path."""
    names = sorted(p.relative_to(wiki).as_posix() for p in wiki.rglob("*.md"))
    return [Path(n).stem.replace("-", " ") for n in names[::6]][:20]


def mtimes(wiki: Path) -> dict[str, float]:
    return {rel: (wiki / rel).stat().st_mtime for rel in files_of(wiki) if not rel.startswith(".")}


def answers(data: Path, qs: list[str]) -> dict[str, Any]:
    """What the server over ``data`` answers: the app in this process (its answers are
    the point, not the process)."""
    srv = AppServer(data).start()
    try:
        out: dict[str, Any] = {}
        for q in qs:
            r = srv.post("/v1/recall", {"query": q, "now": NOW})
            assert r.status_code == 200, r.text
            out[q] = [(i["id"], i["path"]) for i in r.json()["items"]]
        r = srv.get("/v1/pages", params={"limit": 1000})
        assert r.status_code == 200, r.text
        out["pages"] = sorted(p["path"] for p in r.json()["pages"])
        return out
    finally:
        srv.stop()


def test_c68_a_real_vault_survives_both_round_trips(tmp_path: Path) -> None:
    src = tmp_path / "s"
    shutil.copytree(vault(), src / "wiki")  # copy2: the vault's file times come along
    qs = queries(src / "wiki")
    assert len(qs) == 20
    want = answers(src, qs)  # the first start commits the vault
    assert sum(bool(v) for k, v in want.items() if k != "pages") >= 15
    assert len(want["pages"]) >= 100
    files, times, refs = files_of(src / "wiki"), mtimes(src / "wiki"), refs_of(src / "wiki")

    export, backup = tmp_path / "export.jsonl", tmp_path / "b.wmb"
    # export, backup and import in this process; restore as a process of its own
    assert run_cli_here(src, "export", str(export)).returncode == 0
    assert run_cli_here(src, "backup", str(backup)).returncode == 0
    d1, d2 = tmp_path / "d1", tmp_path / "d2"
    out = run_cli_here(d1, "import", "--json", str(export))
    assert out.returncode == 0, out.stderr
    out = run_cli(d2, "restore", str(backup))
    assert out.returncode == 0, out.stderr

    visible = {k: v for k, v in files.items() if not k.startswith(".")}
    assert {k: v for k, v in files_of(d1 / "wiki").items() if not k.startswith(".")} == visible
    assert mtimes(d1 / "wiki") == times
    assert files_of(d2 / "wiki") == files and mtimes(d2 / "wiki") == times
    assert refs_of(d2 / "wiki") == refs
    assert answers(d1, qs) == want
    assert answers(d2, qs) == want
