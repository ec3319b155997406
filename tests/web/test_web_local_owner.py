"""The web view's local-owner flag (``WIKI_MEMORY_WEB_LOCAL_OWNER``), with the app in
process: a loopback visitor is the owner without signing in, a request naming another
host is refused, and the API still needs its token."""

from __future__ import annotations

from appkit import AppServer, http


def test_local_owner_flag(tmp_path):
    data = tmp_path / "data"
    (data / "wiki").mkdir(parents=True)
    (data / "wiki" / "a.md").write_text("# A\n")
    # off by default: test_web.py::test_every_route_needs_sign_in
    with AppServer(data, env={"WIKI_MEMORY_WEB_LOCAL_OWNER": "1", "USER": "olivia"}) as on:
        r = http(on).get(on.url + "/")
        assert r.status_code == 200 and "olivia" in r.text
        # a page that reached us through DNS rebinding names another host: not let in
        # (allowed hosts answer 421 on every route, the web view included)
        r = http(on).get(on.url + "/", headers={"Host": "evil.example"})
        assert r.status_code == 421 and "olivia" not in r.text
        # the API still needs its token
        assert http(on).get(on.url + "/v1/pages").status_code == 401
