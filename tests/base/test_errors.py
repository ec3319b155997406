"""One error table for every face: HTTP statuses, MCP tool errors and CLI exit codes
come from ``wiki_memory.errors.TABLE``; ``/v1`` answers JSON for every error, the web
view HTML."""

from __future__ import annotations

import re

import httpx
import pytest
from serverproc import ServerProcess
from support import REPO

from wiki_memory import errors
from wiki_memory.cli.common import CliError, server_error
from wiki_memory.errors import TABLE, exit_status, rule_for
from wiki_memory.wiki.git import GitBusy
from wiki_memory.wiki.paths import PathRefused


@pytest.fixture(scope="module")
def srv(tmp_path_factory):
    d = tmp_path_factory.mktemp("errors") / "data"
    s = ServerProcess(d)
    s.start()
    yield s
    s.stop()


def auth(srv) -> dict[str, str]:
    return dict(srv.headers)


@pytest.mark.process
def test_v1_answers_json_for_unknown_routes_and_wrong_methods(srv):
    h = auth(srv)
    r = httpx.get(srv.url + "/v1/no-such-route", headers=h)
    assert r.status_code == 404
    assert r.headers["content-type"].startswith("application/json")
    assert r.json()["error"] == "not_found"
    r = httpx.post(srv.url + "/v1/pages", headers=h)  # GET only
    assert r.status_code == 405
    assert r.headers["content-type"].startswith("application/json")
    assert r.json()["error"] == "method_not_allowed"
    assert "GET" in r.headers.get("allow", "")
    r = httpx.delete(srv.url + "/v1/recall", headers=h)
    assert (r.status_code, r.json()["error"]) == (405, "method_not_allowed")
    # the web view keeps its HTML pages
    r = httpx.get(srv.url + "/no-such-page", headers=h)
    assert r.status_code == 404 and r.headers["content-type"].startswith("text/html")
    r = httpx.post(srv.url + "/pages", headers=h)
    assert r.status_code == 405 and r.headers["content-type"].startswith("text/html")


@pytest.mark.process
def test_http_statuses_follow_the_table(srv):
    h = auth(srv)
    cases = [
        (httpx.post(srv.url + "/v1/recall", headers=h, content=b"{"), "bad_json"),
        (httpx.post(srv.url + "/v1/recall", headers=h, json={"budget_tokens": -1}), None),
        (httpx.get(srv.url + "/v1/pages/a/../b.md", headers=h), None),
        (httpx.get(srv.url + "/v1/pages/nope.md", headers=h), "not_found"),
        (httpx.get(srv.url + "/v1/pages", headers={"Authorization": "Bearer x"}), None),
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


def test_every_api_error_raise_site_agrees_with_the_table():
    """``ApiError(status, code, ...)`` states its status for the reader; the table sends
    it. A raise site that states another status than the table would mislead."""
    found = 0
    for path in (REPO / "wiki_memory").rglob("*.py"):
        text = path.read_text(encoding="utf-8")
        for m in re.finditer(r'ApiError\(\s*(\d{3}),\s*"([a-z_]+)"', text):
            found += 1
            status, code = int(m.group(1)), m.group(2)
            assert code in TABLE, (path.name, code)
            assert TABLE[code].status == status, (path.name, status, code)
    assert found > 5


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
