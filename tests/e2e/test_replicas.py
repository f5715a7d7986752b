"""Two replicas (two apps, two Gangplank services, two engines) on one PostgreSQL database,
racing to write into one cluster: the stream never forks, every request gets a definite answer,
and the recorded decisions are exactly what the decider gives for the recorded inputs."""
from __future__ import annotations

import random
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from service.app.audit import replay
from tests.e2e.conftest import open_client
from tests.e2e.helpers import Api, node, workload


def test_two_replicas_racing_never_fork(pg_url: str, cluster: str) -> None:
    with open_client(pg_url) as first, open_client(pg_url) as second:
        replicas = [Api(first, cluster), Api(second, cluster)]
        for i in range(4):
            assert replicas[i % 2].put_node(f"n{i}", node(cpu="8", rack=f"r{i % 2}")).status_code == 200
        rng = random.Random(5)
        plan: list[tuple[str, Any]] = []
        for i in range(80):
            plan.append(("submit", workload(f"w{i:03d}", rng.randint(1, 3), cpu="2", priority=rng.choice([0, 10]),
                                             topology="example.com/rack" if i % 3 == 0 else None)))
            if i >= 6 and i % 2 == 0:
                plan.append(("delete", f"w{i - 6:03d}"))

        def run(step: tuple[int, tuple[str, Any]]) -> tuple[str, int, dict[str, Any]]:
            i, (kind, arg) = step
            api = replicas[i % 2]
            r = api.submit(arg) if kind == "submit" else api.delete_workload(arg)
            return kind, r.status_code, r.json()

        with ThreadPoolExecutor(8) as pool:
            answers = list(pool.map(run, enumerate(plan)))
            # the same name on both replicas at once: one 201, one 409
            dup = list(pool.map(lambda api: api.submit(workload("same-name")).status_code, replicas * 2))
            # the same idempotency key on both replicas at once: one submission, the same answer
            keyed_rounds = []
            for k in range(6):
                key = {"Idempotency-Key": f"{cluster}-shared-key-{k}"}
                keyed_rounds.append(list(pool.map(
                    lambda api, key=key, k=k: api.submit(workload(f"keyed-{k}"), headers=key), replicas * 2)))

        submitted = [a for a in answers if a[0] == "submit"]
        assert all(status == 201 for _, status, _ in submitted), [a for a in submitted if a[1] != 201][:3]
        # a deletion may race its own submission's replica: it is then a definite 404
        assert all(status in (200, 404) for kind, status, _ in answers if kind == "delete")
        assert sorted(dup) == [201, 409, 409, 409]
        for keyed in keyed_rounds:
            assert [r.status_code for r in keyed] == [201] * 4, [r.json() for r in keyed if r.status_code != 201]
            assert all(r.json() == keyed[0].json() for r in keyed)

        events = replicas[0].all_events()
        last = events[-1]["position"]
        assert [e["position"] for e in events] == list(range(1, last + 1))  # gapless, no fork
        for api in replicas:
            assert api.verify() == {"ok": True, "events": last, "head": events[-1]["hash"]}
            assert api.last_position() == last
        names = [e["data"]["name"] for e in events if e["type"] == "WorkloadSubmitted"]
        assert len(names) == len(set(names)) == 80 + 1 + 6
        deletions = sum(1 for e in events if e["type"] == "WorkloadDeleted")
        assert deletions == sum(1 for kind, status, _ in answers if kind == "delete" and status == 200)
        # each answer's decisions are the recorded ones at those positions
        by_position = {e["position"]: e for e in events}
        for _, status, body in answers:
            for d in body.get("decisions", []) if status < 300 else []:
                assert by_position[d["position"]]["type"] == d["type"]
                assert by_position[d["position"]]["data"] == d["data"]
        # both replicas show the same views
        assert replicas[0].all_workloads() == replicas[1].all_workloads()
        assert replicas[0].get("/nodes").json() == replicas[1].get("/nodes").json()
        for n in replicas[0].get("/nodes").json()["items"]:
            assert not n["free"]["cpu"].startswith("-"), n

    # decided on the state every writer should have seen: replay re-decides byte for byte
    result = replay(events, cluster, verify=True)
    assert result.ok, result.summary()
