"""Causes in `audit explain` (audit.md), from the structured reasons, for old and new records alike,
also from an export without a database; the hash chain is checked first."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from typer.testing import CliRunner

from service.cli.main import app as cli
from service.domain.model import events as ev
from tests.audit.test_verdicts import _as_version_1
from tests.audit.test_verdicts import _envelopes as _bare
from tests.domain.sim import Sim, basic, gang, pods


def _envelopes(s: Sim, edit: Any = None) -> list[dict[str, Any]]:
    """The export of the stream: each decision names the input that caused it (metadata)."""
    cause = {"at": 0}

    def with_cause(body: dict[str, Any]) -> None:
        if body["type"] in ev.INPUT_TYPES:
            cause["at"] = body["position"]
        else:
            body["metadata"] = {"causationPosition": cause["at"]}
        if edit is not None:
            edit(body)

    return _bare(s, with_cause)


def _stream() -> Sim:
    s = Sim()
    s.node("n1", cpu="2")
    s.node("n2", cpu="2")
    s.submit("low", gang("g", 2, pods(2, cpu="1")), priority=1)   # #3.. on n1
    s.submit("fill", basic("b", pods(1, cpu="2")), priority=5)    # n2
    s.submit("wait", gang("g", 2, pods(2, cpu="2")), priority=3)  # no room: waits (preempts low? 1 < 3)
    s.submit("high", basic("b", pods(1, cpu="2")), priority=10)
    s.delete("fill")
    s.remove_node("n1")
    return s


def _explain(tmp_path: Path, envs: list[dict[str, Any]], who: str) -> Any:
    path = tmp_path / "export.jsonl"
    path.write_text("".join(json.dumps(e, sort_keys=True) + "\n" for e in envs))
    return CliRunner().invoke(cli, ["audit", "explain", "--from-file", str(path), who])


def test_explain_from_an_export_names_the_causes(tmp_path: Path) -> None:
    s = _stream()
    for envs in (_envelopes(s), _envelopes(s, _as_version_1)):
        lines = []
        for who in ("default/low", "default/wait", "default/fill"):
            result = _explain(tmp_path, envs, who)
            assert result.exit_code == 0, result.output
            lines += result.output.strip().splitlines()
        assert all("[#" in line for line in lines if not line.startswith(("    ", "Now:"))), lines
        text = "\n".join(lines)
        assert "preempted by default/" in text and "was submitted at #" in text, text
        assert "was removed at #" in text or "was deleted at #" in text, text
        assert "nodes are available" in text


def test_waits_read_the_recorded_words_of_an_old_record(tmp_path: Path) -> None:
    s = Sim()
    s.node("n1", cpu="1")
    s.submit("w", gang("g", 2, pods(2, cpu="1")))
    new = _explain(tmp_path, _envelopes(s), "default/w")
    assert "0/1 nodes are available: 1 Insufficient cpu. 1/2 pods of the gang fit, minCount 2." in new.output
    assert "NoLowerPriorityVictims" in new.output or "Preemption" not in new.output

    def old_words(body: dict[str, Any]) -> None:
        _as_version_1(body)
        x = body["data"].get("explanation")
        if x:
            x["message"] = "words of the old release."

    old = _explain(tmp_path, _envelopes(s, old_words), "default/w")
    assert old.exit_code == 0 and "words of the old release." in old.output, old.output


def test_a_broken_chain_is_named_first(tmp_path: Path) -> None:
    envs = _envelopes(_stream())
    envs[2]["data"]["priority"] = 99
    result = _explain(tmp_path, envs, "default/low")
    assert result.exit_code == 1 and "hash chain broken at position 3" in result.output, result.output
    assert _explain(tmp_path, _envelopes(_stream()), "default/nobody").exit_code == 1
