"""Audit and replay for incident reviews (issue 7), on PostgreSQL."""
from __future__ import annotations

import asyncio
import json
import re
from collections.abc import AsyncIterator
from typing import Any

import pytest
import pytest_asyncio
import sqlalchemy as sa
from typer.testing import CliRunner

from service.api.answers import HTTP_POLICY
from service.app.commands import Accepted, Command, Origin, Result, Submission
from service.app.service import Gangplank
from service.cli.main import app as cli
from service.domain.model import events as ev
from service.domain.model.rules import RULES
from service.store import open_store
from service.store.migrate import upgrade
from service.store.testing import temporary_postgres_database

C = "prod"
ORIGIN = Origin(source="cli", actor="test")


async def execute(svc: Gangplank, cmd: Command, *, dry_run: bool = False) -> Result:
    return await svc.commands.execute(Submission(cmd, ORIGIN), HTTP_POLICY, dry_run=dry_run)


@pytest_asyncio.fixture(scope="module")
async def incident() -> AsyncIterator[dict[str, Any]]:
    """A gang preempted by a high-priority job, then a node lost, then the preemptor finishes."""
    async with temporary_postgres_database("gp_audit") as url:
        await upgrade(url)
        svc = Gangplank(open_store(url), snapshot_every=4)
        marks: dict[str, int] = {}

        async def run(cmd: Command) -> dict[str, Any]:
            out = await execute(svc, cmd)
            assert isinstance(out, Accepted), out
            return out.body

        for i in range(1, 4):
            await run(Command(C, "UpsertNode", f"n{i}", body={"allocatable": {"cpu": "4", "pods": 2}}))
        await run(Command(C, "UpsertPriorityClass", "high", body={"value": 1000}))
        await run(Command(C, "SubmitWorkload", "train", "team-a", {
            "name": "train", "priority": 10,
            "podGroups": [{"name": "workers", "schedulingPolicy": {"gang": {"minCount": 4}},
                           "pods": [{"name": "w", "count": 4, "requests": {"cpu": "2"}}]}]}))
        marks["train_running"] = (await svc.queries.clusters())[0]["lastPosition"]
        await run(Command(C, "SubmitWorkload", "urgent", "team-b", {
            "name": "urgent", "priorityClassName": "high",
            "podGroups": [{"name": "main", "schedulingPolicy": {"gang": {"minCount": 4}},
                           "pods": [{"name": "m", "count": 6, "requests": {"cpu": "2"}}]}]}))
        marks["preempted"] = (await svc.queries.clusters())[0]["lastPosition"]
        await run(Command(C, "RemoveNode", "n3"))
        marks["node_lost"] = (await svc.queries.clusters())[0]["lastPosition"]
        await run(Command(C, "UpsertNode", "n4", body={"allocatable": {"cpu": "4", "pods": 2}}))
        await run(Command(C, "DeleteWorkload", "urgent", "team-b"))
        marks["end"] = (await svc.queries.clusters())[0]["lastPosition"]
        yield {"svc": svc, "url": url, "marks": marks}
        await svc.store.close()


async def test_history_tells_the_whole_story(incident):
    svc: Gangplank = incident["svc"]
    hist = await svc.queries.history(C, "team-a", "train")
    types = [e["type"] for e in hist["events"]]
    assert types[0] == ev.WORKLOAD_SUBMITTED
    assert ev.POD_GROUP_PREEMPTED in types
    assert types.count(ev.POD_GROUP_SCHEDULED) == 2  # before the preemption and after the room came back
    pre = next(e for e in hist["events"] if e["type"] == ev.POD_GROUP_PREEMPTED)
    assert pre["data"]["preemptor"]["workload"] == "urgent" and pre["data"]["wholeGroup"] is True
    positions = [e["position"] for e in hist["events"]]
    assert positions == sorted(positions)
    urgent = await svc.queries.history(C, "team-b", "urgent")
    utypes = [e["type"] for e in urgent["events"]]
    assert ev.POD_GROUP_PREEMPTED in utypes  # as preemptor
    assert ev.PODS_LOST in utypes  # n3 was removed under it
    assert utypes[-1] == ev.WORKLOAD_DELETED
    waits = [e for e in hist["events"] if e["type"] == ev.POD_GROUP_UNSCHEDULABLE]
    # served as stored: codes and numbers, no words (those are rendered by views and audit explain)
    assert waits and waits[0]["data"]["explanation"]["nodes"] == 3 and waits[0]["data"]["rules"] == RULES
    assert "message" not in waits[0]["data"]["explanation"]


async def test_state_at_positions(incident):
    svc: Gangplank = incident["svc"]
    m = incident["marks"]

    def phase(state: dict, name: str) -> str:
        return next(w for w in state["workloads"] if w["name"] == name)["status"]["phase"]

    s1 = await svc.queries.state_at(C, m["train_running"])
    assert s1["position"] == m["train_running"] and phase(s1, "train") == "Scheduled"
    assert {w["name"] for w in s1["workloads"]} == {"train"}
    s2 = await svc.queries.state_at(C, m["preempted"])
    assert phase(s2, "train") == "Pending" and phase(s2, "urgent") == "Scheduled"
    s3 = await svc.queries.state_at(C, m["node_lost"])
    assert "n3" not in {n["name"] for n in s3["nodes"]}
    urgent = next(w for w in s3["workloads"] if w["name"] == "urgent")["status"]["podGroups"][0]
    assert urgent["placedPods"] == 4 and urgent["phase"] == "Scheduled"  # lost its 2 surplus pods
    s4 = await svc.queries.state_at(C, None, include_finished=True)
    assert phase(s4, "urgent") == "Finished" and phase(s4, "train") == "Scheduled"
    live = await svc.queries.state_at(C, None)
    assert [w["name"] for w in live["workloads"]] == ["train"] and live["finishedWorkloads"] == 1
    # an input whose decisions follow: the state between them
    events = (await svc.queries.events(C, after=m["preempted"], limit=1, wait=0))["events"]
    assert events[0]["type"] == ev.NODE_REMOVED
    between = await svc.queries.state_at(C, events[0]["position"])
    n3_pods = [w for w in between["workloads"] if w["name"] == "urgent"][0]["status"]["podGroups"][0]["pods"]
    assert any(p["node"] == "n3" for p in n3_pods)  # PodsLost not yet applied


def test_explain_in_words(incident):
    result = CliRunner().invoke(cli, ["audit", "explain", "--cluster", C, "--database-url", incident["url"],
                                      "team-a/train"])
    assert result.exit_code == 0, result.output
    text = result.output
    assert "Submitted team-a/train with priority 10" in text
    assert "waiting" in text and "0/3 nodes are available" in text
    assert "preempted by team-b/urgent group main (priority 1000 > 10)" in text
    assert "Scheduled group workers" in text
    # every story line names its event's position ("[#12]"): printed as text, not taken for a rich style
    assert re.search(r"\[#\d+\] Submitted team-a/train ", text), text


def test_replay_without_verify_claims_no_chain_check(incident, tmp_path):
    runner = CliRunner()
    verified = runner.invoke(cli, ["replay", "--cluster", C, "--verify", "--database-url", incident["url"]])
    head = json.loads(verified.stdout[: verified.stdout.rindex("}") + 1])["head"]
    plain = runner.invoke(cli, ["replay", "--cluster", C, "--database-url", incident["url"]])
    assert plain.exit_code == 0, plain.output
    summary = json.loads(plain.stdout[: plain.stdout.rindex("}") + 1])
    # the chain was not recomputed: null, not true; the head is the one recorded on the last event
    assert summary["chainOk"] is None and summary["head"] == head
    exported = runner.invoke(cli, ["export", "--cluster", C, "--database-url", incident["url"]]).stdout
    path = tmp_path / "events.jsonl"
    path.write_text(exported)
    offline = runner.invoke(cli, ["replay", "--cluster", C, "--from-file", str(path)])
    offline_summary = json.loads(offline.stdout[: offline.stdout.rindex("}") + 1])
    assert offline_summary["chainOk"] is None and offline_summary["head"] == head


def test_replay_verify_ok_and_export_roundtrip(incident, tmp_path):
    runner = CliRunner()
    ok = runner.invoke(cli, ["replay", "--cluster", C, "--verify", "--database-url", incident["url"]])
    assert ok.exit_code == 0, ok.output
    summary = json.loads(ok.stdout[: ok.stdout.rindex("}") + 1])
    assert summary["position"] == incident["marks"]["end"] and summary["chainOk"] is True
    exported = runner.invoke(cli, ["export", "--cluster", C, "--database-url", incident["url"]])
    assert exported.exit_code == 0
    path = tmp_path / "events.jsonl"
    path.write_text(exported.stdout)
    offline = runner.invoke(cli, ["replay", "--cluster", C, "--verify", "--from-file", str(path)])
    assert offline.exit_code == 0, offline.output
    assert json.loads(offline.stdout[: offline.stdout.rindex("}") + 1]) == summary
    until = runner.invoke(cli, ["replay", "--cluster", C, "--until", str(incident["marks"]["preempted"]),
                                "--from-file", str(path)])
    assert json.loads(until.stdout[: until.stdout.rindex("}") + 1])["position"] == incident["marks"]["preempted"]


def test_replay_verify_until_an_input_whose_decisions_follow(incident, tmp_path):
    """`--until N` where N is an input and its decisions are at N+1…: nothing recorded up to N differs
    (the decisions after N are outside the range), and the state is the one between them."""
    runner = CliRunner()
    node_lost = incident["marks"]["preempted"] + 1  # the RemoveNode input; its PodsLost follow
    plain = runner.invoke(cli, ["replay", "--cluster", C, "--until", str(node_lost),
                                "--database-url", incident["url"]])
    checked = runner.invoke(cli, ["replay", "--cluster", C, "--until", str(node_lost), "--verify",
                                  "--database-url", incident["url"]])
    assert checked.exit_code == 0, checked.output
    summary = json.loads(checked.stdout[: checked.stdout.rindex("}") + 1])
    expected = json.loads(plain.stdout[: plain.stdout.rindex("}") + 1])
    assert summary["position"] == node_lost and summary["chainOk"] is True
    assert summary["verdict"] == "identical"
    assert {k: v for k, v in summary.items() if k not in ("chainOk", "verdict", "rules", "explanationDiffs", "divergence")} == \
        {k: v for k, v in expected.items() if k not in ("chainOk",)}


def test_verify_catches_an_altered_decision(incident, tmp_path):
    # copy the stream into a scratch cluster name in the export, alter one decision, re-verify offline
    runner = CliRunner()
    exported = runner.invoke(cli, ["export", "--cluster", C, "--database-url", incident["url"]]).stdout
    lines = [json.loads(x) for x in exported.splitlines()]
    target = next(e for e in lines if e["type"] == ev.POD_GROUP_PREEMPTED)
    target["data"]["pods"][0]["node"] = "n9"
    path = tmp_path / "altered.jsonl"
    path.write_text("\n".join(json.dumps(e) for e in lines) + "\n")
    bad = runner.invoke(cli, ["replay", "--cluster", C, "--verify", "--from-file", str(path)])
    assert bad.exit_code == 1
    assert f"position {target['position']}" in bad.output


async def test_verify_catches_a_decision_altered_in_the_store():
    async with temporary_postgres_database("gp_audit") as url:
        await upgrade(url)
        svc = Gangplank(open_store(url))
        await execute(svc, Command("x", "UpsertNode", "n1", body={"allocatable": {"cpu": "2"}}))
        await execute(svc, Command("x", "SubmitWorkload", "a", "ns", {
            "name": "a", "podGroups": [{"name": "g", "schedulingPolicy": {"basic": {}},
                                         "pods": [{"name": "p", "requests": {"cpu": "1"}}]}]}))
        await svc.store.close()
        engine = sa.ext.asyncio.create_async_engine(url)
        async with engine.begin() as conn:
            row = (await conn.execute(sa.text("SELECT data FROM events WHERE cluster='x' AND position=3"))).scalar()
            await conn.execute(sa.text("UPDATE events SET data=:d WHERE cluster='x' AND position=3"),
                               {"d": row.replace('"n1"', '"n2"')})
        await engine.dispose()
        # the CLI runs its own event loop: call it from a worker thread
        result = await asyncio.to_thread(CliRunner().invoke, cli,
                                         ["replay", "--cluster", "x", "--verify", "--database-url", url])
        assert result.exit_code == 1 and "position 3" in result.output
        chain = await asyncio.to_thread(CliRunner().invoke, cli,
                                        ["audit", "verify", "--cluster", "x", "--database-url", url])
        assert chain.exit_code == 1 and "position 3" in chain.output


async def test_snapshots_and_read_tables_are_caches(incident):
    svc: Gangplank = incident["svc"]
    before = await svc.queries.state_at(C, None)
    async with svc.store.engine.begin() as conn:  # type: ignore[attr-defined]
        count = (await conn.execute(sa.text("SELECT count(*) FROM snapshots"))).scalar()
        assert count > 0  # snapshot_every=4 made some
        await conn.execute(sa.text("DELETE FROM snapshots"))
    fresh = Gangplank(open_store(incident["url"]))
    try:
        after = await fresh.queries.state_at(C, None)
        assert after == before
        for mark in incident["marks"].values():
            assert await fresh.queries.state_at(C, mark) == await svc.queries.state_at(C, mark)
    finally:
        await fresh.store.close()


@pytest.mark.parametrize(("args", "says"), [
    (["replay", "--cluster", C, "--from-file", "/nonexistent/events.jsonl"], "No such file"),
    (["replay", "--cluster", C, "--verify", "--from-file", "{bad}"], "not JSON lines"),
    (["audit", "verify", "--cluster", C, "--database-url", "nonsense://x"], "unsupported database URL"),
    (["audit", "verify", "--cluster", C, "--database-url", "sqlite+aiosqlite:////nonexistent/dir/x.db"],
     "no database at /nonexistent/dir/x.db"),
    (["audit", "verify", "--cluster", C, "--database-url", "sqlite+aiosqlite:///{notdb}"],
     "database cannot be used"),
    (["export", "--cluster", "Not_A_Cluster", "--database-url", "sqlite+aiosqlite:////nonexistent/x.db"],
     "cluster name"),
    (["replay", "--cluster", C, "--until", "-3", "--from-file", "/nonexistent/events.jsonl"], "--until"),
    (["serve", "--tokens", "/nonexistent/tokens.json", "--database-url", "sqlite+aiosqlite:////nonexistent/x.db"],
     "cannot read the tokens file"),
], ids=["missing file", "not JSON", "bad URL", "no database", "not a database", "bad cluster", "negative until",
        "tokens file"])
def test_a_command_that_cannot_run_exits_2_with_a_message(tmp_path, args, says):
    """Exit 1 means "verification failed" (cli.md); a command that cannot run at all says why and
    exits 2, without a traceback."""
    if "{bad}" in args:
        bad = tmp_path / "bad.jsonl"
        bad.write_text("{not json\n")
        args = [str(bad) if a == "{bad}" else a for a in args]
    if any("{notdb}" in a for a in args):
        junk = tmp_path / "junk.db"
        junk.write_text("not an SQLite file\n" * 100)
        args = [a.replace("{notdb}", str(junk)) for a in args]
    result = CliRunner().invoke(cli, args)
    assert result.exit_code == 2, (result.exit_code, result.output, result.exception)
    assert says in result.output and "Traceback" not in result.output


async def test_state_at_every_position_equals_a_plain_fold(tmp_path):
    """Light snapshots every 3 events (active workloads only) plus a short replay give, at every
    position, exactly the view of the events folded from nothing."""
    from service.app.queries import state_view
    from service.app.service import Gangplank as G
    from service.domain import ClusterState, Event, evolve
    from service.domain.model.upcasting import upcast

    svc = G(open_store(f"sqlite+aiosqlite:///{tmp_path}/s.db"), snapshot_every=3)
    await upgrade(f"sqlite+aiosqlite:///{tmp_path}/s.db")
    for i in range(3):
        await execute(svc, Command(C, "UpsertNode", f"n{i}", body={"allocatable": {"cpu": "4"}}))
    for w in range(12):
        await execute(svc, Command(C, "SubmitWorkload", f"w{w}", "ns", {
            "name": f"w{w}", "priority": w % 3,
            "podGroups": [{"name": "g", "schedulingPolicy": {"gang": {"minCount": 1 + w % 2}},
                           "pods": [{"name": "p", "count": 2, "requests": {"cpu": str(1 + w % 3)}}]}]}))
        if w % 3 == 2:
            await execute(svc, Command(C, "DeleteWorkload", f"w{w - 2}", "ns"))
    events = await svc.store.read(C)
    assert len(await svc.store.read(C)) > 20
    state = ClusterState(C)
    for e in events:
        evolve(state, Event(e.position, e.type, upcast(e.type, e.schema_version, e.data)))
        expected = state_view(state, e.position, False)
        got = await svc.queries.state_at(C, e.position)
        assert got == expected, e.position
    await svc.store.close()


async def test_a_dropped_cluster_state_is_freed_although_loaded_states_are_frozen(tmp_path):
    """Loaded states are kept out of the collector (gc.freeze); one dropped after a conflict must
    still be collected, not leak with its reference cycles."""
    import gc
    import weakref

    url = f"sqlite+aiosqlite:///{tmp_path}/d.db"
    await upgrade(url)
    svc = Gangplank(open_store(url))
    await execute(svc, Command(C, "UpsertNode", "n1", body={"allocatable": {"cpu": "4"}}))
    await execute(svc, Command(C, "SubmitWorkload", "w", "ns", {
        "name": "w", "podGroups": [{"name": "g", "pods": [{"name": "p", "requests": {"cpu": "1"}}]}]}))
    svc.cache.drop(C)
    await execute(svc, Command(C, "UpsertNode", "n0", body={"allocatable": {"cpu": "4"}}))  # reloaded, frozen
    old = weakref.ref(svc.cache.cached(C).workloads[("ns", "w")].groups[0])  # in a cycle with its workload
    svc.cache.drop(C)  # as after a conflict: the next command reloads the cluster
    await execute(svc, Command(C, "UpsertNode", "n2", body={"allocatable": {"cpu": "4"}}))
    assert svc.cache.cached(C).workloads[("ns", "w")].groups[0] is not old()
    gc.collect()
    assert old() is None
    assert gc.get_freeze_count() > 0
    await svc.store.close()
    gc.unfreeze()


async def test_a_dry_run_leaves_the_live_state_and_finished_workloads_untouched(tmp_path):
    from service.domain.read.views import canonical

    url = f"sqlite+aiosqlite:///{tmp_path}/dry.db"
    await upgrade(url)
    svc = Gangplank(open_store(url))
    await execute(svc, Command(C, "UpsertNode", "n1", body={"allocatable": {"cpu": "2"}}))
    for name in ("done", "low"):
        await execute(svc, Command(C, "SubmitWorkload", name, "ns", {
            "name": name, "priority": 1,
            "podGroups": [{"name": "g", "pods": [{"name": "p", "count": 2, "requests": {"cpu": "1"}}]}]}))
    await execute(svc, Command(C, "DeleteWorkload", "done", "ns"))
    before = canonical(svc.cache.cached(C))
    out = await execute(svc, Command(C, "SubmitWorkload", "urgent", "ns", {
        "name": "urgent", "priority": 9,
        "podGroups": [{"name": "g", "pods": [{"name": "p", "count": 2, "requests": {"cpu": "1"}}]}]}),
        dry_run=True)
    assert isinstance(out, Accepted) and out.body["dryRun"] is True
    assert [d["type"] for d in out.body["decisions"]].count("PodGroupPreempted") == 2  # `low` would go, pod by pod
    assert canonical(svc.cache.cached(C)) == before
    again = await execute(svc, Command(C, "SubmitWorkload", "done", "ns", {
        "name": "done", "podGroups": [{"name": "g", "pods": [{"name": "p"}]}]}), dry_run=True)
    # a finished workload's name makes a new incarnation (lifecycle.md), also in a dry run: nothing changes
    done = svc.cache.cached(C).workloads[("ns", "done")]
    assert isinstance(again, Accepted) and again.body["previous"] == done.position
    assert canonical(svc.cache.cached(C)) == before
    await svc.store.close()
