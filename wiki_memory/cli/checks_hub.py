"""doctor's ``hub_leaks`` check (registered in ``cli/doctor.py``): the commits of each
remote's branch, as last fetched (no network), that hold personal content or a purged
version (:func:`wiki_memory.wiki.hubleaks.hub_leaks`), and the cleanup that replaces
them, ``wiki-memory sync --rewrite-hub NAME --yes`` (docs/operations.md)."""

from __future__ import annotations

from typing import Any

__all__ = ["check_hub_leaks"]


def check_hub_leaks(ctx: Any) -> None:
    """Report key ``hub_leaks``: remote -> ``{"commits" (how many), "first" (up to five
    ``{"commit", "reasons", "files"}``, newest first)}`` for every remote whose fetched
    branch holds a leak; one error per such remote naming the fix. Paths are never
    named (they may be the personal content)."""
    from dulwich.objects import Commit
    from dulwich.refs import Ref
    from dulwich.repo import Repo

    from wiki_memory.core.syncguard import load_tombstones
    from wiki_memory.wiki import replicate as rp
    from wiki_memory.wiki.hubleaks import hub_leaks

    wiki = ctx.settings.wiki_dir
    if not (wiki / ".git").is_dir():
        return
    remotes = rp.list_remotes(wiki)
    if not remotes:
        return
    purged = load_tombstones(wiki).blobs
    found: dict[str, Any] = {}
    with Repo(str(wiki)) as repo:
        for name in sorted(remotes):
            prefix = Ref(f"refs/remotes/{name}".encode())
            leaks: dict[str, Any] = {}
            for _ref, sha in sorted(repo.refs.as_dict(prefix).items()):
                try:
                    if not isinstance(repo.get_object(sha), Commit):
                        continue
                except KeyError:
                    continue
                for leak in hub_leaks(repo, sha, set(purged)):
                    leaks.setdefault(leak.commit, leak)
            if not leaks:
                continue
            ordered = list(leaks.values())
            found[name] = {
                "commits": len(ordered),
                "first": [
                    {"commit": x.commit, "reasons": x.reasons, "files": x.files}
                    for x in ordered[:5]
                ],
            }
            kinds = sorted({r for x in ordered for r in x.reasons})
            ctx.error(
                f"hub {name} ({remotes[name]}) holds {len(ordered)} commit(s) with what "
                f"should never have left a server ({'; '.join(kinds)}), newest "
                f"{ordered[0].commit[:12]}: replace them, then run gc on the hub if it is "
                "hosted",
                f"wiki-memory sync --rewrite-hub {name} --yes",
            )
    ctx.rep["hub_leaks"] = found
