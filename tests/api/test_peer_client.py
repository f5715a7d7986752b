"""The forwarding client's two failures (service/api/peer_client.py): a request that was never sent is
`Refused` (the forwarder may retry it anywhere), one lost after sending is `Lost`."""
from __future__ import annotations

import asyncio
import time

import pytest

from service.api import peer_client as pc


class _ClosedWriter:
    """A kept connection whose transport the owner closed: uvloop raises on write."""

    def __init__(self) -> None:
        self.closed = False

    def is_closing(self) -> bool:
        return False  # not yet seen as closing when it is taken from the pool

    def write(self, data: bytes) -> None:
        raise RuntimeError("unable to perform operation on <TCPTransport closed=True>; the handler is closed")

    def close(self) -> None:
        self.closed = True


async def test_a_kept_connection_closed_under_the_write_is_refused_not_an_error() -> None:
    client = pc.PeerClient()
    writer = _ClosedWriter()
    conn = pc._Conn(asyncio.StreamReader(), writer)  # type: ignore[arg-type]
    conn.used = time.monotonic()
    client._idle[("127.0.0.1", 9)] = [conn]
    with pytest.raises(pc.Refused):
        await client.request("http://127.0.0.1:9", "DELETE", "/v1/x", [], b"")
    assert writer.closed
    assert client._idle[("127.0.0.1", 9)] == []


async def test_a_connection_lost_after_sending_is_lost() -> None:
    async def answer_nothing(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.readuntil(b"\r\n\r\n")
        writer.close()

    server = await asyncio.start_server(answer_nothing, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    try:
        with pytest.raises(pc.Lost):
            await pc.PeerClient().request(f"http://127.0.0.1:{port}", "POST", "/v1/x", [], b"{}")
    finally:
        server.close()
        await server.wait_closed()
