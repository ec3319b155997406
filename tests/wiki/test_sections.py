"""Sections by heading and the splices of precise edits (wiki_memory/wiki/sections.py):
headings in code, comments and the frontmatter are not sections, a section holds its
subsections, an ambiguous name needs its parent, and appends land after the section's
last line, before the blank lines and the next heading."""

from __future__ import annotations

import pytest

from wiki_memory.errors import BadRequest
from wiki_memory.wiki.sections import (
    append_text,
    find_section,
    insert_item,
    replace_body,
    section_hash,
    sections,
)

PAGE = """---
title: Plan
# a YAML comment, not a heading
---
# Plan

## Risks

- outage

### Notes
a note

## Other

```
## inside a fence
```

<!--
## inside a comment
-->

### Risks
other risks
"""


def test_headings_outside_code_comments_and_frontmatter_only() -> None:
    titles = [(s.level, s.title, s.parents) for s in sections(PAGE)]
    assert titles == [
        (1, "Plan", ()),
        (2, "Risks", ("Plan",)),
        (3, "Notes", ("Plan", "Risks")),
        (2, "Other", ("Plan",)),
        (3, "Risks", ("Plan", "Other")),
    ]


def test_an_ambiguous_name_needs_its_parent_and_an_unknown_one_lists_headings() -> None:
    with pytest.raises(BadRequest, match="2 sections are named 'risks'"):
        find_section(PAGE, "risks")
    sec = find_section(PAGE, "Other#Risks")
    assert PAGE[sec.start : sec.end] == "### Risks\nother risks\n"
    with pytest.raises(BadRequest, match="its headings: Plan, Risks, Notes, Other, Risks"):
        find_section(PAGE, "Nope")


def test_append_goes_after_the_last_line_of_the_section_and_its_subsections() -> None:
    out = append_text(PAGE, "- second", "Plan#Risks")
    assert "### Notes\na note\n- second\n\n## Other" in out
    assert append_text("no newline", "x") == "no newline\nx\n"
    assert append_text("# A\n## B\n", "x", "A") == "# A\n## B\nx\n"
    assert append_text("# A\n## B\n", "x", "B") == "# A\n## B\nx\n"
    assert append_text("# A\n\n# C\n", "x", "A") == "# A\nx\n\n# C\n"


def test_checklist_item_after_the_last_item_else_at_the_end() -> None:
    page = "# T\n- [ ] one\n- [x] two\n\ntext\n# U\n"
    assert (
        insert_item(page, "three", "T") == "# T\n- [ ] one\n- [x] two\n- [ ] three\n\ntext\n# U\n"
    )
    assert insert_item(page, "- [x] done", "U") == page + "- [x] done\n"


def test_replace_body_keeps_the_heading_and_checks_the_hash() -> None:
    sec = find_section(PAGE, "Notes")
    h = section_hash(PAGE, sec)
    same, before = replace_body(PAGE, "Notes", "new", "0" * 64)
    assert same == PAGE and before == h
    out, _ = replace_body(PAGE, "Notes", "new", h)
    assert "### Notes\nnew\n\n## Other" in out
