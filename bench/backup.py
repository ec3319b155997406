"""Backup and restore of a large wiki, measured: the peak memory of the process against
its idle memory, and the time, next to the floor of reading or copying the same bytes.

Builds a data directory whose wiki holds ``--mb`` megabytes of page text that does not
compress well (random words, pages of ``--page-kb`` KB, committed with the stock ``git``
binary as setup and packed by ``git gc``), then runs, each in a fresh process:

- **backup** (the product): ``core.backup.backup`` (bundle, tar, verify), plain and
  ``--encrypt``, beside the floor **read .git once** (every byte of ``.git/objects``);
- **restore** (the product): ``core.backup.restore`` of those two backups into empty
  data directories (the restored ``HEAD`` is checked against the wiki's), beside the
  floor **copy the backup once**.

RSS is read from ``/proc/self/status`` after the imports (idle) and ``VmHWM`` (peak) at
the end. The issue's target: peak at most idle + 200 MB for a 500 MB wiki. Prints a
table: idle and peak RSS, their difference beside the target, and from samples every
20 ms the peak growth of anonymous memory (``RssAnon``: what the process allocates) and
the peak of file-backed resident pages (``RssFile``: mapped files such as pack files,
which count in RSS while mapped).

    python bench/backup.py [--mb 500] [--page-kb 100] [--keep DIR]

``--keep DIR`` builds the wiki in ``DIR/data`` once and reuses it on later runs.
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

CHILD = r"""
import os, sys, time, json
from pathlib import Path
def rss(key):
    for line in open('/proc/self/status'):
        if line.startswith(key):
            return int(line.split()[1]) / 1024
sys.path.insert(0, sys.argv[1])
from wiki_memory.config import load_settings
from wiki_memory.core.backup import backup, restore
settings = load_settings(Path(sys.argv[2]))
import threading
peaks = {'RssAnon:': 0.0, 'RssFile:': 0.0}
stop = threading.Event()
def sample():
    while not stop.is_set():
        for k in peaks:
            peaks[k] = max(peaks[k], rss(k))
        time.sleep(0.02)
idle = rss('VmRSS:')
idle_anon = rss('RssAnon:')
threading.Thread(target=sample, daemon=True).start()
t = time.perf_counter()
mode = sys.argv[4]
if mode == 'floor':
    n = 0
    for p in (settings.wiki_dir / '.git' / 'objects').rglob('*'):
        if p.is_file():
            with open(p, 'rb') as f:
                while b := f.read(1 << 20):
                    n += len(b)
elif mode == 'copy':
    with open(sys.argv[3], 'rb') as f, open(Path(sys.argv[2]) / 'copy', 'wb') as g:
        while b := f.read(1 << 20):
            g.write(b)
elif mode.startswith('restore'):
    secret = 'bench passphrase' if mode == 'restore-encrypted' else None
    restore(settings, Path(sys.argv[3]), secret)
else:
    backup(settings, Path(sys.argv[3]), 'bench passphrase' if mode == 'encrypted' else None)
stop.set()
print(json.dumps({'idle': idle, 'peak': rss('VmHWM:'), 'seconds': time.perf_counter() - t,
                  'idle_anon': idle_anon, 'anon': peaks['RssAnon:'], 'file': peaks['RssFile:']}))
"""


def build(data: Path, mb: int, page_kb: int) -> None:
    wiki = data / "wiki"
    wiki.mkdir(parents=True)
    rng = random.Random(7)
    words = [
        "".join(rng.choices("abcdefghijklmnopqrstuvwxyz", k=rng.randint(3, 9)))
        for _ in range(50000)
    ]
    page = page_kb * 1024
    for i in range(mb * 1024 * 1024 // page):
        p = wiki / "notes" / f"{i % 100:02d}" / f"page-{i}.md"
        p.parent.mkdir(parents=True, exist_ok=True)
        text = " ".join(rng.choices(words, k=page // 6))[:page]
        p.write_text(f"# page {i}\n\n{text}\n", encoding="utf-8")
    env = {**os.environ, "GIT_AUTHOR_NAME": "b", "GIT_AUTHOR_EMAIL": "b@example.org",
           "GIT_COMMITTER_NAME": "b", "GIT_COMMITTER_EMAIL": "b@example.org"}  # fmt: skip
    subprocess.run(["git", "init", "-q", "-b", "main", str(wiki)], check=True)
    subprocess.run(["git", "-C", str(wiki), "-c", "gc.auto=0", "add", "-A"], check=True, env=env)
    subprocess.run(
        ["git", "-C", str(wiki), "-c", "gc.auto=0", "commit", "-qm", "seed"], check=True, env=env
    )
    subprocess.run(["git", "-C", str(wiki), "gc", "-q"], check=True, env=env)


def run(data: Path, out: Path, mode: str) -> dict[str, float]:
    import json

    r = subprocess.run(
        [sys.executable, "-c", CHILD, str(REPO), str(data), str(out), mode],
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    return dict(json.loads(r.stdout.strip().splitlines()[-1]))


def row(name: str, res: dict[str, float], floor: dict[str, float]) -> None:
    extra = res["peak"] - res["idle"]
    ratio = res["seconds"] / floor["seconds"] if floor["seconds"] else 0
    anon = res["anon"] - res["idle_anon"]
    print(f"{name:<28}{res['idle']:>9.0f}{res['peak']:>9.0f}{extra:>11.0f}{200:>8}"
          f"{anon:>8.0f}{res['file']:>9.0f}"
          f"{res['seconds']:>8.1f}  ({ratio:.1f}x the floor's time)")  # fmt: skip


def head_of(wiki: Path) -> str:
    r = subprocess.run(["git", "-C", str(wiki), "rev-parse", "HEAD"],
                       capture_output=True, text=True, check=True)  # fmt: skip
    return r.stdout.strip()


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--mb", type=int, default=500)
    ap.add_argument("--page-kb", type=int, default=100, help="size of one page (KB)")
    ap.add_argument("--keep", type=Path, help="build the wiki here once and reuse it")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-backup-") as tmp:
        data = (args.keep or Path(tmp)) / "data"
        t = time.perf_counter()
        if not (data / "wiki" / ".git").is_dir():
            build(data, args.mb, args.page_kb)
        text_mb = sum(p.stat().st_size for p in (data / "wiki" / "notes").rglob("*.md")) / 2**20
        pack_mb = (
            sum(p.stat().st_size for p in (data / "wiki" / ".git").rglob("*") if p.is_file())
            / 2**20
        )
        print(
            f"wiki: {text_mb:.0f} MB of pages, .git {pack_mb:.0f} MB (ready in {time.perf_counter() - t:.0f} s)"
        )
        print(
            f"{'run':<28}{'idle MB':>9}{'peak MB':>9}{'peak-idle':>11}{'target':>8}"
            f"{'anon+':>8}{'file pk':>9}{'s':>8}"
        )
        floor = run(data, Path(tmp) / "none", "floor")
        row("floor: read .git once", floor, floor)
        for mode, name in (("plain", "backup"), ("encrypted", "backup --encrypt")):
            row(name, run(data, Path(tmp) / f"b-{mode}", mode), floor)
        copy = Path(tmp) / "copy"
        copy.mkdir()
        floor = run(copy, Path(tmp) / "b-plain", "copy")
        row("floor: copy the backup once", floor, floor)
        want = head_of(data / "wiki")
        for mode, name in (("plain", "restore"), ("encrypted", "restore --encrypt")):
            target = Path(tmp) / f"r-{mode}"
            secret = "restore-encrypted" if mode == "encrypted" else "restore"
            row(name, run(target, Path(tmp) / f"b-{mode}", secret), floor)
            assert head_of(target / "wiki") == want, "the restored HEAD differs"
            shutil.rmtree(target)


if __name__ == "__main__":
    main()
