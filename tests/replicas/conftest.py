"""Replicas as an operator runs them: `gangplank serve` processes on one PostgreSQL database.

- `pg_url` (session): a migrated temporary database (service.store.testing); tests use cluster
  names of their own.
- `Replica`: one `python -m service serve` subprocess on a free loopback port (`start`, `ready`,
  `kill` with SIGKILL, `stop`), its log in the test's tmp_path (printed when a test fails).
- `RoundRobin`: the load balancer: each request goes to the next live replica; a request whose
  connection fails is sent again, with the same Idempotency-Key, to the next one.
- `lock_holders`: the PostgreSQL backends of a process that hold an advisory lock (found through
  the process's TCP sockets: its connections' client ports).
"""
from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import asyncpg
import httpx
import pytest_asyncio

from service.kafka.testing import free_port
from service.store.migrate import upgrade
from service.store.testing import temporary_postgres_database

ROOT = Path(__file__).resolve().parents[2]


@pytest_asyncio.fixture(scope="session")
async def pg_url() -> AsyncIterator[str]:
    async with temporary_postgres_database("gp_replicas") as url:
        await upgrade(url)
        yield url


def libpq(url: str) -> str:
    return url.replace("postgresql+asyncpg://", "postgresql://", 1)


@dataclass
class Replica:
    index: int
    url: str
    log_path: Path
    args: list[str] = field(default_factory=list)
    env: dict[str, str] = field(default_factory=dict)
    port: int = 0
    proc: subprocess.Popen[bytes] | None = None
    alive: bool = False

    def start(self) -> Replica:
        self.port = self.port or free_port()
        env = {k: v for k, v in os.environ.items() if not k.startswith("GANGPLANK_")} | self.env
        with open(self.log_path, "ab") as log:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "service", "serve", "--port", str(self.port), "--database-url", self.url,
                 "--no-migrate", *self.args], cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT)
        self.alive = True
        return self

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    async def ready(self, timeout: float = 60, kafka: bool | None = None) -> None:
        deadline = time.monotonic() + timeout
        async with httpx.AsyncClient(base_url=self.base, timeout=2) as client:
            while time.monotonic() < deadline:
                assert self.proc is not None and self.proc.poll() is None, f"replica {self.index} exited"
                try:
                    answer = await client.get("/readyz")
                    if answer.status_code == 200 and (kafka is None or answer.json()["checks"].get("kafka") is kafka):
                        return
                except httpx.HTTPError:
                    pass
                await asyncio.sleep(0.1)
        raise AssertionError(f"replica {self.index} not ready within {timeout} s")

    def kill(self) -> None:
        assert self.proc is not None
        self.proc.send_signal(signal.SIGKILL)
        self.alive = False
        self.proc.wait(10)

    def stop(self) -> None:
        self.alive = False
        if self.proc is None or self.proc.poll() is not None:
            return
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(20)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()

    def log_tail(self, chars: int = 4000) -> str:
        return self.log_path.read_text(errors="replace")[-chars:] if self.log_path.exists() else ""


@dataclass
class Answer:
    status: int
    body: Any
    started: float  # time.monotonic() of the first try
    waited: float
    replicas: list[int]  # the replicas it was sent to, in order


class RoundRobin:
    """Round robin over the live replicas, as a load balancer with retries does."""

    def __init__(self, replicas: list[Replica]) -> None:
        self.replicas = replicas
        self.turn = 0
        self.clients: dict[int, httpx.AsyncClient] = {}

    async def request(self, method: str, path: str, *, json: Any = None, key: str | None = None) -> Answer:
        start = time.monotonic()
        tried: list[int] = []
        headers = {"Idempotency-Key": key} if key else {}
        for _ in range(30):
            live = [r for r in self.replicas if r.alive]
            assert live, "no replica left"
            replica = live[self.turn % len(live)]
            self.turn += 1
            tried.append(replica.index)
            client = self.clients.get(replica.index)
            if client is None:
                client = self.clients[replica.index] = httpx.AsyncClient(base_url=replica.base, timeout=30)
            try:
                answer = await client.request(method, path, json=json, headers=headers)
            except httpx.TransportError:
                await asyncio.sleep(0.01)
                continue
            if answer.status_code == 503:
                await asyncio.sleep(0.05)
                continue
            return Answer(answer.status_code, answer.json(), start, time.monotonic() - start, tried)
        raise AssertionError(f"{method} {path}: no replica answered (tried {tried})")

    async def close(self) -> None:
        for client in self.clients.values():
            await client.aclose()


def client_ports(pid: int) -> set[int]:
    """Local TCP ports of a process's sockets (Linux /proc)."""
    inodes = set()
    for fd in Path(f"/proc/{pid}/fd").iterdir():
        try:
            target = os.readlink(fd)
        except OSError:
            continue
        if target.startswith("socket:["):
            inodes.add(target[8:-1])
    ports = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in Path(table).read_text().splitlines()[1:]:
            parts = line.split()
            if parts[9] in inodes:
                ports.add(int(parts[1].rsplit(":", 1)[1], 16))
    return ports


async def lock_holders(url: str, pid: int) -> list[int]:
    """PostgreSQL backends of process `pid` that hold a granted advisory lock."""
    ports = list(client_ports(pid))
    conn = await asyncpg.connect(libpq(url))
    try:
        rows = await conn.fetch(
            "SELECT DISTINCT l.pid FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid"
            " WHERE l.locktype = 'advisory' AND l.granted AND a.client_port = ANY($1::int[])", ports)
    finally:
        await conn.close()
    return [r[0] for r in rows]


async def backends_alive(url: str, pids: list[int]) -> list[int]:
    conn = await asyncpg.connect(libpq(url))
    try:
        rows = await conn.fetch("SELECT pid FROM pg_stat_activity WHERE pid = ANY($1::int[])", pids)
    finally:
        await conn.close()
    return [r[0] for r in rows]
