"""Audit benchmark (issue 7): `state?at=N` on a 1,000,000-event cluster, and `replay --verify`.

Builds the cluster in a fresh PostgreSQL database: 500 nodes, then a chunk of real
decisions (submissions of gang workloads, deletions) made by the decider and
repeated under new namespaces until the stream holds --events events; snapshots are
taken every --snapshot-every events as the running service does. Then times
Gangplank.state_at(N) for random N (p50/p99), and replay --verify over a prefix.

    python bench/audit.py [--events 1000000] [--queries 200] [--verify-events 100000]
                          [--database-url URL [--build-only | --measure-only]]
"""
from __future__ import annotations

import argparse
import asyncio
import json
import random
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from service.app.audit import replay  # noqa: E402
from service.app.service import Gangplank  # noqa: E402
from service.app.snapshots import LIGHT_PER_FULL  # noqa: E402
from service.domain import ClusterState, Event, accept, evolve, handle  # noqa: E402
from service.gcpause import configure_for_serving  # noqa: E402
from service.store import NewEvent, open_store  # noqa: E402
from service.store.migrate import upgrade  # noqa: E402
from service.store.testing import temporary_postgres_database  # noqa: E402

CLUSTER = "big"


def chunk(nodes: int, workloads: int, seed: int) -> tuple[list[Event], list[Event]]:
    """(node events, a chunk of workload events that ends with every workload deleted)."""
    rng = random.Random(seed)
    state = ClusterState(CLUSTER)
    out: list[Event] = []

    def run(kind: str, name: str, ns: str | None = None, body: dict | None = None) -> None:
        etype, data = accept(state, kind, name, ns, body)  # type: ignore[misc]
        data = json.loads(json.dumps(data))
        inp = Event(state.position + 1, etype, data)
        out.append(inp)
        out.extend(handle(state, inp))

    for i in range(nodes):
        run("UpsertNode", f"n{i:04d}", body={"labels": {"rack": f"r{i // 50:02d}"},
                                             "allocatable": {"cpu": "64", "memory": "512Gi", "pods": 110}})
    node_events = list(out)
    out.clear()
    live: list[str] = []
    for i in range(workloads):
        size = rng.randint(1, 16)
        run("SubmitWorkload", f"w{i:05d}", "ns", {
            "name": f"w{i:05d}", "priority": rng.choice([10, 50, 100]),
            "podGroups": [{"name": "g", "schedulingPolicy": {"gang": {"minCount": size}},
                           "topology": {"key": "rack"},
                           "pods": [{"name": "p", "count": size, "requests": {"cpu": "4", "memory": "16Gi"}}]}]})
        live.append(f"w{i:05d}")
        if len(live) > 300 or rng.random() < 0.3:
            run("DeleteWorkload", live.pop(rng.randrange(len(live))), "ns")
    for name in live:
        run("DeleteWorkload", name, "ns")
    return node_events, out


def renamed(events: list[Event], k: int) -> list[Event]:
    ns = f"ns{k}"
    return [Event(e.position, e.type, {**e.data, "namespace": ns}) for e in events]


async def build(url: str, total: int, snapshot_every: int, nodes: int = 500) -> None:
    store = open_store(url)
    node_events, work = chunk(nodes, 4000, 7)
    meta = {"source": "cli", "actor": "bench", "commandId": None, "causationPosition": None,
            "receivedAt": "2026-11-30T10:00:00.000000Z"}
    state = ClusterState(CLUSTER)
    position = 0
    pending: list[Event] = []
    next_snapshot = snapshot_every
    t0 = time.perf_counter()

    async def flush() -> None:
        nonlocal position, pending
        if pending:
            await store.append(CLUSTER, position, [NewEvent(e.type, e.data, meta) for e in pending])
            position += len(pending)
            pending = []

    k = 0
    snapshots = 0
    svc = Gangplank(store)  # its snapshot() writes what the running service writes
    stream = iter(node_events)
    while position + len(pending) < total:
        try:
            e = next(stream)
        except StopIteration:
            stream = iter(renamed(work, k))
            k += 1
            continue
        e = Event(position + len(pending) + 1, e.type, e.data)
        evolve(state, e)
        pending.append(e)
        if len(pending) >= 5000:
            await flush()
        if state.position >= next_snapshot:
            await flush()
            snapshots += 1
            await svc.snapshots.save(state, light=True)
            if snapshots % LIGHT_PER_FULL == 0:
                await svc.snapshots.save(state)
            next_snapshot += snapshot_every
    await flush()
    print(json.dumps({"built_events": position, "workloads": len(state.workloads),
                      "build_s": round(time.perf_counter() - t0, 1)}))
    await store.close()


async def measure(url: str, queries: int, verify_events: int) -> None:
    configure_for_serving()  # as `gangplank serve` runs (service/gcpause.py)
    svc = Gangplank(open_store(url))
    last = await svc.store.last_position(CLUSTER)
    t = time.perf_counter()
    await svc.queries.state_at(CLUSTER, None)  # the service loads the live state once, at its first request
    print(json.dumps({"live_state_load_s": round(time.perf_counter() - t, 2)}))
    rng = random.Random(1)
    times = []
    for _ in range(queries):
        n = rng.randint(1, last)
        t = time.perf_counter()
        view = await svc.queries.state_at(CLUSTER, n)
        times.append(time.perf_counter() - t)
        assert view["position"] == n
    times.sort()
    def pct(q):
        return round(times[min(len(times) - 1, int(q * len(times)))] * 1000, 1)
    print(json.dumps({"state_at_queries": queries, "p50_ms": pct(0.5), "p99_ms": pct(0.99),
                      "max_ms": round(times[-1] * 1000, 1), "mean_ms": round(statistics.mean(times) * 1000, 1)}))

    t = time.perf_counter()
    envs = [e.envelope() for e in await svc.store.read(CLUSTER, after=0, limit=verify_events)]
    read_s = time.perf_counter() - t
    t = time.perf_counter()
    result = replay(envs, CLUSTER, verify=True)
    verify_s = time.perf_counter() - t
    assert result.ok, result.summary()
    t = time.perf_counter()
    plain = replay(envs, CLUSTER, verify=False)
    fold_s = time.perf_counter() - t
    print(json.dumps({"verify_events": len(envs), "read_events_per_s": round(len(envs) / read_s),
                      "replay_verify_events_per_s": round(len(envs) / verify_s),
                      "replay_fold_events_per_s": round(len(envs) / fold_s), "ok": result.ok,
                      "position": plain.state.position}))
    await svc.store.close()


async def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--events", type=int, default=1_000_000)
    ap.add_argument("--queries", type=int, default=200)
    ap.add_argument("--verify-events", type=int, default=100_000)
    ap.add_argument("--snapshot-every", type=int, default=1_000)
    ap.add_argument("--database-url", help="build into (or, with --measure-only, measure) this database "
                                           "and keep it, instead of a throw-away one")
    ap.add_argument("--build-only", action="store_true")
    ap.add_argument("--measure-only", action="store_true")
    args = ap.parse_args()

    async def run(url: str) -> None:
        if not args.measure_only:
            await upgrade(url)
            await build(url, args.events, args.snapshot_every)
        if not args.build_only:
            await measure(url, args.queries, args.verify_events)

    if args.database_url:
        await run(args.database_url)
    else:
        async with temporary_postgres_database("gp_bench_audit") as url:
            await run(url)


if __name__ == "__main__":
    asyncio.run(main())
