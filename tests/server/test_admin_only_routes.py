"""The admin-only routes of unrendered events refuse a member before reading anything,
naming the grant it lacks; the owner is answered."""

from __future__ import annotations

from appkit import AppServer


def test_unrendered_routes_are_the_owners_and_admins(tmp_path):
    with AppServer(tmp_path / "data") as srv:
        member = {"Authorization": f"Bearer {srv.token_for('mo', role='member')}"}
        r = srv.get("/v1/admin/unrendered", headers=member)
        assert r.status_code == 403 and r.json()["grant"] == "admin", r.text
        r = srv.post("/v1/admin/unrendered/discard", {"session": "abcdefgh"}, headers=member)
        assert r.status_code == 403 and r.json()["grant"] == "admin", r.text
        assert srv.get("/v1/admin/unrendered").status_code == 200
