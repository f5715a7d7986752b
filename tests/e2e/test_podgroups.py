"""PodGroup objects over HTTP on PostgreSQL (lifecycle.md *PodGroup objects*): create, get, list,
delete, the refusals recording nothing, the workload's view and history, replay --verify."""
from __future__ import annotations

from typing import Any

from service.app.audit import explain, replay
from tests.e2e.helpers import Api, node

TEMPLATES = {"name": "train", "podGroupTemplates": [
    {"name": "worker", "schedulingPolicy": {"gang": {"minCount": 2}},
     "pods": [{"name": "worker", "count": 2, "requests": {"cpu": "1"}}]}]}


def _create(api: Api, body: dict[str, Any], namespace: str = "team-a", **kw: Any) -> Any:
    return api.client.post(api.url(f"/namespaces/{namespace}/podgroups"), json=body, **kw)


def _ref(name: str, template: str | None = "worker", workload: str = "train") -> dict[str, Any]:
    ref: dict[str, Any] = {"workloadName": workload}
    if template is not None:
        ref["templateName"] = template
    return {"name": name, "workloadRef": ref}


def test_podgroups_over_http(client: Any, cluster: str) -> None:
    api = Api(client, cluster)
    api.put_node("n1", node(cpu="2"))
    r = api.submit(TEMPLATES)
    assert r.status_code == 201 and r.json()["status"] == {"phase": "Pending", "deletedAt": None, "podGroups": [],
                                                            "compositePodGroups": []}
    r = _create(api, _ref("train-0"), headers={"Idempotency-Key": f"{cluster}-pg-0"})
    assert r.status_code == 201, r.text
    assert r.headers["location"].endswith("/namespaces/team-a/podgroups/train-0")
    view = r.json()
    assert (view["workload"], view["template"], view["status"]["phase"]) == ("train", "worker", "Scheduled")
    assert [d["type"] for d in view["decisions"]] == ["PodGroupScheduled"]
    again = _create(api, _ref("train-0"), headers={"Idempotency-Key": f"{cluster}-pg-0"})
    assert again.json() == view and again.headers["idempotent-replayed"] == "true"
    assert _create(api, _ref("train-1")).json()["status"]["phase"] == "Pending"
    got = api.get("/namespaces/team-a/podgroups/train-1").json()
    assert got["status"]["pendingPods"] == 2 and got["status"]["explanation"] is not None
    page = api.get("/podgroups", params={"workload": "train"}).json()
    assert [p["name"] for p in page["items"]] == ["train-0", "train-1"] and page["next"] is None
    assert api.get("/podgroups", params={"phase": "Pending"}).json()["items"][0]["name"] == "train-1"
    assert [p["name"] for p in api.get("/podgroups", params={"limit": 1}).json()["items"]] == ["train-0"]
    wl = api.workload("train").json()
    assert [g["name"] for g in wl["status"]["podGroups"]] == ["train-0", "train-1"]
    assert [w["name"] for w in api.get("/workloads").json()["items"]] == ["train"]  # PodGroups are not workloads
    r = api.client.delete(api.url("/namespaces/team-a/podgroups/train-0"))
    assert r.status_code == 200, r.text
    assert r.json()["status"]["phase"] == "Finished"
    assert [(d["type"], d["data"]["podGroup"]) for d in r.json()["decisions"]] == [("PodGroupScheduled", "train-1")]
    assert api.get("/namespaces/team-a/podgroups/train-0").json()["status"]["phase"] == "Finished"
    history = [e["type"] for e in api.get("/namespaces/team-a/workloads/train/history").json()["events"]]
    assert history.count("PodGroupCreated") == 2 and "PodGroupDeleted" in history
    assert history.count("PodGroupScheduled") == 2
    lines = explain("team-a", "train", api.get("/namespaces/team-a/workloads/train/history").json()["events"])
    assert any("PodGroup train-0 created from template worker, priority 0: 2 pods, gang minCount 2" in line
               for line in lines), lines
    assert any("PodGroup train-0 deleted" in line for line in lines)
    assert any("Scheduled group train-1, after PodGroup team-a/train-0 was deleted" in line for line in lines), lines
    past = api.get("/state", params={"at": 3}).json()
    assert [g["name"] for g in next(w for w in past["workloads"] if w["name"] == "train")["status"]["podGroups"]] \
        == ["train-0"]
    r = api.client.post(api.url("/namespaces/team-a/workloads/train/podstatus"),
                        json={"pods": [{"podGroup": "train-1", "name": "worker-0", "phase": "Succeeded"}]})
    assert r.status_code == 200 and r.json()["status"]["podGroups"][0]["succeededPods"] == 1
    api.delete_workload("train")
    assert api.get("/namespaces/team-a/podgroups/train-1").json()["status"]["phase"] == "Finished"
    result = replay(api.all_events(), cluster, verify=True)
    assert result.ok, result.summary()


def test_podgroup_refusals_record_nothing(client: Any, cluster: str) -> None:
    api = Api(client, cluster)
    api.put_node("n1", node(cpu="8"))
    api.submit(TEMPLATES)
    api.submit({"name": "flat", "podGroups": [{"name": "g", "schedulingPolicy": {"basic": {}}, "pods": [{"name": "p"}]}]})
    _create(api, _ref("train-0"))
    before = api.last_position()
    cases = [
        (_create(api, _ref("x", workload="nope")), 422, ["body", "workloadRef", "workloadName"]),
        (_create(api, _ref("x", template="nope")), 422, ["body", "workloadRef", "templateName"]),
        (_create(api, _ref("x", template="g", workload="flat")), 409, None),
        (_create(api, _ref("train-0")), 409, None),
        (_create(api, {**_ref("x"), "parentCompositePodGroupName": "c"}), 422, ["body", "parentCompositePodGroupName"]),
        (_create(api, _ref("x", template=None)), 422, ["body", "schedulingPolicy"]),
        (_create(api, {**_ref("x"), "pods": [{"name": "p", "count": 9999}]}), 422, ["body", "pods"]),
        (_create(api, {**_ref("x"), "replicas": 2}), 422, ["body", "replicas"]),
        (api.client.delete(api.url("/namespaces/team-a/podgroups/nope")), 404, None),
        (api.get("/namespaces/team-a/podgroups/nope"), 404, None),
        (api.get("/podgroups", params={"workload": "Bad_Name"}), 422, ["query", "workload"]),
    ]
    for r, status, loc in cases:
        assert r.status_code == status, r.text
        assert r.headers["content-type"].startswith("application/problem+json")
        if loc is not None:
            assert loc in [e["loc"] for e in r.json()["errors"]], r.json()
    assert api.last_position() == before
