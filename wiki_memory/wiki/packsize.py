"""What a fetched pack inflates to, read before anything inflates it whole: a hub can
send a few KB that inflate to gigabytes, so the fetch sums the objects' declared sizes
and refuses the pack past ``max_fetch_bytes`` (docs/git.md, the border)."""

from __future__ import annotations

import zlib
from typing import Any

__all__ = ["PackError", "inflated_bytes"]


class PackError(ValueError):
    """The bytes are not a well-formed pack (truncated, not a pack, an object longer than
    its header says)."""


class _PackReader:
    """Sequential reads of a pack file with a buffer (what zlib did not use goes back)."""

    def __init__(self, f: Any) -> None:
        self.f = f
        self.buf = b""

    def chunk(self) -> bytes:
        out, self.buf = (self.buf or self.f.read(1 << 16)), b""
        if not out:
            raise PackError("the hub sent a truncated pack")
        return bytes(out)

    def take(self, n: int) -> bytes:
        while len(self.buf) < n:
            more = self.f.read(1 << 16)
            if not more:
                raise PackError("the hub sent a truncated pack")
            self.buf += more
        out, self.buf = self.buf[:n], self.buf[n:]
        return out


def _varint(data: bytes, i: int) -> tuple[int, int]:
    """A delta header's size (7 bits a byte, least significant first) at ``data[i]``."""
    value = shift = 0
    while True:
        if i >= len(data):
            raise PackError("the hub sent a truncated delta")
        b = data[i]
        value |= (b & 0x7F) << shift
        shift += 7
        i += 1
        if not b & 0x80:
            return value, i


def inflated_bytes(f: Any, stop: int) -> int:
    """What the pack in ``f`` inflates to: the sum of each object's size as its header
    declares it (a delta: the size of the object it makes, from the delta's own header).
    dulwich never inflates an object past its declared size, so this bounds the memory
    and time of indexing it. Read in 64 KiB pieces, inflating only up to each object's
    declared size, and stopping once the sum passes ``stop`` (returned then: before
    anything big was inflated). Raises PackError for a pack that is not one."""
    r = _PackReader(f)
    head = r.take(12)
    if head[:4] != b"PACK":
        raise PackError("the hub sent something that is not a pack")
    total = 0
    for _ in range(int.from_bytes(head[8:12], "big")):
        b = r.take(1)[0]
        kind, size, shift = (b >> 4) & 7, b & 0x0F, 4
        while b & 0x80:
            b = r.take(1)[0]
            size |= (b & 0x7F) << shift
            shift += 7
        if kind == 6:  # offset delta: its base's distance
            while r.take(1)[0] & 0x80:
                pass
        elif kind == 7:  # reference delta: its base's id
            r.take(20)
        if total + size > stop:
            return total + size
        d = zlib.decompressobj()
        got, start = 0, b""
        counted = kind not in (6, 7)
        if counted:
            total += size
        while not d.eof:
            out = d.decompress(d.unconsumed_tail or r.chunk(), 1 << 16)
            got += len(out)
            if got > size:
                raise PackError("the hub sent an object longer than its header says")
            if not counted:
                start += out[: 32 - len(start)]
                if len(start) >= 20 or d.eof:
                    target = _varint(start, _varint(start, 0)[1])[0]
                    total += size + target
                    counted = True
                    if total > stop:
                        return total
        r.buf = d.unused_data + r.buf
    return total
