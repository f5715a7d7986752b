"""`?explain=true` on the event page and a workload's history (console.md: the console shows the
words of `audit explain`, rendered by the service): the events stay as stored, and beside them each
event's lines, about whom, with its cause named."""
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

C = "/v1/clusters/prod"


def _gang(name: str, cpu: int, priority: int = 0) -> dict[str, Any]:
    return {"name": name, "priority": priority, "podGroups": [{"name": "g", "schedulingPolicy": {"gang": {"minCount": 2}},
                                                              "pods": [{"name": "p", "count": 2,
                                                                        "requests": {"cpu": str(cpu)}}]}]}


@pytest.fixture
def client() -> Iterator[TestClient]:
    name = f"explain-{uuid.uuid4().hex}"
    with TestClient(create_app(Gangplank(open_store(f"memory://{name}")), ApiSettings())) as c:
        for i in range(2):
            c.put(f"{C}/nodes/n{i}", json={"allocatable": {"cpu": "4", "pods": "10"}})
        c.post(f"{C}/namespaces/a/workloads", json=_gang("low", 3))
        c.post(f"{C}/namespaces/b/workloads", json=_gang("high", 3, priority=100))
        c.delete(f"{C}/nodes/n1")
        c.delete(f"{C}/namespaces/b/workloads/high")
        yield c
    discard_database(name)


def test_the_event_page_keeps_the_events_as_stored_and_adds_their_words(client):
    plain = client.get(f"{C}/events?limit=100").json()
    page = client.get(f"{C}/events?limit=100&explain=true").json()
    assert page["events"] == plain["events"] and "explained" not in plain
    by = {x["position"]: x for x in page["explained"]}
    assert [x["position"] for x in page["explained"]] == [e["position"] for e in page["events"]]
    types = {e["position"]: e["type"] for e in page["events"]}
    first = {t: p for p, t in sorted(types.items(), reverse=True)}
    assert by[1] == {"position": 1, "about": "node n0", "namespace": None, "workload": None,
                     "lines": ["Node n0 was added or replaced at #1"]}
    preempted = by[first["PodGroupPreempted"]]
    assert preempted["about"] == "a/low" and (preempted["namespace"], preempted["workload"]) == ("a", "low")
    high_at = next(p for p, t in types.items() if t == "WorkloadSubmitted" and p > 3)
    assert preempted["lines"][0].startswith(f"Group g preempted by b/high group g (priority 100 > 0), when b/high "
                                            f"was submitted at #{high_at}: evicted ")
    lost = by[first["PodsLost"]]
    removed_at = next(p for p, t in types.items() if t == "NodeRemoved")
    assert f"because node n1 was removed at #{removed_at}" in lost["lines"][0]
    scheduled = by[first["PodGroupScheduled"]]  # the first placement: its own submission is not named
    assert scheduled["lines"][0].startswith("Scheduled group g: 2 pods on ") and "after" not in scheduled["lines"][0]


def test_a_page_names_causes_it_does_not_hold(client):
    events = client.get(f"{C}/events?limit=100").json()["events"]
    decision = next(e for e in events if e["type"] == "PodsLost")  # caused by the node's removal
    cause = decision["metadata"]["causationPosition"]
    page = client.get(f"{C}/events?after={decision['position'] - 1}&limit=1&explain=true").json()
    assert [e["position"] for e in page["events"]] == [decision["position"]]  # the cause is not in the page
    assert f"because node n1 was removed at #{cause}" in page["explained"][0]["lines"][0]


def test_a_history_gets_the_lines_of_audit_explain_by_event(client):
    history = client.get(f"{C}/namespaces/a/workloads/low/history?explain=true").json()
    plain = client.get(f"{C}/namespaces/a/workloads/low/history").json()
    assert history["events"] == plain["events"] and "explained" not in plain
    positions = [x["position"] for x in history["explained"]]
    assert positions[:-1] == [e["position"] for e in history["events"]] and positions[-1] is None
    assert history["explained"][0]["lines"][0].startswith("Submitted a/low with priority 0")
    assert history["explained"][-1]["lines"][0].startswith("Now: ")
    assert all(x["lines"] and all(isinstance(line, str) for line in x["lines"]) for x in history["explained"])
