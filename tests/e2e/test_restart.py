"""A restart keeps everything: a new app on the same database serves the same views,
from a snapshot and from the events alone (snapshots are caches)."""
from __future__ import annotations

from typing import Any

from service.app.audit import replay
from tests.e2e.conftest import open_client
from tests.e2e.helpers import Api, node, run_sql, workload


def observe(api: Api) -> dict[str, Any]:
    """Everything the API shows about the cluster."""
    workloads = api.all_workloads()
    return {
        "nodes": api.get("/nodes").json(),
        "node views": {n["name"]: api.get(f"/nodes/{n['name']}").json() for n in api.get("/nodes").json()["items"]},
        "workloads": workloads,
        "workload views": {(w["namespace"], w["name"]): api.workload(w["name"], w["namespace"]).json()
                           for w in workloads},
        "priority classes": api.get("/priorityclasses").json(),
        "state": api.get("/state").json(),
        "earlier state": api.get("/state", params={"at": 12}).json(),
        "events": api.all_events(),
        "verify": api.verify(),
    }


def test_restart_keeps_everything(pg_url: str, cluster: str) -> None:
    retry_key = {"Idempotency-Key": f"{cluster}-restart-retry"}
    with open_client(pg_url, snapshot_every=7) as client:
        api = Api(client, cluster)
        for i in range(3):
            api.put_node(f"n{i}", node(cpu="8", rack=f"r{i % 2}"))
        client.put(api.url("/priorityclasses/high"), json={"value": 100})
        for i in range(6):
            ns = "team-a" if i % 2 else "team-b"
            api.submit(workload(f"w{i}", 2, cpu="3", topology="example.com/rack"), namespace=ns)
        first = api.submit(workload("keyed", 1, cpu="1", priority_class="high"), headers=retry_key)
        assert first.status_code == 201
        api.submit(workload("too-big", 1, cpu="64"))
        api.delete_workload("w1")
        client.delete(api.url("/nodes/n0"))  # pods lost, some back in the queue
        before = observe(api)
    assert before["verify"]["ok"] is True
    assert any(w["status"]["phase"] == "Pending" for w in before["workloads"])
    assert any(w["status"]["phase"] == "Finished" for w in before["workloads"])

    snapshots = run_sql(pg_url, "SELECT count(*) FROM snapshots WHERE cluster = $1", cluster, fetch=True)
    assert snapshots > 0, "the first app should have written snapshots (snapshot_every=7)"

    # a new app on the same database: from the latest snapshot plus the events after it
    with open_client(pg_url) as client:
        api = Api(client, cluster)
        assert observe(api) == before
        # keys survive the restart
        again = api.submit(workload("keyed", 1, cpu="1", priority_class="high"), headers=retry_key)
        assert (again.status_code, again.json()) == (201, first.json())
        assert again.headers["idempotent-replayed"] == "true"
        # every snapshot is a cache: drop them all
        assert run_sql(pg_url, "DELETE FROM snapshots").startswith("DELETE")

    with open_client(pg_url, snapshot_every=10**9) as client:
        api = Api(client, cluster)
        assert observe(api) == before
        # and it goes on deciding from there, on the same chain
        assert api.submit(workload("after", 1, cpu="1")).status_code == 201
        assert api.verify()["ok"] is True
        events = api.all_events()
    # the recorded decisions are those the decider gives for the recorded inputs
    result = replay(events, cluster, verify=True)
    assert result.ok, result.summary()

