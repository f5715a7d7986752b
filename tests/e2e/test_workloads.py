"""Workloads and inventory through the real app on PostgreSQL."""
from __future__ import annotations

from litestar.testing import TestClient

from tests.e2e.helpers import Api, node, workload


def test_submit_get_list_delete(client: TestClient, cluster: str) -> None:
    api = Api(client, cluster)
    for i in range(2):
        assert api.put_node(f"n{i}", node(cpu="8")).status_code == 200

    r = api.submit(workload("a", 2, cpu="4"))
    assert r.status_code == 201, r.text
    assert r.headers["location"] == f"/v1/clusters/{cluster}/namespaces/team-a/workloads/a"
    a = r.json()
    assert a["cluster"] == cluster and a["namespace"] == "team-a" and a["name"] == "a"
    assert a["status"]["phase"] == "Scheduled"
    assert [d["type"] for d in a["decisions"]] == ["PodGroupScheduled"]
    assert a["decisions"][0]["position"] == a["position"] + 1
    assert all(p["node"] is not None for p in a["status"]["podGroups"][0]["pods"])
    assert a["spec"]["podGroups"][0]["pods"][0]["count"] == 2

    # the GET shows the committed view (without the decisions of the request)
    got = api.workload("a").json()
    assert got == {k: v for k, v in a.items() if k != "decisions"}

    # other namespace; one that cannot be placed (pending), one that fills the rest
    assert api.submit(workload("b", 1, cpu="4"), namespace="team-b").status_code == 201
    big = api.submit(workload("big", 1, cpu="16"))
    assert big.status_code == 201
    assert big.json()["status"]["phase"] == "Pending"
    assert [d["type"] for d in big.json()["decisions"]] == ["PodGroupUnschedulable"]
    group = big.json()["status"]["podGroups"][0]
    assert group["explanation"]["message"].startswith("0/2 nodes are available")
    assert api.submit(workload("c", 1, cpu="4"), namespace="team-b").status_code == 201
    waiting = api.submit(workload("d", 1, cpu="4"))  # no room left: pending
    assert waiting.status_code == 201 and waiting.json()["status"]["phase"] == "Pending"

    # list: submission order, pages by position
    everything = api.all_workloads()
    assert [w["name"] for w in everything] == ["a", "b", "big", "c", "d"]
    positions = [w["position"] for w in everything]
    assert positions == sorted(positions)
    page1 = api.get("/workloads", params={"limit": 2}).json()
    assert [w["name"] for w in page1["items"]] == ["a", "b"] and page1["next"] == positions[1]
    page2 = api.get("/workloads", params={"limit": 2, "after": page1["next"]}).json()
    assert [w["name"] for w in page2["items"]] == ["big", "c"] and page2["next"] == positions[3]
    page3 = api.get("/workloads", params={"limit": 2, "after": page2["next"]}).json()
    assert [w["name"] for w in page3["items"]] == ["d"] and page3["next"] is None
    # filters
    team_b = api.get("/workloads", params={"namespace": "team-b"}).json()
    assert [w["name"] for w in team_b["items"]] == ["b", "c"] and team_b["next"] is None
    pending = api.get("/workloads", params={"phase": "Pending"}).json()
    assert [w["name"] for w in pending["items"]] == ["big", "d"]
    scheduled_a = api.get("/workloads", params={"phase": "Scheduled", "namespace": "team-a"}).json()
    assert [w["name"] for w in scheduled_a["items"]] == ["a"]
    assert api.get("/workloads", params={"phase": "Finished"}).json() == {"items": [], "next": None}

    # delete: the final view and the decisions the freed room caused (d gets a's room)
    r = api.delete_workload("a")
    assert r.status_code == 200, r.text
    final = r.json()
    assert final["name"] == "a" and final["status"]["phase"] == "Finished"
    scheduled = [d for d in final["decisions"] if d["type"] == "PodGroupScheduled"]
    assert [d["data"]["workload"] for d in scheduled] == ["d"]
    assert api.workload("d").json()["status"]["phase"] == "Scheduled"

    # after deletion: still there, Finished, pods released
    gone = api.workload("a")
    assert gone.status_code == 200
    assert gone.json()["status"]["phase"] == "Finished"
    assert all(p["node"] is None for p in gone.json()["status"]["podGroups"][0]["pods"])
    assert [w["name"] for w in api.get("/workloads", params={"phase": "Finished"}).json()["items"]] == ["a"]
    # deleting again is a 404
    assert api.delete_workload("a").status_code == 404

    # history: submission, decision, deletion
    hist = api.get("/namespaces/team-a/workloads/a/history").json()["events"]
    assert [e["type"] for e in hist] == ["WorkloadSubmitted", "PodGroupScheduled", "WorkloadDeleted"]
    # the name submitted again is a new incarnation (lifecycle.md, *Names used again*)
    again = api.submit(workload("a"))
    assert again.status_code == 201 and again.json()["previous"] == hist[0]["position"]
    assert api.verify()["ok"] is True


def test_inventory_nodes_and_priority_classes(client: TestClient, cluster: str) -> None:
    api = Api(client, cluster)
    r = api.put_node("n1", node(cpu="4", rack="r1"))
    assert r.status_code == 200, r.text
    view = r.json()
    assert view["name"] == "n1" and view["allocatable"]["cpu"] == "4"
    assert view["free"]["cpu"] == "4" and view["pods"] == []
    assert view["decisions"] == []
    assert api.put_node("n2", node(cpu="4", rack="r2")).status_code == 200

    listed = api.get("/nodes").json()["items"]
    assert [n["name"] for n in listed] == ["n1", "n2"]
    assert api.get("/nodes/n1").json() == {k: v for k, v in view.items() if k != "decisions"}

    # replace: labels change, it is the same node
    r = api.put_node("n1", {"labels": {"example.com/rack": "r9"}, "allocatable": {"cpu": "4"},
                            "unschedulable": False})
    assert r.status_code == 200 and r.json()["labels"] == {"example.com/rack": "r9"}
    assert "pods" not in api.get("/nodes/n1").json()["allocatable"]

    # priority classes
    r = client.put(api.url("/priorityclasses/high"), json={"value": 1000})
    assert r.status_code == 200, r.text
    assert r.json()["name"] == "high" and r.json()["value"] == 1000
    assert r.json()["preemptionPolicy"] == "PreemptLowerPriority"
    assert client.put(api.url("/priorityclasses/batch"),
                      json={"value": 10, "preemptionPolicy": "Never"}).status_code == 200
    assert [p["name"] for p in api.get("/priorityclasses").json()["items"]] == ["batch", "high"]
    assert api.get("/priorityclasses/batch").json() == {"name": "batch", "value": 10, "preemptionPolicy": "Never"}
    assert api.get("/priorityclasses/nope").status_code == 404

    # a submission by class gets the class's value, resolved once
    r = api.submit(workload("by-class", 1, cpu="2", priority_class="high"))
    assert r.status_code == 201 and r.json()["priority"] == 1000
    r = api.submit(workload("never", 1, cpu="1", priority_class="batch"))
    assert r.json()["priority"] == 10 and r.json()["preemptionPolicy"] == "Never"
    assert client.put(api.url("/priorityclasses/high"), json={"value": 5}).status_code == 200
    assert api.workload("by-class").json()["priority"] == 1000

    # node views show their pods
    placed = api.workload("by-class").json()["status"]["podGroups"][0]["pods"][0]["node"]
    pods = api.get(f"/nodes/{placed}").json()["pods"]
    assert {"namespace": "team-a", "workload": "by-class", "podGroup": "workers", "pod": "w-0"} in pods

    # removing a node releases its pods: the answer names them, the workload is pending again
    r = client.delete(api.url(f"/nodes/{placed}"))
    assert r.status_code == 200, r.text
    released = r.json()["released"]
    assert {"namespace": "team-a", "workload": "by-class", "podGroup": "workers", "pod": "w-0",
            "node": placed} in released
    assert any(d["type"] == "PodsLost" for d in r.json()["decisions"])
    assert api.get(f"/nodes/{placed}").status_code == 404
    assert client.delete(api.url(f"/nodes/{placed}")).status_code == 404
    assert [n["name"] for n in api.get("/nodes").json()["items"]] == [n for n in ("n1", "n2") if n != placed]
    by_class = api.workload("by-class").json()
    # it lands on the remaining node again in the same pass, unless that is full
    assert by_class["status"]["podGroups"][0]["pods"][0]["node"] in (None, "n1", "n2")
    assert api.verify()["ok"] is True


def test_preemption_is_visible_in_the_preemptors_answer(client: TestClient, cluster: str) -> None:
    api = Api(client, cluster)
    for i in range(2):
        api.put_node(f"n{i}", node(cpu="8", rack="r1"))
    low = api.submit(workload("low", 2, cpu="8", priority=10, topology="example.com/rack"))
    assert low.json()["status"]["phase"] == "Scheduled"
    filler = api.submit(workload("filler", 1, cpu="1", priority=10))
    assert filler.json()["status"]["phase"] == "Pending"

    r = api.submit(workload("high", 2, cpu="8", priority=500, topology="example.com/rack"), namespace="team-b")
    assert r.status_code == 201, r.text
    high = r.json()
    assert high["status"]["phase"] == "Scheduled"
    types = [d["type"] for d in high["decisions"]]
    assert types[:2] == ["PodGroupPreempted", "PodGroupScheduled"], types
    preempted, scheduled = high["decisions"][0], high["decisions"][1]
    assert preempted["data"]["workload"] == "low" and preempted["data"]["wholeGroup"] is True
    assert preempted["data"]["preemptor"]["workload"] == "high"
    assert sorted(p["pod"] for p in preempted["data"]["pods"]) == ["w-0", "w-1"]
    assert scheduled["data"]["workload"] == "high"
    victims = scheduled["data"]["preemption"]["victims"]
    assert [(v["namespace"], v["workload"], v["wholeGroup"]) for v in victims] == [("team-a", "low", True)]
    assert sorted(victims[0]["pods"]) == ["w-0", "w-1"]
    # positions follow the input's
    assert [d["position"] for d in high["decisions"]] == list(range(high["position"] + 1,
                                                                    high["position"] + 1 + len(types)))

    victim = api.workload("low").json()
    assert victim["status"]["phase"] == "Pending"
    conditions = victim["status"]["podGroups"][0]["conditions"]
    assert any(c["type"] == "DisruptionTarget" and c["reason"] == "PreemptionByScheduler" for c in conditions)
    history = [e["type"] for e in api.get("/namespaces/team-a/workloads/low/history").json()["events"]]
    assert "PodGroupPreempted" in history
    # the preemptor's decision is in the stream, exactly as answered
    stored = {e["position"]: e for e in api.all_events()}
    for d in high["decisions"]:
        assert stored[d["position"]]["type"] == d["type"] and stored[d["position"]]["data"] == d["data"]


def test_removing_a_slice_answers_the_pods_released_as_for_nodes(client: TestClient, cluster: str) -> None:
    """http.md: resource slices answer "as for nodes"; removing one is node loss for its devices."""
    api = Api(client, cluster)
    assert api.put_node("n1", node(cpu="8")).status_code == 200
    assert client.put(api.url("/deviceclasses/gpu"), json={
        "selectors": [{"cel": {"expression": "device.driver == 'gpu.example.com'"}}]}).status_code == 200
    assert client.put(api.url("/resourceslices/n1-gpus"), json={
        "driver": "gpu.example.com", "pool": {"name": "n1", "generation": 1}, "nodeName": "n1",
        "devices": [{"name": "gpu-0"}]}).status_code == 200
    body = workload("uses-gpu", 1, cpu="1")
    body["resourceClaimTemplates"] = [{"name": "one", "spec": {"devices": {"requests": [
        {"name": "gpu", "exactly": {"deviceClassName": "gpu"}}]}}}]
    body["podGroups"][0]["pods"][0]["resourceClaims"] = [{"name": "gpu", "resourceClaimTemplateName": "one"}]
    r = api.submit(body)
    assert r.status_code == 201 and r.json()["status"]["phase"] == "Scheduled", r.text

    r = client.delete(api.url("/resourceslices/n1-gpus"))
    assert r.status_code == 200, r.text
    answer = r.json()
    assert answer["name"] == "n1-gpus"
    assert answer["released"] == [{"namespace": "team-a", "workload": "uses-gpu", "podGroup": "workers",
                                   "pod": "w-0", "node": "n1"}]
    assert [d["type"] for d in answer["decisions"]][:1] == ["PodsLost"]
    r = client.delete(api.url("/deviceclasses/gpu"))
    assert r.status_code == 200 and r.json()["released"] == [] and r.json()["name"] == "gpu"
    assert client.delete(api.url("/resourceslices/n1-gpus")).status_code == 404


def test_an_oversized_body_is_413_on_every_mutating_route(client: TestClient, cluster: str) -> None:
    """http.md: "a body over 1 MiB is 413, whatever it holds": also on a DELETE, which takes no body."""
    api = Api(client, cluster)
    assert api.put_node("n1", node(cpu="8")).status_code == 200
    assert api.submit(workload("keep")).status_code == 201
    before = api.get("/events").json()["lastPosition"]
    big = b" " * (1024 * 1024 + 1)
    for path in ("/nodes/n1", "/namespaces/team-a/workloads/keep"):
        r = client.request("DELETE", api.url(path), content=big)
        assert r.status_code == 413, r.text
        assert r.headers["content-type"].startswith("application/problem+json")
    assert api.get("/events").json()["lastPosition"] == before
    assert api.get("/nodes/n1").status_code == 200 and api.workload("keep").status_code == 200


def test_removing_a_node_answers_every_pod_released_with_its_own_node(client: TestClient, cluster: str) -> None:
    api = Api(client, cluster)
    for name in ("n1", "n2"):
        assert api.put_node(name, node(cpu="1")).status_code == 200
    r = api.submit(workload("pair", 2, cpu="1"))  # one pod per node; minCount 2
    pods = {p["name"]: p["node"] for p in r.json()["status"]["podGroups"][0]["pods"]}
    assert sorted(pods.values()) == ["n1", "n2"]
    r = client.delete(api.url("/nodes/n1"))
    assert r.status_code == 200, r.text
    # the gang is below minCount: it goes back whole, its pod on n2 is released too
    assert sorted((p["pod"], p["node"]) for p in r.json()["released"]) == sorted(pods.items())
