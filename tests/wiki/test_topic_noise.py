"""Topic noise (docs/sessions.md, "Topic pages"): what tools print, what a harness
notifies and the wiki's own links make no topic; the same words said in a prompt or a
reply still do. Each class of noise seen in sessions of the shared hook payloads is
checked over two sessions, the least that makes a topic."""

from __future__ import annotations

import pytest

from wiki_memory.wiki.topics import Session, compile_topics, entry_topics

pytestmark = pytest.mark.fast

TOOL = (
    "**10:00:05** · tool **apply_patch** · ok\n\ninput:\n\n~~~~text\n*** Begin Patch\n"
    "*** Update File: src/upload.py\n@@ Display Path\n*** End Patch\n~~~~\n\noutput:\n\n"
    '~~~~text\n{\n "filePath": "/home/user/project/src/upload.py"\n}\n'
    "Exit code 1 ENOENT\n~~~~\n"
)
NOTIFY = "**10:00:10** · notification\n\n~~~~text\nClaude needs your permission to use Bash\n~~~~\n"
REPEAT = (
    "**10:00:15** · prompt · repeated\n\n"
    "same prompt as [[projects/hooks/sessions/2023-11-14-e0c1f73f.md#^t2]]\n"
)


def topics_of(*entries: str) -> dict[str, str]:
    """Name -> kind of the topics two sessions holding ``entries`` give."""
    sessions = [
        Session(f"projects/p/sessions/2023-11-1{d}-s.md", f"2023-11-1{d}", [], f"2023-11-1{d}")
        for d in (4, 5)
    ]
    for s in sessions:
        s.entries = [(f"t{i}", text) for i, text in enumerate(entries, start=1)]
    return {t.name: t.kind for t in compile_topics(sessions)}


def prompt(text: str) -> str:
    return f"**10:00:00** · prompt\n\n~~~~text\n{text}\n~~~~\n"


def test_a_tools_input_and_output_give_files_tools_and_error_codes_but_no_names() -> None:
    found = topics_of(TOOL)
    assert found.get("src/upload.py") == "file" and found.get("apply_patch") == "tool"
    assert found.get("ENOENT") == "error"
    for noise in ("Begin Patch", "End Patch", "Update File", "Display", "Path"):
        assert noise not in found, noise
    assert not {k for k, v in found.items() if v == "phrase"}, found  # home user, exit code


def test_the_same_words_said_in_a_prompt_still_make_topics() -> None:
    found = topics_of(prompt("I asked Display Path about the exit code of the Begin Patch run"))
    assert found.get("Display Path") == "name" and found.get("Begin Patch") == "name"
    assert found.get("exit code") == "phrase"


def test_a_notification_gives_no_topic() -> None:
    assert topics_of(NOTIFY) == {}
    assert entry_topics(NOTIFY) == {}


def test_a_link_to_a_page_of_the_wiki_is_no_file_topic() -> None:
    assert topics_of(REPEAT) == {}
    # a path written in a prompt, no link, is one
    said = prompt("see projects/hooks/sessions/2023-11-14-e0c1f73f.md")
    assert "projects/hooks/sessions/2023-11-14-e0c1f73f.md" in topics_of(said)
