"""GET /audit/replay (audit.md): the report of replay --verify over HTTP (auditor, admin): the
verdict, rules, explanationDiffs, divergence; 404 without events; 409 for newer rules."""
from __future__ import annotations

import asyncio
import json
from pathlib import Path

import asyncpg

from service.domain.model.rules import RULES
from service.store.base import GENESIS_HASH, canonical_json, chain_hash
from tests.e2e.conftest import open_client
from tests.e2e.helpers import Api, node, workload


async def _newer_rules(url: str, cluster: str) -> None:
    """Record a decision as a newer release would (rules + 1), the chain re-hashed as that release would."""
    conn = await asyncpg.connect(url.replace("postgresql+asyncpg", "postgresql"))
    try:
        rows = await conn.fetch("SELECT * FROM events WHERE cluster = $1 ORDER BY position", cluster)
        prev = GENESIS_HASH
        for r in rows:
            data = json.loads(r["data"])
            if r["type"] == "PodGroupScheduled":
                data["rules"] = RULES + 1
            body = {"cluster": cluster, "position": r["position"], "type": r["type"],
                    "schemaVersion": r["schema_version"], "data": data, "metadata": json.loads(r["metadata"]),
                    "recordedAt": r["recorded_at"]}
            h = chain_hash(prev, body)
            await conn.execute("UPDATE events SET data = $1, prev_hash = $2, hash = $3 WHERE cluster = $4 "
                               "AND position = $5", canonical_json(data), prev, h, cluster, r["position"])
            prev = h
        await conn.execute("UPDATE clusters SET head_hash = $1 WHERE name = $2", prev, cluster)
    finally:
        await conn.close()


def test_replay_verify_over_http(pg_url: str, cluster: str, tmp_path: Path) -> None:
    tokens = tmp_path / "tokens.json"
    tokens.write_text(json.dumps({"adm": "admin", "aud": "auditor",
                                  "sub": {"role": "submitter", "namespaces": ["team-a"]}}))
    admin, auditor = {"Authorization": "Bearer adm"}, {"Authorization": "Bearer aud"}
    with open_client(pg_url, tokens_file=str(tokens)) as client:
        api = Api(client, cluster)
        api.put_node("n1", node(cpu="4"), headers=admin)
        for i in range(3):
            assert api.submit(workload(f"w{i}", 2, cpu="2"), headers=admin).status_code == 201
        last = client.get(api.url("/events"), headers=admin).json()["lastPosition"]
        answer = client.get(api.url("/audit/replay"), headers=auditor)
        assert answer.status_code == 200, answer.text
        report = answer.json()
        assert report["verdict"] == "identical" and report["chainOk"] is True
        assert report["rules"] == {"current": RULES, "recorded": [RULES]}
        assert report["explanationDiffs"] == 0 and report["divergence"] is None
        assert report["events"] == last
        assert client.get(api.url("/audit/replay?until=2"), headers=admin).json()["position"] == 2
        assert client.get(api.url("/audit/replay"), headers={"Authorization": "Bearer sub"}).status_code == 403
        none = client.get(Api(client, f"{cluster}-none").url("/audit/replay"), headers=admin)
        assert none.status_code == 404
        assert client.get(api.url("/events"), headers=admin).json()["lastPosition"] == last  # nothing recorded
        # a decision of newer rules than the code's: cannot be re-decided (the chain is not the point here)
        asyncio.run(_newer_rules(pg_url, cluster))
        newer = client.get(api.url("/audit/replay"), headers=admin)
        assert newer.status_code == 409, newer.text
        assert f"rules {RULES + 1}" in newer.json()["detail"]
