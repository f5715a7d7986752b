"""Names used again (lifecycle.md): a deleted workload's name submitted again is a new incarnation,
over HTTP on PostgreSQL, with its views, history, list, idempotency, replay, what-if and audit explain
keeping the incarnations apart."""
from __future__ import annotations

from typing import Any

from litestar.testing import TestClient

from tests.e2e.helpers import Api, node, workload


def _rerun(api: Api) -> tuple[dict[str, Any], dict[str, Any]]:
    """a submitted (key k1), deleted, submitted again (key k2): the two answers."""
    assert api.put_node("n1", node(cpu="8")).status_code == 200
    first = api.submit(workload("a", 2, cpu="2"), headers={"Idempotency-Key": f"{api.cluster}-k1"})
    assert first.status_code == 201, first.text
    assert api.delete_workload("a").status_code == 200
    second = api.submit(workload("a", 2, cpu="2"), headers={"Idempotency-Key": f"{api.cluster}-k2"})
    assert second.status_code == 201, second.text
    return first.json(), second.json()


def test_a_deleted_name_submitted_again_is_a_new_incarnation(client: TestClient, cluster: str) -> None:
    api = Api(client, cluster)
    first, second = _rerun(api)
    assert second["position"] > first["position"]
    assert first["previous"] is None and second["previous"] == first["position"]
    assert second["status"]["phase"] == "Scheduled" and second["status"]["deletedAt"] is None
    assert [d["type"] for d in second["decisions"]] == ["PodGroupScheduled"]
    events = api.all_events()
    submitted = [e for e in events if e["type"] == "WorkloadSubmitted"]
    assert [e["position"] for e in submitted] == [first["position"], second["position"]]

    # the name means the latest incarnation; ?position=N the one submitted at N
    assert api.workload("a").json()["position"] == second["position"]
    old = api.get("/namespaces/team-a/workloads/a", params={"position": first["position"]}).json()
    assert old["position"] == first["position"] and old["status"]["phase"] == "Finished"
    assert old["status"]["deletedAt"] is not None and old["previous"] is None
    assert api.get("/namespaces/team-a/workloads/a", params={"position": first["position"] + 1}).status_code == 404
    assert api.get("/namespaces/team-a/workloads/a", params={"position": "x"}).status_code == 422

    # history: the latest incarnation's events only, unless ?position=N
    latest = [e["position"] for e in api.get("/namespaces/team-a/workloads/a/history").json()["events"]]
    assert latest[0] == second["position"] and min(latest) == second["position"]
    earlier = api.get("/namespaces/team-a/workloads/a/history", params={"position": first["position"]}).json()
    positions = [e["position"] for e in earlier["events"]]
    assert positions[0] == first["position"] and max(positions) < second["position"]
    assert [e["type"] for e in earlier["events"]][-1] == "WorkloadDeleted"
    assert api.get("/namespaces/team-a/workloads/a/history", params={"position": 10_000}).status_code == 404

    # the list holds every incarnation, each with its position
    listed = [(w["name"], w["position"], w["status"]["phase"]) for w in api.all_workloads()]
    assert listed == [("a", first["position"], "Finished"), ("a", second["position"], "Scheduled")]


def test_a_live_name_is_a_409_naming_its_position(client: TestClient, cluster: str) -> None:
    api = Api(client, cluster)
    _, second = _rerun(api)
    again = api.submit(workload("a", 1), headers={"Idempotency-Key": f"{api.cluster}-k3"})
    assert again.status_code == 409
    assert f"position {second['position']}" in again.json()["detail"]


def test_idempotency_is_unchanged_after_a_deletion(client: TestClient, cluster: str) -> None:
    api = Api(client, cluster)
    first, second = _rerun(api)
    retry = api.submit(workload("a", 2, cpu="2"), headers={"Idempotency-Key": f"{api.cluster}-k1"})
    assert retry.status_code == 201 and retry.headers.get("idempotent-replayed") == "true"
    assert retry.json()["position"] == first["position"]
    assert len([w for w in api.all_workloads() if w["name"] == "a"]) == 2


def test_decisions_concern_the_live_incarnation_and_replay_keeps_them_apart(client: TestClient,
                                                                            cluster: str) -> None:
    api = Api(client, cluster)
    first, second = _rerun(api)
    # a higher-priority workload preempts the second incarnation, not the first (long gone)
    urgent = api.submit(workload("urgent", 4, cpu="2", priority=100), namespace="team-b")
    assert urgent.status_code == 201, urgent.text
    preempted = [d for d in urgent.json()["decisions"] if d["type"] == "PodGroupPreempted"]
    assert preempted and preempted[0]["data"]["workload"] == "a"
    now = api.workload("a").json()
    assert now["position"] == second["position"] and now["status"]["phase"] == "Pending"
    old = api.get("/namespaces/team-a/workloads/a", params={"position": first["position"]}).json()
    assert old["status"]["phase"] == "Finished"
    history = api.get("/namespaces/team-a/workloads/a/history").json()["events"]
    assert "PodGroupPreempted" in [e["type"] for e in history]
    report = api.get("/audit/replay").json()
    assert report["verdict"] == "identical", report
    assert api.verify()["ok"] is True


def test_what_if_withdraws_every_incarnation_or_one(client: TestClient, cluster: str) -> None:
    api = Api(client, cluster)
    first, second = _rerun(api)
    url = api.url("/audit/what-if")
    rows = client.post(url, json={}).json()["workloads"]
    assert [(r["name"], r["submittedAt"], r["recorded"]["phase"]) for r in rows] == \
        [("a", first["position"], "Finished"), ("a", second["position"], "Scheduled")]
    assert all(r["whatIf"] == r["recorded"] for r in rows)

    every = client.post(url, json={"withdraw": ["team-a/a"]}).json()["workloads"]
    assert [r["withdrawn"] for r in every] == [True, True]
    one = client.post(url, json={"withdraw": [f"team-a/a@{first['position']}"]}).json()["workloads"]
    assert [r["withdrawn"] for r in one] == [True, False]
    assert one[1]["whatIf"]["phase"] == "Scheduled"
    bad = client.post(url, json={"withdraw": [f"team-a/a@{first['position'] + 1}"]})
    assert bad.status_code == 422 and bad.json()["errors"][0]["loc"][-2:] == ["withdraw", 0]
    bad = client.post(url, json={"withdraw": ["team-a/a@x"]})
    assert bad.status_code == 422


def test_audit_explain_tells_the_incarnations_apart(client: TestClient, pg_url: str, cluster: str) -> None:
    from typer.testing import CliRunner

    from service.cli.main import app as cli

    api = Api(client, cluster)
    first, second = _rerun(api)
    assert api.submit(workload("urgent", 4, cpu="2", priority=100), namespace="team-b").status_code == 201

    def explain(*extra: str) -> list[str]:
        result = CliRunner().invoke(cli, ["audit", "explain", "team-a/a", "--cluster", cluster,
                                          "--database-url", pg_url, *extra])
        assert result.exit_code == 0, result.output
        return result.stdout.splitlines()

    latest = explain()
    assert f"[#{second['position']}] Submitted team-a/a" in latest[0]
    assert f"the one before was submitted at #{first['position']}" in latest[0]
    assert all(f"[#{first['position']}]" not in line for line in latest)  # its history only
    assert any("preempted by team-b/urgent" in line for line in latest)
    earlier = explain("--position", str(first["position"]))
    assert f"[#{first['position']}] Submitted team-a/a" in earlier[0] and "the one before" not in earlier[0]
    assert earlier[-1].startswith("Now: Finished (deleted at #")
    # the preemptor names its victim's incarnation
    urgent = CliRunner().invoke(cli, ["audit", "explain", "team-b/urgent", "--cluster", cluster,
                                      "--database-url", pg_url])
    assert f"evicted team-a/a (submitted at #{second['position']}) group" in urgent.stdout, urgent.stdout
