"""The guard's reads of a connection, on a real socket (wiki_memory/server/guard.py):
each read asks for less than the size glibc maps on its own, and a body of several reads
arrives whole."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
import uvicorn
from uvicorn.server import ServerState

from wiki_memory.server.guard import MMAP_THRESHOLD, READ_CHUNK, Guard, protocol_class

pytestmark = pytest.mark.process


def head(length: int) -> bytes:
    return f"PUT /x HTTP/1.1\r\nHost: a\r\nContent-Length: {length}\r\n\r\n".encode()


def test_a_connection_reads_in_chunks_below_the_mmap_threshold_and_gets_big_bodies_whole() -> None:
    # a real socket on a real loop: each read of a connection asks for less than the
    # size glibc is told to map on its own (guard.MMAP_THRESHOLD), and a body of several
    # reads still arrives whole
    sizes: list[int] = []

    async def echo_size(scope: Any, receive: Any, send: Any) -> None:
        got = 0
        more = True
        while more:
            msg = await receive()
            got += len(msg.get("body", b""))
            more = msg.get("more_body", False)
        answer = str(got).encode()
        length = [(b"content-length", str(len(answer)).encode())]
        await send({"type": "http.response.start", "status": 200, "headers": length})
        await send({"type": "http.response.body", "body": answer})

    async def main() -> bytes:
        loop = asyncio.get_running_loop()
        config = uvicorn.Config(echo_size, log_level="critical", lifespan="off")
        config.load()
        cls = protocol_class(Guard(10, 128))

        def made() -> Any:
            proto = cls(config=config, server_state=ServerState(), app_state={}, _loop=loop)
            real = proto.connection_made

            def connection_made(transport: Any) -> None:
                real(transport)
                sizes.append(transport.max_size)

            proto.connection_made = connection_made
            return proto

        server = await loop.create_server(made, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        body = b"x" * (3 * READ_CHUNK + 17)
        writer.write(head(len(body)).replace(b"Host: a", b"Host: a\r\nConnection: close"))
        writer.write(body)
        await writer.drain()
        reply = await asyncio.wait_for(reader.read(), 10)
        writer.close()
        server.close()
        await server.wait_closed()
        return reply

    reply = asyncio.run(main())
    assert reply.startswith(b"HTTP/1.1 200") and reply.endswith(str(3 * READ_CHUNK + 17).encode())
    assert sizes and all(0 < s <= READ_CHUNK < MMAP_THRESHOLD for s in sizes)
