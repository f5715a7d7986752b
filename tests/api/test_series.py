"""GET /v1/clusters/{cluster}/series (console.md, *Series*) over the real application (in-memory
store): each point agrees with `/state?at=N` and the events between points, the positions are
spread evenly, bad ranges are 422s naming `from`, `to` or `points`, a cluster without events has
the empty point, auditors may read it, and it reads nothing of the stream before the snapshot it starts from."""
from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from litestar.testing import TestClient

from service.api import ApiSettings, create_app
from service.app.service import Gangplank
from service.store import open_store
from service.store.memory import discard_database
from tests.api.conftest import ADMIN, AUDITOR, SUBMITTER, TOKENS, bearer

C = "/v1/clusters/prod"


def _gang(name: str, pods: int, cpu: int, priority: int = 0) -> dict[str, Any]:
    return {"name": name, "priority": priority,
            "podGroups": [{"name": "g", "schedulingPolicy": {"gang": {"minCount": pods}},
                           "pods": [{"name": "p", "count": pods, "requests": {"cpu": str(cpu)}}]}]}


def _record(client: TestClient, headers: dict[str, str] | None = None) -> None:
    """Three nodes; a gang placed, a higher one that preempts it, a node lost, deletions."""
    kw = {"headers": headers} if headers else {}
    for i in range(3):
        assert client.put(f"{C}/nodes/n{i}", json={"allocatable": {"cpu": "4", "pods": "10"}}, **kw).status_code == 200
    for body, ns in ((_gang("low", 2, 3), "a"), (_gang("high", 2, 3, priority=100), "b"), (_gang("small", 1, 1), "a")):
        assert client.post(f"{C}/namespaces/{ns}/workloads", json=body, **kw).status_code == 201
    busy = next(n["name"] for n in client.get(f"{C}/nodes", **kw).json()["items"] if n["pods"])
    assert client.delete(f"{C}/nodes/{busy}", **kw).status_code == 200
    assert client.delete(f"{C}/namespaces/b/workloads/high", **kw).status_code == 200


@pytest.fixture
def real() -> Iterator[tuple[TestClient, Gangplank]]:
    name = f"series-{uuid.uuid4().hex}"
    service = Gangplank(open_store(f"memory://{name}"), snapshot_every=5)
    with TestClient(create_app(service, ApiSettings())) as client:
        yield client, service
    discard_database(name)


def _reference(client: TestClient, position: int) -> dict[str, Any]:
    """The point's numbers from the state view (`/state?at=N`), summed here."""
    state = client.get(f"{C}/state?at={position}").json()
    nodes = state["nodes"]
    groups = [g for w in state["workloads"] for g in w["status"]["podGroups"]]
    return {"placedPods": sum(g["placedPods"] for g in groups),
            "pendingGroups": sum(1 for g in groups if g["pendingPods"] > 0),
            "allocated": {r: str(sum(int(n["allocated"].get(r, "0")) for n in nodes)) for r in ("cpu", "pods")}
            if nodes else {},
            "allocatable": {r: str(sum(int(n["allocatable"][r]) for n in nodes)) for r in ("cpu", "pods")}
            if nodes else {}}


def test_every_point_is_the_state_after_its_position(real):
    client, _ = real
    _record(client)
    events = client.get(f"{C}/events?limit=1000").json()["events"]
    last = events[-1]["position"]
    series = client.get(f"{C}/series").json()
    assert (series["from"], series["to"]) == (0, last)
    assert [p["position"] for p in series["points"]] == list(range(0, last + 1))  # fewer positions than 500
    previous = 0
    checked = {"preemptions": 0, "losses": 0}
    for point in series["points"]:
        position = point["position"]
        if position:
            assert point == {**point, **_reference(client, position)}, position
            assert point["time"] == events[position - 1]["recordedAt"]
        else:
            assert point["time"] is None and point["placedPods"] == 0
        between = [e["type"] for e in events if previous < e["position"] <= position]
        assert point["preemptions"] == between.count("PodGroupPreempted")
        assert point["losses"] == between.count("PodsLost")
        checked["preemptions"] += point["preemptions"]
        checked["losses"] += point["losses"]
        previous = position
    assert checked["preemptions"] >= 1 and checked["losses"] >= 1  # the scenario exercises both counts
    assert client.get(f"{C}/series").json() == series  # deterministic


def test_points_are_spread_evenly_and_counted_since_the_point_before(real):
    client, _ = real
    _record(client)
    events = client.get(f"{C}/events?limit=1000").json()["events"]
    last = events[-1]["position"]
    series = client.get(f"{C}/series?from=2&to={last}&points=4").json()
    positions = [p["position"] for p in series["points"]]
    assert positions[0] == 2 and positions[-1] == last and len(positions) == 4
    assert positions == [2 + i * (last - 2) // 3 for i in range(4)]
    total = [e["type"] for e in events if 2 <= e["position"] <= last]
    assert sum(p["preemptions"] for p in series["points"]) == total.count("PodGroupPreempted")
    assert sum(p["losses"] for p in series["points"]) == total.count("PodsLost")
    for point in series["points"]:
        assert point == {**point, **_reference(client, point["position"])}
    one = client.get(f"{C}/series?points=1").json()["points"]
    assert [p["position"] for p in one] == [last]
    beyond = client.get(f"{C}/series?from=3&to={last + 50}").json()
    assert beyond["to"] == last and beyond["points"][-1]["position"] == last


@pytest.mark.parametrize(("query", "field"), [
    ("points=0", "points"), ("points=2001", "points"), ("points=many", "points"),
    ("from=-1", "from"), ("from=7&to=3", "to"), ("from=100000", "from"), ("to=x", "to"),
])
def test_bad_ranges_are_422s_naming_the_parameter(real, query, field):
    client, _ = real
    _record(client)
    answer = client.get(f"{C}/series?{query}")
    assert answer.status_code == 422, answer.text
    assert answer.headers["content-type"].startswith("application/problem+json")
    assert [e["loc"] for e in answer.json()["errors"]] == [["query", field]]


def test_a_cluster_without_events_has_its_empty_point(real):
    client, _ = real
    answer = client.get("/v1/clusters/empty/series")
    assert answer.status_code == 200
    assert answer.json() == {"from": 0, "to": 0, "points": [
        {"position": 0, "time": None, "placedPods": 0, "pendingGroups": 0, "allocated": {}, "allocatable": {},
         "preemptions": 0, "losses": 0}]}
    assert client.get("/v1/clusters/empty/series?from=1").json()["errors"][0]["loc"] == ["query", "from"]
    assert client.get("/v1/clusters/Bad_Name/series").json()["errors"][0]["loc"] == ["path", "cluster"]


def test_it_starts_from_a_snapshot_not_the_stream_before_from(real):
    client, service = real
    _record(client)
    for i in range(8):  # more events: snapshots every 5 events
        client.post(f"{C}/namespaces/c/workloads", json=_gang(f"w{i}", 1, 1))
    last = client.get(f"{C}/events?limit=1").json()["lastPosition"]
    reads: list[int] = []
    originals = {name: getattr(service.store, name) for name in ("read", "read_data")}

    def counting(name: str) -> Any:
        async def read(cluster: str, after: int = 0, *args: Any, **kw: Any) -> Any:
            reads.append(after)
            return await originals[name](cluster, after, *args, **kw)
        return read

    for name in originals:
        setattr(service.store, name, counting(name))
    start = last - 3
    series = client.get(f"{C}/series?from={start}").json()
    assert [p["position"] for p in series["points"]] == list(range(start, last + 1))
    assert reads and min(reads) >= start - 1 - 5, reads  # from the snapshot at most 5 events before
    for name, original in originals.items():
        setattr(service.store, name, original)
    for point in series["points"]:
        assert point == {**point, **_reference(client, point["position"])}


def test_auditors_read_it_submitters_do_not():
    name = f"series-{uuid.uuid4().hex}"
    app = create_app(Gangplank(open_store(f"memory://{name}")), ApiSettings(tokens=TOKENS))
    with TestClient(app) as client:
        _record(client, bearer(ADMIN))
        assert client.get(f"{C}/series").status_code == 401
        assert client.get(f"{C}/series", headers=bearer(AUDITOR)).status_code == 200
        assert client.get(f"{C}/series", headers=bearer(SUBMITTER)).status_code == 403
        document = client.get("/schema/openapi.json").json()
        operation = document["paths"]["/v1/clusters/{cluster}/series"]["get"]
        assert operation["responses"]["200"]["content"]["application/json"]["schema"]["$ref"].endswith("/Series")
        assert {p["name"] for p in operation["parameters"] if p["in"] == "query"} == {"from", "to", "points"}
    discard_database(name)
