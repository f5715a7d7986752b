"""Issue 18, point 7, through the real app and store: a retired name's 409, `allocated` without `pods`."""
from __future__ import annotations

from litestar.testing import TestClient

from tests.e2e.helpers import Api, node, workload


def test_a_live_names_409_says_where_its_workload_was_submitted(client: TestClient, cluster: str) -> None:
    api = Api(client, cluster)
    assert api.put_node("n1", node()).status_code == 200
    live_at = api.submit(workload("live")).json()["position"]
    assert api.submit(workload("done")).status_code == 201
    assert api.delete_workload("done").status_code == 200
    before = api.last_position()
    live = api.submit(workload("live"))
    assert live.status_code == 409 and f"position {live_at}" in live.json()["detail"]
    assert api.last_position() == before  # nothing recorded
    assert api.submit(workload("done")).status_code == 201  # a deleted one's name: a new incarnation


def test_allocated_shows_pods_only_where_the_node_declares_them(client: TestClient, cluster: str) -> None:
    api = Api(client, cluster)
    assert api.put_node("bare", {"labels": {"example.com/rack": "r1"},
                                 "allocatable": {"cpu": "4", "memory": "8Gi"}}).status_code == 200
    assert api.submit(workload("one", pods=1, cpu="1")).status_code == 201
    view = api.get("/nodes/bare").json()
    assert view["pods"] and view["allocated"] == {"cpu": "1", "memory": view["allocated"]["memory"]}
    assert "pods" not in view["allocated"] and "pods" not in view["free"]
    # declared: allocated and free agree with allocatable (4 cpu fit only there: bare has 3 left)
    assert api.put_node("counted", node(cpu="4", rack="r2")).status_code == 200
    assert api.submit(workload("two", pods=1, cpu="4")).status_code == 201
    counted = api.get("/nodes/counted").json()
    assert counted["allocatable"]["pods"] == "110"
    assert counted["allocated"]["pods"] == "1" and counted["free"]["pods"] == "109"
