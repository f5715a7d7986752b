"""The HTTP fuzz, through the real application and decider (a Gangplank over the in-memory store), not
a recording stub: random sequences of valid and mutated requests on one cluster (nodes, slices, classes,
priority classes, workloads, finished pods, the scheduler configuration, what-ifs, deletions). No answer
is a 5xx; every 4xx is a problem document and records nothing; a dry run records nothing; and the stream
they leave re-decides `identical` (GET /audit/replay)."""
from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from litestar.testing import TestClient

from service.api import ApiSettings, create_app
from service.app.service import Gangplank
from service.store import open_store
from service.store.memory import discard_database
from tests.api.test_fuzz import mutated

STEPS = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                     HealthCheck.function_scoped_fixture])
COUNTS: dict[str, int] = {}  # what the examples exercised, asserted at the end

GPU_CLASS = {"selectors": [{"cel": {"expression": "device.driver == 'gpu.example.com'"}}]}


def _node(cpu: str, rack: str) -> dict[str, Any]:
    return {"labels": {"example.com/rack": rack}, "allocatable": {"cpu": cpu, "memory": "64Gi", "pods": "110"}}


def _slice(node: str) -> dict[str, Any]:
    return {"driver": "gpu.example.com", "pool": {"name": node, "generation": 1}, "nodeName": node,
            "devices": [{"name": f"gpu-{i}", "allowMultipleAllocations": True,
                         "attributes": {"index": {"int": i}}, "capacity": {"milli": {"value": "1000"}}}
                        for i in range(2)]}


def _workload(name: str, pods: int, cpu: str, priority: int, gang: bool, milli: str | None,
              topology: bool) -> dict[str, Any]:
    entry: dict[str, Any] = {"name": "w", "count": pods, "requests": {"cpu": cpu, "memory": "1Gi"}}
    body: dict[str, Any] = {"name": name, "priority": priority}
    if milli is not None:
        entry["resourceClaims"] = [{"name": "gpu", "resourceClaimTemplateName": "share"}]
        body["resourceClaimTemplates"] = [{"name": "share", "spec": {"devices": {"requests": [{
            "name": "gpu", "exactly": {"deviceClassName": "gpu", "count": 1,
                                       "capacity": {"requests": {"milli": milli}}}}]}}}]
    group: dict[str, Any] = {"name": "workers", "pods": [entry],
                             "schedulingPolicy": {"gang": {"minCount": pods}} if gang else {"basic": {}}}
    if topology:
        group["topology"] = {"key": "example.com/rack"}
    body["podGroups"] = [group]
    return body


NAMES = st.sampled_from(["a", "b", "c"])
NODES = st.sampled_from(["n1", "n2", "n3"])
WORKLOADS = st.builds(_workload, NAMES, st.integers(1, 4), st.sampled_from(["500m", "1", "2", "4"]),
                      st.sampled_from([0, 10, 100]), st.booleans(), st.none() | st.sampled_from(["300", "600", "1000"]),
                      st.booleans())
SCHEDULERS = st.sampled_from([
    {"scoringStrategy": {"type": "MostAllocated"}}, {"scoringStrategy": {"type": "LeastAllocated"}},
    {"scoringStrategy": {"type": "FragmentationAware", "fragmentationAware": {
        "deviceClassName": "gpu", "capacity": "milli", "targetWorkload": {"shapes": [
            {"weight": 1, "cpu": "1", "devices": {"capacity": {"requests": {"milli": "600"}}}}]}}}}])
WHAT_IFS = st.sampled_from([
    {}, {"withdraw": ["team-a/a"]}, {"scoring": {"strategy": "LeastAllocated"}},
    {"nodes": [{"at": 1, "cordon": "n1"}]}, {"capacity": [{"resource": "cpu", "factor": "0.5"}]},
    {"scoring": {"strategy": "FragmentationAware", "fragmentationAware": {
        "deviceClassName": "gpu", "capacity": "milli", "targetWorkload": {"fromHistory": {}}}}}])


@st.composite
def step(draw: st.DrawFn) -> tuple[str, str, Any, str]:
    """(method, path below the cluster, body or None, what it is)."""
    kind = draw(st.sampled_from(["node", "node", "slice", "class", "priority", "submit", "submit", "submit",
                                 "dry", "delete", "remove", "finish", "finish", "finish", "scheduler", "whatif"]))
    name, node = draw(NAMES), draw(NODES)
    if kind == "node":
        method, path, body = "PUT", f"/nodes/{node}", _node(draw(st.sampled_from(["2", "4", "8"])),
                                                            draw(st.sampled_from(["r1", "r2"])))
    elif kind == "slice":
        method, path, body = "PUT", f"/resourceslices/{node}-gpus", _slice(node)
    elif kind == "class":
        method, path, body = "PUT", "/deviceclasses/gpu", GPU_CLASS
    elif kind == "priority":
        method, path, body = "PUT", "/priorityclasses/high", {"value": draw(st.integers(0, 1000))}
    elif kind in ("submit", "dry"):
        method, path, body = "POST", "/namespaces/team-a/workloads" + ("?dryRun=true" if kind == "dry" else ""), \
            draw(WORKLOADS)
    elif kind == "delete":
        method, path, body = "DELETE", f"/namespaces/team-a/workloads/{name}", None
    elif kind == "remove":
        method, path, body = "DELETE", f"/nodes/{node}", None
    elif kind == "finish":
        method, path, body = "POST", f"/namespaces/team-a/workloads/{name}/podstatus", {"pods": [
            {"podGroup": "workers", "name": f"w-{draw(st.integers(0, 1))}",
             "phase": draw(st.sampled_from(["Succeeded", "Failed"]))}]}
    elif kind == "scheduler":
        method, path, body = "PUT", "/scheduler", draw(SCHEDULERS)
    else:
        method, path, body = "POST", "/audit/what-if", draw(WHAT_IFS)
    if body is not None and draw(st.integers(0, 4)) == 0:  # now and then a mutated body
        body, kind = draw(mutated(body)), f"{kind} (mutated)"
    return method, path, body, kind


@pytest.fixture(scope="module")
def client() -> Iterator[TestClient]:
    name = f"fuzz-{uuid.uuid4().hex}"
    with TestClient(create_app(Gangplank(open_store(f"memory://{name}")), ApiSettings()),
                    raise_server_exceptions=False) as c:
        yield c
    discard_database(name)


def _last(client: TestClient, base: str) -> int:
    answer = client.get(f"{base}/events", params={"after": 0, "limit": 1})
    return int(answer.json()["lastPosition"]) if answer.status_code == 200 else 0


@STEPS
@given(st.lists(step(), min_size=3, max_size=25))
def test_random_requests_through_the_real_decider(client: TestClient, steps: list[Any]) -> None:
    base = f"/v1/clusters/f-{uuid.uuid4().hex[:12]}"
    start = [("PUT", f"/nodes/n{i}", _node("8", f"r{i}"), "node") for i in (1, 2)] \
        + [("POST", "/namespaces/team-a/workloads", _workload("a", 2, "1", 0, True, None, False), "submit")]
    for method, path, body, kind in start + steps:
        before = _last(client, base)
        raw = None if body is None else json.dumps(body).encode()
        answer = client.request(method, base + path, content=raw,
                                headers={"content-type": "application/json"} if raw is not None else {})
        assert answer.status_code < 500, (method, path, body, answer.text)
        after = _last(client, base)
        outcome = "refused" if answer.status_code >= 400 else "accepted"
        COUNTS[f"{kind.split()[0]} {outcome}"] = COUNTS.get(f"{kind.split()[0]} {outcome}", 0) + 1
        if answer.status_code >= 400:
            assert answer.headers["content-type"].startswith("application/problem+json"), answer.text
            assert after == before, ("a refused request recorded something", method, path, answer.text)
        elif "dryRun" in path or path == "/audit/what-if":
            assert after == before, ("a dry run or a what-if recorded something", method, path)
        else:
            assert after > before, (method, path, answer.text)
            decided = answer.json().get("decisions") or []
            COUNTS["decisions"] = COUNTS.get("decisions", 0) + len(decided)
    if _last(client, base):
        report = client.get(f"{base}/audit/replay")
        assert report.status_code == 200, report.text
        assert report.json()["verdict"] == "identical", report.json()
        COUNTS["verified"] = COUNTS.get("verified", 0) + 1


def test_the_fuzz_exercised_the_decider() -> None:
    """Runs after the property (file order): it placed pods, refused and accepted each kind."""
    if not COUNTS:
        pytest.skip("the property did not run")
    assert COUNTS.get("decisions", 0) > 0 and COUNTS.get("verified", 0) > 0, COUNTS
    for kind in ("node", "submit", "finish", "scheduler", "whatif"):
        assert COUNTS.get(f"{kind} accepted", 0) > 0, (kind, sorted(COUNTS.items()))
    assert sum(n for k, n in COUNTS.items() if k.endswith("refused")) > 0, COUNTS
