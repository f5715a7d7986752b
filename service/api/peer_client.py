"""A lean HTTP/1.1 client for requests forwarded to an owner (service/api/forwarding.py): kept-alive
connections per owner, the request written as bytes, one answer read (a Content-Length or chunked
body). A general client (httpx) costs several times the CPU of the request it carries; forwarding is
on the hot path of every replica but the owner.

    answer = await peers.request("http://10.0.0.5:8000", "POST", "/v1/...", headers, body)

Refused, or a kept connection found closed when the request is written, raises `Refused` (the request
was never sent); a connection lost after sending raises
`Lost` (the outcome is unknown). An idle connection is reused only while younger than IDLE_SECONDS,
well below uvicorn's keep-alive timeout (5 s), so the owner does not close it under a request.
"""
from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass
from urllib.parse import urlsplit

IDLE_SECONDS = 2.0
MAX_IDLE_PER_PEER = 64


class Refused(ConnectionError):
    """The owner could not be connected to: nothing was sent."""


class Lost(ConnectionError):
    """The connection failed after the request was sent: its outcome is unknown."""


@dataclass
class Answer:
    status: int
    headers: list[tuple[bytes, bytes]]  # names lower-cased
    body: bytes

    def header(self, name: bytes) -> bytes | None:
        return next((v for k, v in self.headers if k == name), None)


class _Conn:
    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader, self.writer = reader, writer
        self.used = time.monotonic()

    def close(self) -> None:
        self.writer.close()


class PeerClient:
    def __init__(self, connect_timeout: float = 1.0) -> None:
        self.connect_timeout = connect_timeout
        self._idle: dict[tuple[str, int], list[_Conn]] = {}

    async def _connection(self, host: str, port: int) -> _Conn:
        idle = self._idle.get((host, port), [])
        while idle:
            conn = idle.pop()
            if time.monotonic() - conn.used < IDLE_SECONDS and not conn.writer.is_closing():
                return conn
            conn.close()
        try:
            reader, writer = await asyncio.wait_for(asyncio.open_connection(host, port), self.connect_timeout)
        except (OSError, TimeoutError) as exc:
            raise Refused(f"{host}:{port}: {exc}") from exc
        return _Conn(reader, writer)

    async def request(self, base: str, method: str, target: str, headers: list[tuple[str, str]],
                      body: bytes) -> Answer:
        url = urlsplit(base)
        host, port = url.hostname or "127.0.0.1", url.port or 80
        conn = await self._connection(host, port)
        head = [f"{method} {target} HTTP/1.1", f"host: {url.netloc}", f"content-length: {len(body)}"]
        head += [f"{k}: {v}" for k, v in headers]
        try:  # a kept connection the owner closed fails here, before anything is sent (uvloop: RuntimeError)
            conn.writer.write(("\r\n".join(head) + "\r\n\r\n").encode("latin-1") + body)
        except (OSError, RuntimeError) as exc:
            conn.close()
            raise Refused(f"{host}:{port}: {type(exc).__name__}: {exc}") from exc
        try:
            answer, keep = await _read(conn.reader)
        except (OSError, asyncio.IncompleteReadError, ValueError, asyncio.LimitOverrunError) as exc:
            conn.close()
            raise Lost(f"{host}:{port}: {type(exc).__name__}: {exc}") from exc
        except BaseException:  # cancelled while waiting: the connection's state is unknown
            conn.close()
            raise
        if keep:
            conn.used = time.monotonic()
            pool = self._idle.setdefault((host, port), [])
            if len(pool) < MAX_IDLE_PER_PEER:
                pool.append(conn)
                return answer
        conn.close()
        return answer

    async def close(self) -> None:
        for pool in self._idle.values():
            for conn in pool:
                conn.close()
        self._idle.clear()


async def _read(reader: asyncio.StreamReader) -> tuple[Answer, bool]:
    status_line = await reader.readuntil(b"\r\n")
    parts = status_line.split(b" ", 2)
    if len(parts) < 2 or not parts[0].startswith(b"HTTP/1."):
        raise ValueError(f"not an HTTP answer: {status_line[:60]!r}")
    status = int(parts[1])
    headers: list[tuple[bytes, bytes]] = []
    while True:
        line = await reader.readuntil(b"\r\n")
        if line == b"\r\n":
            break
        name, _, value = line.partition(b":")
        headers.append((name.strip().lower(), value.strip()))
    values = dict(headers)
    if values.get(b"transfer-encoding", b"").lower() == b"chunked":
        chunks = []
        while True:
            size = int((await reader.readuntil(b"\r\n")).split(b";", 1)[0], 16)
            data = await reader.readexactly(size + 2)
            if size == 0:
                break
            chunks.append(data[:-2])
        body = b"".join(chunks)
    else:
        body = await reader.readexactly(int(values.get(b"content-length", b"0")))
    keep = values.get(b"connection", b"").lower() != b"close"
    return Answer(status, headers, body), keep
