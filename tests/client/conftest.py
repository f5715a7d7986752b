"""The client against a real server: `gangplank serve` in a subprocess on a free loopback port, over
its own PostgreSQL database (created and dropped as tests/e2e does), so requests cross a real socket.

- `server`: the base URL, one server per session.
- `cluster`: a cluster of its own for each test (tests share the server, never a stream).
"""
from __future__ import annotations

import asyncio
import hashlib
import os
import re
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from service.store.migrate import upgrade
from service.store.testing import temporary_postgres_database

ROOT = Path(__file__).resolve().parents[2]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def start_server(database_url: str, port: int) -> subprocess.Popen[bytes]:
    proc = subprocess.Popen([sys.executable, "-m", "service", "serve", "--port", str(port),
                             "--database-url", database_url, "--no-migrate"],
                            cwd=ROOT, env={**os.environ, "GANGPLANK_TOKENS": ""},
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"gangplank serve exited: {proc.stderr.read().decode() if proc.stderr else ''}")
        try:
            if httpx.get(f"http://127.0.0.1:{port}/readyz", timeout=1).status_code == 200:
                return proc
        except httpx.TransportError:
            pass
        time.sleep(0.1)
    proc.kill()
    raise RuntimeError("gangplank serve did not become ready in 30 s")


def stop_server(proc: subprocess.Popen[bytes]) -> None:
    proc.terminate()
    try:
        proc.wait(10)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


@pytest.fixture(scope="session")
def database_url() -> Iterator[str]:
    """A database of its own, made in a loop of its own (the session's loop is pytest-asyncio's)."""
    loop = asyncio.new_event_loop()
    cm = temporary_postgres_database("gp_client")
    url = loop.run_until_complete(cm.__aenter__())
    loop.run_until_complete(upgrade(url))
    try:
        yield url
    finally:
        loop.run_until_complete(cm.__aexit__(None, None, None))
        loop.close()


@pytest.fixture(scope="session")
def server(database_url: str) -> Iterator[str]:
    port = free_port()
    proc = start_server(database_url, port)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        stop_server(proc)


@pytest.fixture
def cluster(request: pytest.FixtureRequest) -> str:
    slug = re.sub(r"[^a-z0-9]+", "-", request.node.name.lower()).strip("-")[:40].strip("-")
    return f"{slug}-{hashlib.sha256(request.node.nodeid.encode()).hexdigest()[:8]}"
