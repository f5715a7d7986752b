"""Bodies and a thin client wrapper for the end-to-end tests."""
from __future__ import annotations

import asyncio
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import asyncpg
from litestar.testing import TestClient


def node(cpu: str = "8", memory: str = "64Gi", gpu: str | None = None, rack: str = "r1",
         **labels: str) -> dict[str, Any]:
    allocatable = {"cpu": cpu, "memory": memory, "pods": "110"}
    if gpu is not None:
        allocatable["example.com/gpu"] = gpu
    return {"labels": {"example.com/rack": rack, **labels}, "allocatable": allocatable}


def workload(name: str, pods: int = 1, *, cpu: str = "1", min_count: int | None = None,
             priority: int | None = None, priority_class: str | None = None,
             topology: str | None = None, basic: bool = False) -> dict[str, Any]:
    group: dict[str, Any] = {
        "name": "workers",
        "schedulingPolicy": {"basic": {}} if basic else {"gang": {"minCount": min_count or pods}},
        "pods": [{"name": "w", "count": pods, "requests": {"cpu": cpu, "memory": "1Gi"}}],
    }
    if topology:
        group["topology"] = {"key": topology}
    body: dict[str, Any] = {"name": name, "podGroups": [group]}
    if priority is not None:
        body["priority"] = priority
    if priority_class is not None:
        body["priorityClassName"] = priority_class
    return body


class Api:
    """Requests on one cluster of one app."""

    def __init__(self, client: TestClient, cluster: str) -> None:
        self.client = client
        self.cluster = cluster
        self.base = f"/v1/clusters/{cluster}"

    def url(self, path: str) -> str:
        return self.base + path

    def get(self, path: str, **kw: Any) -> Any:
        return self.client.get(self.url(path), **kw)

    def put_node(self, name: str, body: dict[str, Any] | None = None, **kw: Any) -> Any:
        return self.client.put(self.url(f"/nodes/{name}"), json=body or node(), **kw)

    def submit(self, body: dict[str, Any], namespace: str = "team-a", *, query: str = "", **kw: Any) -> Any:
        return self.client.post(self.url(f"/namespaces/{namespace}/workloads{query}"), json=body, **kw)

    def delete_workload(self, name: str, namespace: str = "team-a", **kw: Any) -> Any:
        return self.client.delete(self.url(f"/namespaces/{namespace}/workloads/{name}"), **kw)

    def workload(self, name: str, namespace: str = "team-a") -> Any:
        return self.get(f"/namespaces/{namespace}/workloads/{name}")

    def last_position(self) -> int:
        r = self.get("/events", params={"after": 0, "limit": 1})
        assert r.status_code == 200, r.text
        return r.json()["lastPosition"]

    def all_events(self) -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = []
        while True:
            r = self.get("/events", params={"after": out[-1]["position"] if out else 0, "limit": 1000})
            assert r.status_code == 200, r.text
            batch = r.json()["events"]
            if not batch:
                return out
            out.extend(batch)

    def all_workloads(self) -> list[dict[str, Any]]:
        r = self.get("/workloads", params={"limit": 1000})
        assert r.status_code == 200, r.text
        assert r.json()["next"] is None
        return r.json()["items"]

    def verify(self) -> dict[str, Any]:
        r = self.get("/audit/verify")
        assert r.status_code == 200, r.text
        return r.json()


def libpq_url(url: str) -> str:
    return url.replace("postgresql+asyncpg://", "postgresql://", 1)


def run_sql(url: str, sql: str, *args: Any, fetch: bool = False) -> Any:
    """Run one statement on the database through asyncpg (in a worker thread, with its own
    event loop); `fetch`: its first value, else its status ("UPDATE 1")."""
    async def run() -> Any:
        conn = await asyncpg.connect(libpq_url(url))
        try:
            return await (conn.fetchval(sql, *args) if fetch else conn.execute(sql, *args))
        finally:
            await conn.close()

    with ThreadPoolExecutor(1) as pool:
        return pool.submit(asyncio.run, run()).result()
