"""One error table for every face: HTTP statuses, MCP tool errors and CLI exit codes
come from ``wiki_memory.errors.TABLE``; ``/v1`` answers JSON for every error, the web
view HTML."""

from __future__ import annotations

import re

import pytest
from appkit import AppServer, http
from support import REPO

from wiki_memory import errors
from wiki_memory.cli.common import CliError, server_error
from wiki_memory.errors import TABLE, exit_status, rule_for
from wiki_memory.wiki.git import GitBusy
from wiki_memory.wiki.paths import PathRefused


@pytest.fixture(scope="module")
def srv(tmp_path_factory):
    d = tmp_path_factory.mktemp("errors") / "data"
    s = AppServer(d)  # the app in this process: these are the routes' answers
    s.start()
    yield s
    s.stop()


def auth(srv) -> dict[str, str]:
    return dict(srv.headers)


def test_v1_answers_json_for_unknown_routes_and_wrong_methods(srv):
    h = auth(srv)
    client = http(srv)
    r = client.get(srv.url + "/v1/no-such-route", headers=h)
    assert r.status_code == 404
    assert r.headers["content-type"].startswith("application/json")
    assert r.json()["error"] == "not_found"
    r = client.post(srv.url + "/v1/pages", headers=h)  # GET only
    assert r.status_code == 405
    assert r.headers["content-type"].startswith("application/json")
    assert r.json()["error"] == "method_not_allowed"
    assert "GET" in r.headers.get("allow", "")
    r = client.delete(srv.url + "/v1/recall", headers=h)
    assert (r.status_code, r.json()["error"]) == (405, "method_not_allowed")
    # the web view keeps its HTML pages
    r = client.get(srv.url + "/no-such-page", headers=h)
    assert r.status_code == 404 and r.headers["content-type"].startswith("text/html")
    r = client.post(srv.url + "/pages", headers=h)
    assert r.status_code == 405 and r.headers["content-type"].startswith("text/html")


def test_http_statuses_follow_the_table(srv):
    h = auth(srv)
    client = http(srv)
    cases = [
        (client.post(srv.url + "/v1/recall", headers=h, content=b"{"), "bad_json"),
        (client.post(srv.url + "/v1/recall", headers=h, json={"budget_tokens": -1}), None),
        (client.get(srv.url + "/v1/pages/a/../b.md", headers=h), None),
        (client.get(srv.url + "/v1/pages/nope.md", headers=h), "not_found"),
        (client.get(srv.url + "/v1/pages", headers={"Authorization": "Bearer x"}), None),
    ]
    for r, code in cases:
        body = r.json()
        assert set(body) >= {"error", "message"}, body
        if code is not None:
            assert body["error"] == code
        want = TABLE[body["error"]].status if body["error"] in TABLE else None
        assert r.status_code == want, (r.status_code, body)


def test_every_error_class_has_a_row_and_statuses_agree():
    for cls in (
        errors.BadRequest,
        errors.BadPath,
        errors.Unauthorized,
        errors.Forbidden,
        errors.NotFound,
        errors.MethodNotAllowed,
        errors.StateConflict,
        errors.PreconditionRequired,
        errors.TooLarge,
        errors.Unavailable,
    ):
        assert cls.code in TABLE, cls
    assert rule_for(errors.Conflict("x")).status == 412
    assert rule_for(PathRefused("x")).status == 400
    busy = GitBusy(3)
    assert (rule_for(busy).status, busy.headers["Retry-After"]) == (503, "3")
    assert rule_for(ValueError("x")).status == 500  # outside the hierarchy: a bug


def test_one_error_idiom():
    """Every error a face answers is a typed error: a subclass of
    :class:`errors.WikiMemoryError` whose class names its code, a row of the table. No
    class picks its code per instance (the old ``ApiError(status, code, ...)`` did)."""
    import importlib
    import pkgutil

    import wiki_memory

    for mod in pkgutil.walk_packages(wiki_memory.__path__, "wiki_memory."):
        if mod.name.endswith(("cli_mcp", "__main__")) or "._" in mod.name:
            continue
        importlib.import_module(mod.name)
    seen, todo = [], [errors.WikiMemoryError]
    while todo:
        cls = todo.pop()
        seen.append(cls)
        todo.extend(cls.__subclasses__())
    assert len(seen) > 15
    for cls in seen:
        assert cls.code in TABLE, (cls.__module__, cls.__name__, cls.code)
        if cls is not errors.WikiMemoryError:
            assert "error_code" not in vars(cls), f"{cls.__name__} picks its code per instance"
    assert not [
        p.name
        for p in (REPO / "wiki_memory").rglob("*.py")
        if re.search(r"\bApiError\b", p.read_text(encoding="utf-8"))
    ]


class _Resp:
    def __init__(self, status: int, body: object) -> None:
        self.status_code = status
        self._body = body
        self.text = str(body)

    def json(self) -> object:
        if isinstance(self._body, Exception):
            raise self._body
        return self._body


def test_cli_exit_status_comes_from_the_table():
    for code, rule in TABLE.items():
        err = server_error(_Resp(rule.status, {"error": code, "message": "m"}))
        assert isinstance(err, CliError) and err.code == rule.exit, code
    # a handoff's own state codes fall back to their status's row
    assert server_error(_Resp(409, {"error": "claimed", "message": "m"})).code == 3
    assert server_error(_Resp(502, ValueError("not json"))).code == 1
    assert exit_status("not_found") == 4
