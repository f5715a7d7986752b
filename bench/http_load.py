"""HTTP + PostgreSQL end to end (issue 3, item 9), and replay speed of a 1,000,000-event cluster.

    .venv/bin/python bench/http_load.py [--submissions 3000] [--concurrency 8] [--events 1000000]
                                   [--skip-http] [--skip-replay]

HTTP: starts `gangplank serve` (`python -m service serve`) as a subprocess on a free loopback
port against a fresh PostgreSQL database (service.store.testing), loads 5,000 nodes (100 racks
x 50; cpu 64, memory 512Gi, example.com/gpu 8, pods 110) over HTTP, then, from this process
(httpx async, --concurrency connections), POSTs --submissions gang workloads of 1-16 pods
(one GPU, 8 cpu and 64Gi each; rack topology; priorities 10/50/100; each with an
Idempotency-Key, as a job controller sends them) and DELETEs the oldest ones to keep at most
--live workloads running. Every 201 is durable: committed to PostgreSQL before the answer.
Reports submissions/s over the timed run, p50/p99 of the POSTs (and of the DELETEs), the
server's CPU per submission, and checks /audit/verify. `--live 100000` deletes nothing: submissions
only (the 5,000 nodes hold ~4,700 of these workloads; keep --warmup + --submissions below that, or
the rest wait in the queue).

Replay: builds a cluster of --events events in another fresh database: the 5,000 nodes, then
a chunk of real decisions (the decider on submissions and deletions like the ones above,
ending with every workload deleted) repeated under new namespaces, appended through the
store in batches. Then times the cluster cache's rebuild(cluster) with no snapshot, in this process with
the GC thresholds `gangplank serve` sets (and the same work split: the store reads alone, the
fold alone; with --plain-fold also every event through `evolve`, as before the fast replay, and
a check that both give the same state), and `gangplank replay --cluster C` end to end (a
subprocess, interpreter start included). Both databases are dropped at the end. The machine's CPU count and load average are
printed with each result: other processes on it take CPU from the measured ones.
"""
from __future__ import annotations

import sys
from pathlib import Path

# Run as a script, this file's folder comes first on sys.path; keep it out so that nothing in
# bench/ can shadow a standard-library module.
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != Path(__file__).resolve().parent]

import argparse  # noqa: E402
import asyncio  # noqa: E402
import collections  # noqa: E402
import contextlib  # noqa: E402
import gc  # noqa: E402
import json  # noqa: E402
import os  # noqa: E402
import random  # noqa: E402
import resource  # noqa: E402
import signal  # noqa: E402
import socket  # noqa: E402
import statistics  # noqa: E402
import subprocess  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from collections.abc import AsyncIterator  # noqa: E402
from typing import Any  # noqa: E402

import httpx  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench import rawhttp  # noqa: E402
from service.gcpause import configure_for_serving  # noqa: E402
from service.store.migrate import upgrade  # noqa: E402
from service.store.testing import temporary_postgres_database  # noqa: E402

CLUSTER = "bench"
RACKS, PER_RACK = 100, 50


def node_body(rack: int) -> dict[str, Any]:
    return {"labels": {"example.com/rack": f"r{rack:03d}", "topology.kubernetes.io/zone": f"z{rack % 4}"},
            "allocatable": {"cpu": "64", "memory": "512Gi", "example.com/gpu": "8", "pods": "110"}}


def node_names() -> list[tuple[str, int]]:
    return [(f"r{rack:03d}-n{i:02d}", rack) for rack in range(RACKS) for i in range(PER_RACK)]


def workload_body(name: str, rng: random.Random, max_pods: int = 16) -> dict[str, Any]:
    size = rng.randint(1, max_pods)
    return {"name": name, "priority": rng.choice([10, 10, 10, 50, 50, 100]),
            "podGroups": [{"name": "workers", "schedulingPolicy": {"gang": {"minCount": size}},
                           "topology": {"key": "example.com/rack"},
                           "pods": [{"name": "w", "count": size,
                                     "requests": {"cpu": "8", "memory": "64Gi", "example.com/gpu": "1"}}]}]}


def pct(xs: list[float], q: float) -> float:
    xs = sorted(xs)
    return round(xs[min(len(xs) - 1, int(q * len(xs)))] * 1000, 2) if xs else 0.0


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def machine() -> dict[str, Any]:
    """The machine's load while measuring: other processes share the CPUs."""
    return {"cpus": os.cpu_count(), "loadavg_1m": round(os.getloadavg()[0], 2)}


def cpu_seconds(pid: int) -> float:
    """User + system CPU of a process and its live children (granian's worker) (Linux /proc)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    total = (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    for task in Path(f"/proc/{pid}/task").iterdir():
        children = (task / "children").read_text().split() if (task / "children").exists() else []
        total += sum(cpu_seconds(int(child)) for child in children)
    return total


# ----------------------------------------------------------------------------------- HTTP

async def wait_ready(client: httpx.AsyncClient, proc: subprocess.Popen, timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"gangplank serve exited with {proc.returncode}")
        try:
            if (await client.get("/readyz")).status_code == 200:
                return
        except httpx.TransportError:
            pass
        await asyncio.sleep(0.2)
    raise RuntimeError("gangplank serve did not become ready")


async def run_pool(n_workers: int, work: Any) -> None:
    await asyncio.gather(*(work(w) for w in range(n_workers)))


def per_request(report: dict[str, Any], requests: int) -> dict[str, Any]:
    """bench/stages.py's report of the measured run, each stage's wall time per durable request."""
    stages = {name: {**v, "ms_per_request": round(v["total_s"] / requests * 1000, 3)}
              for name, v in report["stages"].items()}
    return {**report, "stages": stages, "requests": requests,
            "cpu_ms_per_request": round(report["process_cpu_s"] / requests * 1000, 3)}


async def noop_requests(host: str, port: int, path: str, count: int, concurrency: int) -> dict[str, Any]:
    """`count` GETs of `path` (a no-op: nothing decided, nothing recorded) from `concurrency` keep-alive
    connections of the same client: what the server and client cost per request with no work."""
    left = [count]
    lat: list[float] = []

    async def worker(_: int) -> None:
        conn = rawhttp.Connection(host, port)
        while left[0] > 0:
            left[0] -= 1
            t = time.perf_counter()
            status, _data = await conn.request("GET", path)
            lat.append(time.perf_counter() - t)
            assert status == 200, status
        conn.close()
    t0 = time.perf_counter()
    await run_pool(concurrency, worker)
    wall = time.perf_counter() - t0
    return {"path": path, "count": count, "per_s": round(count / wall, 1), "p50_ms": pct(lat, 0.5),
            "p99_ms": pct(lat, 0.99)}


def server_command(url: str, port: int, profile: str | None, stages: str | None, server: str) -> list[str]:
    """`gangplank serve` on `url` (under cProfile, or the stage timers of bench/stages.py); with
    server "granian", the same app under granian (one worker, uvloop, HTTP/1.1; bench/granian_app.py)."""
    if server == "granian":
        return [sys.executable, "-m", "granian", "--interface", "asgi", "--factory", "--host", "127.0.0.1",
                "--port", str(port), "--workers", "1", "--loop", "uvloop", "--http", "1", "--runtime-mode", "st",
                "--log-level", "warning", "--no-ws", "bench.granian_app:app"]
    serve = ["serve", "--port", str(port), "--database-url", url]
    if stages:
        return [sys.executable, str(ROOT / "bench" / "stages.py"), stages, "--", *serve]
    profiler = ["-m", "cProfile", "-o", profile] if profile else []
    return [sys.executable, *profiler, "-m", "service", *serve]


async def http_bench(url: str, submissions: int, concurrency: int, live_max: int, warmup: int,
                     seed: int, profile: str | None = None, *, max_pods: int = 16, stages: bool = False,
                     noop: int = 0, server: str = "") -> dict[str, Any]:
    port = free_port()
    log = tempfile.NamedTemporaryFile(prefix="gangplank-serve-", suffix=".log", delete=False)
    env = {k: v for k, v in os.environ.items() if not k.startswith("GANGPLANK_")}
    if server == "granian":
        env["GANGPLANK_DATABASE_URL"] = url
    stages_file = tempfile.mktemp(prefix="gangplank-stages-", suffix=".json") if stages else None
    proc = subprocess.Popen(server_command(url, port, profile, stages_file, server), cwd=ROOT, env=env,
                            stdout=log, stderr=subprocess.STDOUT)
    base = f"http://127.0.0.1:{port}"
    api = f"/v1/clusters/{CLUSTER}"
    limits = httpx.Limits(max_connections=concurrency, max_keepalive_connections=concurrency)
    result: dict[str, Any] = {"concurrency": concurrency, "max_pods": max_pods, "database": url.split(":")[0]}
    try:
        async with httpx.AsyncClient(base_url=base, limits=limits, timeout=60) as client:
            await wait_ready(client, proc)

            # nodes, over HTTP
            nodes = collections.deque(node_names())
            t0 = time.perf_counter()

            async def put_nodes(_: int) -> None:
                while nodes:
                    name, rack = nodes.popleft()
                    r = await client.put(f"{api}/nodes/{name}", json=node_body(rack))
                    assert r.status_code == 200, r.text
            await run_pool(concurrency, put_nodes)
            dt = time.perf_counter() - t0
            result["nodes"] = {"count": RACKS * PER_RACK, "s": round(dt, 2), "per_s": round(RACKS * PER_RACK / dt)}

            retries = 0
            host, port_ = "127.0.0.1", port

            async def send(conn: rawhttp.Connection, method: str, path: str, body: Any = None,
                           key: str | None = None) -> tuple[int, bytes]:
                """One keyed request; a connection lost before the answer is retried with the
                same key (what the key is for), and counted."""
                nonlocal retries
                for attempt in range(5):
                    try:
                        return await conn.request(method, path, body, {"Idempotency-Key": key} if key else None)
                    except ConnectionError:
                        if attempt == 4:
                            raise
                        retries += 1
                raise AssertionError("unreachable")

            rng = random.Random(seed)
            bodies = [workload_body(f"job-{i:05d}", rng, max_pods) for i in range(warmup + submissions)]
            live: collections.deque[str] = collections.deque()
            post_lat: list[float] = []
            del_lat: list[float] = []
            statuses: collections.Counter[int] = collections.Counter()
            phases: collections.Counter[str] = collections.Counter()
            preemptions = 0

            async def submit_all(queue: collections.deque[dict[str, Any]], timed: bool) -> None:
                nonlocal preemptions

                async def worker(_: int) -> None:
                    nonlocal preemptions
                    conn = rawhttp.Connection(host, port_)
                    while queue:
                        body = queue.popleft()
                        t = time.perf_counter()
                        status, data = await send(conn, "POST", f"{api}/namespaces/bench/workloads", body,
                                                  f"submit-{body['name']}")
                        took = time.perf_counter() - t
                        assert status == 201, data
                        if timed:
                            answer = json.loads(data)
                            post_lat.append(took)
                            statuses[status] += 1
                            phases[answer["status"]["phase"]] += 1
                            preemptions += sum(1 for d in answer["decisions"] if d["type"] == "PodGroupPreempted")
                        live.append(body["name"])
                        while len(live) > live_max:
                            old = live.popleft()
                            t = time.perf_counter()
                            status, data = await send(conn, "DELETE", f"{api}/namespaces/bench/workloads/{old}",
                                                      key=f"delete-{old}")
                            if timed:
                                del_lat.append(time.perf_counter() - t)
                            assert status == 200, data
                    conn.close()
                await run_pool(concurrency, worker)

            await submit_all(collections.deque(bodies[:warmup]), timed=False)
            before = (await client.get(f"{api}/events", params={"limit": 1})).json()["lastPosition"]
            if stages_file:
                proc.send_signal(signal.SIGUSR1)  # the stage timers start from here
                await asyncio.sleep(0.2)
            cpu0, client0 = cpu_seconds(proc.pid), time.process_time()
            t0 = time.perf_counter()
            await submit_all(collections.deque(bodies[warmup:]), timed=True)
            wall = time.perf_counter() - t0
            server_cpu, client_cpu = cpu_seconds(proc.pid) - cpu0, time.process_time() - client0
            if stages_file:
                proc.send_signal(signal.SIGUSR2)  # the stage timers stop here (their report is kept)
            after = (await client.get(f"{api}/events", params={"limit": 1})).json()["lastPosition"]
            verify = (await client.get(f"{api}/audit/verify")).json()
            assert verify["ok"], verify
            result["submissions"] = {
                "count": submissions, "wall_s": round(wall, 2), "per_s": round(submissions / wall, 1),
                "requests_per_s": round((submissions + len(del_lat)) / wall, 1),
                "post_p50_ms": pct(post_lat, 0.5), "post_p99_ms": pct(post_lat, 0.99),
                "post_max_ms": pct(post_lat, 1.0), "post_mean_ms": round(statistics.mean(post_lat) * 1000, 2),
                "deletes": len(del_lat), "delete_p50_ms": pct(del_lat, 0.5), "delete_p99_ms": pct(del_lat, 0.99),
                "phases": dict(phases), "preempted_groups": preemptions, "transport_retries": retries,
                "events_appended": after - before,
                "server_cpu_ms_per_request": round(server_cpu / (submissions + len(del_lat)) * 1000, 2),
                "server_cpu_share": round(server_cpu / wall, 2),
                "client_cpu_ms_per_request": round(client_cpu / (submissions + len(del_lat)) * 1000, 2),
            }
            result["audit_verify"] = {"ok": verify["ok"], "events": verify["events"]}
            if noop:
                result["noop"] = await noop_requests(host, port_, "/healthz", noop, concurrency)
                result["noop"]["submission_cost_x"] = round(result["noop"]["per_s"]
                                                            / result["submissions"]["per_s"], 2)
    finally:
        proc.send_signal(signal.SIGINT)  # a clean stop (cProfile writes its stats on the way out)
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        log.close()
        result["server_log"] = log.name
        if stages_file and Path(stages_file).exists():
            requests = submissions + result.get("submissions", {}).get("deletes", 0)
            result["stages"] = per_request(json.loads(Path(stages_file).read_text()), requests)
            Path(stages_file).unlink()
    return result


@contextlib.asynccontextmanager
async def http_database(kind: str) -> AsyncIterator[str]:
    """A fresh, migrated database for the server: PostgreSQL, or an SQLite file (dropped after)."""
    if kind == "sqlite":
        with tempfile.TemporaryDirectory(prefix="gp-bench-") as tmp:
            url = f"sqlite+aiosqlite:///{tmp}/bench.db"
            await upgrade(url)
            yield url
        return
    async with temporary_postgres_database("gp_bench") as url:
        await upgrade(url)
        yield url


# ----------------------------------------------------------------------------------- replay

def decided_chunk(workloads: int, live_max: int, seed: int) -> tuple[list[Any], list[Any]]:
    """(the node inputs, a chunk of workload events ending with every workload deleted),
    decided by the real decider on the 5,000-node cluster."""
    from service.domain import ClusterState, Event, Rejection, accept, handle

    rng = random.Random(seed)
    state = ClusterState(CLUSTER)
    out: list[Any] = []

    def run(kind: str, name: str, ns: str | None = None, body: dict[str, Any] | None = None) -> None:
        accepted = accept(state, kind, name, ns, body)
        assert not isinstance(accepted, Rejection), accepted
        etype, data = accepted
        inp = Event(state.position + 1, etype, json.loads(json.dumps(data)))
        out.append(inp)
        out.extend(handle(state, inp))

    for name, rack in node_names():
        run("UpsertNode", name, body=node_body(rack))
    nodes = list(out)
    out.clear()
    live: collections.deque[str] = collections.deque()
    for i in range(workloads):
        body = workload_body(f"job-{i:05d}", rng)
        run("SubmitWorkload", body["name"], "ns", body)
        live.append(body["name"])
        while len(live) > live_max:
            run("DeleteWorkload", live.popleft(), "ns")
    while live:
        run("DeleteWorkload", live.popleft(), "ns")
    return nodes, out


def renamed(value: Any, ns: str) -> Any:
    """Every "namespace" in the data (also the preemptor's and victims') set to `ns`."""
    if isinstance(value, dict):
        return {k: (ns if k == "namespace" and v == "ns" else renamed(v, ns)) for k, v in value.items()}
    if isinstance(value, list):
        return [renamed(v, ns) for v in value]
    return value


async def build_stream(url: str, total: int, batch: int) -> dict[str, Any]:
    from service.store import NewEvent, open_store

    t0 = time.perf_counter()
    nodes, chunk = decided_chunk(workloads=4000, live_max=1500, seed=11)
    decide_s = time.perf_counter() - t0
    meta = {"source": "cli", "actor": "bench", "commandId": None, "causationPosition": None,
            "receivedAt": "2026-11-30T10:00:00.000000Z"}
    store = open_store(url)
    position = 0
    pending: list[Any] = []
    by_type: collections.Counter[str] = collections.Counter()
    t0 = time.perf_counter()
    try:
        def source():  # noqa: ANN202
            yield from nodes
            k = 0
            while True:
                ns = f"ns{k}"
                for e in chunk:
                    yield type(e)(e.position, e.type, renamed(e.data, ns))
                k += 1

        for e in source():
            if position + len(pending) >= total:
                break
            pending.append(NewEvent(e.type, e.data, meta))
            by_type[e.type] += 1
            if len(pending) >= batch:
                await store.append(CLUSTER, position, pending)
                position += len(pending)
                pending = []
        if pending:
            await store.append(CLUSTER, position, pending)
            position += len(pending)
    finally:
        await store.close()
    return {"events": position, "chunk_events": len(chunk), "decide_chunk_s": round(decide_s, 1),
            "append_s": round(time.perf_counter() - t0, 1), "by_type": dict(sorted(by_type.items()))}


async def time_rebuild(url: str, plain_fold: bool = False) -> dict[str, Any]:
    from service.app.service import Gangplank
    from service.app.snapshots import SNAPSHOT_VERSION
    from service.domain import ClusterState, Event, evolve
    from service.domain.fold.fast import Replay
    from service.domain.model.upcasting import upcast
    from service.domain.read.views import canonical
    from service.store import open_store
    from service.store.codec import loads

    store = open_store(url)
    try:
        assert await store.latest_snapshot(CLUSTER, SNAPSHOT_VERSION) is None
        svc = Gangplank(store)
        await store.read(CLUSTER, after=0, limit=10)  # a warm connection
        configure_for_serving()  # as `gangplank serve` runs (service/gcpause.py)
        t0, c0 = time.perf_counter(), time.process_time()
        state = await svc.cache.rebuild(CLUSTER)
        rebuild_s, rebuild_cpu = time.perf_counter() - t0, time.process_time() - c0
        n = state.position
        live_nodes, workloads = len(state.nodes.live_indices()), len(state.workloads)
        rebuilt = canonical(state) if plain_fold else None
        del state
        gc.collect()
        # the same work split: the store reads alone (read_data without decoding, as rebuild
        # does; decoded; and read(), full envelopes, as /events does), then the fold alone (as
        # rebuild folds: Replay over the undecoded rows, three batches announced ahead)
        timings: dict[str, float] = {}
        raw_batches: list[Any] = []
        for name, decode in (("read_raw", False), ("read_data", True)):
            t0, c0 = time.perf_counter(), time.process_time()
            after = 0
            while True:
                b = await store.read_data(CLUSTER, after=after, limit=5000, decode=decode)
                if not b:
                    break
                if not decode:
                    raw_batches.append(b)
                after = b[-1][0]
            timings[name] = time.perf_counter() - t0
            timings[name + "_cpu"] = time.process_time() - c0
        t0 = time.perf_counter()
        count, after = 0, 0
        while True:
            full = await store.read(CLUSTER, after=after, limit=5000)
            if not full:
                break
            count, after = count + len(full), full[-1].position
        read_full_s = time.perf_counter() - t0
        del full
        gc.disable()
        t0, c0 = time.perf_counter(), time.process_time()
        replay = Replay(ClusterState(CLUSTER))
        for b in raw_batches[:4]:
            replay.ahead(b)
        for i, b in enumerate(raw_batches):
            if i + 4 < len(raw_batches):
                replay.ahead(raw_batches[i + 4])
            replay.fold(b)
        fresh = replay.finish()
        fold_s, fold_cpu = time.perf_counter() - t0, time.process_time() - c0
        gc.enable()
        assert fresh.position == n == count
        out = {"events": n, "rebuild_s": round(rebuild_s, 2), "rebuild_events_per_s": round(n / rebuild_s),
               "rebuild_events_per_cpu_s": round(n / rebuild_cpu),
               "read_raw_events_per_s": round(n / timings["read_raw"]),
               "read_raw_events_per_cpu_s": round(n / timings["read_raw_cpu"]),
               "read_data_events_per_s": round(n / timings["read_data"]),
               "read_envelopes_events_per_s": round(n / read_full_s),
               "fold_only_events_per_s": round(n / fold_s), "fold_only_events_per_cpu_s": round(n / fold_cpu),
               "workloads": workloads, "live_nodes": live_nodes}
        if plain_fold:  # every event through evolve, as before the fast replay; and the same state
            del fresh
            gc.collect()
            gc.disable()
            t0, c0 = time.perf_counter(), time.process_time()
            plain = ClusterState(CLUSTER)
            for b in raw_batches:
                for position, type_, version, data in b:
                    evolve(plain, Event(position, type_, upcast(type_, version, loads(data))))
            out["plain_fold_events_per_s"] = round(n / (time.perf_counter() - t0))
            out["plain_fold_events_per_cpu_s"] = round(n / (time.process_time() - c0))
            gc.enable()
            out["same_state_as_plain_fold"] = canonical(plain) == rebuilt
    finally:
        await store.close()
    return out


def time_cli_replay(url: str, events: int) -> dict[str, Any]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("GANGPLANK_")}
    t0, c0 = time.perf_counter(), children_cpu()
    done = subprocess.run([sys.executable, "-m", "service", "replay", "--cluster", CLUSTER, "--database-url", url],
                          cwd=ROOT, env=env, capture_output=True, text=True)
    wall, cpu = time.perf_counter() - t0, children_cpu() - c0
    assert done.returncode == 0, done.stderr[-2000:]
    summary = json.loads(done.stdout)
    assert summary["events"] == events, summary
    t0 = time.perf_counter()
    subprocess.run([sys.executable, "-c", "import service.cli.main, service.app.audit, service.store"],
                   cwd=ROOT, env=env, check=True)
    startup = time.perf_counter() - t0
    return {"wall_s": round(wall, 2), "events_per_s": round(events / wall),
            "cpu_s": round(cpu, 2), "events_per_cpu_s": round(events / cpu),
            "interpreter_and_imports_s": round(startup, 2),
            "events_per_s_without_startup": round(events / (wall - startup)),
            "summary": {k: summary[k] for k in ("position", "inputs", "decisions", "workloads", "nodes")}}


# ----------------------------------------------------------------------------------- main

async def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--submissions", type=int, default=3000)
    ap.add_argument("--warmup", type=int, default=200)
    ap.add_argument("--concurrency", type=int, default=8)
    ap.add_argument("--live", type=int, default=1500, help="running workloads kept (older ones deleted)")
    ap.add_argument("--events", type=int, default=1_000_000)
    ap.add_argument("--batch", type=int, default=10_000, help="events per append when building the stream")
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--profile-server", metavar="FILE", help="run the server under cProfile, stats to FILE")
    ap.add_argument("--max-pods", type=int, default=16,
                    help="gangs of 1..N pods (16: the stream of bench/digest.py; 32: the perf stream)")
    ap.add_argument("--database", choices=("postgresql", "sqlite"), default="postgresql",
                    help="the server's store: a fresh PostgreSQL database or a fresh SQLite file")
    ap.add_argument("--stages", action="store_true",
                    help="run the server under bench/stages.py's timers: wall time per stage and request")
    ap.add_argument("--noop", type=int, default=0, metavar="N",
                    help="then N no-op requests (GET /healthz) from the same client: the submission's cost in no-ops")
    ap.add_argument("--server", choices=("serve", "granian"), default="serve",
                    help="serve: `gangplank serve` (uvicorn); granian: the same app under granian")
    ap.add_argument("--skip-http", action="store_true")
    ap.add_argument("--skip-replay", action="store_true")
    ap.add_argument("--plain-fold", action="store_true",
                    help="also fold every event with evolve (slow) and check the rebuilt state is the same")
    args = ap.parse_args()

    if not args.skip_http:
        async with http_database(args.database) as url:
            result = await http_bench(url, args.submissions, args.concurrency, args.live, args.warmup, args.seed,
                                      args.profile_server, max_pods=args.max_pods, stages=args.stages,
                                      noop=args.noop, server=args.server)
            print(json.dumps({"http": result, "machine": machine()}), flush=True)
    if not args.skip_replay:
        async with temporary_postgres_database("gp_bench") as url:
            await upgrade(url)
            built = await build_stream(url, args.events, args.batch)
            print(json.dumps({"built": built, "machine": machine()}), flush=True)
            print(json.dumps({"rebuild": await time_rebuild(url, args.plain_fold), "machine": machine()}), flush=True)
            print(json.dumps({"cli_replay": time_cli_replay(url, built["events"]), "machine": machine()}), flush=True)


if __name__ == "__main__":
    asyncio.run(main())
