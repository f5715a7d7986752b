"""The same small happy path on both backends: PostgreSQL and an SQLite file."""
from __future__ import annotations

from pathlib import Path

import pytest

from tests.e2e.conftest import open_client
from tests.e2e.helpers import Api, node, workload


@pytest.fixture(params=["postgresql", "sqlite"])
def database_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "postgresql":
        return request.getfixturevalue("pg_url")
    return f"sqlite+aiosqlite:///{tmp_path / 'gangplank.db'}"  # migrated by the app at start


def test_happy_path(database_url: str, cluster: str) -> None:
    with open_client(database_url) as client:
        api = Api(client, cluster)
        assert client.get("/readyz").status_code == 200
        assert api.put_node("n1", node(cpu="4")).status_code == 200
        assert api.put_node("n2", node(cpu="4")).status_code == 200
        r = api.submit(workload("train", 2, cpu="4"), headers={"Idempotency-Key": f"{cluster}-k"})
        assert r.status_code == 201 and r.json()["status"]["phase"] == "Scheduled"
        replay = api.submit(workload("train", 2, cpu="4"), headers={"Idempotency-Key": f"{cluster}-k"})
        assert replay.json() == r.json()
        waiting = api.submit(workload("wait", 1, cpu="4"))
        assert waiting.json()["status"]["phase"] == "Pending"
        assert api.submit(workload("train")).status_code == 409
        deleted = api.delete_workload("train")
        assert deleted.status_code == 200
        assert [d["data"]["workload"] for d in deleted.json()["decisions"]] == ["wait"]
        assert api.workload("train").json()["status"]["phase"] == "Finished"
        assert [w["name"] for w in api.all_workloads()] == ["train", "wait"]
        assert api.last_position() == 8
        assert api.verify() == {"ok": True, "events": 8, "head": api.all_events()[-1]["hash"]}
        assert {"name": cluster, "lastPosition": 8} in client.get("/v1/clusters").json()["items"]
        views = api.all_workloads(), api.get("/nodes").json()
    with open_client(database_url) as client:  # restart
        api = Api(client, cluster)
        assert (api.all_workloads(), api.get("/nodes").json()) == views
