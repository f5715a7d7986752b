"""The verdicts of replay --verify (audit.md, *Verifying across releases*): identical, equivalent,
diverged, broken; the report's fields, the verdict line, exit codes and --strict; newer rules."""
from __future__ import annotations

import copy
import json
from typing import Any

import pytest
from typer.testing import CliRunner

from service.app import verify as vd
from service.app.audit import replay
from service.cli.main import app as cli
from service.domain.model import events as ev
from service.domain.model.rules import RULES
from service.store.base import GENESIS_HASH, chain_hash
from tests.domain.sim import Sim, basic, gang, pods


def _stream() -> Sim:
    s = Sim()
    s.node("n1", cpu="2")
    s.node("n2", cpu="2")
    s.submit("low", gang("g", 2, pods(2, cpu="1")), priority=1)
    s.submit("wait", gang("g", 4, pods(4, cpu="2")))
    s.submit("high", basic("b", pods(2, cpu="2")), priority=10)
    s.remove_node("n2")
    return s


def _chain(bodies: list[dict[str, Any]]) -> list[dict[str, Any]]:
    out, prev = [], GENESIS_HASH
    for body in bodies:
        h = chain_hash(prev, body)
        out.append({**body, "prevHash": prev, "hash": h})
        prev = h
    return out


def _envelopes(s: Sim, edit: Any = None) -> list[dict[str, Any]]:
    bodies = []
    for e in s.events:
        body = {"cluster": "c1", "position": e.position, "type": e.type, "schemaVersion": ev.SCHEMA_VERSIONS[e.type],
                "data": copy.deepcopy(e.data), "metadata": {}, "recordedAt": "2026-12-01T10:00:00.000000Z"}
        if edit is not None:
            edit(body)
        bodies.append(body)
    return _chain(bodies)


def _as_version_1(body: dict[str, Any]) -> None:
    """What a release before rules recorded: schemaVersion 1, no rules, reasons and victims in words."""
    if body["type"] not in ev.DECISION_TYPES:
        return
    body["schemaVersion"] = 1
    d = body["data"]
    d.pop("rules")
    x = d.get("explanation")
    if x:
        parts = sorted(f"{r['nodes']} {'Insufficient ' + r['resource'] if r['reason'] == 'Insufficient' else r['reason']}"
                       for r in x["reasons"])
        d["explanation"] = {"message": f"0/{x['nodes']} nodes are available: " + ", ".join(parts) + ".",
                            "reasons": [{"reason": f"Insufficient {r['resource']}" if r["reason"] == "Insufficient"
                                         else r["reason"], "nodes": r["nodes"]} for r in x["reasons"]],
                            "placeablePods": x["placeablePods"], "minCount": x["minCount"],
                            "preemption": x["preemption"]}
    if body["type"] == ev.POD_GROUP_PREEMPTED:
        d["reason"] = "whole group: words of an older release"
        d.pop("minCount")
    for v in (d.get("preemption") or {}).get("victims", []):
        v["why"] = "words of an older release"
        v.pop("reason"), v.pop("minCount")
    for r in (d.get("preemption") or {}).get("reprieved", []):
        r["why"] = "kept"
        r.pop("reason")


def test_a_stream_of_this_release_is_identical():
    s = _stream()
    summary = replay(_envelopes(s), "c1", verify=True).summary()
    assert summary["verdict"] == "identical"
    assert summary["rules"] == {"current": RULES, "recorded": [RULES]}
    assert summary["explanationDiffs"] == 0 and summary["divergence"] is None
    assert vd.verdict_line(summary) == (f"identical: {summary['decisions']} decisions re-decided byte for byte under "
                                        f"rules {RULES}, chain intact")


def test_an_older_stream_with_the_same_outcomes_is_equivalent():
    s = _stream()
    kinds = {e.type for e in s.events}
    assert {ev.POD_GROUP_PREEMPTED, ev.POD_GROUP_UNSCHEDULABLE, ev.PODS_LOST} <= kinds
    summary = replay(_envelopes(s, _as_version_1), "c1", verify=True).summary()
    decisions = sum(1 for e in s.events if e.type in ev.DECISION_TYPES)
    assert summary["verdict"] == "equivalent", summary.get("divergence")
    assert summary["rules"] == {"current": RULES, "recorded": [0]}
    assert summary["explanationDiffs"] == decisions  # each differs at least by its rules
    assert vd.verdict_line(summary) == (f"equivalent: same outcomes; {decisions} decisions differ only in explanations "
                                        f"(recorded under rules 0, re-decided under rules {RULES})")


def test_an_older_stream_with_another_placement_diverges_with_a_structured_diff():
    s = _stream()
    target = next(e.position for e in s.events if e.type == ev.POD_GROUP_SCHEDULED)

    def moved(body: dict[str, Any]) -> None:
        _as_version_1(body)
        if body["position"] == target:
            body["data"]["pods"][0]["node"] = "elsewhere"

    summary = replay(_envelopes(s, moved), "c1", verify=True).summary()
    assert summary["verdict"] == "diverged"
    d = summary["divergence"]
    assert d["position"] == target and d["recorded"]["type"] == d["redecided"]["type"] == ev.POD_GROUP_SCHEDULED
    assert "explanation" not in d["recorded"]["outcome"] and "rules" not in d["redecided"]["outcome"]
    assert d["differences"] == [{"path": ["pods", 0, "node"], "recorded": "elsewhere",
                                 "redecided": s.events[target - 1].data["pods"][0]["node"]}]
    assert vd.verdict_line(summary).startswith(f"diverged at position {target}: pods.0.node recorded \"elsewhere\"")


def test_under_the_current_rules_an_explanation_change_is_a_divergence():
    s = _stream()
    target = next(e.position for e in s.events if e.type == ev.POD_GROUP_UNSCHEDULABLE)

    def reworded(body: dict[str, Any]) -> None:
        if body["position"] == target:
            body["data"]["explanation"]["placeablePods"] += 1

    summary = replay(_envelopes(s, reworded), "c1", verify=True).summary()
    assert summary["verdict"] == "diverged" and summary["divergence"]["position"] == target
    d = summary["divergence"]
    assert d["recorded"]["outcome"] == d["redecided"]["outcome"]  # same outcome, but under the current rules
    placeable = s.events[target - 1].data["explanation"]["placeablePods"]
    assert d["differences"] == [{"path": ["explanation", "placeablePods"], "recorded": placeable + 1,
                                 "redecided": placeable}]


def test_a_missing_decision_diverges_with_a_null_side():
    s = _stream()
    envs = _envelopes(s)
    last_decision = max(e["position"] for e in envs if e["type"] in ev.DECISION_TYPES)
    bodies = [{k: v for k, v in e.items() if k not in ("hash", "prevHash")} for e in envs]
    # an extra decision recorded where the decider makes none: a divergence at its position
    extra = {**bodies[last_decision - 1], "position": len(bodies) + 1}
    summary = replay(_chain([*bodies, extra]), "c1", verify=True).summary()
    assert summary["verdict"] == "diverged"
    assert summary["divergence"]["redecided"] is None and summary["divergence"]["position"] == len(bodies) + 1
    assert summary["divergence"]["differences"][0]["path"] == ["type"]


def test_a_broken_chain_is_broken_whatever_else():
    envs = _envelopes(_stream(), _as_version_1)
    envs[3]["data"]["name"] = "altered"
    summary = replay(envs, "c1", verify=True).summary()
    assert summary["verdict"] == "broken" and summary["firstBadPosition"] == 4
    assert vd.verdict_line(summary).startswith("hash chain broken at position 4: ")


def test_newer_rules_cannot_be_re_decided():
    def newer(body: dict[str, Any]) -> None:
        if body["type"] in ev.DECISION_TYPES:
            body["data"]["rules"] = RULES + 1

    with pytest.raises(vd.NewerRules) as caught:
        replay(_envelopes(_stream(), newer), "c1", verify=True)
    assert f"rules {RULES + 1}" in str(caught.value) and f"rules {RULES}" in str(caught.value)


def _cli(tmp_path: Any, envs: list[dict[str, Any]], *extra: str) -> Any:
    path = tmp_path / "export.jsonl"
    path.write_text("".join(json.dumps(e, sort_keys=True) + "\n" for e in envs))
    return CliRunner().invoke(cli, ["replay", "--verify", "--from-file", str(path), *extra])


def test_cli_exit_codes_and_strict(tmp_path):
    s = _stream()
    identical = _cli(tmp_path, _envelopes(s))
    assert identical.exit_code == 0 and identical.output.strip().splitlines()[-1].startswith("identical: ")
    old = _envelopes(s, _as_version_1)
    equivalent = _cli(tmp_path, old)
    assert equivalent.exit_code == 0, equivalent.output
    assert equivalent.output.strip().splitlines()[-1].startswith("equivalent: same outcomes; ")
    assert _cli(tmp_path, old, "--strict").exit_code == 1

    def newer(body: dict[str, Any]) -> None:
        if body["type"] in ev.DECISION_TYPES:
            body["data"]["rules"] = RULES + 1

    refused = _cli(tmp_path, _envelopes(s, newer))
    assert refused.exit_code == 2 and f"rules {RULES + 1}" in refused.output
