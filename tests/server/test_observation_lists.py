"""``POST /v1/observations`` with a list (docs/api.md): each item is judged on its own, a
refused item gets its own status in its place while the rest are accepted, and what was
accepted is durable (a ``kill -9`` right after the reply loses none of it)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
import pytest
from appkit import AppServer, http
from serverproc import ServerProcess

# tiers per test: the ones that need a real server process are marked process


def ev(i: int, marker: str, **over: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "harness": "claude-code",
        "event": "UserPromptSubmit",
        "session_id": "list-s1",
        "cwd": "/home/dev/listproj",
        "project": "listproj",
        "event_id": f"list-{i}",
        "payload": {"prompt": f"prompt {marker}"},
    }
    base.update(over)
    return base


def spool_bytes(data: Path) -> bytes:
    return b"".join(p.read_bytes() for p in sorted((data / "spool").iterdir()) if p.is_file())


@pytest.mark.process
def test_a_bad_item_is_refused_alone_and_the_accepted_ones_survive_kill_9(tmp_path: Path) -> None:
    data = tmp_path / "data"
    batch = [
        ev(1, "quokkaone"),
        ev(2, "wombatbad", payload=["not", "an", "object"]),
        ev(3, "quokkathree"),
        ev(4, "wombatbadid", session_id="no spaces allowed"),
        ev(1, "quokkaone"),  # the same event_id again: a duplicate, accepted
    ]
    s = ServerProcess(data).start()
    try:
        r = s.post("/v1/observations", batch)
        assert r.status_code == 207, r.text
        body = r.json()
        assert body["refused"] == 2
        items = body["accepted"]
        assert [i["status"] for i in items] == [202, 400, 202, 400, 202]
        assert [i.get("duplicate") for i in items] == [False, None, False, None, True]
        assert items[0]["id"] == items[4]["id"]
        assert items[1]["error"] == "bad_request" and items[1]["field"] == "payload"
        assert items[3]["error"] == "bad_request" and items[3]["field"] == "session_id"
        assert "id" not in items[1] and "id" not in items[3]
        # accepted items are searchable at once; refused ones were never stored
        found = s.post("/v1/recall", {"query": "quokkathree", "budget_tokens": 2000}).json()
        assert found["total"] >= 1
    finally:
        s.kill()
    stored = spool_bytes(data)
    assert b"quokkaone" in stored and b"quokkathree" in stored
    assert b"wombatbad" not in stored
    s2 = ServerProcess(data, port=s.port).start()
    try:
        # accepted before the kill: on disk, so both are duplicates now
        again = s2.post("/v1/observations", [ev(1, "quokkaone"), ev(3, "quokkathree")])
        assert again.status_code == 202, again.text
        assert [i["duplicate"] for i in again.json()["accepted"]] == [True, True]
        assert again.json()["refused"] == 0
        # a fixed copy of a refused item is new (nothing of it was kept)
        fixed = s2.post("/v1/observations", [ev(2, "wombatfixed")])
        assert fixed.json()["accepted"][0]["duplicate"] is False
        # a list whose every item is refused: 207, nothing stored
        bad = s2.post("/v1/observations", [ev(9, "x", payload=1), ev(10, "x", harness=3)])
        assert bad.status_code == 207
        assert [i["status"] for i in bad.json()["accepted"]] == [400, 400]
        # what still refuses the whole list: empty, too long, not JSON
        assert s2.post("/v1/observations", []).status_code == 400
        many = [ev(100 + i, "m") for i in range(1001)]
        r = s2.post("/v1/observations", many)
        assert r.status_code == 400 and r.json()["field"] == "body"
        assert b"list-1000" not in spool_bytes(data)
        # a single bad event keeps its plain error answer
        one = s2.post("/v1/observations", ev(11, "x", payload=[1]))
        assert one.status_code == 400 and one.json()["field"] == "payload"
    finally:
        s2.stop()


def test_a_refused_project_refuses_only_its_own_items(tmp_path: Path) -> None:
    data = tmp_path / "data"
    note = data / "wiki" / "projects" / "atlas" / "notes" / "rates.md"
    note.parent.mkdir(parents=True)
    note.write_text("---\ntitle: Rates\n---\n# Rates\n\nper day\n")
    with AppServer(data) as s:
        mo = s.token_for("mo", None, ("alpha",))
        batch = [
            ev(1, "alphaword", project="alpha", session_id="m1"),
            ev(2, "atlasword", project="atlas", session_id="m2"),
            ev(3, "alphaword2", project="alpha", session_id="m1"),
        ]
        r = http(s).post(
            s.url + "/v1/observations",
            json=batch,
            headers={"Authorization": f"Bearer {mo}"},
            timeout=60,
        )
        assert r.status_code == 207, r.text
        items = r.json()["accepted"]
        assert [i["status"] for i in items] == [202, 404, 202]
        # mo may not read atlas: the answer a hidden project gets alone
        assert items[1]["error"] == "capture_refused" and items[1]["project"] == "atlas"
        stored = spool_bytes(data)
        assert b"alphaword2" in stored and b"atlasword" not in stored


@pytest.mark.serial  # asserts a time bound
def test_a_large_observation_does_not_hold_up_other_requests(tmp_path: Path) -> None:
    """Sanitizing a large observation takes a while (about 0.5 s for 0.9 MB of "password=abc"): it runs on
    a capture thread, so a health check sent meanwhile is answered long before it ends
    (relative to the capture's own time, whatever the machine's load)."""
    import threading
    import time

    s = ServerProcess(tmp_path / "data").start()
    big = "password=abc " * 70_000  # 0.9 MB that the sanitizer must read through
    capture_s: list[float] = []
    codes: list[int] = []
    health_s: list[float] = []
    done = threading.Event()

    def send() -> None:
        try:
            with httpx.Client(base_url=s.url, headers=s.headers, timeout=120) as c:
                for i in range(4):
                    t = time.perf_counter()
                    r = c.post("/v1/observations", json=ev(100 + i, "big", payload={"prompt": big}))
                    capture_s.append(time.perf_counter() - t)
                    codes.append(r.status_code)
        finally:
            done.set()

    try:
        sender = threading.Thread(target=send)
        sender.start()
        with httpx.Client(base_url=s.url, timeout=120) as c:
            while not done.is_set():
                t = time.perf_counter()
                assert c.get("/v1/health").status_code == 200
                health_s.append(time.perf_counter() - t)
                time.sleep(0.02)
        sender.join()
        assert codes == [202] * 4 and health_s
        slowest_capture = sorted(capture_s)[len(capture_s) // 2]
        assert max(health_s) < 0.5 * slowest_capture, (health_s, capture_s)
    finally:
        s.kill()
