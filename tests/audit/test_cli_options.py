"""The `gangplank` command's surface (issue 18): help for every option (naming its environment
variable), no "<bool>" after flags, --version, replay --from-file without --cluster, and
`audit explain` telling causes in words."""
from __future__ import annotations

import asyncio
import json
import re
from importlib.metadata import version
from pathlib import Path
from typing import Any

import click
import pytest
import typer.main
from typer.testing import CliRunner

from service.api.answers import HTTP_POLICY
from service.app.audit import explain
from service.app.commands import Accepted, Command, Origin, Submission
from service.app.service import Gangplank
from service.cli.main import app as cli
from service.store import open_store
from service.store.migrate import upgrade
from tests.audit.test_cli_streams import C, _record

ENV = {"--database-url": "GANGPLANK_DATABASE_URL", "--kafka-bootstrap": "GANGPLANK_KAFKA_BOOTSTRAP",
       "--tokens": "GANGPLANK_TOKENS", "--kafka-idempotence": "GANGPLANK_KAFKA_IDEMPOTENCE"}


def _commands(group: click.Command, path: tuple[str, ...] = ()) -> list[tuple[tuple[str, ...], click.Command]]:
    found = [(path, group)]
    for name, sub in getattr(group, "commands", {}).items():
        found += _commands(sub, (*path, name))
    return found


COMMANDS = _commands(typer.main.get_command(cli))


@pytest.mark.parametrize("path,command", COMMANDS, ids=[" ".join(p) or "gangplank" for p, _ in COMMANDS])
def test_every_option_has_help_and_flags_show_no_type(path: tuple[str, ...], command: click.Command) -> None:
    for param in command.params:
        assert param.help if isinstance(param, click.Option) else True, (path, param.name)  # type: ignore[attr-defined]
        for opt in param.opts:
            if opt in ENV:
                assert ENV[opt] in param.help, (path, opt)  # type: ignore[attr-defined]
    text = CliRunner().invoke(cli, [*path, "--help"], env={"COLUMNS": "200"}).output
    assert "<bool>" not in text and "<str>" not in text, text
    for param in command.params:  # rendered, not eaten as markup
        assert all(ENV[o] in text for o in param.opts if o in ENV), (path, param.name, text)


def test_version() -> None:
    result = CliRunner().invoke(cli, ["--version"])
    assert result.exit_code == 0 and result.stdout == f"gangplank {version('gangplank')}\n"


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    base = tmp_path_factory.mktemp("options")
    url = f"sqlite+aiosqlite:///{base / 'good.db'}"
    asyncio.run(_record(url))
    return {"base": base, "url": url}


def test_replay_from_file_takes_the_cluster_from_the_file(recorded: dict[str, Any]) -> None:
    runner = CliRunner()
    export = runner.invoke(cli, ["export", "--cluster", C, "--database-url", recorded["url"]]).stdout
    path = recorded["base"] / "prod.jsonl"
    path.write_text(export)
    result = runner.invoke(cli, ["replay", "--verify", "--from-file", str(path)])
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout[: result.stdout.rindex("}") + 1])["cluster"] == C
    two = recorded["base"] / "two.jsonl"
    two.write_text(export + export.replace(f'"cluster":"{C}"', '"cluster":"other"'))
    mixed = runner.invoke(cli, ["replay", "--from-file", str(two)])
    assert mixed.exit_code == 2 and mixed.stderr == f"error: {two} holds the events of clusters other, prod: " \
                                                    "give --cluster\n"
    assert runner.invoke(cli, ["replay", "--from-file", str(two), "--cluster", "other"]).exit_code == 0
    # with neither a file nor a database, the server's default (client.md, *One address for every command*)
    neither = runner.invoke(cli, ["replay", "--server", "http://127.0.0.1:9"])
    assert neither.exit_code == 3 and "cannot reach http://127.0.0.1:9" in neither.stderr


def _explain(url: str, workload: str) -> list[str]:
    result = CliRunner().invoke(cli, ["audit", "explain", "--cluster", C, "--database-url", url, workload])
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert not re.search(r"\b1 pods\b|pod\(s\)|group\(s\)", result.stdout), result.stdout
    return lines


def test_explain_tells_what_freed_the_room_what_released_pods_and_the_state_now(recorded: dict[str, Any]) -> None:
    train = _explain(recorded["url"], "team-a/train")
    assert any("[#8] Group workers preempted by team-b/urgent group main (priority 1000 > 10), when "
               "team-b/urgent was submitted at #7: evicted" in x for x in train), train
    assert any("[#17] Scheduled group workers, after team-b/urgent was deleted at #16: 4 pods" in x
               for x in train), train
    assert train[-1] == "Now: Scheduled — group workers: 4 of 4 pods placed (minCount 4) on n1 (w-0, w-1), " \
                        "n2 (w-2, w-3)."
    urgent = _explain(recorded["url"], "team-b/urgent")
    assert any("[#12] Group main lost 2 pods, n3 (m-4, m-5), because node n3 was removed at #11." in x
               for x in urgent), urgent
    assert any("[#15] Placed more pods of group main, after node n4 was added or replaced at #14" in x
               for x in urgent), urgent
    assert urgent[-1] == "Now: Finished (deleted at #16)."


async def _record_devices(url: str) -> None:
    """One node with 2 GPUs (DRA); `a` takes both, `b` waits for them, removing the slice releases `a`."""
    await upgrade(url)
    svc = Gangplank(open_store(url))

    async def run(kind: str, name: str, body: dict[str, Any], namespace: str | None = None) -> None:
        out = await svc.commands.execute(Submission(Command(C, kind, name, namespace, body),
                                                    Origin(source="cli", actor="test")), HTTP_POLICY)
        assert isinstance(out, Accepted), out

    node = {"labels": {"example.com/rack": "r1"}, "allocatable": {"cpu": "8", "pods": 8}}
    await run("UpsertNode", "n1", node)
    await run("UpsertDeviceClass", "gpu", {"selectors": [{"cel": {"expression": "device.driver == 'gpu.example.com'"}}]})
    await run("UpsertResourceSlice", "n1-gpus", {"driver": "gpu.example.com", "pool": {"name": "n1", "generation": 1},
                                                 "nodeName": "n1", "devices": [{"name": "gpu-0"}, {"name": "gpu-1"}]})
    for name in ("a", "b"):
        await run("SubmitWorkload", name, {
            "name": name, "podGroups": [{"name": "g", "pods": [{"name": "w", "requests": {"cpu": "1"},
                                         "resourceClaims": [{"name": "gpus", "resourceClaimTemplateName": "two"}]}]}],
            "resourceClaimTemplates": [{"name": "two", "spec": {"devices": {"requests": [
                {"name": "gpu", "exactly": {"deviceClassName": "gpu", "count": 2}}]}}}]}, "team-a")
    await run("RemoveResourceSlice", "n1-gpus", {})
    await svc.store.close()


def test_explain_shows_the_devices(tmp_path: Path) -> None:
    url = f"sqlite+aiosqlite:///{tmp_path / 'dra.db'}"
    asyncio.run(_record_devices(url))
    a = _explain(url, "team-a/a")
    assert "    claim gpus of pod w-0 (Pod): gpu.example.com/n1/gpu-0, gpu.example.com/n1/gpu-1" in a, a
    assert any("Group g lost 1 pod, n1 (w-0), because resource slice n1-gpus was removed at #8" in x
               and "Released claim gpus of w-0." in x for x in a), a
    b = _explain(url, "team-a/b")
    assert any(x.startswith("    claim gpus of pod w-0, request gpu (class gpu): InsufficientDevices on 1 node, "
                            "needs 2, at most 0 free of 2 reachable on one node") for x in b), b
    assert b[-1].startswith("Now: Pending — group g: 0 of 1 pod placed (minCount 1), waiting: 0/1 nodes"), b


def test_explain_names_a_taint_that_released_pods() -> None:
    """A NoExecute taint releases pods as node loss does (reason TaintedNoExecute): the cause says which."""
    submitted = {"position": 2, "type": "WorkloadSubmitted", "metadata": {"causationPosition": None},
                 "data": {"namespace": "ns", "name": "w", "priority": 0, "preemptionPolicy": "Never",
                          "spec": {"podGroups": [{"name": "g", "pods": [{"name": "p"}]}]}}}
    placed = {"position": 3, "type": "PodGroupScheduled", "metadata": {"causationPosition": 2},
              "data": {"namespace": "ns", "workload": "w", "podGroup": "g", "pods": [{"pod": "p-0", "node": "n1"}],
                       "placedPods": 1, "minCount": 1, "claims": [], "explanation": None}}
    lost = {"position": 5, "type": "PodsLost", "metadata": {"causationPosition": 4},
            "data": {"namespace": "ns", "workload": "w", "podGroup": "g", "pods": [{"pod": "p-0", "node": "n1"}],
                     "node": "n1", "reason": "TaintedNoExecute", "wholeGroup": False, "claimsReleased": []}}
    tainted = {"position": 4, "type": "NodeUpserted",
               "data": {"name": "n1", "taints": [{"key": "maintenance", "value": "now", "effect": "NoExecute"},
                                                 {"key": "x", "value": "", "effect": "NoSchedule"}]}}
    lines = explain("ns", "w", [submitted, placed, lost], {4: tainted})
    assert lines[1].endswith("Scheduled group g: 1 pod on n1 (p-0); 1 placed (minCount 1).")  # its own submission
    assert lines[2].endswith("Group g lost 1 pod, n1 (p-0), because node n1 was replaced with taint "
                             "maintenance=now:NoExecute at #4."), lines
    assert lines[-1] == "Now: Pending — group g: 0 of 1 pod placed (minCount 1)."
    assert explain("ns", "w", [submitted, placed, lost])[2].endswith("because node n1 was tainted NoExecute.")
