"""The sha256 of a large page is remembered (a compile asks for it several times): the
digest must be the page's own whatever was asked before, for the same object, equal bytes
read again, and other bytes of the same length."""

from __future__ import annotations

import hashlib

from wiki_memory.plainfile import forget_hashes, page_hash


def sha(b: bytes) -> str:
    return hashlib.sha256(b).hexdigest()


def test_large_pages_get_their_own_digest_whatever_was_asked_before() -> None:
    forget_hashes()
    size = 600_000
    pages = [b"---\nupdated: %d\n---\n" % i + b"x" * size for i in range(6)]  # one length
    for p in pages:
        assert page_hash(p) == sha(p)
    for p in pages[::-1]:  # the same objects, then equal bytes read again, then a bytearray
        assert page_hash(p) == sha(p)
        assert page_hash(bytes(bytearray(p))) == sha(p)
        assert page_hash(bytearray(p)) == sha(p)  # type: ignore[arg-type]
    changed = pages[0][:-1] + b"y"  # differs at its last byte only
    assert page_hash(changed) == sha(changed)
    assert page_hash(pages[0]) == sha(pages[0])
