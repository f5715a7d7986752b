"""POST /audit/what-if (audit.md): auditor and admin, the report as canonical JSON, 422 naming the
entry, 404 for a cluster without events, nothing recorded."""
from __future__ import annotations

import json
from pathlib import Path

from litestar.testing import TestClient

from tests.e2e.conftest import open_client
from tests.e2e.helpers import Api, node, run_sql, workload


def test_what_if_over_http(pg_url: str, cluster: str, tmp_path: Path) -> None:
    tokens = tmp_path / "tokens.json"
    tokens.write_text(json.dumps({"adm": "admin", "aud": "auditor",
                                  "sub": {"role": "submitter", "namespaces": ["team-a"]}}))
    admin, auditor = {"Authorization": "Bearer adm"}, {"Authorization": "Bearer aud"}
    with open_client(pg_url, tokens_file=str(tokens)) as client:
        api = Api(client, cluster)
        api.put_node("n1", node(cpu="4"), headers=admin)
        api.put_node("n2", node(cpu="4"), headers=admin)
        for i in range(3):
            assert api.submit(workload(f"w{i}", 2, cpu="2"), headers=admin).status_code == 201
        last = client.get(api.url("/events"), headers=admin).json()["lastPosition"]
        url = api.url("/audit/what-if")
        same = client.post(url, json={}, headers=auditor)
        assert same.status_code == 200, same.text
        assert same.text.endswith("}\n")
        doc = same.json()
        assert json.dumps(doc, sort_keys=True, separators=(",", ":")) + "\n" == same.text
        assert all(w["whatIf"] == w["recorded"] for w in doc["workloads"]) and len(doc["workloads"]) == 3
        cordoned = client.post(url, json={"nodes": [{"at": 2, "cordon": "n2"}]}, headers=admin).json()
        assert cordoned["totals"]["whatIf"]["scheduled"] < cordoned["totals"]["recorded"]["scheduled"]
        bad = client.post(url, json={"nodes": [{"at": 1, "remove": "n9"}]}, headers=admin)
        assert bad.status_code == 422 and bad.json()["errors"][0]["loc"] == ["body", "nodes", 0, "remove"]
        unknown = client.post(url, json={"withdraw": "x", "oops": 1}, headers=admin)
        assert unknown.status_code == 422
        assert {tuple(e["loc"]) for e in unknown.json()["errors"]} == {("body", "withdraw"), ("body", "oops")}
        assert client.post(url, json={}, headers={"Authorization": "Bearer sub"}).status_code == 403
        assert client.post(Api(client, f"{cluster}-none").url("/audit/what-if"), json={},
                           headers=admin).status_code == 404
        assert client.get(api.url("/events"), headers=admin).json()["lastPosition"] == last  # nothing recorded


def test_what_if_errors_are_problem_documents(client: TestClient, pg_url: str, cluster: str) -> None:
    """Streams and changes the what-if world cannot follow answer a problem document, never a 500:
    finished pods of a withdrawn workload are skipped; a capacity beyond the quantities' range, a
    FragmentationAware without its configuration and a node name PUT /nodes refuses are 422s naming
    the entry; a record this code did not write is a 409 naming its position."""
    api = Api(client, cluster)
    api.put_node("n1", node(cpu="4"))
    assert api.submit(workload("pi", 2, cpu="1")).status_code == 201
    body = {"pods": [{"podGroup": "workers", "name": "w-0", "phase": "Succeeded"}]}
    assert client.post(api.url("/namespaces/team-a/workloads/pi/podstatus"), json=body).status_code == 200
    assert api.submit(workload("next", 1, cpu="1")).status_code == 201
    url = api.url("/audit/what-if")
    withdrawn = client.post(url, json={"withdraw": ["team-a/pi"]})
    assert withdrawn.status_code == 200, withdrawn.text
    assert withdrawn.json()["inputs"]["skipped"] == 2  # pi's submission and its PodsFinished
    for changes, loc in (
            ({"capacity": [{"resource": "cpu", "factor": 10 ** 30}]}, ["body", "capacity", 0, "factor"]),
            ({"scoring": {"strategy": "FragmentationAware", "fragmentationAware": 42}},
             ["body", "scoring", "fragmentationAware"]),
            ({"scoring": {"strategy": "FragmentationAware", "fragmentationAware": {}}},
             ["body", "scoring", "fragmentationAware", "deviceClassName"]),
            ({"nodes": [{"at": 1, "add": "Bad_N", "node": node(cpu="4")}]}, ["body", "nodes", 0, "add"])):
        bad = client.post(url, json=changes)
        assert bad.status_code == 422, (changes, bad.text)
        assert bad.headers["content-type"].startswith("application/problem+json")
        assert loc in [e["loc"] for e in bad.json()["errors"]], bad.json()
    placed = run_sql(pg_url, "SELECT position FROM events WHERE cluster = $1 AND type = 'PodGroupScheduled' "
                             "ORDER BY position LIMIT 1", cluster, fetch=True)
    run_sql(pg_url, "UPDATE events SET data = replace(data, '\"n1\"', '\"ghost\"') "
                    "WHERE cluster = $1 AND position = $2", cluster, placed)
    broken = client.post(url, json={})
    assert broken.status_code == 409, broken.text
    assert broken.headers["content-type"].startswith("application/problem+json")
    assert broken.json()["position"] == placed and f"event {placed}" in broken.json()["detail"]
