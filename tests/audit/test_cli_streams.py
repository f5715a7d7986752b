"""The CLI on damaged, partial or missing streams and databases (SQLite): it names the first bad
position, verifies what a file holds, and says in one line why it cannot run."""
from __future__ import annotations

import asyncio
import json
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from service.api.answers import HTTP_POLICY
from service.app.commands import Accepted, Command, Origin, Result, Submission
from service.app.service import Gangplank
from service.cli.main import app as cli
from service.domain.model import events as ev
from service.store import open_store
from service.store.migrate import upgrade

C = "prod"
ORIGIN = Origin(source="cli", actor="test")


async def execute(svc: Gangplank, cmd: Command, *, dry_run: bool = False) -> Result:
    return await svc.commands.execute(Submission(cmd, ORIGIN), HTTP_POLICY, dry_run=dry_run)
ROOT = Path(__file__).resolve().parents[2]


async def _record(url: str) -> None:
    """21 events: a preemption, a node lost (input 11, decisions 12-13), then four plain inputs."""
    await upgrade(url)
    svc = Gangplank(open_store(url))

    async def run(cmd: Command) -> None:
        out = await execute(svc, cmd)
        assert isinstance(out, Accepted), out

    node = {"allocatable": {"cpu": "4", "pods": 2}}
    for i in range(1, 4):
        await run(Command(C, "UpsertNode", f"n{i}", body=node))
    await run(Command(C, "UpsertPriorityClass", "high", body={"value": 1000}))
    await run(Command(C, "SubmitWorkload", "train", "team-a", {
        "name": "train", "priority": 10,
        "podGroups": [{"name": "workers", "schedulingPolicy": {"gang": {"minCount": 4}},
                       "pods": [{"name": "w", "count": 4, "requests": {"cpu": "2"}}]}]}))
    await run(Command(C, "SubmitWorkload", "urgent", "team-b", {
        "name": "urgent", "priorityClassName": "high",
        "podGroups": [{"name": "main", "schedulingPolicy": {"gang": {"minCount": 4}},
                       "pods": [{"name": "m", "count": 6, "requests": {"cpu": "2"}}]}]}))
    await run(Command(C, "RemoveNode", "n3"))
    await run(Command(C, "UpsertNode", "n4", body=node))
    await run(Command(C, "DeleteWorkload", "urgent", "team-b"))
    for i in range(5, 9):
        await run(Command(C, "UpsertNode", f"n{i}", body=node))
    await svc.store.close()


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    base = tmp_path_factory.mktemp("streams")
    db = base / "good.db"
    url = f"sqlite+aiosqlite:///{db}"
    asyncio.run(_record(url))
    export = _ok(["export", "--cluster", C, "--database-url", url]).stdout
    lines = export.splitlines()
    types = [json.loads(x)["type"] for x in lines]
    assert len(lines) == 21 and types[10] == ev.NODE_REMOVED and types[9] not in ev.INPUT_TYPES
    assert all(t in ev.INPUT_TYPES for t in types[17:])
    return {"base": base, "db": db, "url": url, "lines": lines}


def _ok(args: list[str]) -> Any:
    result = CliRunner().invoke(cli, args)
    assert result.exit_code == 0, (result.exit_code, result.output, result.exception)
    return result


def _summary(result: Any) -> dict[str, Any]:
    return json.loads(result.stdout[: result.stdout.rindex("}") + 1])


def _file(recorded: dict[str, Any], name: str, lines: list[str]) -> str:
    path = recorded["base"] / name
    path.write_text("\n".join(lines) + "\n")
    return str(path)


def _db_without(recorded: dict[str, Any], name: str, position: int) -> str:
    copy = recorded["base"] / name
    shutil.copy(recorded["db"], copy)
    with sqlite3.connect(copy) as conn:
        conn.execute("DELETE FROM events WHERE cluster=? AND position=?", (C, position))
    return f"sqlite+aiosqlite:///{copy}"


# -- 1, 2: a gap or events out of order ---------------------------------------------------------
def test_verify_names_the_missing_position(recorded):
    runner = CliRunner()
    gapped_db = _db_without(recorded, "gap.db", 10)
    gapped_file = _file(recorded, "gap.jsonl", recorded["lines"][:9] + recorded["lines"][10:])
    for source in (["--database-url", gapped_db], ["--from-file", gapped_file]):
        result = runner.invoke(cli, ["replay", "--cluster", C, "--verify", *source])
        assert result.exit_code == 1, (source, result.output, result.exception)
        assert "hash chain broken at position 10" in result.output, result.output


def test_verify_of_events_out_of_order_stops_at_the_expected_position(recorded):
    lines = recorded["lines"]
    swapped = _file(recorded, "swap.jsonl", lines[:18] + [lines[19], lines[18]] + lines[20:])  # 18, 20, 19
    result = CliRunner().invoke(cli, ["replay", "--cluster", C, "--verify", "--from-file", swapped])
    assert result.exit_code == 1, (result.output, result.exception)
    assert "hash chain broken at position 19" in result.output, result.output
    summary = _summary(result)
    assert summary["chainOk"] is False and summary["firstBadPosition"] == 19


@pytest.mark.parametrize("damage", ["gap", "swap", "gap in the database"])
def test_plain_replay_refuses_a_stream_with_a_gap_or_out_of_order(recorded, damage):
    lines = recorded["lines"]
    if damage == "gap":
        source = ["--from-file", _file(recorded, "gap2.jsonl", lines[:9] + lines[10:])]
        expected, found = 10, 11
    elif damage == "swap":
        source = ["--from-file", _file(recorded, "swap2.jsonl", lines[:18] + [lines[19], lines[18]] + lines[20:])]
        expected, found = 19, 20
    else:
        source = ["--database-url", _db_without(recorded, "gap2.db", 10)]
        expected, found = 10, 11
    result = CliRunner().invoke(cli, ["replay", "--cluster", C, *source])
    assert result.exit_code == 2, (result.output, result.exception)
    assert f"expected position {expected}, found {found}" in result.output
    assert result.stdout == "" and len(result.output.splitlines()) == 1, result.output


# -- 3: an export cut by --until ---------------------------------------------------------------
def test_an_export_until_an_input_whose_decisions_follow_verifies(recorded):
    url = recorded["url"]
    exported = _ok(["export", "--cluster", C, "--until", "11", "--database-url", url]).stdout
    path = _file(recorded, "until.jsonl", exported.splitlines())
    checked = _ok(["replay", "--cluster", C, "--verify", "--from-file", path])
    plain = _ok(["replay", "--cluster", C, "--until", "11", "--database-url", url])
    summary = _summary(checked)
    assert summary["position"] == 11 and summary["events"] == 11 and summary["chainOk"] is True
    assert summary["verdict"] == "identical"
    assert {k: v for k, v in summary.items() if k not in ("chainOk", "verdict", "rules", "explanationDiffs", "divergence")} == \
        {k: v for k, v in _summary(plain).items() if k != "chainOk"}
    # a decision removed from inside the file is still caught
    cut = exported.splitlines()
    damaged = _file(recorded, "until-gap.jsonl", cut[:9] + cut[10:])
    bad = CliRunner().invoke(cli, ["replay", "--cluster", C, "--verify", "--from-file", damaged])
    assert bad.exit_code == 1 and "position 10" in bad.output


# -- 4: a cluster without events ---------------------------------------------------------------
@pytest.mark.parametrize("command", [
    ["replay"], ["replay", "--verify"], ["export"], ["audit", "verify"],
    ["replay", "--from-file", "{file}"], ["replay", "--verify", "--from-file", "{file}"],
])
def test_a_cluster_without_events_has_its_own_exit_code(recorded, command):
    """2, not the 1 of a broken chain; audit verify prints what GET /audit/verify answers."""
    path = _file(recorded, "prod-only.jsonl", recorded["lines"])
    args = [path if a == "{file}" else a for a in command] + ["--cluster", "nope"]
    if "--from-file" not in command:
        args += ["--database-url", recorded["url"]]
    result = CliRunner().invoke(cli, args)
    assert result.exit_code == 2, (result.output, result.exception)
    assert result.stderr.strip() == "error: cluster 'nope' has no events"
    if command == ["audit", "verify"]:
        assert json.loads(result.stdout) == {"ok": True, "events": 0, "head": "0" * 64}
    else:
        assert result.stdout == ""


def test_until_zero_of_a_cluster_with_events_is_not_an_error(recorded):
    summary = _summary(_ok(["replay", "--cluster", C, "--until", "0", "--database-url", recorded["url"]]))
    assert summary["position"] == 0 and summary["events"] == 0
    assert _ok(["export", "--cluster", C, "--until", "0", "--database-url", recorded["url"]]).stdout == ""


# -- 5: SQLite files that are not there, or hold no schema ---------------------------------------
READS = [["replay", "--cluster", C], ["replay", "--cluster", C, "--verify"], ["export", "--cluster", C],
         ["audit", "verify", "--cluster", C], ["audit", "explain", "--cluster", C, "ns/w"]]


@pytest.mark.parametrize("command", READS, ids=" ".join)
def test_a_read_needs_the_database_file_and_never_creates_it(tmp_path, monkeypatch, command):
    monkeypatch.chdir(tmp_path)
    for url, path in ((f"sqlite+aiosqlite:///{tmp_path}/none.db", f"{tmp_path}/none.db"),
                      ("sqlite+aiosqlite:///rel.db", "rel.db"),
                      ("sqlite+aiosqlite:////nonexistent/dir/x.db", "/nonexistent/dir/x.db")):
        result = CliRunner().invoke(cli, [*command, "--database-url", url])
        assert result.exit_code == 2, (url, result.output, result.exception)
        assert result.output == f"error: no database at {path} (run gangplank migrate, or give --database-url)\n"
    monkeypatch.setenv("GANGPLANK_DATABASE_URL", "sqlite+aiosqlite:///gangplank.db")
    result = CliRunner().invoke(cli, command)  # the environment's store: gangplank.db here
    assert result.exit_code == 2 and "no database at" in result.output
    monkeypatch.delenv("GANGPLANK_DATABASE_URL")
    monkeypatch.setenv("GANGPLANK_SERVER", "http://127.0.0.1:9")
    result = CliRunner().invoke(cli, command)  # neither: the server (client.md, *One address for every command*)
    assert result.exit_code == 3 and "cannot reach http://127.0.0.1:9" in result.output
    assert list(tmp_path.iterdir()) == []


def test_migrate_says_when_the_directory_is_missing_and_creates_relative_files(tmp_path, monkeypatch):
    result = CliRunner().invoke(cli, ["migrate", "--database-url", "sqlite+aiosqlite:////nonexistent/dir/x.db"])
    assert result.exit_code == 2
    assert result.output == "error: cannot create /nonexistent/dir/x.db: directory /nonexistent/dir does not exist\n"
    monkeypatch.chdir(tmp_path)
    _ok(["migrate", "--database-url", "sqlite+aiosqlite:///rel.db"])
    assert (tmp_path / "rel.db").is_file()
    _ok(["migrate", "--database-url", "sqlite+aiosqlite:///:memory:"])


def test_a_missing_directory_is_one_clean_line_without_a_thread_traceback():
    """aiosqlite fails to open in its worker thread, which could outlive asyncio.run and print
    "Event loop is closed": nothing is opened now. In a real process, to see all of stderr."""
    for command in (["replay", "--cluster", C], ["audit", "verify", "--cluster", C], ["migrate"]):
        for _ in range(3):
            run = subprocess.run([sys.executable, "-m", "service", *command, "--database-url",
                                  "sqlite+aiosqlite:////nonexistent/dir/x.db"],
                                 cwd=ROOT, capture_output=True, text=True, timeout=60)
            assert run.returncode == 2 and run.stdout == "", run
            assert len(run.stderr.splitlines()) == 1 and run.stderr.startswith("error: "), run.stderr


@pytest.mark.parametrize("command", READS[:4], ids=" ".join)
def test_a_database_without_the_schema_says_to_migrate(tmp_path, command):
    blank = tmp_path / "blank.db"
    blank.touch()
    for url in (f"sqlite+aiosqlite:///{blank}", "sqlite+aiosqlite:///:memory:"):
        result = CliRunner().invoke(cli, [*command, "--database-url", url])
        assert result.exit_code == 2, (result.output, result.exception)
        assert "no such table: clusters" in result.output
        assert f"run gangplank migrate --database-url {url}" in result.output
        assert len(result.output.splitlines()) == 1, result.output


# -- an event type this release cannot fold ------------------------------------------------------
def test_an_unknown_event_type_stops_every_replay_naming_type_and_position(recorded):
    """Event 19 retyped as a newer release might write it, the chain re-hashed so it holds: a plain
    replay, a verification and a what-if each stop there, naming the type and the position."""
    from service.store.base import GENESIS_HASH, chain_hash

    rehashed, prev = [], GENESIS_HASH
    for line in recorded["lines"]:
        env = json.loads(line)
        if env["position"] == 19:
            env["type"] = "NodeDrained"
        env = {k: v for k, v in env.items() if k not in ("hash", "prevHash")}
        env["prevHash"], env["hash"] = prev, chain_hash(prev, env)
        prev = env["hash"]
        rehashed.append(json.dumps(env))
    path = _file(recorded, "newer.jsonl", rehashed)
    changes = recorded["base"] / "none.yaml"
    changes.write_text("{}\n")
    for extra in ([], ["--verify"], ["--what-if", str(changes)]):
        result = CliRunner().invoke(cli, ["replay", "--from-file", path, *extra])
        assert result.exit_code == 2, (extra, result.output, result.exception)
        assert "19" in result.stderr and "'NodeDrained'" in result.stderr, (extra, result.stderr)
        assert len(result.stderr.strip().splitlines()) == 1 and "Traceback" not in result.output
