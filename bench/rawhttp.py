"""A lean HTTP/1.1 keep-alive client for load generation.

httpx costs ~3 ms of CPU per request, as much as the server being measured, on the
same two cores. This client writes the request bytes and reads one response
(Content-Length bodies only, which is all the service sends), nothing more.
"""
from __future__ import annotations

import asyncio
import json
from typing import Any


class Connection:
    def __init__(self, host: str, port: int) -> None:
        self.host, self.port = host, port
        self.reader: asyncio.StreamReader | None = None
        self.writer: asyncio.StreamWriter | None = None

    async def _open(self) -> None:
        self.reader, self.writer = await asyncio.open_connection(self.host, self.port)

    async def request(self, method: str, path: str, body: Any = None,
                      headers: dict[str, str] | None = None) -> tuple[int, bytes]:
        """One request; a connection lost before the answer raises ConnectionError."""
        if self.writer is None:
            await self._open()
        assert self.reader is not None and self.writer is not None
        payload = b"" if body is None else json.dumps(body, separators=(",", ":")).encode()
        head = [f"{method} {path} HTTP/1.1", f"Host: {self.host}", f"Content-Length: {len(payload)}"]
        if body is not None:
            head.append("Content-Type: application/json")
        for k, v in (headers or {}).items():
            head.append(f"{k}: {v}")
        try:
            self.writer.write(("\r\n".join(head) + "\r\n\r\n").encode() + payload)
            status_line = await self.reader.readuntil(b"\r\n")
            length = 0
            while True:
                line = await self.reader.readuntil(b"\r\n")
                if line == b"\r\n":
                    break
                name, _, value = line.partition(b":")
                if name.strip().lower() == b"content-length":
                    length = int(value)
            data = await self.reader.readexactly(length) if length else b""
        except (asyncio.IncompleteReadError, ConnectionError, OSError) as exc:
            self.close()
            raise ConnectionError(str(exc)) from exc
        return int(status_line.split(b" ", 2)[1]), data

    def close(self) -> None:
        if self.writer is not None:
            self.writer.close()
        self.reader = self.writer = None
