"""A PostgreSQL restart under concurrent submissions answers 503, never 500, and loses nothing
that was acknowledged (replicas.md deliverable: "a database restart answers 503").

This test runs its OWN PostgreSQL server (initdb + pg_ctl from /usr/lib/postgresql/*/bin, in a
temporary directory, on a free loopback port, as the `postgres` user when run as root) and
restarts that one. It never touches the shared server at 127.0.0.1:5432: other test runs use it
at the same time, and restarting it would break them. Skipped when no PostgreSQL binaries are
installed.
"""
from __future__ import annotations

import asyncio
import glob
import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from service.kafka.testing import free_port
from service.store.migrate import upgrade
from tests.e2e.helpers import workload
from tests.replicas.conftest import Replica

BINARIES = sorted(glob.glob("/usr/lib/postgresql/*/bin"))
CLUSTER = "restart"


class OwnPostgres:
    """A throw-away PostgreSQL server of this test: started, stopped and started again at will."""

    def __init__(self) -> None:
        self.bin = Path(BINARIES[-1])
        self.dir = Path(tempfile.mkdtemp(prefix="gp-own-pg-"))
        self.port = free_port()
        self.as_postgres = ["runuser", "-u", "postgres", "--"] if os.geteuid() == 0 else []
        if self.as_postgres:
            shutil.chown(self.dir, "postgres", "postgres")
        self.url = f"postgresql+asyncpg://postgres@127.0.0.1:{self.port}/postgres"

    def _run(self, *args: str) -> None:
        subprocess.run([*self.as_postgres, *args], check=True, capture_output=True, timeout=60)

    def init(self) -> None:
        self._run(str(self.bin / "initdb"), "-D", str(self.dir / "data"), "-A", "trust", "-U", "postgres",
                  "-E", "UTF8", "--no-sync")

    def start(self) -> None:
        # fsync off: an immediate stop keeps the WAL in the page cache (never synchronous_commit=off,
        # which would lose acknowledged commits at an immediate stop)
        options = f"-p {self.port} -c listen_addresses=127.0.0.1 -k {self.dir} -c fsync=off"
        self._run(str(self.bin / "pg_ctl"), "-D", str(self.dir / "data"), "-l", str(self.dir / "log"), "-o", options,
                  "-w", "start")

    def stop(self, mode: str = "fast") -> None:
        self._run(str(self.bin / "pg_ctl"), "-D", str(self.dir / "data"), "-m", mode, "-w", "stop")

    def remove(self) -> None:
        try:
            self.stop("immediate")
        except subprocess.CalledProcessError:
            pass  # not running
        shutil.rmtree(self.dir, ignore_errors=True)


@pytest.fixture
def own_postgres() -> Iterator[OwnPostgres]:
    if not BINARIES or (os.geteuid() == 0 and shutil.which("runuser") is None):
        pytest.skip("no PostgreSQL server binaries to run a server of this test's own")
    server = OwnPostgres()
    try:
        server.init()
        server.start()
        asyncio.run(upgrade(server.url))
        yield server
    finally:
        server.remove()


def _workload(name: str) -> dict[str, Any]:
    return workload(name, 1, cpu="10m")


async def test_a_database_restart_under_load_is_503_never_500(own_postgres: OwnPostgres, tmp_path: Path) -> None:
    """A `gangplank serve` process and 16 clients submitting keyed workloads without pause, while
    the server is stopped fast (sessions terminated), stopped immediately (sessions cut, as in a
    crash), and started again: every answer is a 201 or a 503 with Retry-After."""
    replica = Replica(0, own_postgres.url, tmp_path / "replica-0.log").start()
    base = f"/v1/clusters/{CLUSTER}"
    statuses: dict[int, int] = {}
    acknowledged: list[str] = []
    unanswered: list[str] = []  # 503s: retried with their keys afterwards
    done = asyncio.Event()
    try:
        await replica.ready()
        async with httpx.AsyncClient(base_url=replica.base, timeout=30) as client:
            node = {"allocatable": {"cpu": "100000", "memory": "1000Ti", "pods": "1000000"}}
            assert (await client.put(f"{base}/nodes/n1", json=node)).status_code in (200, 201)

            async def submitter(worker: int) -> None:
                i = 0
                while not done.is_set():
                    name = f"w{worker}-{i}"
                    i += 1
                    response = await client.post(f"{base}/namespaces/ns/workloads", json=_workload(name),
                                                 headers={"Idempotency-Key": name})
                    statuses[response.status_code] = statuses.get(response.status_code, 0) + 1
                    if response.status_code == 201:
                        acknowledged.append(name)
                    elif response.status_code == 503:
                        assert response.headers.get("retry-after") == "1"
                        unanswered.append(name)
                        await asyncio.sleep(0.005)

            workers = [asyncio.create_task(submitter(w)) for w in range(16)]
            await asyncio.sleep(0.5)
            for mode in ("fast", "immediate", "fast"):
                await asyncio.to_thread(own_postgres.stop, mode)
                await asyncio.sleep(0.2)  # down: connections refused
                await asyncio.to_thread(own_postgres.start)
                await asyncio.sleep(0.8)
            done.set()
            await asyncio.gather(*workers)
            assert statuses.get(500, 0) == 0, statuses
            assert set(statuses) <= {201, 503}, statuses
            assert statuses.get(503, 0) > 0, f"the restarts were not noticed: {statuses}"
            assert len(acknowledged) > 20, statuses

            # nothing acknowledged is lost; a 503'd submission retried with its key is decided once
            for name in unanswered:
                retried = await client.post(f"{base}/namespaces/ns/workloads", json=_workload(name),
                                            headers={"Idempotency-Key": name})
                assert retried.status_code == 201, retried.text
            submitted: list[str] = []
            after = 0
            while True:
                page = (await client.get(f"{base}/events", params={"after": after, "limit": 1000})).json()
                if not page["events"]:
                    break
                submitted += [e["data"]["name"] for e in page["events"] if e["type"] == "WorkloadSubmitted"]
                after = page["events"][-1]["position"]
            assert sorted(submitted) == sorted(acknowledged + unanswered)  # each once, none lost
            assert (await client.get(f"{base}/audit/verify")).json()["ok"] is True
        assert "api.unhandled" not in replica.log_path.read_text(errors="replace")
    finally:
        replica.stop()
