"""What one compile changed on a session page, for its commit message
(:class:`SessionChange`; :mod:`wiki_memory.core.sessions` makes them)."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["SessionChange", "page_stem"]


def page_stem(rel: str) -> str:
    """A page's file name without its folder and ``.md``."""
    return rel.rsplit("/", 1)[-1].removesuffix(".md")


@dataclass(frozen=True)
class SessionChange:
    """What one compile changed on a session page, for its commit message line
    (:meth:`message`); two compiles committed together sum up (:meth:`plus`)."""

    key: str  # the page's path
    title: str
    harness: str
    added: bool  # the page was first written
    turns: int  # prompts and Codex turns added
    events: int  # observations added
    ended: bool  # this compile ended the session

    def plus(self, later: SessionChange) -> SessionChange:
        """This change followed by ``later`` (same page), as one."""
        return SessionChange(
            self.key,
            later.title,
            later.harness,
            self.added or later.added,
            self.turns + later.turns,
            self.events + later.events,
            self.ended or later.ended,
        )

    def message(self) -> str:
        """``Add session <page name> (<harness>)`` for a page first written, else
        ``Session <page name>: +N turns`` (``+N events`` when no turn was added), with
        ``, ended`` when the session ended. The page's file name, never its title: a
        commit message names paths and counts only (a title is a first prompt)."""
        short = page_stem(self.key)
        if self.added:
            msg = f"Add session {short} ({self.harness})"
        elif self.turns:
            msg = f"Session {short}: +{self.turns} turn" + ("s" if self.turns != 1 else "")
        else:
            msg = f"Session {short}: +{self.events} event" + ("s" if self.events != 1 else "")
        return msg + (", ended" if self.ended else "")
