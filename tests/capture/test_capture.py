"""Capture: validating hook events and the durable spool with durable dedup."""

from __future__ import annotations

import threading

import pytest

from wiki_memory.capture.observation import ObservationError, parse_event, project_name
from wiki_memory.capture.spool import Spool


def ev(n: int, **kw):
    base = {
        "harness": "claude-code",
        "event": "UserPromptSubmit",
        "session_id": "s1",
        "cwd": "/home/u/proj",
        "event_id": f"e{n}",
        "payload": {"prompt": f"prompt {n}"},
    }
    base.update(kw)
    return base


def test_missing_fields_are_named():
    with pytest.raises(ObservationError) as e:
        parse_event({"event": "Stop", "session_id": "s", "cwd": "/x"}, "u")
    assert e.value.field == "harness"
    with pytest.raises(ObservationError) as e:
        parse_event({"harness": "h", "event": "Stop", "session_id": "s"}, "u")
    assert e.value.field == "cwd"
    with pytest.raises(ObservationError) as e:
        parse_event({"harness": "h", "event": "Stop", "cwd": "/x"}, "u")
    assert e.value.field == "session_id"
    with pytest.raises(ObservationError) as e:
        parse_event(ev(1, ts="yesterday"), "u")
    assert e.value.field == "ts"


def test_fields_fall_back_to_the_payload_and_unknown_events_are_kept():
    o = parse_event(
        {
            "harness": "claude-code",
            "payload": {"hook_event_name": "WorktreeCreate", "session_id": "abc", "cwd": "/p/x"},
        },
        "u",
    )
    assert (o.event, o.kind, o.session_id, o.cwd) == ("WorktreeCreate", "other", "abc", "/p/x")


def test_project_names_are_one_safe_path_component():
    assert project_name("/home/u/my proj/") == "my-proj"
    assert project_name("../../etc") == "etc"
    with pytest.raises(ObservationError):
        project_name("/")


def test_spool_is_durable_and_dedup_survives_restart_and_cleanup(tmp_path):
    sp = Spool(tmp_path)
    acc = sp.append([parse_event(ev(1), "alice"), parse_event(ev(2), "alice")])
    assert [a.duplicate for a in acc] == [False, False]
    again = sp.append([parse_event(ev(1), "alice")])
    assert again[0].duplicate and again[0].obs_id == acc[0].obs_id
    sp.close()

    sp2 = Spool(tmp_path)
    key = acc[0].session_key
    assert [o.payload["prompt"] for o in sp2.observations(key)] == ["prompt 1", "prompt 2"]
    assert sp2.append([parse_event(ev(2), "alice")])[0].duplicate
    # the page is committed and the session ended long ago: the spool file goes, dedup stays
    sp2.write_state(key, {"status": "ended", "committed_count": 2, "ended_at": 0})
    assert sp2.cleanup(keep_seconds=10, now=1000) == [key]
    assert not (tmp_path / f"{key}.jsonl").exists()
    sp2.close()
    sp3 = Spool(tmp_path)
    assert sp3.append([parse_event(ev(1), "alice")])[0].duplicate
    # the same event id from another user is a different event
    assert not sp3.append([parse_event(ev(1), "bob")])[0].duplicate


def test_dedup_keys_survive_a_crash_that_took_the_seen_logs_tail(tmp_path):
    # an append fsyncs the session file (whose lines carry their dedup keys), not the
    # seen-events log: a crash may take the log's unsynced tail
    sp = Spool(tmp_path)
    acc = sp.append([parse_event(ev(1), "alice"), parse_event(ev(2), "alice")])
    key = acc[0].session_key
    (tmp_path / "seen-events.log").write_bytes(b"")  # the tail the crash took
    sp2 = Spool(tmp_path)  # no close(): the first process died
    assert sp2.append([parse_event(ev(1), "alice")])[0].duplicate
    # the session file goes after its page is committed: its keys must outlive it
    sp2.write_state(key, {"status": "ended", "committed_count": 2, "ended_at": 0})
    assert sp2.cleanup(keep_seconds=10, now=1000) == [key]
    assert not (tmp_path / f"{key}.jsonl").exists()
    sp3 = Spool(tmp_path)
    assert [a.duplicate for a in sp3.append([parse_event(ev(2), "alice")])] == [True]
    assert sp3.append([parse_event(ev(1), "alice")])[0].obs_id == acc[0].obs_id
    # a crash that cut the log's last line short: the next key still gets a line of its own
    new = sp3.append([parse_event(ev(3), "alice")])[0]
    with open(tmp_path / "seen-events.log", "ab") as f:
        f.write(b"0123456789abcdef")
    sp4 = Spool(tmp_path)
    sp4.append([parse_event(ev(4), "alice")])
    # its session file goes too: the key must be found in the log alone
    sp4.write_state(new.session_key, {"status": "ended", "committed_count": 9, "ended_at": 0})
    assert sp4.cleanup(keep_seconds=10, now=1000) == [new.session_key]
    sp5 = Spool(tmp_path)
    assert sp5.append([parse_event(ev(4), "alice")])[0].duplicate
    assert sp5.append([parse_event(ev(3), "alice")])[0].obs_id == new.obs_id


def test_project_is_fixed_by_the_first_event(tmp_path):
    sp = Spool(tmp_path)
    a = sp.append([parse_event(ev(1, project="alpha"), "u")])[0]
    sp.append([parse_event(ev(2, project="beta", cwd="/x/beta"), "u")])
    assert sp.sessions[a.session_key].project == "alpha"
    assert {o.project for o in sp.observations(a.session_key)} == {"alpha"}


def test_torn_last_line_is_ignored(tmp_path):
    sp = Spool(tmp_path)
    a = sp.append([parse_event(ev(1), "u")])[0]
    sp.close()
    with open(tmp_path / f"{a.session_key}.jsonl", "ab") as f:
        f.write(b'{"obs_id": "half')
    sp2 = Spool(tmp_path)
    assert len(sp2.observations(a.session_key)) == 1
    assert sp2.append([parse_event(ev(3), "u")])[0].obs_id.endswith("-2")


def test_concurrent_appends_lose_nothing_and_share_fsyncs(tmp_path, monkeypatch):
    import os

    calls = {"n": 0}
    real = os.fsync

    def counting(fd):
        calls["n"] += 1
        return real(fd)

    monkeypatch.setattr(os, "fsync", counting)
    sp = Spool(tmp_path)

    def worker(t: int) -> None:
        for i in range(50):
            sp.append([parse_event(ev(t * 1000 + i, session_id=f"s{t}"), "u")])

    threads = [threading.Thread(target=worker, args=(t,)) for t in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    total = sum(len(sp.observations(k)) for k in sp.sessions)
    assert total == 400
    # every append fsyncs before returning, yet concurrent appends share syncs
    assert calls["n"] < 400 * 2
    sp.close()  # the log takes the keys in batches (each is durable in its spool line)
    seen = (tmp_path / "seen-events.log").read_text().split()
    assert len(seen) == 800  # key and observation id per accepted event


def test_a_failed_fsync_of_one_of_several_files_is_never_counted_as_synced(tmp_path, monkeypatch):
    # a group's session files are fsynced side by side; one that fails makes the sync
    # fail (nothing acknowledged), and what it covered is taken back for good: after a
    # failed fsync the kernel may drop the pages and report the next fsync as a success
    import os

    sp = Spool(tmp_path)
    _, target = sp.write([parse_event(ev(i, session_id=f"s{i}"), "u") for i in range(4)])
    files = {fd: key for key, fd in sp._fds.items()}
    bad = sorted(files)[2]
    real = os.fsync
    synced: list[int] = []
    lock = threading.Lock()

    def failing(fd):
        if fd == bad:
            raise OSError(5, "Input/output error")
        with lock:
            synced.append(fd)
        return real(fd)

    monkeypatch.setattr(os, "fsync", failing)
    with pytest.raises(OSError):
        sp.sync_to(target)
    assert not sp.synced(target)
    assert sorted(synced) == sorted(set(files) - {bad})
    monkeypatch.setattr(os, "fsync", real)
    with pytest.raises(OSError):
        sp.sync_to(target)  # refused for good, never acknowledged later
    assert (tmp_path / f"{files[bad]}.jsonl").stat().st_size == 0
    assert files[bad] not in sp.sessions
    # the failed file's event, sent again, is a new event and is fsynced
    acc = sp.append([parse_event(ev(2, session_id="s2"), "u")])
    assert not acc[0].duplicate
    assert [o.event_id for o in sp.observations(acc[0].session_key)] == ["e2"]
    sp.close()


def test_out_of_range_times_are_refused_before_anything_is_stored(tmp_path):
    for bad in (
        1e300,
        float("inf"),
        float("nan"),
        1e20,
        -1e11,
        -5,
        "9999-12-31T23:59:59-14:00",
        "0001-01-01",
        "yesterday",
    ):
        with pytest.raises(ObservationError) as e:
            parse_event(ev(1, ts=bad), "u")
        assert e.value.field == "ts"
    ok = parse_event(ev(1, ts="2026-11-30T10:00:00+02:00"), "u")
    assert ok.ts == 1796025600.0
    assert parse_event(ev(2, ts=1796025600000), "u").ts == 1796025600.0  # milliseconds
