"""The sanitizer: every detector removes its secrets, look-alikes stay, C32, no false positives.

Fake secrets are assembled from parts at run time (prefix + random characters from a
seeded generator) so that this file itself holds nothing secret-shaped.
"""

from __future__ import annotations

import base64
import json
import random
import re
import string
import subprocess
import sys
from collections.abc import Callable

import pytest
from support import REPO, runtime_distributions, shared_path

from wiki_memory.capture.sanitize import DETECTORS, Redaction, redact_obj, redact_text

RNG = random.Random(20240532)
UPPER, LOWER, DIGITS = string.ascii_uppercase, string.ascii_lowercase, string.digits
ALNUM = UPPER + LOWER + DIGITS
B64 = ALNUM + "+/"
HEX = "0123456789abcdef"
URLSAFE = ALNUM + "_-"


def rnd(n: int, alphabet: str = ALNUM) -> str:
    """n random characters; always mixes cases and digits when the alphabet has them."""
    while True:
        s = "".join(RNG.choice(alphabet) for _ in range(n))
        if alphabet is not ALNUM and alphabet is not B64:
            return s
        if (
            any(c.isupper() for c in s)
            and any(c.islower() for c in s)
            and any(c.isdigit() for c in s)
        ):
            return s


def mixed(n: int, alphabet: str = ALNUM) -> str:
    """n random characters from ``alphabet`` with at least two of lowercase, uppercase
    and digits (a real token's body; an all-letters draw would read as a word)."""
    while True:
        s = "".join(RNG.choice(alphabet) for _ in range(n))
        kinds = any(c.islower() for c in s) + any(c.isupper() for c in s)
        if kinds + any(c.isdigit() for c in s) >= 2:
            return s


def b64url(obj: dict) -> str:
    return base64.urlsafe_b64encode(json.dumps(obj).encode()).rstrip(b"=").decode()


def pem(label: str, lines: int = 5, sep: str = "\n", end: bool = True) -> tuple[str, str]:
    """A fake PEM block and one body line that must not survive."""
    body = [rnd(64, B64) for _ in range(lines)] + [rnd(24, B64) + "=="]
    head = f"-----BEGIN {label}-----"
    tail = [f"-----END {label}-----"] if end else []
    return sep.join([head, *body, *tail]), body[1]


def _gcp(n: int) -> tuple[str, str]:
    key, line = pem("PRIVATE KEY", lines=3 + n)
    doc = {
        "type": "service_account",
        "project_id": f"demo-project-{n}",
        "private_key_id": rnd(40, HEX),
        "private_key": key + "\n",
        "client_email": f"svc{n}@demo-project-{n}.iam.gserviceaccount.com",
    }
    return json.dumps(doc, indent=2 if n % 2 else None), line


# ---------------------------------------------------------------------------
# the corpus: (kind, text to plant, parts that must not survive)


def _corpus() -> list[tuple[str, str, list[str]]]:
    c: list[tuple[str, str, list[str]]] = []

    def add(kind: str, text: str, *gone: str) -> None:
        c.append((kind, text, list(gone) or [text]))

    for prefix in ("AK" + "IA", "AS" + "IA", "AK" + "IA"):
        add("aws-access-key", prefix + rnd(16, UPPER + DIGITS))
    for tmpl in (
        "aws_secret_access_key = {v}",
        "AWS_SECRET_ACCESS_KEY={v}",
        '"SecretAccessKey": "{v}"',
    ):
        v = rnd(40, B64)
        add("aws-secret-key", tmpl.format(v=v), v)
    v = rnd(40, B64)
    add("aws-secret-key", f"{'AK' + 'IA' + rnd(16, UPPER + DIGITS)} {v}", v)
    for n in range(3):
        text, line = _gcp(n)
        add("gcp-service-account-key", text, line)
    k, line = pem("RSA PRIVATE KEY")
    add("private-key", k, line)
    k, line = pem("EC PRIVATE KEY")
    add("private-key", json.dumps(k)[1:-1], line)  # JSON-escaped: literal \n
    k, line = pem("OPENSSH PRIVATE KEY", sep=" ")
    add("private-key", k, line)  # all on one line
    k, line = pem("PRIVATE KEY", lines=8, end=False)
    add("private-key", k.rsplit("\n", 3)[0], line)  # truncated, no END line
    k, line = pem("ENCRYPTED PRIVATE KEY")
    add("private-key", k, line)
    k, line = pem("PGP PRIVATE KEY BLOCK")
    add("private-key", k.replace("\n", "\nVersion: GnuPG v2\n\n", 1), line)
    add(
        "azure-storage-key",
        "DefaultEndpointsProtocol=https;AccountName=demo;AccountKey="
        + (v := rnd(86, B64) + "==")
        + ";EndpointSuffix=core.windows.net",
        v,
    )
    add("azure-storage-key", "AccountKey=" + (v := rnd(86, B64) + "=="), v)
    add(
        "azure-storage-key",
        "Endpoint=sb://demo.servicebus.windows.net/;SharedAccessKeyName=RootManageSharedAccessKey;"
        "SharedAccessKey=" + (v := rnd(43, B64) + "="),
        v,
    )
    for n in range(3):
        sig = rnd(30, ALNUM) + "%2B" + rnd(10) + "%3D"
        add(
            "azure-sas-token",
            f"https://demo{n}.blob.core.windows.net/c/b{n}.txt?sv=2022-11-02&ss=b&srt=o&sp=r"
            f"&se=2030-01-01T00:00:00Z&spr=https&sig={sig}",
            sig,
        )
    for prefix in ("gh" + "p_", "gh" + "o_", "gh" + "s_", "gh" + "u_", "gh" + "r_"):
        add("github-token", prefix + rnd(36))
    add("github-token", "github" + "_pat_" + rnd(22) + "_" + rnd(59))
    for prefix in ("gl" + "pat-", "gl" + "dt-", "gl" + "rt-"):
        add("gitlab-token", prefix + rnd(20, ALNUM + "_-"))
    for prefix in ("xo" + "xb-", "xo" + "xp-", "xo" + "xa-"):
        add("slack-token", f"{prefix}{rnd(12, DIGITS)}-{rnd(12, DIGITS)}-{rnd(24)}")
    add("slack-token", f"xa{'pp'}-1-A{rnd(10, UPPER + DIGITS)}-{rnd(13, DIGITS)}-{rnd(64, HEX)}")
    for _ in range(3):
        add(
            "slack-webhook",
            f"https://hooks.slack.com/services/T{rnd(8, UPPER + DIGITS)}/B{rnd(8, UPPER + DIGITS)}/{rnd(24)}",
        )
    for prefix in ("sk" + "_live_", "rk" + "_live_", "sk" + "_test_", "wh" + "sec_"):
        add("stripe-key", prefix + rnd(24 if "sec" not in prefix else 32))
    add("anthropic-key", "sk-" + "ant-api03-" + rnd(93, ALNUM + "_-") + "AA")
    add("anthropic-key", "sk-" + "ant-admin01-" + rnd(93, ALNUM + "_-") + "AA")
    add("anthropic-key", "sk-" + "ant-oat01-" + rnd(80, ALNUM + "_-"))
    add(
        "openai-key",
        "sk-" + "proj-" + rnd(74, ALNUM + "_-") + "T3Blbk" + "FJ" + rnd(74, ALNUM + "_-"),
    )
    add("openai-key", "sk-" + rnd(20) + "T3Blbk" + "FJ" + rnd(20))
    add("openai-key", "sk-" + "svcacct-" + rnd(60, ALNUM + "_-"))
    for _ in range(3):
        add("npm-token", "np" + "m_" + rnd(36))
    for _ in range(2):
        add("pypi-token", "py" + "pi-AgEIcHlwaS5vcmc" + rnd(60, ALNUM + "_-"))
    add("pypi-token", "py" + "pi-AgENdGVzdC5weXBpLm9yZw" + rnd(60, ALNUM + "_-"))
    for _ in range(3):
        add("google-api-key", "AI" + "za" + rnd(35, ALNUM + "_-"))
    for _ in range(3):
        add("huggingface-token", "h" + "f_" + rnd(34))
    for _ in range(3):
        add("wiki-memory-offer-code", "wm" + "o_" + rnd(26, "abcdefghijklmnopqrstuvwxyz234567"))
    for sub in ("demo", "user-42", "svc@example.com"):
        header = b64url({"alg": "HS256", "typ": "JWT"})
        payload = b64url({"sub": sub, "iat": 1716000000, "exp": 1716003600})
        add("jwt", f"{header}.{payload}.{rnd(43, ALNUM + '_-')}")
    for tmpl in (
        "postgres://app:{pw}@db.internal:5432/app",
        "mysql://root:{pw}@localhost:3306/shop",
        "redis://:{pw}@cache.internal:6379/0",
        "https://deploy:{pw}@git.example.com/team/repo.git",
    ):
        pw = rnd(14, ALNUM + "-_!~")
        add("url-password", tmpl.format(pw=pw), pw)
    for tmpl in (
        "Authorization: Bearer {v}",
        'curl -H "Authorization: Basic {v}" https://api.example.com/x',
        '{{"Authorization": "Token {v}"}}',
        "Authorization: token {v}",
        "curl -u deploy:{v} https://api.example.com/x",
    ):
        v = rnd(32, ALNUM + "-._~")
        add("auth-header", tmpl.format(v=v), v)
    for tmpl in (
        "DB_PASSWORD={v}",
        '"client_secret": "{v}"',
        "api_key: {v}",
        "--password={v}",
        "export MY_SERVICE_TOKEN='{v}'",
        "SESSION_SECRET={hex}",
        "mysql_pwd = '{v}'",
        "smtp --pass-phrase {v}",
        "x-api-key: {v}",
        "credentials={v}",
        "PRIVATE_SIGNING_SEED={v}",
    ):
        v, hx = rnd(18, ALNUM + "!#%+-_"), rnd(32, HEX)
        gone = hx if "{hex}" in tmpl else v
        add("generic-secret", tmpl.format(v=v, hex=hx), gone)
    for kind, make in PROVIDER_FAKES:
        for _ in range(2):
            add(kind, make())
    for kind, tmpl in STYLES:
        v = style_value()
        if kind == "url-password":
            v = v.replace("/", "_")  # a raw "/" would end the URL's user part
        add(kind, tmpl.format(v=v), v)
    return c


# One generator per provider rule of docs/sanitizer.md, written from each provider's
# published token format (prefix + body alphabet and length), not from the sanitizer's
# regexes. Prefixes are split ("gh" + "p_") so that this file holds no token.
PROVIDER_FAKES: list[tuple[str, Callable[[], str]]] = [
    ("anthropic-key", lambda: "sk-" + "ant-api03-" + mixed(93, URLSAFE) + "AA"),
    ("openrouter-key", lambda: "sk-" + "or-v1-" + mixed(64, HEX)),
    ("openai-key", lambda: "sk-" + "proj-" + mixed(74, URLSAFE) + "T3Blbk" + "FJ" + mixed(74)),
    ("github-token", lambda: "gh" + RNG.choice("pousr") + "_" + mixed(36)),
    (
        "gitlab-token",
        lambda: "gl" + RNG.choice(["pat", "dt", "rt", "ft", "soat"]) + "-" + mixed(20, URLSAFE),
    ),
    (
        "slack-token",
        lambda: "xo" + "xb-" + rnd(12, DIGITS) + "-" + rnd(13, DIGITS) + "-" + mixed(24),
    ),
    (
        "stripe-key",
        lambda: RNG.choice(["sk", "rk"]) + "_" + RNG.choice(["live", "test"]) + "_" + mixed(24),
    ),
    ("aws-access-key", lambda: RNG.choice(["AK", "AS"]) + "IA" + mixed(16, UPPER + DIGITS)),
    ("aws-bedrock-key", lambda: "AB" + "SK" + mixed(132, ALNUM + "+/")),
    ("google-api-key", lambda: "AI" + "za" + mixed(35, URLSAFE)),
    (
        "google-oauth",
        lambda: RNG.choice(
            ["GOC" + "SPX-" + mixed(28, URLSAFE), "ya" + "29." + mixed(120, URLSAFE)]
        ),
    ),
    ("huggingface-token", lambda: RNG.choice(["h" + "f_", "api" + "_org_"]) + mixed(34)),
    ("npm-token", lambda: "np" + "m_" + mixed(36)),
    ("pypi-token", lambda: "py" + "pi-AgEIcHlwaS5vcmc" + mixed(70, URLSAFE)),
    (
        "grafana-token",
        lambda: RNG.choice(
            ["gl" + "c_" + mixed(60, ALNUM + "+/"), "gl" + "sa_" + mixed(32) + "_" + rnd(8, HEX)]
        ),
    ),
    (
        "jwt",
        lambda: (
            f"{b64url({'alg': 'RS256', 'kid': rnd(8)})}.{b64url({'sub': rnd(6)})}.{mixed(43, URLSAFE)}"
        ),
    ),
    ("1password-token", lambda: "op" + "s_eyJ" + mixed(260, ALNUM + "+/")),
    ("adobe-client-secret", lambda: "p8" + "e-" + mixed(32)),
    (
        "age-secret-key",
        lambda: "AGE-" + "SECRET-KEY-1" + mixed(58, "QPZRY9X8GF2TVDW0S3JN54KHCE6MUA7L"),
    ),
    ("airtable-token", lambda: "pa" + "t" + mixed(14) + "." + rnd(64, HEX)),
    ("alibaba-access-key", lambda: "LT" + "AI" + mixed(20)),
    ("jfrog-token", lambda: RNG.choice(["AK" + "Cp" + mixed(69), "cmV" + "md" + mixed(59)])),
    ("clickhouse-key", lambda: "4b" + "1d" + mixed(38)),
    ("clojars-token", lambda: "CLOJ" + "ARS_" + mixed(60)),
    ("cloudflare-origin-ca-key", lambda: "v1" + ".0-" + rnd(24, HEX) + "-" + rnd(146, HEX)),
    ("databricks-token", lambda: "da" + "pi" + mixed(32, HEX)),
    ("digitalocean-token", lambda: "do" + RNG.choice("por") + "_v1_" + mixed(64, HEX)),
    ("doppler-token", lambda: "dp" + "." + RNG.choice(["pt", "st", "sa"]) + "." + mixed(43)),
    (
        "duffel-token",
        lambda: "duf" + "fel_" + RNG.choice(["test", "live"]) + "_" + mixed(43, URLSAFE),
    ),
    ("dynatrace-token", lambda: "dt0" + "c01." + mixed(24) + "." + mixed(64)),
    ("easypost-key", lambda: "EZ" + RNG.choice("AT") + "K" + mixed(54)),
    ("facebook-token", lambda: "EA" + "A" + RNG.choice("MC") + mixed(140)),
    ("flutterwave-key", lambda: "FLWSECK" + "_TEST-" + mixed(32, "abcdefgh0123456789") + "-X"),
    (
        "flyio-token",
        lambda: RNG.choice(
            ["fo" + "1_" + mixed(43, URLSAFE), "fm" + "2_" + mixed(140, ALNUM + "+/")]
        ),
    ),
    ("frameio-token", lambda: "fio" + "-u-" + mixed(64, URLSAFE)),
    (
        "harness-token",
        lambda: RNG.choice(["pa", "sa"]) + "t." + mixed(22) + "." + mixed(24) + "." + mixed(20),
    ),
    ("heroku-key", lambda: "HRKU" + "-AA" + mixed(58, URLSAFE)),
    ("infracost-token", lambda: "ic" + "o-" + mixed(32)),
    ("intra42-secret", lambda: "s-s4t2" + RNG.choice(["ud", "af"]) + "-" + mixed(64, HEX)),
    ("linear-key", lambda: "lin" + "_api_" + mixed(40)),
    (
        "notion-token",
        lambda: RNG.choice(["nt" + "n_" + rnd(11, DIGITS) + mixed(35), "sec" + "ret_" + mixed(43)]),
    ),
    ("octopus-key", lambda: "AP" + "I-" + mixed(26, UPPER + DIGITS)),
    ("openshift-token", lambda: "sha256" + "~" + mixed(43, URLSAFE)),
    ("perplexity-key", lambda: "pp" + "lx-" + mixed(48)),
    ("planetscale-token", lambda: "pscale" + RNG.choice(["_tkn_", "_pw_", "_oauth_"]) + mixed(43)),
    ("postman-key", lambda: "PM" + "AK-" + mixed(24, HEX) + "-" + rnd(34, HEX)),
    ("prefect-token", lambda: "pn" + "u_" + mixed(36)),
    ("pulumi-token", lambda: "pu" + "l-" + mixed(40, HEX)),
    ("readme-key", lambda: "rd" + "me_" + mixed(70, LOWER + DIGITS)),
    ("rubygems-key", lambda: "ruby" + "gems_" + mixed(48, HEX)),
    ("scalingo-token", lambda: "tk" + "-us-" + mixed(48, URLSAFE)),
    ("sendgrid-key", lambda: "S" + "G." + mixed(22, URLSAFE) + "." + mixed(43, URLSAFE)),
    ("brevo-key", lambda: "xkey" + "sib-" + rnd(64, HEX) + "-" + mixed(16)),
    (
        "sentry-token",
        lambda: RNG.choice(
            ["sntr" + "yu_" + mixed(64, HEX), "sntr" + "ys_eyJ" + mixed(90, ALNUM + "+/")]
        ),
    ),
    ("settlemint-token", lambda: "sm" + "_" + RNG.choice("aps") + "at_" + mixed(16)),
    ("shippo-token", lambda: "ship" + "po_" + RNG.choice(["live", "test"]) + "_" + mixed(40, HEX)),
    (
        "shopify-token",
        lambda: "sh" + RNG.choice(["pat", "pca", "ppa", "pss"]) + "_" + mixed(32, HEX),
    ),
    ("sourcegraph-token", lambda: "sg" + "p_" + rnd(16, HEX) + "_" + mixed(40, HEX)),
    (
        "square-token",
        lambda: RNG.choice(["sq0" + "atp-", "sq0" + "csp-", "EA" + "AA"]) + mixed(40, URLSAFE),
    ),
    ("twilio-key", lambda: "S" + "K" + mixed(32, HEX)),
    ("typeform-token", lambda: "tf" + "p_" + mixed(44, URLSAFE) + "_" + mixed(14)),
    ("vault-token", lambda: "hv" + RNG.choice("sbr") + "." + mixed(95, URLSAFE)),
    ("definednetworking-token", lambda: "dn" + "key-" + mixed(26) + "-" + mixed(52)),
    ("newrelic-key", lambda: "NR" + RNG.choice(["AK", "II"]) + "-" + mixed(27, UPPER + DIGITS)),
    ("mapbox-token", lambda: "sk" + ".eyJ" + mixed(60) + "." + mixed(22)),
    ("yandex-key", lambda: "AQ" + "VN" + mixed(36, URLSAFE)),
    ("twitter-bearer-token", lambda: "A" * 22 + mixed(90, ALNUM + "%")),
    (
        "plaid-token",
        lambda: "access" + "-sandbox-" + "-".join(rnd(n, HEX) for n in (8, 4, 4, 4, 12)),
    ),
    ("dropbox-token", lambda: "s" + "l." + mixed(140, URLSAFE)),
    (
        "atlassian-token",
        lambda: RNG.choice(["ATAT" + "T3" + mixed(180, URLSAFE), "AT" + "BB" + mixed(32)]),
    ),
    ("docker-token", lambda: "dckr" + "_pat_" + mixed(27, URLSAFE)),
    ("groq-key", lambda: "gs" + "k_" + mixed(52)),
    ("xai-key", lambda: "xa" + "i-" + mixed(80)),
    ("replicate-token", lambda: "r" + "8_" + mixed(37)),
    ("tailscale-key", lambda: "tskey" + "-auth-" + mixed(12) + "-" + mixed(30)),
    (
        "supabase-token",
        lambda: RNG.choice(["sb" + "p_" + mixed(40, HEX), "sb" + "_secret_" + mixed(32, URLSAFE)]),
    ),
    ("contentful-token", lambda: "CFP" + "AT-" + mixed(43, URLSAFE)),
    ("figma-token", lambda: "fig" + "d_" + mixed(40, URLSAFE)),
    ("sonarqube-token", lambda: "sq" + RNG.choice("upa") + "_" + mixed(40, HEX)),
    ("buildkite-token", lambda: "bk" + "ua_" + mixed(40, HEX)),
    ("circleci-token", lambda: "CCI" + "PAT_" + mixed(22) + "_" + rnd(40, HEX)),
    (
        "langsmith-key",
        lambda: "lsv2" + RNG.choice(["_pt_", "_sk_"]) + mixed(32, HEX) + "_" + rnd(10, HEX),
    ),
    ("pinecone-key", lambda: "pc" + "sk_" + mixed(5) + "_" + mixed(64)),
    ("nvidia-key", lambda: "nv" + "api-" + mixed(64, URLSAFE)),
    ("tavily-key", lambda: "tv" + "ly-" + mixed(32)),
    (
        "azure-ad-client-secret",
        lambda: mixed(3) + RNG.choice(DIGITS) + "Q" + "~" + mixed(34, ALNUM + "_~.-"),
    ),
    ("terraform-token", lambda: mixed(14, LOWER + DIGITS) + ".atlas" + "v1." + mixed(67, URLSAFE)),
    ("maxmind-key", lambda: mixed(6) + "_" + mixed(29) + "_mm" + "k"),
    ("mailchimp-key", lambda: mixed(32, HEX) + "-u" + "s" + str(RNG.randint(1, 21))),
    (
        "authress-key",
        lambda: (
            "sc"
            + "_"
            + mixed(10, LOWER + DIGITS)
            + "."
            + mixed(5, LOWER + DIGITS)
            + ".acc"
            + "_"
            + mixed(20, LOWER + DIGITS)
            + "."
            + mixed(60, URLSAFE)
        ),
    ),
]

# The writing styles an assignment can take, each with a fresh value made of dots, slashes,
# base64 and URL-safe characters; ``{v}`` is the value that must go.
STYLES: list[tuple[str, str]] = [
    ("generic-secret", "DB_PASSWORD={v}"),
    ("generic-secret", "export API_TOKEN={v}"),
    ("generic-secret", "export SENDGRID_API_KEY='{v}'"),
    ("generic-secret", "db:\n  password: {v}\n  user: app"),
    ("generic-secret", "db:\n  password: |\n    {v}\n  user: app"),
    ("generic-secret", "tls:\n  private_key: >-\n    {v}\n"),
    ("generic-secret", "{{user: app, password: {v}}}"),
    ("generic-secret", '{{"client_secret": "{v}", "client_id": "app"}}'),
    ("generic-secret", '[database]\npassword = "{v}"\nhost = "db"'),
    ("generic-secret", "[smtp]\npassword = {v}\nport = 25"),
    ("generic-secret", "deploy --password {v} --host prod"),
    ("generic-secret", "deploy --password={v}"),
    ("generic-secret", "deploy --db-password '{v}'"),
    ("generic-secret", "deploy --api-token Q{v} --region eu"),  # a capital first
    ("cli-password", "sshpass -p {v} ssh deploy@10.0.0.5"),
    ("cli-password", "sshpass -p '{v}' scp build.tgz deploy@host:/srv"),
    ("cli-password", "docker login -u deploy -p {v} registry.example.com"),
    ("cli-password", "podman login --username deploy -p {v} quay.io"),
    ("cli-password", "mysql -h db -u root -p{v} shop"),
    ("cli-password", "redis-cli -h cache -a {v} ping"),
    ("url-password", "https://deploy:{v}@git.example.com/team/repo.git"),
    ("url-password", "DATABASE_URL=postgres://app:{v}@db.internal:5432/app"),
    ("auth-header", "Authorization: Bearer {v}"),
    ("auth-header", "curl -H 'Proxy-Authorization: Basic {v}' https://api.example.com"),
]


def style_value() -> str:
    """A secret with the characters the keyword rule once let through: dots, slashes,
    base64 padding, URL-safe dashes."""
    return mixed(6) + "." + mixed(5, URLSAFE) + "/" + mixed(6, B64) + "=="


def _sentry_dsn() -> tuple[str, str]:
    key = mixed(32, HEX)
    return f"SENTRY_DSN=https://{key}@o{rnd(6, DIGITS)}.ingest.sentry.io/{rnd(7, DIGITS)}", key


def _webhooks() -> list[tuple[str, str, list[str]]]:
    out = []
    for _ in range(2):
        dsn, key = _sentry_dsn()
        out.append(("dsn-key", dsn, [key]))
        path = f"{mixed(8, HEX)}-{rnd(4, HEX)}@{mixed(8, HEX)}/IncomingWebhook/{mixed(32, HEX)}/{mixed(8, HEX)}"
        out.append(
            ("teams-webhook", f"https://contoso.webhook.office.com/webhookb2/{path}", [path])
        )
        hook = f"{rnd(18, DIGITS)}/{mixed(68, URLSAFE)}"
        out.append(("discord-webhook", f"https://discord.com/api/webhooks/{hook}", [hook]))
        bot = f"{rnd(10, DIGITS)}:{mixed(35, URLSAFE)}"
        out.append(("telegram-bot-token", f"curl https://api.telegram.org/bot{bot}/getMe", [bot]))
    return out


CORPUS = _corpus() + _webhooks()
KINDS = [d.kind for d in DETECTORS]


def _strings(obj: object) -> list[str]:
    """Every string in a JSON value, dict keys included."""
    if isinstance(obj, str):
        return [obj]
    if isinstance(obj, dict):
        return [s for k, v in obj.items() for s in _strings(k) + _strings(v)]
    if isinstance(obj, (list, tuple)):
        return [s for x in obj for s in _strings(x)]
    return []


def _contexts(text: str) -> dict[str, str]:
    """The secret planted in a prompt, a JSON tool input, a tool output and a file path.

    Each value is everything the sanitizer produced, joined (so an `in` check covers it).
    """
    prompt, _ = redact_text(f"Please deploy with {text} and tell me when it is done.")
    tool_input, _ = redact_obj(
        {
            "hook_event_name": "PreToolUse",
            "tool_name": "Bash",
            "tool_input": {"command": f"printf '%s' '{text}' > .env", "description": "write env"},
        }
    )
    tool_output, _ = redact_obj(
        {
            "hook_event_name": "PostToolUse",
            "tool_response": {"stdout": f"$ cat config\n{text}\nLOG_LEVEL=info\n", "stderr": ""},
        }
    )
    path, _ = redact_text(f"/home/dev/projects/demo/{text}/notes.md")
    escaped, _ = redact_text(json.dumps({"stdout": f"output:\n{text}\n"}))
    nested, _ = redact_obj({"content": json.dumps({"tool_response": {"stdout": text}})})
    return {
        "prompt": prompt,
        "tool_input": "\n".join(_strings(tool_input)),
        "tool_output": "\n".join(_strings(tool_output)),
        "file_path": path,
        "json_escaped": escaped,
        "json_in_string": "\n".join(_strings(nested)),
    }


def test_corpus_has_a_fresh_fake_for_every_rule_and_style() -> None:
    counts = {k: sum(1 for kind, _, _ in CORPUS if kind == k) for k in KINDS}
    assert all(n >= 1 for n in counts.values()), [k for k, n in counts.items() if not n]
    providers = _doc_table("Provider tokens")
    assert len(providers) >= 60
    assert all(counts.get(k, 0) >= 1 for k, *_ in providers)
    assert len(CORPUS) >= 150
    assert {k for k, _ in STYLES} <= set(KINDS)


@pytest.mark.parametrize(
    ("kind", "text", "gone"), CORPUS, ids=[f"{k}-{i}" for i, (k, _, _) in enumerate(CORPUS)]
)
def test_secret_does_not_survive_in_any_context(kind: str, text: str, gone: list[str]) -> None:
    for where, out in _contexts(text).items():
        for g in gone:
            assert g not in out, f"{kind} survived in {where}: {out[:300]!r}"
        assert f"[REDACTED:{kind}]" in out, (
            f"{where}: placeholder for {kind} missing: {out[:300]!r}"
        )


@pytest.mark.parametrize(("kind", "text", "gone"), CORPUS[::3], ids=lambda x: "")
def test_offsets_point_into_the_original_text(kind: str, text: str, gone: list[str]) -> None:
    original = f"note: {text} (end)"
    out, reds = redact_text(original)
    assert reds and all(isinstance(r, Redaction) for r in reds)
    assert out.count("[REDACTED:") == len(reds)
    for g in gone:
        assert any(r.start <= original.find(g) and original.find(g) + len(g) <= r.end for r in reds)
    rebuilt, pos = [], 0
    for r in reds:
        rebuilt += [original[pos : r.start], f"[REDACTED:{r.kind}]"]
        pos = r.end
    assert "".join(rebuilt) + original[pos:] == out


def test_assignment_keeps_the_name_and_url_keeps_scheme_user_host() -> None:
    pw = rnd(16)
    out, _ = redact_text(f"DB_PASSWORD={pw}\nDATABASE_URL=postgres://app:{pw}@db.internal:5432/app")
    assert out == (
        "DB_PASSWORD=[REDACTED:generic-secret]\n"
        "DATABASE_URL=postgres://app:[REDACTED:url-password]@db.internal:5432/app"
    )
    out, _ = redact_text(f'curl -H "Authorization: Bearer {pw}" https://api.example.com/v1')
    assert (
        out == 'curl -H "Authorization: Bearer [REDACTED:auth-header]" https://api.example.com/v1'
    )
    tok = "gh" + "s_" + rnd(36)
    out, _ = redact_text(f"git clone https://x-access-token:{tok}@github.com/org/repo.git")
    assert out == "git clone https://x-access-token:[REDACTED:github-token]@github.com/org/repo.git"


def test_tokens_glued_to_a_word_or_split_by_base64_and_dots_are_found() -> None:
    gh, aws = "gh" + "p_" + mixed(36), "AK" + "IA" + mixed(16, UPPER + DIGITS)
    bedrock = "AB" + "SK" + "Qx/" + mixed(120, ALNUM + "+")  # a "/" right after the prefix
    sg = "S" + "G." + mixed(22, URLSAFE) + "." + mixed(43, URLSAFE)
    text = f"harness=h-{gh} backup_{aws}.tar key {bedrock}\\n{sg}"
    out, reds = redact_text(text)
    assert [r.kind for r in reds] == [
        "github-token",
        "aws-access-key",
        "aws-bedrock-key",
        "sendgrid-key",
    ]
    for secret in (gh, aws, bedrock, sg):
        assert secret not in out and secret[6:30] not in out
    assert out.startswith("harness=h-[REDACTED:github-token] backup_[REDACTED:aws-access-key].tar")


# ---------------------------------------------------------------------------
# C32: a `cat .env`, a curl with a Bearer JWT, a key pasted in a prompt


def test_c32_hook_payloads() -> None:
    case = json.loads(shared_path("cases", "inputs", "C32.json").read_text(encoding="utf-8"))
    clean, n = redact_obj(case["payloads"])
    text = "\n".join(_strings(clean))
    dumped = json.dumps(clean)
    for secret in case["secret_values_that_must_not_survive"]:
        assert secret not in text and secret not in dumped, secret
    for keep in case["non_secret_text_that_must_survive"]:
        assert keep in text, keep
    assert n >= len(case["secret_values_that_must_not_survive"])
    stdout = clean[0]["tool_response"]["stdout"]
    for line in (
        "OPENAI_API_KEY=[REDACTED:openai-key]",
        "ANTHROPIC_API_KEY=[REDACTED:anthropic-key]",
        "AWS_ACCESS_KEY_ID=[REDACTED:aws-access-key]",
        "AWS_SECRET_ACCESS_KEY=[REDACTED:aws-secret-key]",
        "GITHUB_TOKEN=[REDACTED:github-token]",
        "SLACK_BOT_TOKEN=[REDACTED:slack-token]",
        "STRIPE_SECRET_KEY=[REDACTED:stripe-key]",
        "DATABASE_URL=postgres://app:[REDACTED:url-password]@db.internal:5432/app",
        "SESSION_SECRET=[REDACTED:generic-secret]",
    ):
        assert line in stdout.splitlines(), line
    assert "Authorization: Bearer [REDACTED:jwt]" in clean[1]["tool_input"]["command"]
    assert "[REDACTED:openai-key]" in clean[2]["prompt"]
    assert redact_obj(clean) == (clean, 0)  # idempotent


# ---------------------------------------------------------------------------
# look-alikes and false positives

LOOK_ALIKES = [
    "budget_tokens=1000",
    "max_tokens=",
    "max_tokens=512",
    "token_count = 3",
    "tokens: 1500",
    "TOKEN_LIMIT=4096",
    "password_reset_url = https://example.com/reset",
    "Forgot your password? Use the password reset link; never share a token.",
    "commit cc0fce3c1326d18e2bdb7020eaf4c52e885da569",
    "sha256 " + "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08",
    "id 123e4567-e89b-12d3-a456-426614174000",
    "![dot](data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg==)",
    "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOMqqnkVzrm0SdG6UOoqKLsabgH5C9okWi0dh2l9GKJl dev@laptop",
    "ssh-rsa AAAAB3NzaC1yc2EAAAADAQABAAABgQC7vbqajDhA0+Gt6ZqFNqyA9kdGSzPO3Tj4XB0ENLfTbNT3pq5W0qa1z4Lx user@host",
    "-----BEGIN PUBLIC KEY-----\nMIIBIjANBgkqhkiG9w0BAQEFAAOCAQ8AMIIBCgKCAQEAu1SU1LfVLPHCozMxH2Mo\n"
    "4lgOEePzNm0tRgeLezV6ffAt0gunVTLw7onLRnrq0/IzW7yWR7QkrmBL7jTKEn5u\n-----END PUBLIC KEY-----",
    "-----BEGIN PGP PUBLIC KEY BLOCK-----\n\nmQENBFzDc3YBCAC7vbqajDhA0Gt6ZqFNqyA9kdGSzPO3Tj4XB0ENLfTbNT3pq5W0\n"
    "-----END PGP PUBLIC KEY BLOCK-----",
    "-----BEGIN CERTIFICATE-----\nMIIDdzCCAl+gAwIBAgIEAgAAuTANBgkqhkiG9w0BAQUFADBaMQswCQYDVQQGEwJJ\n"
    "-----END CERTIFICATE-----",
    "The key file starts with -----BEGIN RSA PRIVATE KEY----- and ends with the END line.",
    "-----BEGIN PRIVATE KEY-----\n...\n-----END PRIVATE KEY-----",
    "GITHUB_TOKEN=***",
    "API_KEY=<your-token>",
    "password: ${DB_PASSWORD}",
    "token = os.environ['GITHUB_TOKEN']",
    "api_key = os.getenv('OPENAI_API_KEY')",
    "password=None",
    '{"token": null, "secret": true, "private": false}',
    "OPENAI_API_KEY=[REDACTED:openai-key]",
    "secret: {{ secrets.DEPLOY_KEY }}",
    "token: str = ''",
    "def check(password: str, token: Optional[str] = None) -> bool:",
    "api_key = settings.openai_api_key",
    "TOKEN_FILE=/run/secrets/github_token",
    "pk_live_" + "51HqLyjWDarjtT1zdp7dc",  # Stripe publishable keys are public
    "git@github.com:org/repo.git and https://github.com/org/repo",
    "https://user@example.com/path and ssh://git@host:22/repo",
    "docker login --password-stdin registry.example.com",
    "sk-learn-style-words-without-digits",
    "export PGPASSWORD",
    "credential.helper=osxkeychain",
    "docker run -u 1000:1000 -v $PWD:/src image",
    "if password == confirm_password:",
    "export GITHUB_TOKEN=$(gh auth token)",
    "NextToken: AQICAHhEXAMPLEpaginationtoken",
    # identifiers and type annotations are not secrets
    "token: AccessTokenT",
    "refresh_token: RefreshTokenT",
    "password_field = form.password",
    "def refresh(self, token: OAuthToken) -> None:",
    "private_key: Ed25519PrivateKey | None = None",
    "model = Model(password='password1')",
    "mkdir -p build && ssh -p 2222 deploy@host",
    "mysql -u root -p shop < dump.sql",
    "git clone ssh://deploy_user_2024@git.example.com/app.git",
    "sha256 4b1d" + "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a",
    "docker login -p $REGISTRY_PASSWORD registry.example.com",
    'sshpass -p "$(cat ~/.pw)" ssh host',
]


@pytest.mark.parametrize("text", LOOK_ALIKES)
def test_look_alikes_are_kept(text: str) -> None:
    assert redact_text(text) == (text, [])
    assert redact_obj({"v": text, text: 1}) == ({"v": text, text: 1}, 0)


def _fp_sources() -> list[tuple[str, str]]:
    """(where, text) for every vault note, every LoCoMo turn and the project's own
    source, hooks, tests (but this file), docs and benchmarks."""
    out: list[tuple[str, str]] = []
    vaults = shared_path("data", "vaults")
    for f in sorted(vaults.rglob("*.md")):
        out.append((str(f.relative_to(vaults)), f.read_text(encoding="utf-8", errors="replace")))
    locomo = json.loads(
        shared_path("data", "locomo", "locomo7-dev.json").read_text(encoding="utf-8")
    )
    for conv in locomo:
        for key, turns in conv["conversation"].items():
            if key.startswith("session_") and isinstance(turns, list):
                for t in turns:
                    out.append((f"locomo {conv['sample_id']} {t['dia_id']}", t["text"]))
    own = [
        *REPO.glob("wiki_memory/**/*.py"),
        *REPO.glob("hooks/*.py"),
        *REPO.glob("tests/**/*.py"),
        *REPO.glob("docs/**/*.md"),
        *REPO.glob("bench/**/*.py"),
    ]
    for f in sorted(set(own)):
        if f.name == "test_sanitize.py" or not f.is_file():
            continue
        if f.name == "gitleaks_rules.py":
            # generated data: gitleaks' allowlist names known public example keys by value
            # (Google's documented AIza... keys, a Bedrock example), which we redact anyway
            continue
        text = f.read_text(encoding="utf-8", errors="replace")
        if f.name == "sanitizer.md":
            # The detector table shows one secret-shaped example per kind on purpose
            # (test_documented_examples_are_redacted checks each); the rest is scanned.
            for ex in _doc_examples():
                text = text.replace(f"`{ex[1]}`", " " * (len(ex[1]) + 2))
        out.append((str(f.relative_to(REPO)), text))
    return out


# (file, redacted text) in the corpora above that really are secret-shaped, with the
# reason. The vaults, LoCoMo, the source and the docs hold none; only tests that plant a
# fake secret on purpose to check that it gets redacted.
_PLANTED = "a fake secret planted on purpose to check that the hook/server redacts it"
ALLOWED: dict[tuple[str, str], str] = {
    ("tests/harness/test_hooks.py", "hunter2hunter2"): f"DB_PASSWORD=hunter2hunter2: {_PLANTED}",
    (
        "tests/harness/test_hooks.py",
        "ghp_" + "FAKEexample" * 3 + "0003",
    ): f"GITHUB_TOKEN=...: {_PLANTED}",
    ("tests/server/test_server.py", "dXNlcjpwYXNz"): (
        "Authorization: Basic base64('user:pass'), a credential sent on purpose to check that "
        "the server refuses Basic auth; a Basic header value is what must be redacted"
    ),
    ("docs/handoffs.md", "wmo_fakeexamplefakeexamplefake"): (
        "the documentation stand-in for an offer code in the story of the handoff loop; the "
        "detector redacting it is what the story shows"
    ),
    ("docs/mcp.md", "wmo_fakeexamplefakeexamplefake"): (
        "the same stand-in, in the MCP side of the handoff story"
    ),
    ("tests/server/test_e2e.py", "wJalrXUtnFEMI/K7MDENG/"): (
        "AWS_SECRET = '<first half of AWS's documented example secret key>' + '...': the "
        "end-to-end test assembles a fake AWS secret to check C32, so a string literal "
        "assigned to a *_SECRET name is exactly what must be redacted"
    ),
    ("tests/harness/test_hook_lists.py", "srv.token"): (
        "WIKI_MEMORY_TOKEN=srv.token hands the hook the test server's token: in captured "
        "text, a value assigned to a *_TOKEN name is exactly what must be redacted"
    ),
}


#: (file, kind) whose every hit is a planted fake: tests that assemble a fake RSA key from
#: lines in code; gitleaks' private-key rule (64 or more characters of anything between a
#: BEGIN and an END line) takes the code between them too, as it should in captured text
ALLOWED_KINDS: dict[tuple[str, str], str] = {
    ("tests/harness/test_hooks.py", "private-key"): f"a fake RSA key built in code: {_PLANTED}",
    ("tests/server/test_e2e.py", "private-key"): f"a fake RSA key built in code: {_PLANTED}",
    ("tests/capture/test_leak_gaps.py", "auth-header"): "curl commands with a fake -H or -u"
    f" value, which the curl rules must still find: {_PLANTED}",
    ("tests/capture/test_leak_gaps.py", "generic-secret"): "the secret of a fake curl -u"
    f" tail, named on its own to check the rule finds it: {_PLANTED}",
    ("tests/capture/linear_timing.py", "auth-header"): "the curl rules' adversarial units: a"
    f" whole fake Authorization tail after -H or -u: {_PLANTED}",
    ("bench/sanitize_linear.py", "private-key"): "the linear-time bench's adversarial inputs:"
    " BEGIN and END lines as strings in code, which gitleaks' private-key rule takes with the"
    " 64 or more characters between them",
}


def test_no_false_positives_in_vaults_locomo_and_own_source() -> None:
    found = []
    for where, text in _fp_sources():
        for r in redact_text(text)[1]:
            found.append((where, r.kind, text[r.start : r.end]))
    unexpected = [
        f for f in found if (f[0], f[2]) not in ALLOWED and (f[0], f[1]) not in ALLOWED_KINDS
    ]
    for where, kind, matched in found:
        print(f"redacted in {where}: {kind}: {matched[:120]!r}")
    assert not unexpected, (
        "the sanitizer would redact these; fix a false positive in sanitize.py, or, for a "
        f"fake secret planted on purpose in a test, add it to ALLOWED with why: {unexpected}"
    )


def test_no_redaction_in_the_vaults_and_under_one_per_mb_in_real_python() -> None:
    """The two shared Obsidian vaults: no redaction at all. The Python source of the
    project's installed run-time dependencies (listed with their versions in the
    output, ``-s`` shows it): fewer than one redaction per MB."""
    vaults = shared_path("data", "vaults")
    vault_hits = []
    for f in sorted(vaults.rglob("*.md")):
        text = f.read_text(encoding="utf-8", errors="replace")
        vault_hits += [(str(f.relative_to(vaults)), r.kind) for r in redact_text(text)[1]]
    assert vault_hits == []
    size, hits, names = 0, [], []
    for dist in runtime_distributions():
        names.append(f"{dist.metadata['Name']} {dist.version}")
        for f in dist.files or ():
            path = dist.locate_file(f)
            if not str(f).endswith(".py") or not path.is_file():
                continue
            text = path.read_text(encoding="utf-8", errors="replace")
            size += len(text.encode())
            hits += [(str(f), r.kind, text[r.start : r.end]) for r in redact_text(text)[1]]
    mb = size / 1e6
    print(f"real Python source: {len(names)} distributions: {', '.join(names)}")
    print(f"{mb:.1f} MB, {len(hits)} redactions, {len(hits) / mb:.2f} per MB")
    for where, kind, matched in hits:
        print(f"  {where}: {kind}: {matched[:80]!r}")
    assert mb > 5, "too little real source installed to measure"
    assert len(hits) / mb < 1


def _doc_table(heading: str) -> list[list[str]]:
    """The rows of the table under ``### <heading>`` in docs/sanitizer.md, as cells
    (backticks kept off the first cell)."""
    doc = REPO / "docs" / "sanitizer.md"
    if not doc.exists():
        return []
    text = doc.read_text(encoding="utf-8")
    start = text.index(f"### {heading}")
    rows = []
    for line in text[start:].splitlines()[1:]:
        if line.startswith("### ") or line.startswith("## "):
            break
        m = re.match(r"^\| `([a-z0-9-]+)` \|(.*)\|$", line)
        if m:
            cells = [c.strip() for c in re.split(r"(?<!\\)\|", m.group(2))]
            rows.append([m.group(1), *cells])
    return rows


def _doc_examples() -> list[tuple[str, str]]:
    """(kind, example) from the context-rule table of docs/sanitizer.md."""
    return [(row[0], row[-1].strip("`")) for row in _doc_table("Context rules")]


def test_docs_list_every_rule_and_provider_with_its_placeholder() -> None:
    context = {k for k, _ in _doc_examples()}
    providers = [row[0] for row in _doc_table("Provider tokens")]
    assert len(providers) == len(set(providers))
    assert context | set(providers) == set(KINDS), "docs/sanitizer.md must list every rule"
    assert not context & set(providers)
    doc = (REPO / "docs" / "sanitizer.md").read_text(encoding="utf-8")
    assert f"### Provider tokens ({len(providers)} rules)" in doc


def test_documented_examples_are_redacted_with_their_kind() -> None:
    for kind, example in _doc_examples():
        out, reds = redact_text(example)
        assert f"[REDACTED:{kind}]" in out, (kind, example, out)


# ---------------------------------------------------------------------------
# idempotence, redact_obj on keys and JSON-escaped content, extra patterns


def test_idempotent_over_the_whole_corpus() -> None:
    text = "\n\n".join(t for _, t, _ in CORPUS)
    once, reds = redact_text(text)
    assert len(reds) >= len(CORPUS)
    assert redact_text(once) == (once, [])
    obj = {t: {"v": t, "l": [t, 1, None, True]} for _, t, _ in CORPUS}
    clean, n = redact_obj(obj)
    assert n > 0 and redact_obj(clean) == (clean, 0)


def test_redact_obj_keys_values_and_name_value_pairs() -> None:
    tok1, tok2 = "gh" + "p_" + rnd(36), "gh" + "p_" + rnd(36)
    pw, pw2 = rnd(12, LOWER) + "!", rnd(20)
    obj = {
        tok1: 1,
        tok2: 2,
        "nested": {
            "password": pw,  # the key names the secret; the value alone looks like a word
            "env": [{"name": "DB_PASSWORD", "value": pw2}, {"name": "LOG_LEVEL", "value": "info"}],
            "max_tokens": 4096,
            "tokens": ["alpha", "beta"],
        },
        "tuple": (tok1, 3.5),
    }
    before = json.dumps(obj, sort_keys=True, default=list)
    clean, n = redact_obj(obj)
    assert json.dumps(obj, sort_keys=True, default=list) == before  # input untouched
    assert set(clean) == {"[REDACTED:github-token]", "[REDACTED:github-token]#2", "nested", "tuple"}
    assert clean["nested"]["password"] == "[REDACTED:generic-secret]"
    assert clean["nested"]["env"] == [
        {"name": "DB_PASSWORD", "value": "[REDACTED:generic-secret]"},
        {"name": "LOG_LEVEL", "value": "info"},
    ]
    assert clean["nested"]["max_tokens"] == 4096 and clean["nested"]["tokens"] == ["alpha", "beta"]
    assert clean["tuple"] == ("[REDACTED:github-token]", 3.5)
    assert n == 5
    assert redact_obj(clean) == (clean, 0)


def test_json_escaped_pem_inside_a_string_inside_json() -> None:
    key, line = pem("RSA PRIVATE KEY")
    inner = json.dumps({"private_key": key, "note": "rotated"})  # literal \n
    outer = json.dumps({"stdout": inner})  # literal \\n inside a string inside a string
    payload = {"tool_response": {"stdout": outer}, "raw": inner, "double": json.dumps(outer)}
    clean, n = redact_obj(payload)
    text = "\n".join(_strings(clean))
    assert line not in text and "BEGIN RSA PRIVATE KEY" not in text
    assert n == 3 and "rotated" in text
    assert json.loads(json.loads(clean["tool_response"]["stdout"])["stdout"])["note"] == "rotated"


def test_json_text_in_a_string_is_parsed_for_name_value_pairs() -> None:
    # `kubectl get secret -o json`-style output: the name and the value are separate
    # strings, which no text rule can connect; redact_obj parses the JSON text.
    pw = rnd(14, LOWER + DIGITS)
    stdout = json.dumps(
        {"env": [{"name": "DB_PASSWORD", "value": pw}, {"name": "MODE", "value": "prod"}]}, indent=2
    )
    clean, n = redact_obj({"tool_response": {"stdout": stdout}})
    assert n == 1 and pw not in clean["tool_response"]["stdout"]
    env = json.loads(clean["tool_response"]["stdout"])["env"]
    assert env == [
        {"name": "DB_PASSWORD", "value": "[REDACTED:generic-secret]"},
        {"name": "MODE", "value": "prod"},
    ]


def test_extra_patterns_from_settings() -> None:
    extra = [("acme-key", r"ACME-[0-9a-f]{16}"), ("ticket-secret", r"ticket=(?P<secret>\w{8,})")]
    out, reds = redact_text("use ACME-0123456789abcdef and ticket=Zx81kq0Pw9 now", extra)
    assert out == "use [REDACTED:acme-key] and ticket=[REDACTED:ticket-secret] now"
    assert [r.kind for r in reds] == ["acme-key", "ticket-secret"]
    assert redact_text(out, extra) == (out, [])
    assert redact_obj(["ACME-0123456789abcdef"], extra) == (["[REDACTED:acme-key]"], 1)
    with pytest.raises(ValueError, match="not a valid regex"):
        redact_text("x", [("bad", "(")])
    with pytest.raises(ValueError, match="kind"):
        redact_text("x", [("no spaces allowed", "x")])
    with pytest.raises(TypeError):
        redact_text(b"bytes")  # type: ignore[arg-type]


#: The most modules importing the sanitizer may load after json (which the hook has
#: loaded already, and which loads re): 5 today, __future__, the three packages and keyscan
#: (dataclasses, with inspect and ast behind it, went when the sanitizer dropped them). A bound on the work
#: the hook pays at start, not on its time: bench/sanitize.py measures that.
SANITIZER_MAX_MODULES = 8


@pytest.mark.process
def test_import_is_stdlib_only_and_small() -> None:
    code = (
        "import sys, json; before = set(sys.modules); "
        "import wiki_memory.capture.sanitize as s; new = set(sys.modules) - before; "
        "bad = sorted(m for m in new "
        "if m.split('.')[0] not in sys.stdlib_module_names and m.split('.')[0] != 'wiki_memory'); "
        "print(json.dumps([sorted(new), bad]))"
    )
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    new, bad = json.loads(res.stdout)
    assert bad == []
    assert len(new) <= SANITIZER_MAX_MODULES, new


# A hang guard (thread method: a runaway regular expression never returns to the
# interpreter for SIGALRM), not a speed target: bench/parse.py times this input.
@pytest.mark.timeout(60, method="thread")
def test_large_payload_is_redacted() -> None:
    blob = "\n".join(t for _, t, _ in CORPUS) + ("x = 1  # filler line with a token word\n" * 40000)
    out, reds = redact_text(blob)
    assert len(reds) >= len(CORPUS)


FLAG_PW = "Fa" + "ke" + "Pw01"  # assembled: this file holds no flag with its value


@pytest.mark.parametrize(
    ("head", "kind"),
    [
        ("sshpass -p ", "cli-password"),
        ("docker login -u ci -p ", "cli-password"),
        ("mysql -p", "cli-password"),
        ("redis-cli -a ", "cli-password"),
        ("curl -u ci:", "auth-header"),
        ("curl --user=ci:", "auth-header"),
    ],
)
def test_many_password_flags_on_one_line_are_each_redacted(head: str, kind: str) -> None:
    """One long line of the same password flag (the shape that once took the flag rule
    quadratic time): every value is still found, none of the flags' words goes."""
    out, reds = redact_text((head + FLAG_PW + " ") * 2000)
    assert len(reds) == 2000
    assert out == f"{head}[REDACTED:{kind}] " * 2000


def test_a_user_part_without_a_colon_ends_no_match_later_on_the_line() -> None:
    text = "curl --user=" * 3000 + "ci:" + FLAG_PW + " and -p " + FLAG_PW + "2"
    out, _ = redact_text(text)
    assert out.endswith("ci:[REDACTED:auth-header] and -p " + FLAG_PW + "2")


@pytest.mark.parametrize("prefix", ["AKIA", "ASIA", "ABIA", "ACCA"])
def test_an_aws_key_id_of_letters_only_is_redacted(prefix: str) -> None:
    """AWS key ids are base32 (A-Z, 2-7): about one in 28 has no digit in its 16 characters,
    and such an id was kept whole because a token body had to mix letter cases or digits.
    Every context that finds a mixed id finds it; a run of X's stays (a stand-in)."""
    rng = random.Random(prefix)
    for _ in range(10):
        key = prefix + "".join(rng.choice(UPPER) for _ in range(16))
        for text in (
            f"the key {key} was rotated",
            f"AWS_ACCESS_KEY_ID={key}",
            json.dumps({"command": f"aws configure set aws_access_key_id {key}"}),
            f"tar xf backup_{key}.tar",
        ):
            out, found = redact_text(text)
            assert key not in out and "[REDACTED:aws-access-key]" in out, text
            assert [r.kind for r in found] == ["aws-access-key"], text
    assert redact_text(f"{prefix}XXXXXXXXXXXXXXXX in the docs")[1] == []


@pytest.mark.parametrize(
    "context",
    [
        "next=https%3A%2F%2Fb.s3.amazonaws.com%2Fo%3FX-Amz-Credential%3D{k}%2F20240101",
        "q=rotate%20{k}%20now",
        '{{"msg": "id \\u0022{k}\\u0022"}}',
    ],
    ids=["url-in-url", "percent-space", "json-u-escape"],
)
@pytest.mark.parametrize("letters", [False, True], ids=["mixed", "letters"])
def test_an_aws_key_id_after_an_escape_is_redacted(context: str, letters: bool) -> None:
    """A presigned URL inside another URL (``%3D`` before the id), a percent-encoded
    space, a JSON ``\\u0022`` quote: the run of token characters starts with the escape's
    hex digits, and the id after them was kept whole, mixed or not."""
    body = "QWEGRSKPZNWXHBPL" if letters else "Q3EGRSK7ZNWX4BPL"
    key = "AK" + "IA" + body
    out, found = redact_text(context.format(k=key))
    assert key not in out and "[REDACTED:aws-access-key]" in out, out
    assert "aws-access-key" in [r.kind for r in found]


@pytest.mark.parametrize(
    "text",
    [
        "the sgRNA " + "AC" + "CATGGCTTCAAGGTCGAG targets exon 2",  # a 20-nt CRISPR guide
        "primer F: " + "AC" + "CAGTTGACCTGAAGCTGA (Tm 60)",  # a 20-nt PCR primer
        "mRNA " + "AC" + "CAUGGCUUCAAGGUCGAG start",
    ],
)
def test_a_nucleotide_sequence_is_not_an_aws_key_id(text: str) -> None:
    """20 nucleotides that start with ACCA read like an AWS id of letters only; a body
    of nothing but A, C, G, T and U is a sequence (a random id is that 1 time in 10^14)."""
    assert redact_text(text) == (text, [])


def test_every_offer_code_is_redacted_letters_only_too() -> None:
    """Offer codes are ``wmo_`` + 26 base32 characters of one case: about 1 in 220 has no
    digit, and such a code was kept whole (a token had to mix two classes of characters),
    so a claim's captured output kept the code that claims the handoff once in a while."""
    from wiki_memory.core.handoffs.model import new_offer_code

    rng = random.Random(220)
    codes = [new_offer_code() for _ in range(500)]
    codes += ["wmo_" + "".join(rng.choice(LOWER) for _ in range(26)) for _ in range(20)]
    for code in codes:
        for text in (f"claimed with {code}", json.dumps({"stdout": f"code={code}\n"})):
            out, found = redact_text(text)
            assert code not in out and "wiki-memory-offer-code" in [r.kind for r in found]
