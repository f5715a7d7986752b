"""Every error path of http.md through the real app: the answer, and that nothing is recorded."""
from __future__ import annotations

import json
from typing import Any

import pytest
from litestar.testing import TestClient

from tests.e2e.helpers import Api, node, workload


def problem(r: Any, status: int) -> dict[str, Any]:
    assert r.status_code == status, r.text
    assert r.headers["content-type"].startswith("application/problem+json")
    doc = r.json()
    assert doc["status"] == status and doc["title"] and doc["type"].startswith("https://") and doc["detail"]
    return doc


def locs(doc: dict[str, Any]) -> list[list[Any]]:
    return [e["loc"] for e in doc["errors"]]


@pytest.fixture
def api(client: TestClient, cluster: str) -> Api:
    api = Api(client, cluster)
    assert api.put_node("n1", node(cpu="8")).status_code == 200
    assert client.put(api.url("/priorityclasses/high"), json={"value": 100}).status_code == 200
    assert api.submit(workload("taken")).status_code == 201
    assert api.submit(workload("done")).status_code == 201
    assert api.delete_workload("done").status_code == 200
    return api


BAD_BODIES = [
    # (body, a loc that must be named)
    ({"name": "x", "podGroups": [{"name": "g", "schedulingPolicy": {"gang": {"minCount": 0}},
                                  "pods": [{"name": "p"}]}]},
     ["body", "podGroups", 0, "schedulingPolicy", "gang", "minCount"]),
    ({"name": "x", "podGroups": [{"name": "g", "schedulingPolicy": {"gang": {"minCount": 2}},
                                  "pods": [{"name": "p"}]}]},
     ["body", "podGroups", 0, "schedulingPolicy", "gang", "minCount"]),
    ({"name": "Not_A_Name", "podGroups": [{"name": "g", "schedulingPolicy": {"basic": {}},
                                           "pods": [{"name": "p"}]}]}, ["body", "name"]),
    ({"name": "x", "bogus": 1, "podGroups": [{"name": "g", "schedulingPolicy": {"basic": {}},
                                              "pods": [{"name": "p"}]}]}, ["body", "bogus"]),
    ({"name": "x", "podGroups": [{"name": "g", "schedulingPolicy": {"basic": {}},
                                  "pods": [{"name": "p", "requests": {"cpu": "0.5m"}}]}]},
     ["body", "podGroups", 0, "pods", 0, "requests", "cpu"]),
    ({"name": "x", "priority": "high", "podGroups": [{"name": "g", "schedulingPolicy": {"basic": {}},
                                                      "pods": [{"name": "p"}]}]}, ["body", "priority"]),
    ({"name": "x", "preemptionPolicy": "Sometimes",
      "podGroups": [{"name": "g", "schedulingPolicy": {"basic": {}}, "pods": [{"name": "p"}]}]},
     ["body", "preemptionPolicy"]),
    ({"name": "x", "podGroups": [{"name": "g", "schedulingPolicy": {"basic": {}},
                                  "pods": [{"name": "p", "count": 10001}]}]},
     ["body", "podGroups", 0, "pods", 0, "count"]),
]


def test_bad_bodies_are_422_naming_fields_and_record_nothing(client: TestClient, api: Api) -> None:
    before = api.last_position()
    for body, loc in BAD_BODIES:
        doc = problem(api.submit(body), 422)
        assert loc in locs(doc), (loc, doc)
    # two problems at once: both named
    body = {"name": "x", "priority": 1.5, "podGroups": [{"name": "g", "schedulingPolicy": {"basic": {}},
                                                         "pods": [{"name": "p", "count": 0}]}]}
    doc = problem(api.submit(body), 422)
    assert ["body", "priority"] in locs(doc) and ["body", "podGroups", 0, "pods", 0, "count"] in locs(doc)
    # malformed JSON, not an object
    problem(client.post(api.url("/namespaces/team-a/workloads"), content=b'{"name": '), 422)
    assert locs(problem(client.post(api.url("/namespaces/team-a/workloads"), content=b"[]"), 422)) == [["body"]]
    # more than 10,000 pods in one workload
    many = workload("many")
    many["podGroups"] = [{"name": f"g{i}", "schedulingPolicy": {"basic": {}},
                          "pods": [{"name": "p", "count": 5001}]} for i in range(2)]
    problem(api.submit(many), 422)
    # inventory bodies
    doc = problem(api.put_node("n2", {"allocatable": {"cpu": "-1"}}), 422)
    assert ["body", "allocatable", "cpu"] in locs(doc)
    doc = problem(client.put(api.url("/priorityclasses/p"), json={"value": "1"}), 422)
    assert ["body", "value"] in locs(doc)
    doc = problem(api.put_node("n2", {"name": "other", "allocatable": {}}), 422)
    assert ["body", "name"] in locs(doc)
    # bad path and query parameters
    assert ["path", "namespace"] in locs(problem(api.submit(workload("x"), namespace="Team_A"), 422))
    assert ["query", "limit"] in locs(problem(api.get("/workloads", params={"limit": 0}), 422))
    assert ["query", "phase"] in locs(problem(api.get("/workloads", params={"phase": "Running"}), 422))
    assert ["query", "wait"] in locs(problem(api.get("/events", params={"wait": 31}), 422))
    assert api.last_position() == before


def test_state_rejections_record_nothing(client: TestClient, api: Api) -> None:
    before = api.last_position()
    # unknown priority class: 422 naming body.priorityClassName
    doc = problem(api.submit(workload("x", priority_class="nope")), 422)
    assert locs(doc) == [["body", "priorityClassName"]]
    # a live name (a deleted one's makes a new incarnation: tests/e2e/test_names_used_again.py)
    problem(api.submit(workload("taken")), 409)
    # the same name in another namespace is another workload (not submitted here: checked below)
    # unknown workload / node
    problem(api.workload("never"), 404)
    problem(api.delete_workload("never"), 404)
    problem(api.delete_workload("done"), 404)  # already deleted
    problem(api.get("/namespaces/team-a/workloads/never/history"), 404)
    problem(api.get("/nodes/ghost"), 404)
    problem(client.delete(api.url("/nodes/ghost")), 404)
    problem(client.delete(api.url("/deviceclasses/ghost")), 404)
    problem(client.delete(api.url("/resourceslices/ghost")), 404)
    problem(client.get("/v1/clusters/no-such-cluster-here/namespaces/a/workloads/b"), 404)
    # unknown route / method
    problem(client.get("/v1/nowhere"), 404)
    problem(client.delete(api.url("/priorityclasses/high")), 405)
    assert api.last_position() == before
    assert api.submit(workload("taken"), namespace="team-b").status_code == 201


def test_too_large_and_bad_idempotency_keys(client: TestClient, api: Api) -> None:
    before = api.last_position()
    big = workload("huge")
    big["podGroups"][0]["pods"][0]["requests"]["padding"] = "1"
    raw = json.dumps(big).encode()
    raw = raw[:-1] + b"," + b'"x":"' + b"a" * (1024 * 1024) + b'"}'
    problem(client.post(api.url("/namespaces/team-a/workloads"), content=raw), 413)
    problem(client.put(api.url("/nodes/n9"), content=b" " * (1024 * 1024 + 1)), 413)
    for key in ("", "k" * 256, "caf\x7f"):
        doc = problem(api.submit(workload("keyed"), headers={"Idempotency-Key": key}), 422)
        assert locs(doc) == [["header", "Idempotency-Key"]]
    # a bad key and a bad body: both named
    doc = problem(api.submit({"name": "x"}, headers={"Idempotency-Key": ""}), 422)
    assert ["header", "Idempotency-Key"] in locs(doc) and ["body", "podGroups"] in locs(doc)
    assert api.last_position() == before
    assert api.workload("keyed").status_code == 404


def test_idempotent_retries(client: TestClient, api: Api) -> None:
    key = {"Idempotency-Key": "submit-retry-1"}
    first = api.submit(workload("retried", 1, cpu="1"), headers=key)
    assert first.status_code == 201 and "idempotent-replayed" not in first.headers
    after_first = api.last_position()

    again = api.submit(workload("retried", 1, cpu="1"), headers=key)
    assert again.status_code == 201
    assert again.json() == first.json()
    assert again.content == first.content  # the same body: the same bytes, not only the same JSON
    assert again.headers["idempotent-replayed"] == "true"
    assert api.last_position() == after_first

    # the same key with another body, path or method: 409, nothing recorded
    problem(api.submit(workload("retried", 1, cpu="2"), headers=key), 409)
    problem(api.submit(workload("retried", 1, cpu="1"), namespace="team-b", headers=key), 409)
    problem(api.delete_workload("retried", headers=key), 409)
    assert api.last_position() == after_first
    assert api.workload("retried", namespace="team-b").status_code == 404

    # a DELETE retried gives the first answer (not a 404)
    dkey = {"Idempotency-Key": "delete-retry-1"}
    deleted = api.delete_workload("retried", headers=dkey)
    assert deleted.status_code == 200
    position = api.last_position()
    replay = api.delete_workload("retried", headers=dkey)
    assert (replay.status_code, replay.json()) == (200, deleted.json())
    assert replay.content == deleted.content
    assert api.last_position() == position
    # and so is a PUT
    pkey = {"Idempotency-Key": "put-retry-1"}
    put = api.put_node("n7", node(cpu="2"), headers=pkey)
    position = api.last_position()
    assert api.put_node("n7", node(cpu="2"), headers=pkey).content == put.content
    assert api.last_position() == position

    # a request rejected by state stores no key: the same key may then carry the request that works
    rkey = {"Idempotency-Key": "rejected-first"}
    problem(api.submit(workload("x", priority_class="missing"), headers=rkey), 422)
    problem(api.delete_workload("never", headers=rkey), 404)
    assert api.last_position() == position
    assert api.submit(workload("later"), headers=rkey).status_code == 201


def test_dry_run_records_nothing(client: TestClient, api: Api) -> None:
    before = api.last_position()
    key = {"Idempotency-Key": "dry-1"}
    r = api.submit(workload("dry", 2, cpu="2"), query="?dryRun=true", headers=key)
    assert r.status_code == 200, r.text
    view = r.json()
    assert view["dryRun"] is True and view["status"]["phase"] == "Scheduled"
    assert [d["type"] for d in view["decisions"]] == ["PodGroupScheduled"]
    assert api.last_position() == before
    assert api.workload("dry").status_code == 404
    # dry runs answer rejections too, and store no key
    problem(api.submit(workload("taken"), query="?dryRun=true"), 409)
    problem(api.submit(workload("x", priority_class="nope"), query="?dryRun=true"), 422)
    assert api.last_position() == before
    real = api.submit(workload("dry", 2, cpu="2"), headers=key)
    assert real.status_code == 201
    assert real.json()["status"] == view["status"]


def test_dry_run_on_inventory_and_deletion_records_nothing(client: TestClient, api: Api) -> None:
    """Kubernetes' dry run (`?dryRun=All`, or http.md's `true`) on PUT and DELETE: the answer that would
    result, 200, nothing recorded."""
    before = api.last_position()
    r = client.put(api.url("/nodes/n2?dryRun=All"), json=node(cpu="8"))
    assert r.status_code == 200, r.text
    assert r.json()["dryRun"] is True and r.json()["name"] == "n2"
    assert api.get("/nodes/n2").status_code == 404
    r = client.delete(api.url("/namespaces/team-a/workloads/taken?dryRun=true"))
    assert r.status_code == 200, r.text
    assert r.json()["status"]["phase"] == "Finished" and r.json()["dryRun"] is True
    assert api.workload("taken").json()["status"]["phase"] != "Finished"
    r = client.delete(api.url("/nodes/n1?dryRun=All"))
    assert r.status_code == 200 and r.json()["dryRun"] is True
    assert api.get("/nodes/n1").status_code == 200
    problem(client.delete(api.url("/nodes/nope?dryRun=All")), 404)
    assert api.last_position() == before
