"""One write cannot freeze the server: the right to write is decided before a body is
scanned, and a long body is scanned off the event loop (DESIGN.md invariant 13).

A real server, a team of two: a reader of project ``atlas`` and a member with a write
grant there. Each sends, for every rule of the sanitizer, a 1 MiB page made of that
rule's worst input repeated on one line (``WORST``), while a second client asks
``/v1/health`` every 100 ms. Every health answer must come within 1 s. The reader's
PUTs are refused without a scan; the member's are scanned (in a worker thread) and
written.

``PUT /v1/pages/{path}`` takes the path in its URL, so the server decides from the
request's head and answers the reader without reading the body. A client sends its whole
body before it reads the answer, so the honest measure is from the moment the body has
been sent: the refusal must be there within 50 ms of it (it is often there before). That
nothing was scanned shows in the server's CPU time: a 1 MiB scan of these inputs costs
it 0.1-0.3 s (30 s or more for the password-flag lines before the rule was made linear),
a refusal a few milliseconds.
"""

from __future__ import annotations

import http.client
import threading
import time
from pathlib import Path

import pytest
from serverproc import ServerProcess
from teamkit import make_token

from wiki_memory.capture.sanitize import DETECTORS

pytestmark = [pytest.mark.serial, pytest.mark.process]

OWNER = "olivia"
ENV = {"USER": OWNER, "LOGNAME": OWNER}
MIB = 1024 * 1024
#: the page's path: the same project for both callers
PAGE = "/v1/pages/projects/atlas/notes/flood-{i}.md"

#: the worst inputs bench/sanitize_linear.py found for the context rules (the first
#: five took 24 s or more per MiB before the password-flag rule was made linear), and
#: for the provider tokens whose pattern has no prefix; pieces are joined so that this
#: file holds nothing the sanitizer would take for a secret
CONTEXT: list[tuple[str, str]] = [
    ("cli-password", "sshpass -p x "),
    ("cli-password", " -p"),
    ("cli-password", "mysql -px "),
    ("cli-password", "docker login -p x "),
    ("auth-header", "--user="),
    ("auth-header", "--user=a:"),
    ("auth-header", "Authorization: " + "Bearer "),
    ("generic-secret", "--password="),
    ("generic-secret", "password: |\n"),
    ("private-key", "-----BEGIN RSA " + "PRIVATE KEY-----\\n"),
    ("gcp-service-account-key", '{"type": "service_account", "private_' + 'key": "'),
    ("aws-secret-key", "aws_secret_access_" + "key="),
    ("azure-storage-key", "Account" + "Key="),
    ("azure-ad-client-secret", "a1Q~"),
    ("azure-sas-token", "&sig="),
    ("slack-webhook", "https://hooks.slack.com/services/"),
    ("teams-webhook", "/webhookb2/"),
    ("discord-webhook", "https://discord.com/api/webhooks/"),
    ("telegram-bot-token", "https://api.telegram.org/bot1"),
    ("url-password", "a://b:"),
    ("dsn-key", "https://0123456789abcdef"),
    ("terraform-token", ".atlasv1." + "aA1" * 4),
    ("maxmind-key", "_mmk"),
    ("mailchimp-key", "-us" + "aA1" * 4),
    ("authress-key", ".acc"),
]


def worst_inputs() -> list[tuple[str, str]]:
    """(rule, unit) for every rule of the sanitizer: :data:`CONTEXT`, and for each
    provider token its first prefix with a short mixed body and a space, the shape that
    costs those rules most (bench/sanitize_linear.py)."""
    out = list(CONTEXT)
    named = {kind for kind, _ in CONTEXT}
    for d in DETECTORS:
        if d.kind in named:
            continue
        named.add(d.kind)
        assert d.prefixes, f"{d.kind}: no worst input for this rule"
        out.append((d.kind, d.prefixes[0] + "aA1" * 4 + " "))
    return out


def page_of(unit: str) -> bytes:
    return (unit * (MIB // len(unit) + 1)).encode("ascii")[:MIB]


def server_cpu(pid: int) -> float:
    """The server process's CPU time (user + system), in seconds."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / 100  # utime, stime in clock ticks


class HealthPoller:
    """Asks ``/v1/health`` every 100 ms from a thread; ``times`` holds each answer's
    latency in seconds (a failed request counts as infinitely late)."""

    def __init__(self, port: int) -> None:
        self.port = port
        self.times: list[float] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=10)
        while not self._stop.is_set():
            t = time.monotonic()
            try:
                conn.request("GET", "/v1/health")
                resp = conn.getresponse()
                resp.read()
                ok = resp.status == 200
            except OSError:
                ok = False
                conn.close()
                conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=10)
            took = time.monotonic() - t
            self.times.append(took if ok else float("inf"))
            self._stop.wait(max(0.0, 0.1 - took))
        conn.close()

    def __enter__(self) -> HealthPoller:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(15)


def put(conn: http.client.HTTPConnection, path: str, token: str, body: bytes) -> tuple[int, float]:
    """PUT ``body``; the status and the seconds from the body's last byte sent to the
    answer's head read."""
    conn.putrequest("PUT", path)
    conn.putheader("Authorization", f"Bearer {token}")
    conn.putheader("Content-Type", "text/markdown")
    conn.putheader("Content-Length", str(len(body)))
    conn.endheaders()
    conn.send(body)
    sent = time.monotonic()
    resp = conn.getresponse()
    took = time.monotonic() - sent
    resp.read()
    return resp.status, took


@pytest.fixture(scope="module")
def team(tmp_path_factory: pytest.TempPathFactory) -> object:
    data = tmp_path_factory.mktemp("flood") / "data"
    notes = data / "wiki" / "projects" / "atlas" / "notes"
    notes.mkdir(parents=True)
    (notes / "intro.md").write_text("# atlas\n\natlas notes\n")
    reader = make_token(data, "rita", "reader", "atlas", here=True)
    member = make_token(data, "mo", None, "atlas", here=True)
    srv = ServerProcess(data, env=ENV).start()
    try:
        yield srv, reader, member
    finally:
        srv.stop()


def test_a_reader_flooding_page_writes_is_refused_unscanned_and_health_stays_quick(
    team: tuple[ServerProcess, str, str],
) -> None:
    srv, reader, _member = team
    assert srv.proc is not None
    cases = worst_inputs()
    refusals: list[tuple[str, int, float, float]] = []
    conn = http.client.HTTPConnection("127.0.0.1", srv.port, timeout=120)
    with HealthPoller(srv.port) as health:
        for i, (rule, unit) in enumerate(cases):
            body = page_of(unit)
            cpu = server_cpu(srv.proc.pid)
            status, took = put(conn, PAGE.format(i=i), reader, body)
            refusals.append((rule, status, took, server_cpu(srv.proc.pid) - cpu))
    conn.close()
    assert {s for _, s, _, _ in refusals} == {403}, refusals
    slow = [(r, t) for r, _, t, _ in refusals if t > 0.05]
    assert not slow, f"refusals later than 50 ms after the body: {slow}"
    # a scan of any of these bodies costs the server 0.1 s or more of CPU; the refusal,
    # with the body read and dropped, a few milliseconds (the clock ticks are 10 ms)
    cpu_each = sorted(c for *_, c in refusals)
    assert cpu_each[len(cpu_each) // 2] <= 0.03, refusals
    assert sum(cpu_each) <= 0.05 * len(cases), refusals
    # the refusals take well under a second in all, so there are only a few answers
    assert health.times and max(health.times) <= 1.0, health.times


def test_a_member_writing_the_worst_pages_is_answered_and_health_stays_quick(
    team: tuple[ServerProcess, str, str],
) -> None:
    srv, _reader, member = team
    cases = worst_inputs()
    answers: list[tuple[str, int, float]] = []
    conn = http.client.HTTPConnection("127.0.0.1", srv.port, timeout=120)
    with HealthPoller(srv.port) as health:
        for i, (rule, unit) in enumerate(cases):
            status, took = put(conn, PAGE.format(i=1000 + i), member, page_of(unit))
            answers.append((rule, status, took))
    conn.close()
    assert {s for _, s, _ in answers} == {201}, answers
    assert len(health.times) >= 5 and max(health.times) <= 1.0, (
        sorted(health.times)[-5:],
        answers,
    )
