"""lifecycle.md over HTTP on PostgreSQL: podstatus, its refusals (nothing recorded), finished pods
surviving a restart from a snapshot and from the events alone, replay --verify."""
from __future__ import annotations

from typing import Any

from service.app.audit import explain, replay
from tests.e2e.conftest import open_client
from tests.e2e.helpers import Api, node, run_sql, workload
from tests.e2e.test_restart import observe


def _report(api: Api, name: str, pods: list[tuple[str, str]], namespace: str = "team-a", **kw: Any) -> Any:
    body = {"pods": [{"podGroup": "workers", "name": p, "phase": phase} for p, phase in pods]}
    return api.client.post(api.url(f"/namespaces/{namespace}/workloads/{name}/podstatus"), json=body, **kw)


def test_podstatus_over_http(client: Any, cluster: str) -> None:
    api = Api(client, cluster)
    api.put_node("n1", node(cpu="4"))
    assert api.submit(workload("pi", 4, cpu="1")).status_code == 201
    assert api.submit(workload("next", 2, cpu="1")).json()["status"]["phase"] == "Pending"
    r = _report(api, "pi", [("w-0", "Succeeded")], headers={"Idempotency-Key": f"{cluster}-finish-0"})
    assert r.status_code == 200, r.text
    view = r.json()
    group = view["status"]["podGroups"][0]
    assert group["pods"][0] == {"name": "w-0", "phase": "Succeeded", "node": None}
    assert (group["placedPods"], group["succeededPods"], group["pendingPods"]) == (3, 1, 0)
    assert view["decisions"] == []
    again = _report(api, "pi", [("w-0", "Succeeded")], headers={"Idempotency-Key": f"{cluster}-finish-0"})
    assert again.json() == view and again.headers["idempotent-replayed"] == "true"
    r = _report(api, "pi", [("w-1", "Failed")])
    assert [d["type"] for d in r.json()["decisions"]] == ["PodGroupScheduled"]  # `next` takes the room
    assert api.workload("next").json()["status"]["phase"] == "Scheduled"
    history = api.get("/namespaces/team-a/workloads/pi/history").json()
    assert [e["type"] for e in history["events"]].count("PodsFinished") == 2
    lines = explain("team-a", "pi", history["events"])
    assert any("w-1 failed on n1 at position" in line for line in lines), lines
    assert "1 succeeded" in lines[-1]
    at = history["events"][-1]["position"]
    past = api.get("/state", params={"at": at - 1}).json()
    pi = next(w for w in past["workloads"] if w["name"] == "pi")
    assert [p["phase"] for p in pi["status"]["podGroups"][0]["pods"]] == ["Succeeded", "Running", "Running", "Running"]


def test_podstatus_refusals_record_nothing(client: Any, cluster: str) -> None:
    api = Api(client, cluster)
    api.put_node("n1", node(cpu="2"))
    api.submit(workload("pi", 2, cpu="1"))
    api.submit(workload("wait", 2, cpu="2"))
    before = api.last_position()
    cases = [
        (_report(api, "nope", [("w-0", "Succeeded")]), 404, None),
        (_report(api, "pi", [("w-9", "Succeeded")]), 422, ["body", "pods", 0, "name"]),
        (api.client.post(api.url("/namespaces/team-a/workloads/pi/podstatus"),
                         json={"pods": [{"podGroup": "other", "name": "w-0", "phase": "Failed"}]}), 422,
         ["body", "pods", 0, "podGroup"]),
        (_report(api, "wait", [("w-0", "Failed")]), 409, None),
        (_report(api, "pi", [("w-0", "Running")]), 422, ["body", "pods", 0, "phase"]),
        (_report(api, "pi", [("w-0", "Failed"), ("w-0", "Failed")]), 422, ["body", "pods", 1, "name"]),
        (api.client.post(api.url("/namespaces/team-a/workloads/pi/podstatus"), json={"pods": []}), 422,
         ["body", "pods"]),
    ]
    for r, status, loc in cases:
        assert r.status_code == status, r.text
        assert r.headers["content-type"].startswith("application/problem+json")
        if loc is not None:
            assert loc in [e["loc"] for e in r.json()["errors"]], r.json()
    assert "Pending" in cases[3][0].json()["detail"]
    api.delete_workload("pi")
    assert _report(api, "pi", [("w-0", "Failed")]).status_code == 409
    assert api.last_position() == before + 1  # the deletion only (wait still does not fit)


def test_finished_pods_survive_restarts_and_replay(pg_url: str, cluster: str) -> None:
    with open_client(pg_url, snapshot_every=5) as client:
        api = Api(client, cluster)
        api.put_node("n1", node(cpu="8"))
        api.put_node("n2", node(cpu="8"))
        for i in range(3):
            api.submit(workload(f"j{i}", 4, cpu="2"))
        _report(api, "j0", [("w-0", "Succeeded"), ("w-1", "Failed")])
        _report(api, "j1", [("w-2", "Succeeded")])
        _report(api, "j1", [("w-0", "Succeeded"), ("w-1", "Succeeded"), ("w-3", "Succeeded")])
        api.delete_workload("j1")
        client.delete(api.url("/nodes/n1"))
        before = observe(api)
    assert before["workload views"][("team-a", "j1")]["status"]["podGroups"][0]["succeededPods"] == 4
    assert run_sql(pg_url, "SELECT count(*) FROM snapshots WHERE cluster = $1", cluster, fetch=True) > 0
    with open_client(pg_url) as client:
        assert observe(Api(client, cluster)) == before
        assert run_sql(pg_url, "DELETE FROM snapshots WHERE cluster = $1", cluster).startswith("DELETE")
    with open_client(pg_url, snapshot_every=10**9) as client:
        api = Api(client, cluster)
        assert observe(api) == before
        events = api.all_events()
    result = replay(events, cluster, verify=True)
    assert result.ok, result.summary()


def _scale(api: Api, name: str, body: dict[str, Any], namespace: str = "team-a", **kw: Any) -> Any:
    return api.client.post(api.url(f"/namespaces/{namespace}/workloads/{name}/scale"), json=body, **kw)


def _workers(count: int, min_count: int | None = None) -> dict[str, Any]:
    group: dict[str, Any] = {"name": "workers", "pods": [{"name": "w", "count": count}]}
    if min_count is not None:
        group["schedulingPolicy"] = {"gang": {"minCount": min_count}}
    return {"podGroups": [group]}


def test_scale_over_http(client: Any, cluster: str) -> None:
    api = Api(client, cluster)
    api.put_node("n1", node(cpu="4"))
    assert api.submit(workload("pi", 2, cpu="1")).status_code == 201
    r = _scale(api, "pi", _workers(4), headers={"Idempotency-Key": f"{cluster}-scale-0"})
    assert r.status_code == 200, r.text
    view = r.json()
    assert [p["name"] for p in view["status"]["podGroups"][0]["pods"]] == ["w-0", "w-1", "w-2", "w-3"]
    assert [d["type"] for d in view["decisions"]] == ["PodsScheduled"]
    assert view["spec"]["podGroups"][0]["pods"][0]["count"] == 4
    again = _scale(api, "pi", _workers(4), headers={"Idempotency-Key": f"{cluster}-scale-0"})
    assert again.json() == view and again.headers["idempotent-replayed"] == "true"
    dry = _scale(api, "pi", _workers(1, 1), params={"dryRun": "true"})
    assert dry.status_code == 200 and len(dry.json()["status"]["podGroups"][0]["pods"]) == 1
    assert len(api.workload("pi").json()["status"]["podGroups"][0]["pods"]) == 4
    r = _scale(api, "pi", _workers(2, 2))
    assert r.status_code == 200 and r.json()["status"]["podGroups"][0]["placedPods"] == 2
    history = api.get("/namespaces/team-a/workloads/pi/history").json()
    scaled = [e for e in history["events"] if e["type"] == "WorkloadScaled"]
    assert len(scaled) == 2 and scaled[-1]["data"]["podGroups"][0]["removedPods"][0] == {"pod": "w-2", "node": "n1"}
    lines = explain("team-a", "pi", history["events"])
    assert any("Scaled group workers to 2 pods (minCount 2): removed the highest indices w-2 (on n1)" in line
               for line in lines), lines
    assert lines[-1].startswith("Now: Scheduled — group workers: 2 of 2 pods placed"), lines[-1]
    past = api.get("/state", params={"at": scaled[0]["position"]}).json()
    pi = next(w for w in past["workloads"] if w["name"] == "pi")
    assert len(pi["status"]["podGroups"][0]["pods"]) == 4
    result = replay(api.all_events(), cluster, verify=True)
    assert result.ok, result.summary()


def test_scale_refusals_record_nothing(client: Any, cluster: str) -> None:
    api = Api(client, cluster)
    api.put_node("n1", node(cpu="8"))
    api.submit(workload("pi", 4, cpu="1", min_count=2))
    _report(api, "pi", [("w-3", "Succeeded"), ("w-0", "Failed")])
    before = api.last_position()
    cases = [
        (_scale(api, "nope", _workers(2)), 404, None),
        (_scale(api, "pi", _workers(3)), 409, None),  # w-3 Succeeded: PodFinished
        (_scale(api, "pi", {"podGroups": [{"name": "other"}]}), 422, ["body", "podGroups", 0, "name"]),
        (_scale(api, "pi", {"podGroups": [{"name": "workers", "pods": [{"name": "x", "count": 1}]}]}), 422,
         ["body", "podGroups", 0, "pods", 0, "name"]),
        (_scale(api, "pi", _workers(5, 6)), 422, ["body", "podGroups", 0, "schedulingPolicy", "gang", "minCount"]),
        (_scale(api, "pi", _workers(0)), 422, ["body", "podGroups", 0, "pods", 0, "count"]),
        (_scale(api, "pi", {"podGroups": [{"name": "workers", "replicas": 2}]}), 422,
         ["body", "podGroups", 0, "replicas"]),
        (_scale(api, "pi", {"compositePodGroups": [{"name": "workers", "count": 2}]}), 422,
         ["body", "compositePodGroups"]),
        (_scale(api, "pi", {}), 422, ["body", "podGroups"]),
    ]
    for r, status, loc in cases:
        assert r.status_code == status, r.text
        assert r.headers["content-type"].startswith("application/problem+json")
        if loc is not None:
            assert loc in [e["loc"] for e in r.json()["errors"]], r.json()
    assert "PodFinished" in cases[1][0].text or "finished" in cases[1][0].json()["detail"]
    assert api.last_position() == before
    api.delete_workload("pi")
    assert _scale(api, "pi", _workers(5)).status_code == 409
