"""Event store throughput on PostgreSQL.

    .venv/bin/python bench/store_append.py [--appends 2000] [--events 200000]

Creates a throw-away database (service.store.testing), migrates it, and prints:
- durable appends/s, 5 events per append, each append also storing an idempotency record
  and one outbox row per event (what an HTTP command costs): one writer on one cluster,
  then 8 and 32 concurrent writers on as many clusters;
- bulk append of N events in batches of 1,000;
- read() throughput over them in chunks of 5,000, and verify() throughput.
"""
from __future__ import annotations

import argparse
import asyncio
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from service.store import IdempotencyRecord, NewEvent, open_store  # noqa: E402
from service.store.migrate import upgrade  # noqa: E402
from service.store.testing import temporary_postgres_database  # noqa: E402


def make_events(n: int, seq: int) -> list[NewEvent]:
    return [NewEvent(
        type="PodGroupScheduled",
        data={"namespace": "team-a", "workload": f"train-{seq}", "podGroup": "workers",
              "placements": [{"pod": f"train-{seq}-workers-{p}", "node": f"node-{(seq + p) % 64:03d}"}
                             for p in range(4)],
              "explanation": {"reason": "GangAdmitted", "minCount": 4}},
        metadata={"commandId": f"cmd-{seq}", "source": "http", "actor": "bench",
                  "causationPosition": seq, "receivedAt": "2026-11-30T10:00:00.000000Z"},
    ) for _ in range(n)]


async def writer(store, cluster: str, appends: int, per_append: int, tag: str) -> None:
    position = await store.last_position(cluster)
    for i in range(appends):
        idem = IdempotencyRecord(key=f"{tag}-{cluster}-{i}", fingerprint="f" * 64, status=201,
                                 body={"position": position + per_append}, cluster=cluster,
                                 position=position + per_append)
        stored = await store.append(cluster, position, make_events(per_append, i),
                                    idempotency=[idem], outbox_topic="gangplank.decisions")
        position = stored[-1].position


def machine() -> str:
    load = ", ".join(f"{x:.2f}" for x in os.getloadavg())
    return f"{os.cpu_count()} CPUs, load average {load}"


async def main(appends: int, total_events: int) -> None:
    print(f"machine: {machine()}")
    async with temporary_postgres_database("gp_bench") as url:
        await upgrade(url)
        store = open_store(url)
        try:
            await writer(store, "warmup", 50, 5, "w")

            t0, c0 = time.perf_counter(), time.process_time()
            await writer(store, "seq", appends, 5, "s")
            dt, cpu = time.perf_counter() - t0, time.process_time() - c0
            print(f"sequential: {appends} appends x 5 events in {dt:.2f}s = {appends / dt:,.0f} appends/s "
                  f"({appends * 5 / dt:,.0f} events/s), {dt / appends * 1000:.2f} ms/append "
                  f"(client CPU {cpu / appends * 1000:.2f} ms/append)")

            for writers in (8, 32):
                t0, c0 = time.perf_counter(), time.process_time()
                await asyncio.gather(*(writer(store, f"par{writers}-{w}", appends // writers, 5, "p")
                                       for w in range(writers)))
                dt, cpu = time.perf_counter() - t0, time.process_time() - c0
                n = appends // writers * writers
                print(f"concurrent: {writers} writers (one cluster each) x {appends // writers} appends x 5 events "
                      f"in {dt:.2f}s = {n / dt:,.0f} appends/s ({n * 5 / dt:,.0f} events/s) "
                      f"(client CPU {cpu / n * 1000:.2f} ms/append)")

            batch = 1_000
            template = make_events(1, 7)[0]
            t0 = time.perf_counter()
            position = 0
            while position < total_events:
                n = min(batch, total_events - position)
                await store.append("big", position, [template] * n)
                position += n
            dt = time.perf_counter() - t0
            print(f"bulk append: {total_events:,} events in batches of {batch} in {dt:.2f}s = "
                  f"{total_events / dt:,.0f} events/s")

            reader = open_store(url)  # a fresh store, as after a restart
            try:
                t0 = time.perf_counter()
                seen = 0
                async for chunk in reader.stream("big", chunk=5_000):
                    seen += len(chunk)
                dt = time.perf_counter() - t0
            finally:
                await reader.close()
            assert seen == total_events, seen
            print(f"read: {seen:,} events in chunks of 5,000 in {dt:.2f}s = {seen / dt:,.0f} events/s")

            t0 = time.perf_counter()
            result = await store.verify("big")
            dt = time.perf_counter() - t0
            assert result.ok and result.events == total_events, result
            print(f"verify: {result.events:,} events in {dt:.2f}s = {result.events / dt:,.0f} events/s")
            print(f"machine: {machine()}")
        finally:
            await store.close()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--appends", type=int, default=2_000)
    parser.add_argument("--events", type=int, default=200_000)
    args = parser.parse_args()
    asyncio.run(main(args.appends, args.events))
