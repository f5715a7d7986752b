"""Replica operations without a cluster of processes: GET /v1/replicas of the one process (SQLite, memory),
checks.replica, the replica role refused outside the routes between replicas, and the start-up checks of
`serve` (a peer token with tokens and Kafka on PostgreSQL, the lease's bounds)."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from litestar.testing import TestClient

from service.api.settings import ApiSettings, load_tokens
from service.bootstrap import build_app
from service.config import Settings
from tests.replicas.conftest import ROOT

TOKENS = {"adm": {"role": "admin"}, "aud": {"role": "auditor"}, "sub": {"role": "submitter", "namespaces": ["a"]},
          "peer": {"role": "replica", "name": "peers"}}


def test_the_one_process_owns_every_cluster(tmp_path: Path) -> None:
    tokens = tmp_path / "tokens.json"
    tokens.write_text(json.dumps(TOKENS))
    api = ApiSettings(tokens=load_tokens(tokens), replica_id="solo-1", advertise_url="http://solo:1")
    with TestClient(build_app(Settings(database_url="memory://"), api)) as client:
        admin, auditor = {"Authorization": "Bearer adm"}, {"Authorization": "Bearer aud"}
        node = {"labels": {}, "allocatable": {"cpu": "1", "memory": "1Gi"}}
        for cluster in ("zeta", "alpha"):
            assert client.put(f"/v1/clusters/{cluster}/nodes/n1", json=node, headers=admin).status_code == 200
        listed = client.get("/v1/replicas", headers=auditor)
        assert listed.status_code == 200 and listed.headers["gangplank-replica"] == "solo-1"
        body = listed.json()
        assert body["self"] == "solo-1" and len(body["items"]) == 1
        item = body["items"][0]
        assert (item["id"], item["url"], item["live"]) == ("solo-1", "http://solo:1", True)
        assert item["clusters"] == [{"name": "alpha", "epoch": 1}, {"name": "zeta", "epoch": 1}]
        assert client.get("/v1/replicas", headers={"Authorization": "Bearer sub"}).status_code == 403
        for path in ("/v1/replicas", "/v1/clusters", "/v1/clusters/alpha/nodes"):  # replica: internal routes only
            assert client.get(path, headers={"Authorization": "Bearer peer"}).status_code == 403, path
        ready = client.get("/readyz").json()
        assert ready["checks"]["replica"] is True


def test_serve_refuses_replica_settings_that_cannot_work(tmp_path: Path) -> None:
    tokens = tmp_path / "tokens.json"
    tokens.write_text(json.dumps(TOKENS))
    base = [sys.executable, "-m", "service", "serve", "--port", "0", "--no-migrate"]
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path)}
    peerless = subprocess.run([*base, "--tokens", str(tokens), "--kafka-bootstrap", "127.0.0.1:1",
                               "--database-url", "postgresql+asyncpg://nobody@127.0.0.1:1/none"],
                              cwd=ROOT, env=env, capture_output=True, text=True, timeout=60)
    assert peerless.returncode == 2 and "GANGPLANK_PEER_TOKEN" in peerless.stderr, peerless.stderr
    lease = subprocess.run([*base, "--database-url", f"sqlite+aiosqlite:///{tmp_path / 'x.db'}"], cwd=ROOT,
                           env=env | {"GANGPLANK_REPLICA_LEASE_MS": "100"}, capture_output=True, text=True, timeout=60)
    assert lease.returncode == 2 and "GANGPLANK_REPLICA_LEASE_MS" in lease.stderr, lease.stderr
