"""One address for every command (client.md): the audit commands read a running service over its HTTP API
(`--server`, GANGPLANK_SERVER, GANGPLANK_CLUSTER, `--token`) and say what they say when reading the store
itself (`--database-url`)."""
from __future__ import annotations

import json
import time

from typer.testing import CliRunner

from gangplank_client import Client, WorkloadBuilder
from service.cli.main import app

runner = CliRunner()


def gang(name: str, pods: int, priority: int = 0) -> WorkloadBuilder:
    return WorkloadBuilder(name, namespace="team-a").priority(priority).gang("g", min_count=pods) \
        .pods("p", count=pods, requests={"cpu": "2"})


def _record(server: str, cluster: str) -> None:
    with Client(server, cluster=cluster) as c:
        c.put_node("n1", allocatable={"cpu": "4"})
        c.submit(gang("low", 2))
        c.delete_workload("team-a", "low")
        c.submit(gang("low", 2))  # a name used again
        c.submit(gang("urgent", 2, priority=100))  # preempts the second incarnation
        c.delete_workload("team-a", "urgent")


def test_the_audit_commands_read_the_server_as_they_read_the_store(server, database_url, cluster, tmp_path):
    _record(server, cluster)
    (tmp_path / "changes.yaml").write_text("withdraw: [team-a/urgent]\n")
    commands = [["audit", "verify"], ["audit", "explain", "team-a/low"], ["replay", "--verify"],
                ["replay", "--what-if", str(tmp_path / "changes.yaml"), "--output", "json"], ["export"]]
    for command in commands:
        over_http = runner.invoke(app, [*command, "--server", server, "--cluster", cluster])
        from_store = runner.invoke(app, [*command, "--database-url", database_url, "--cluster", cluster])
        assert over_http.exit_code == from_store.exit_code == 0, (command, over_http.output, from_store.output)
        if command[0] == "replay" and command[1] == "--verify":
            http_report, store_report = json.loads(over_http.stdout), json.loads(from_store.stdout)
            assert http_report["verdict"] == store_report["verdict"] == "identical"
            assert http_report["events"] == store_report["events"]
        else:
            assert over_http.stdout == from_store.stdout, command
    # the environment gives the address and the cluster
    env = {"GANGPLANK_SERVER": server, "GANGPLANK_CLUSTER": cluster}
    explained = runner.invoke(app, ["audit", "explain", "team-a/low"], env=env)
    assert explained.exit_code == 0 and "the one before was submitted at #" in explained.stdout
    assert runner.invoke(app, ["audit", "verify"], env=env).exit_code == 0
    # one or the other
    both = runner.invoke(app, ["audit", "verify", "--server", server, "--database-url", database_url])
    assert both.exit_code == 2 and "not both" in both.output
    missing = runner.invoke(app, ["audit", "explain", "team-a/nobody"], env=env)
    assert missing.exit_code == 1
    none = runner.invoke(app, ["audit", "verify", "--server", server, "--cluster", f"{cluster}-none"])
    assert none.exit_code == 2 and "has no events" in none.output


def test_an_unreachable_server_is_said_at_once():
    started = time.monotonic()
    result = runner.invoke(app, ["audit", "verify", "--server", "http://127.0.0.1:9"])
    assert result.exit_code == 3 and "cannot reach http://127.0.0.1:9" in result.output
    assert time.monotonic() - started < 5
