"""``doctor``'s repository check (docs/hooks.md, "A project is its repository"): each
binding of repository ids to a project folder (``repo_id`` in ``projects/<p>/index.md``,
undone by removing the keys by hand), projects that share a display name (two
repositories of one folder name), one repository split across two projects, and forks
(the same root commit under another origin). Nothing is merged automatically: the
findings carry the manual steps."""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from wiki_memory.cli.doctor import Context
from wiki_memory.core.repos import frontmatter_of, ids_of

JOIN_STEPS = (
    "to join them by hand: stop the server, `git mv` the pages of projects/{b}/ into "
    "projects/{a}/, add {b}'s repo_id values to the repo_id list of projects/{a}/index.md, "
    "remove projects/{b}/, commit, and grant {a} to whoever held {b}"
)


def check_repos(ctx: Context) -> None:
    """The repository bindings of the wiki's projects and what looks wrong in them."""
    root = ctx.settings.wiki_dir / "projects"
    rows: list[dict[str, Any]] = []
    try:
        folders = sorted(p for p in root.iterdir() if p.is_dir() and not p.name.startswith("."))
    except OSError:
        folders = []
    for folder in folders:
        try:
            meta = frontmatter_of((folder / "index.md").read_bytes())
        except OSError:
            continue
        ids = ids_of(meta)
        if not ids:
            continue
        rows.append(
            {
                "project": folder.name,
                "repo_ids": ids,
                "display": str(meta.get("display") or folder.name),
                "origin": meta.get("repo_origin"),
                "forks": [f for f in meta.get("repo_forks") or [] if isinstance(f, str)],
            }
        )
    ctx.rep["repos"] = rows
    for r in rows:
        origin = f" (origin {r['origin']})" if r["origin"] else ""
        ctx.info(  # a healthy binding: how to undo it is part of the line, not a fix
            f"project {r['project']}: repository {', '.join(r['repo_ids'])}{origin} "
            f"(to unbind it, remove repo_id from projects/{r['project']}/index.md)"
        )
        for fork in r["forks"]:
            ctx.info(
                f"project {r['project']}: a fork ({fork}) shares its root commit and is filed "
                "in the same project",
                "to keep it apart, name a project in the fork's .wiki-memory.toml",
            )
    by_name: dict[str, list[str]] = defaultdict(list)
    for r in rows:
        by_name[r["display"].casefold()].append(r["project"])
    for name, projects in sorted(by_name.items()):
        if len(projects) > 1:
            a, b = sorted(projects)[:2]
            ctx.warn(
                f"projects {' and '.join(sorted(projects))} share the display name {name!r}: "
                "different repositories, kept apart",
                "if they are one repository, " + JOIN_STEPS.format(a=a, b=b),
            )
    seen: dict[str, str] = {}
    for r in rows:
        for key in [*r["repo_ids"], *([f"origin:{r['origin']}"] if r["origin"] else [])]:
            other = seen.setdefault(key, r["project"])
            if other != r["project"]:
                ctx.warn(
                    f"one repository ({key}) is split across projects {other} and {r['project']}",
                    JOIN_STEPS.format(a=other, b=r["project"]),
                )
