"""`GET /audit/verify` and `gangplank audit verify` give the same answer (issue 18), also for a
cluster with no events: the same body; the CLI's exit code (2) says there was nothing to verify."""
from __future__ import annotations

import json

from litestar.testing import TestClient
from typer.testing import CliRunner

from service.cli.main import app as cli
from tests.e2e.helpers import Api, node


def test_http_and_cli_agree_on_verify(client: TestClient, pg_url: str, cluster: str) -> None:
    runner = CliRunner()
    for name, code in ((cluster, 2), (cluster + "-x", 0)):
        if code == 0:
            Api(client, name).put_node("n1", node(cpu="4"))
        http = client.get(f"/v1/clusters/{name}/audit/verify")
        assert http.status_code == 200
        result = runner.invoke(cli, ["audit", "verify", "--cluster", name, "--database-url", pg_url])
        assert result.exit_code == code, result.output
        assert json.loads(result.stdout) == http.json()
    assert http.json()["ok"] is True and http.json()["events"] == 1
