"""The package list in pyproject.toml is written by hand (the hook program ships from
``hooks/`` as ``wiki_memory._hooks``): every package folder must be in it, or a built
wheel lacks it and the installed server cannot start."""

from __future__ import annotations

import tomllib

from support import REPO


def test_every_package_folder_is_listed_for_the_build():
    conf = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))
    listed = set(conf["tool"]["setuptools"]["packages"])
    found = {
        ".".join(p.parent.relative_to(REPO).parts)
        for p in (REPO / "wiki_memory").rglob("__init__.py")
        if "__pycache__" not in p.parts
    }
    assert found - listed == set()
    assert "wiki_memory._hooks" in listed
