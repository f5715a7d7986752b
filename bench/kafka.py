"""Benchmark of the Kafka adapter (issue 6): commands per second from the topic to committed
decisions on a 5,000-node cluster (PostgreSQL), and the lag from produce time to commit time.

A real broker (Tansu, in memory) and a throw-away PostgreSQL database; the service runs
in-process with its consumer AND its outbox relay (as `gangplank serve --kafka-bootstrap` does).

The command stream is the one of bench/decider.py: 5,000 nodes in 100 racks of 50, then gang
workloads of 1-64 pods (rack topology up to 50 pods) with deletions that keep the cluster near
90% full, generated in advance by a pure decider so that the topic holds a fixed stream.

1. setup: the 5,000 UpsertNode commands through Kafka (timed, not counted);
2. throughput: a backlog of --commands commands produced at once; commands/s = commands /
   (last input's commit - first input's commit), and from the first produce to the last commit;
3. lag: --rate commands/s produced at a steady pace for --seconds; the lag of a command is
   its input event's `recordedAt` (taken inside the committing transaction) minus the time it
   was handed to the producer; p50/p99/max.

    python bench/kafka.py [--stream gangs|light] [--commands 10000] [--rate 100] [--seconds 20]
                          [--max-run 500] [--direct] [--profile] [--stages]
"""
from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing
import os
import random
import statistics
import sys
import tempfile
import time
import uuid
from datetime import UTC, datetime
from pathlib import Path

# bench/ itself must not be on the path (no module of bench/ may shadow the standard library)
HERE = Path(__file__).resolve().parent
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != HERE]
sys.path.insert(0, str(HERE.parent))

from aiokafka import AIOKafkaProducer  # noqa: E402

from bench.decider import Driver, build_cluster, make_stream  # noqa: E402
from service.app.service import Gangplank  # noqa: E402
from service.config import Settings  # noqa: E402
from service.gcpause import configure_for_serving  # noqa: E402
from service.kafka.runtime import KafkaRuntime, ensure_topics  # noqa: E402
from service.kafka.testing import tansu_broker  # noqa: E402
from service.store import open_store  # noqa: E402
from service.store.migrate import upgrade  # noqa: E402
from service.store.testing import temporary_postgres_database  # noqa: E402

CLUSTER = "bench"
NAMESPACE = "bench"


def message(type_: str, name: str, body: dict | None = None, namespace: str | None = None) -> dict:
    m = {"id": str(uuid.uuid4()), "cluster": CLUSTER, "type": type_, "name": name}
    if namespace:
        m["namespace"] = namespace
    if body is not None:
        m["body"] = body
    return m


def generate(n: int, seed: int) -> tuple[list[dict], list[dict]]:
    """(node commands, n workload commands): the stream of bench/decider.py run_stream, recorded."""
    d = Driver()
    nodes: list[dict] = []
    original = d.run

    def recording(kind, name, namespace=None, body=None, timed=True):  # noqa: ANN001, ANN202
        (nodes if kind == "UpsertNode" else commands).append(message(kind, name, body, namespace))
        return original(kind, name, namespace, body, timed)

    commands: list[dict] = []
    d.run = recording  # type: ignore[method-assign]
    build_cluster(d)
    capacity = 5000 * 8
    running: list[str] = []
    stream = make_stream(n, seed)
    i = 0
    while len(commands) < n:
        body = stream[i % len(stream)]
        body = {**body, "name": f"{body['name']}-{i // len(stream)}"}
        i += 1
        d.run("SubmitWorkload", body["name"], NAMESPACE, body)
        wl = d.state.workloads[(NAMESPACE, body["name"])]
        if all(g.scheduled for g in wl.groups):
            running.append(body["name"])
        else:
            d.run("DeleteWorkload", body["name"], NAMESPACE)
        gpu = d.state.nodes.resources["example.com/gpu"]
        used = int(d.state.nodes.used[: d.state.nodes.count, gpu].sum())
        while used > 0.9 * capacity and running:
            name = running.pop(0)
            if d.state.workloads[(NAMESPACE, name)].deleted_at is None:
                d.run("DeleteWorkload", name, NAMESPACE)
            used = int(d.state.nodes.used[: d.state.nodes.count, gpu].sum())
    return nodes, commands[:n]


def generate_light(n: int) -> tuple[list[dict], list[dict]]:
    """(node commands, n cheap commands): single-pod submissions, each deleted four commands
    later, on the same 5,000 nodes: a stream whose decisions cost little, to show the adapter's
    own ceiling."""
    d = Driver()
    nodes: list[dict] = []
    original = d.run

    def recording(kind, name, namespace=None, body=None, timed=True):  # noqa: ANN001, ANN202
        nodes.append(message(kind, name, body, namespace))
        return original(kind, name, namespace, body, timed)

    d.run = recording  # type: ignore[method-assign]
    build_cluster(d)
    commands: list[dict] = []
    live: list[str] = []
    i = 0
    while len(commands) < n:
        if len(live) >= 2:
            commands.append(message("DeleteWorkload", live.pop(0), namespace=NAMESPACE))
            continue
        name = f"light-{i:06d}"
        i += 1
        body = {"name": name, "priority": 10, "podGroups": [
            {"name": "main", "schedulingPolicy": {"basic": {}},
             "pods": [{"name": "p", "count": 1, "requests": {"cpu": "1", "memory": "1Gi"}}]}]}
        commands.append(message("SubmitWorkload", name, body, NAMESPACE))
        live.append(name)
    return nodes, commands[:n]


def ts(text: str) -> float:
    return datetime.strptime(text, "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=UTC).timestamp()


async def produce(bootstrap: str, topic: str, messages: list[dict], sent_at: dict[str, float],
                  rate: float | None = None) -> None:
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, enable_idempotence=False, acks="all", linger_ms=2)
    await producer.start()
    try:
        futures = []
        start = time.time()
        for i, m in enumerate(messages):
            if rate is not None:
                delay = start + i / rate - time.time()
                if delay > 0:
                    await asyncio.sleep(delay)
            sent_at[m["id"]] = time.time()
            futures.append(await producer.send(topic, json.dumps(m).encode(), key=CLUSTER.encode()))
        await asyncio.gather(*futures)
    finally:
        await producer.stop()


async def consumed(store, settings: Settings) -> int:  # noqa: ANN001
    return sum((await store.stored_offsets(settings.consumer_group, settings.commands_topic)).values())


async def wait_consumed(store, settings: Settings, n: int, timeout: float) -> float:  # noqa: ANN001
    deadline = time.monotonic() + timeout
    while await consumed(store, settings) < n:
        if time.monotonic() > deadline:
            raise TimeoutError(f"consumed {await consumed(store, settings)} of {n}")
        await asyncio.sleep(0.1)
    return time.time()


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def _produce_process(bootstrap: str, topic: str, path: str, rate: float | None, out: str) -> None:
    """In a child process (the producer must not share the service's CPU time slice or event loop)."""
    messages = json.loads(Path(path).read_text())
    sent: dict[str, float] = {}
    asyncio.run(produce(bootstrap, topic, messages, sent, rate))
    Path(out).write_text(json.dumps(sent))


def produce_elsewhere(bootstrap: str, topic: str, messages: list[dict], rate: float | None,
                      workdir: Path) -> multiprocessing.Process:
    path, out = workdir / f"in-{len(messages)}.json", workdir / f"sent-{len(messages)}.json"
    path.write_text(json.dumps(messages))
    proc = multiprocessing.get_context("spawn").Process(
        target=_produce_process, args=(bootstrap, topic, str(path), rate, str(out)))
    proc.start()
    proc.out = out  # type: ignore[attr-defined]
    return proc


async def join(proc: multiprocessing.Process) -> dict[str, float]:
    while proc.is_alive():
        await asyncio.sleep(0.05)
    if proc.exitcode != 0:
        raise RuntimeError(f"producer exited with {proc.exitcode}")
    return json.loads(Path(proc.out).read_text())  # type: ignore[attr-defined]


def commit_span_rate(inputs: list) -> float:  # noqa: ANN001
    span = ts(inputs[-1].recorded_at) - ts(inputs[0].recorded_at)
    return (len(inputs) - 1) / span if span > 0 else float("inf")


async def direct_baseline(nodes: list[dict], backlog: list[dict], max_run: int) -> dict:
    """The same commands straight into the application service (no Kafka): the ceiling."""
    from service.kafka.consumer import kafka_policy
    from service.kafka.messages import parse_record

    async with temporary_postgres_database("gp_bench_direct") as url:
        await upgrade(url)
        store = open_store(url)
        try:
            service = Gangplank(store, outbox_topic="bench.decisions")  # outbox rows too, as with Kafka
            items = [parse_record(json.dumps(m).encode(), topic="direct").item for m in nodes + backlog]
            for i in range(0, len(nodes), max_run):
                await service.commands.execute_unit(CLUSTER, items[i:i + max_run], kafka_policy())
            after = await store.last_position(CLUSTER)
            t0 = time.perf_counter()
            rest = items[len(nodes):]
            for i in range(0, len(rest), max_run):
                await service.commands.execute_unit(CLUSTER, rest[i:i + max_run], kafka_policy())
            wall = time.perf_counter() - t0
            events = await store.read(CLUSTER, after=after)
            inputs = [e for e in events if e.metadata["causationPosition"] is None]
            return {"commands": len(rest), "commands_per_s": round(len(rest) / wall),
                    "commands_per_s_commit_span": round(commit_span_rate(inputs))}
        finally:
            await store.close()


async def run(args: argparse.Namespace) -> dict:
    lag_n = int(args.rate * args.seconds)
    t = time.perf_counter()
    if args.stream == "light":
        nodes, stream = generate_light(args.commands + lag_n)
    else:
        nodes, stream = generate(args.commands + lag_n, args.seed)
    backlog, paced = stream[:args.commands], stream[args.commands:]
    print(f"generated {len(nodes)} node and {len(stream)} workload commands in {time.perf_counter() - t:.1f} s",
          file=sys.stderr)
    result: dict = {"stream": args.stream, "nodes": len(nodes), "max_run": args.max_run, "cpus": os.cpu_count(),
                    "load_avg_at_start": round(os.getloadavg()[0], 2)}
    configure_for_serving()  # as `gangplank serve` runs (service/gcpause.py)
    workdir = Path(tempfile.mkdtemp(prefix="gp-bench-kafka-"))
    if args.direct:
        result["direct_no_kafka"] = await direct_baseline(nodes, backlog, args.max_run)
        print(json.dumps({"direct_no_kafka": result["direct_no_kafka"]}), file=sys.stderr)
    with tansu_broker() as bootstrap:
        async with temporary_postgres_database("gp_bench_kafka") as url:
            await upgrade(url)
            settings = Settings(database_url=url, kafka_bootstrap=bootstrap, commands_topic="bench.commands",
                                dlq_topic="bench.commands.dlq", decisions_topic="bench.decisions",
                                consumer_group="bench", kafka_idempotence=False, kafka_partitions=6)
            await ensure_topics(settings)
            # the 5,000 nodes and the backlog are on the topic before the service starts
            await join(produce_elsewhere(bootstrap, settings.commands_topic, nodes + backlog, None, workdir))
            store = open_store(url)
            service = Gangplank(store, outbox_topic=settings.decisions_topic)
            if args.stages:
                from bench import stages
                stages.install()
            profiler = None
            if args.profile:
                import cProfile
                profiler = cProfile.Profile()
                profiler.enable()
            t0 = time.time()
            runtime = await KafkaRuntime(service, settings, max_run=args.max_run).start(connect_timeout=30)
            try:
                await wait_consumed(store, settings, len(nodes) + len(backlog), 1800)
                if args.stages:
                    timed = stages.report()  # the nodes' setup and the backlog
                    commands = len(nodes) + len(backlog)
                    result["stages"] = {**timed, "commands": commands, "cpu_ms_per_command": round(
                        timed["process_cpu_s"] / commands * 1000, 3), "ms_per_command": {
                        k: round(v["total_s"] / commands * 1000, 3) for k, v in timed["stages"].items()}}
                if profiler is not None:
                    import pstats
                    profiler.disable()
                    pstats.Stats(profiler, stream=sys.stderr).sort_stats("tottime").print_stats(25)
                    pstats.Stats(profiler, stream=sys.stderr).sort_stats("cumulative").print_stats(40)
                events = await store.read(CLUSTER, after=0)
                inputs = [e for e in events if e.metadata["causationPosition"] is None]
                first_backlog = len(nodes)
                backlog_inputs = inputs[first_backlog:]
                backlog_events = [e for e in events if e.position >= backlog_inputs[0].position]
                result["setup_nodes_s"] = round(ts(inputs[first_backlog - 1].recorded_at) - t0, 1)
                result["throughput"] = {
                    "commands": len(backlog_inputs),
                    "decisions": len(backlog_events) - len(backlog_inputs),
                    "commands_per_s": round(commit_span_rate(backlog_inputs)),
                    "events_per_s": round(len(backlog_events) * commit_span_rate(backlog_inputs)
                                          / len(backlog_inputs)),
                }
                print(json.dumps({"throughput": result["throughput"]}), file=sys.stderr)
                await wait_outbox(store, 600)
                result["throughput"]["outbox_drained_after_s"] = round(time.time() - t0, 1)

                after = await store.last_position(CLUSTER)
                t0 = time.time()
                sent = await join(produce_elsewhere(bootstrap, settings.commands_topic, paced, args.rate, workdir))
                await wait_consumed(store, settings, len(nodes) + len(backlog) + len(paced), 600)
                events = await store.read(CLUSTER, after=after)
                sent_now = [sent[m["id"]] for m in paced]
                lags = [ts(e.recorded_at) - sent[e.metadata["commandId"]] for e in events
                        if e.metadata["causationPosition"] is None]
                result["lag"] = {
                    "rate_per_s": args.rate, "commands": len(lags),
                    "produced_rate_per_s": round((len(sent_now) - 1) / (max(sent_now) - min(sent_now))),
                    "p50_ms": round(pct(lags, 0.5) * 1000, 1), "p99_ms": round(pct(lags, 0.99) * 1000, 1),
                    "max_ms": round(max(lags) * 1000, 1), "mean_ms": round(statistics.mean(lags) * 1000, 1),
                }
                await wait_outbox(store, 600)
                result["published_rows"] = runtime.total_published
            finally:
                await runtime.stop()
                await store.close()
    result["load_avg_at_end"] = round(os.getloadavg()[0], 2)
    return result


async def wait_outbox(store, timeout: float) -> None:  # noqa: ANN001
    deadline = time.monotonic() + timeout
    while await store.outbox_batch(1):
        if time.monotonic() > deadline:
            raise TimeoutError("the outbox did not drain")
        await asyncio.sleep(0.05)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--commands", type=int, default=10000, help="backlog for the throughput run")
    ap.add_argument("--rate", type=float, default=100, help="commands/s of the paced (lag) run: below capacity")
    ap.add_argument("--seconds", type=float, default=20, help="length of the paced run")
    ap.add_argument("--max-run", type=int, default=500, help="commands of one cluster per transaction")
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--stream", choices=("gangs", "light"), default="gangs",
                    help="gangs: bench/decider.py's stream (decider-bound); light: single-pod submit/delete")
    ap.add_argument("--direct", action="store_true", help="also run the backlog straight into the service")
    ap.add_argument("--profile", action="store_true", help="cProfile the throughput run (to stderr)")
    ap.add_argument("--stages", action="store_true",
                    help="bench/stages.py's timers over the setup and throughput runs: wall time per stage")
    args = ap.parse_args()
    random.seed(args.seed)
    print(json.dumps(asyncio.run(run(args)), indent=2))


if __name__ == "__main__":
    main()
