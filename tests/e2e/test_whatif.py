"""POST /audit/what-if (audit.md): auditor and admin, the report as canonical JSON, 422 naming the
entry, 404 for a cluster without events, nothing recorded."""
from __future__ import annotations

import json
from pathlib import Path

from tests.e2e.conftest import open_client
from tests.e2e.helpers import Api, node, workload


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
