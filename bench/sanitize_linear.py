"""Is every sanitizer rule linear in its input? Adversarial inputs per rule, timed.

For every rule of ``wiki_memory.capture.sanitize.DETECTORS`` (and the shared cues the
scan starts from) this builds inputs meant to make it work hard: its documented example
cut at several points and repeated with no separator, with a space and with a newline
(one long line of half-secrets), its prefixes repeated bare and with a short body, and
a few shapes written by hand for the context rules (``sshpass -p x `` repeated,
``--user=`` repeated, ``password=`` repeated, ...). Each input is timed through
``redact_text`` (what the server and the hook run) at 16 KiB and 256 KiB; a linear
rule takes about 16 times longer on the larger one. The table has one row per rule:
its worst input, the time at 16 KiB and at 1 MiB (the 1 MiB time is measured only
when the 256 KiB one predicts under ``--max-seconds``; otherwise it is extrapolated
quadratically and marked ``~``) and the ratio 1 MiB / 16 KiB (64 when linear). A rule
whose 256 KiB / 16 KiB ratio is over ``--flag`` (default 40) is marked ``SUPER-LINEAR``.

``--against REV`` measures ``sanitize.py`` as it was at git revision REV instead (the
"before" numbers of a fix); ``--only KIND`` keeps the rules whose kind contains KIND.

    python bench/sanitize_linear.py [--against REV] [--only cli] [--flag 40] [--max-seconds 20]
"""

from __future__ import annotations

import argparse
import importlib.util
import re
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from types import ModuleType

REPO = Path(__file__).resolve().parents[1]
MODULE = "wiki_memory/capture/sanitize.py"
KIB = 1024

#: shapes written by hand for the context rules and the shared cues (kind -> units)
HAND: dict[str, list[str]] = {
    "cli-password": [
        "sshpass -p x ",
        "sshpass -p x",
        "mysql -px ",
        "mariadb -px ",
        "docker login -p x ",
        " login -p x ",
        "redis-cli -a x ",
        "sshpass -p -p ",
        " -p",
        "sshpass" + " -p" * 4,
    ],
    "auth-header": [
        "--user=",
        "--user=a",
        "--user=a:",
        "--user='a:",
        " -u a:b",
        " -u ",
        " -u a:",
        "-u a",
        "Authorization: Bearer ",
        "authorization",
        "Bearer ",
        "Bearer a",
        "Proxy-Authorization: Basic ",
    ],
    "generic-secret": [
        "password=",
        "password",
        "password: |\n",
        "password: |",
        "token=a",
        "secret: ",
        "--password ",
        "--password=",
        "DB_PASSWORD=",
        '"password": "',
        "{password: ",
        "key",
        "pass ",
        "a.b.password=",
        "password" + "." * 8,
    ],
    "private-key": [
        "-----BEGIN RSA PRIVATE KEY-----",
        "-----BEGIN RSA PRIVATE KEY-----\n",
        "-----BEGIN PRIVATE KEY-----A",
        "-----BEGIN PRIVATE KEY----- ",
        "private key",
        "-----BEGIN RSA PRIVATE KEY-----\\n",
    ],
    "gcp-service-account-key": [
        '"private_key": "',
        '"private_' + 'key": "-----BEGIN PRIVATE ' + "KEY-----",
        "private_key",
        '{"type": "service_account", "private_key": "',
    ],
    "url-password": ["://", "a://", "a://b:", "a://b:c", "http://a:b", "http://a:b@", "://a:"],
    "dsn-key": ["https://", "https://0123456789abcdef", "://aaaaaaaaaaaaaaaaaaaa1"],
    "aws-secret-key": [
        "aws_secret_access_key=",
        "AK" + "IAQ7F4K2M9X3B8N5V1 ",
        "AK" + "IAQ7F4K2M9X3B8N5V1",
        "secret",
        "A" * 40 + " ",
    ],
    "azure-storage-key": ["AccountKey=", "SharedAccessKey=", "key=", "AccountKey=a;"],
    "azure-ad-client-secret": ["~", "Q~", "abc1Q~", "a1Q~", "aaa1Q~" + "a" * 20],
    "azure-sas-token": ["sig=", "&sig=", "?sig=a"],
    "slack-webhook": ["https://hooks.slack.com/", "hooks.slack.com/services/"],
    "teams-webhook": ["https://a.webhook.office.com/webhookb2/", "/webhookb2/"],
    "discord-webhook": ["https://discord.com/api/webhooks/", "/api/webhooks/"],
    "telegram-bot-token": ["https://api.telegram.org/bot", "api.telegram.org/bot1"],
    "(shared scan)": ["a", "a" * 19 + " ", "-", "_", "a-", "a_", ".", "a.", "~", "+", "/", "%3D"],
}


def load(against: str | None) -> ModuleType:
    """The sanitizer of this checkout, or as it was at git revision ``against``."""
    if against is None:
        sys.path.insert(0, str(REPO))
        from wiki_memory.capture import sanitize

        return sanitize
    src = subprocess.run(
        ["git", "-C", str(REPO), "show", f"{against}:{MODULE}"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    path = Path(tempfile.mkdtemp(prefix="sanitize-linear-")) / "sanitize_before.py"
    path.write_text(src, encoding="utf-8")
    spec = importlib.util.spec_from_file_location("sanitize_before", path)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules["sanitize_before"] = mod
    spec.loader.exec_module(mod)
    return mod


def doc_examples() -> tuple[dict[str, str], dict[str, tuple[str, ...]]]:
    """kind -> the example of the context-rule table in docs/sanitizer.md, and kind ->
    the literals of the provider table's prefixes column (infixes included)."""
    text = (REPO / "docs" / "sanitizer.md").read_text(encoding="utf-8")
    examples: dict[str, str] = {}
    for line in text[text.index("### Context rules") :].splitlines()[1:]:
        if line.startswith("### "):
            break
        m = re.match(r"^\| `([a-z0-9-]+)` \|.*\| `(.*)` \|$", line)
        if m:
            examples[m.group(1)] = m.group(2).replace("\\|", "|")
    literals: dict[str, tuple[str, ...]] = {}
    for line in text[text.index("### Provider tokens") :].splitlines()[1:]:
        if line.startswith("### "):
            break
        cells = re.split(r"(?<!\\)\|", line)
        if len(cells) > 4 and re.fullmatch(r" `[a-z0-9-]+` ", cells[1]):
            literals[cells[1].strip(" `")] = tuple(re.findall(r"`([^`]+)`", cells[3]))
    return examples, literals


def units_for(kind: str, example: str | None, prefixes: tuple[str, ...]) -> list[str]:
    """The repeated units tried for one rule."""
    units = list(HAND.get(kind, []))
    if example:
        cuts = sorted({max(1, len(example) * i // 6) for i in range(1, 7)})
        for k in cuts:
            piece = example[:k]
            units += [piece, piece + " ", piece + "\n"]
    for p in prefixes:
        units += [p, p + " ", p + "a", p + "aA1" * 4, p + "aA1" * 4 + " ", p + "-", p + "_"]
    seen: set[str] = set()
    return [u for u in units if u and not (u in seen or seen.add(u))]


def sized(unit: str, size: int) -> str:
    return (unit * (size // len(unit) + 1))[:size]


def cpu(fn: Callable[[], object], repeat: int = 1) -> float:
    best = float("inf")
    for _ in range(repeat):
        t = time.process_time()
        fn()
        best = min(best, time.process_time() - t)
    return best


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--against", help="git revision whose sanitize.py to measure")
    ap.add_argument("--only", help="rules whose kind contains this")
    ap.add_argument("--flag", type=float, default=40.0, help="ratio 256K/16K that is flagged")
    ap.add_argument("--max-seconds", type=float, default=20.0, help="longest 1 MiB run")
    args = ap.parse_args()

    san = load(args.against)
    examples, literals = doc_examples()
    rules: list[tuple[str, str | None, tuple[str, ...]]] = []
    for d in san.DETECTORS:
        if not any(r[0] == d.kind for r in rules):
            lits = tuple(getattr(d, "prefixes", ()) or ()) + literals.get(d.kind, ())
            rules.append((d.kind, examples.get(d.kind), lits))
        else:  # a kind with two rows: add the second row's prefixes
            i = next(i for i, r in enumerate(rules) if r[0] == d.kind)
            rules[i] = (d.kind, rules[i][1], rules[i][2] + tuple(getattr(d, "prefixes", ()) or ()))
    rules.append(("(shared scan)", None, ()))
    if args.only:
        rules = [r for r in rules if args.only in r[0]]

    redact = san.redact_text
    rows = []
    print(f"sanitizer: {'revision ' + args.against if args.against else 'this checkout'}")
    print(f"{'rule':<28} {'worst input':<34} {'16 KiB':>9} {'1 MiB':>10} {'ratio':>7}")
    for kind, example, prefixes in rules:
        worst = None
        for unit in units_for(kind, example, prefixes):
            small = sized(unit, 16 * KIB)
            mid = sized(unit, 256 * KIB)
            t16 = cpu(lambda s=small: redact(s), repeat=3)
            t256 = cpu(lambda s=mid: redact(s))
            r = t256 / max(t16, 1e-6)
            score = (r, t256)
            if worst is None or score > worst[0]:
                worst = (score, unit, t16, t256)
        assert worst is not None
        (r256, t256), unit, t16, _ = worst
        predicted = t256 * (4 if r256 <= args.flag else 16)
        if predicted <= args.max_seconds:
            t1m = cpu(lambda u=unit: redact(sized(u, 1024 * KIB)))
            mark = ""
        else:
            t1m = t256 * 16
            mark = "~"
        ratio = t1m / max(t16, 1e-6)
        flag = "  SUPER-LINEAR" if r256 > args.flag else ""
        rows.append((kind, unit, t16, t1m, ratio, flag))
        shown = repr(unit)[:34]
        print(
            f"{kind:<28} {shown:<34} {t16 * 1000:>7.2f}ms {mark}{t1m:>8.3f}s {ratio:>7.0f}{flag}",
            flush=True,
        )
    kind, unit, t16, t1m, ratio, _ = max(rows, key=lambda r: r[3])
    print(
        f"\nworst rule: {kind}, input {unit!r} repeated: {t1m:.3f} s at 1 MiB (ratio {ratio:.0f})"
    )
    flagged = [r[0] for r in rows if r[5]]
    print(f"super-linear (256K/16K over {args.flag:.0f}): {', '.join(flagged) or 'none'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
