"""``wiki-memory serve --open`` opens the web view in the user's browser (docs/web.md):
the server process itself, with ``BROWSER`` pointing at a script that notes the URL."""

from __future__ import annotations

import sys

import pytest
from serverproc import ServerProcess
from support import wait_for

pytestmark = pytest.mark.process


def test_serve_open_opens_the_view(tmp_path):
    data = tmp_path / "data"
    opened = tmp_path / "opened.txt"
    script = tmp_path / "browser.py"
    script.write_text(
        f"import sys, pathlib\npathlib.Path({str(opened)!r}).write_text(sys.argv[1])\n"
    )
    srv = ServerProcess(
        data, args=["--open"], env={"BROWSER": f"{sys.executable} {script} %s", "DISPLAY": ""}
    ).start()
    try:
        wait_for(opened.exists, timeout=20)
        assert opened.read_text() == srv.url + "/"
    finally:
        srv.stop()
