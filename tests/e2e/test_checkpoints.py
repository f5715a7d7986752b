"""Signed checkpoints over HTTP (audit.md): `serve --signing-key` signs the head every N events,
GET /audit/checkpoints lists them (auditor, admin; not a submitter), and their signatures hold."""
from __future__ import annotations

import base64
import json
from pathlib import Path

from service.app.checkpoints import key_id, keygen, load_public_key, signed_fields
from tests.e2e.conftest import open_client
from tests.e2e.helpers import Api, node, workload


def test_the_service_signs_heads_and_lists_them(pg_url: str, cluster: str, tmp_path: Path) -> None:
    key = str(tmp_path / "k.pem")
    keygen(key)
    tokens = tmp_path / "tokens.json"
    tokens.write_text(json.dumps({"adm": "admin", "aud": "auditor",
                                  "sub": {"role": "submitter", "namespaces": ["team-a"]}}))
    with open_client(pg_url, signing_key=key, checkpoint_events=3, tokens_file=str(tokens)) as client:
        api = Api(client, cluster)
        admin = {"Authorization": "Bearer adm"}
        assert api.put_node("n1", node(cpu="8"), headers=admin).status_code == 200
        for i in range(4):
            assert api.submit(workload(f"w{i}", 1, cpu="1"), headers=admin).status_code == 201
        answer = api.get("/audit/checkpoints", headers={"Authorization": "Bearer aud"})
        assert answer.status_code == 200
        assert set(answer.json()) == {"items"}  # every list is {"items": [...]} (http.md)
        listed = answer.json()["items"]
        assert api.get("/audit/checkpoints", headers=admin).json()["items"] == listed
        assert api.get("/audit/checkpoints", headers={"Authorization": "Bearer sub"}).status_code == 403
        events = {e["position"]: e for e in api.get("/events", headers=admin).json()["events"]}
    public = load_public_key(key + ".pub")
    assert [c["position"] for c in listed] == [3, 7]  # each commit that took the count since the last to 3 or more
    for cp in listed:
        assert set(cp) == {"cluster", "position", "hash", "signedAt", "keyId", "signature"}
        assert cp["cluster"] == cluster and cp["keyId"] == key_id(public)
        assert cp["hash"] == events[cp["position"]]["hash"]
        public.verify(base64.b64decode(cp["signature"]), signed_fields(cp))
