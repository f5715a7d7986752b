"""What-if replay (audit.md, *What-if*) through the CLI on a recorded SQLite stream, and its rules
one by one: `{}` re-decides the stream as recorded, withdrawn workloads, priority classes, nodes
entries and capacity factors, the range, the clock, the errors naming the entry, determinism, and
that nothing is recorded."""
from __future__ import annotations

import asyncio
import json
import sqlite3
from fractions import Fraction
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from service.app.whatif import domain_events, report
from service.cli.main import app as cli
from service.domain.read.whatif import CapacityChange, Changes, scaled
from service.schemas.errors import InputValidationError
from service.schemas.whatif import parse_changes
from tests.audit.test_cli_streams import C, _record


@pytest.fixture(scope="module")
def stream(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    base = tmp_path_factory.mktemp("whatif")
    db = base / "s.db"
    url = f"sqlite+aiosqlite:///{db}"
    asyncio.run(_record(url))
    exported = CliRunner().invoke(cli, ["export", "--cluster", C, "--database-url", url]).stdout
    (base / "s.jsonl").write_text(exported)
    events = [json.loads(x) for x in exported.splitlines()]
    return {"base": base, "db": db, "url": url, "file": str(base / "s.jsonl"), "events": events}


def _what_if(stream: dict[str, Any], changes: Any, *extra: str, source: str = "db") -> Any:
    path = stream["base"] / "changes.yaml"
    path.write_text(changes if isinstance(changes, str) else json.dumps(changes))
    where = ["--from-file", stream["file"]] if source == "file" else ["--cluster", C, "--database-url", stream["url"]]
    return CliRunner().invoke(cli, ["replay", *where, "--what-if", str(path), *extra])


def _json(stream: dict[str, Any], changes: Any, *extra: str, source: str = "db") -> dict[str, Any]:
    result = _what_if(stream, changes, "--output", "json", *extra, source=source)
    assert result.exit_code == 0, (result.output, result.exception)
    return json.loads(result.stdout)


def _row(doc: dict[str, Any], name: str) -> dict[str, Any]:
    return next(w for w in doc["workloads"] if w["name"] == name)


def test_nothing_changed_is_the_record_and_the_same_bytes_twice(stream: dict[str, Any]) -> None:
    with sqlite3.connect(stream["db"]) as conn:
        before = [conn.execute(f"SELECT count(*) FROM {t}").fetchone()[0]
                  for t in ("events", "snapshots", "idempotency", "clusters", "checkpoints")]
    first = _what_if(stream, {}, "--output", "json")
    assert first.exit_code == 0, first.output
    assert _what_if(stream, {}, "--output", "json").stdout == first.stdout  # deterministic
    assert _what_if(stream, "{}\n", "--output", "json", source="file").stdout == first.stdout  # an export too
    doc = json.loads(first.stdout)
    assert first.stdout.endswith("}\n") and json.dumps(doc, sort_keys=True, separators=(",", ":")) + "\n" == first.stdout
    assert doc["from"] == 0 and doc["until"] == 21 and doc["inputs"] == {"recorded": 13, "changes": 0, "skipped": 0}
    assert [w["name"] for w in doc["workloads"]] == ["train", "urgent"]  # submission order
    for w in doc["workloads"]:
        assert w["whatIf"] == w["recorded"] and not w["withdrawn"]
    assert doc["totals"]["whatIf"] == doc["totals"]["recorded"]
    train, urgent = _row(doc, "train")["recorded"], _row(doc, "urgent")["recorded"]
    # from the record: train placed by its own submission (5), preempted by urgent (7) ...
    assert train["scheduledAt"] == 5 and train["wait"] == 0 and train["preemptionsSuffered"] == 1
    assert urgent["scheduledAt"] == 7 and urgent["preemptionsCaused"] == 1 and urgent["phase"] == "Finished"
    assert doc["totals"]["recorded"]["preemptions"] == 1
    with sqlite3.connect(stream["db"]) as conn:
        after = [conn.execute(f"SELECT count(*) FROM {t}").fetchone()[0]
                 for t in ("events", "snapshots", "idempotency", "clusters", "checkpoints")]
    assert after == before  # records nothing


def test_a_withdrawn_workload_never_was(stream: dict[str, Any]) -> None:
    doc = _json(stream, {"withdraw": ["team-b/urgent"]})
    urgent, train = _row(doc, "urgent"), _row(doc, "train")
    assert urgent["withdrawn"] is True and urgent["whatIf"] is None
    assert doc["inputs"]["skipped"] == 2  # its submission and its deletion
    assert train["whatIf"]["preemptionsSuffered"] == 0 and train["whatIf"]["scheduledAt"] == 5
    assert doc["totals"]["whatIf"]["workloads"] == 1 and doc["totals"]["whatIf"]["preemptions"] == 0


def test_a_lower_priority_class_value_preempts_nobody(stream: dict[str, Any]) -> None:
    doc = _json(stream, "priorityClasses: {high: 5}\n")
    urgent = _row(doc, "urgent")
    assert urgent["recorded"]["priority"] == 1000 and urgent["whatIf"]["priority"] == 5
    assert urgent["whatIf"]["preemptionsCaused"] == 0 and _row(doc, "train")["whatIf"]["preemptionsSuffered"] == 0


def test_nodes_entries_are_decided_at_their_position(stream: dict[str, Any]) -> None:
    # every node cordoned before the first submission: nothing can be placed until n4 comes (input 14)
    cordons = [{"at": 4, "cordon": n} for n in ("n1", "n2", "n3")]
    doc = _json(stream, {"nodes": cordons})
    assert doc["inputs"]["changes"] == 3
    inputs = [e["position"] for e in stream["events"] if e["type"] in (
        "NodeUpserted", "NodeRemoved", "PriorityClassUpserted", "WorkloadSubmitted", "WorkloadDeleted")]
    train = _row(doc, "train")["whatIf"]
    assert train["scheduledAt"] is not None and train["scheduledAt"] > 7
    assert train["wait"] == sum(1 for p in inputs if 5 < p <= train["scheduledAt"])  # the recorded inputs between
    # an added node at the end of the range is decided there, dated by its `at`
    added = _json(stream, {"nodes": [{"at": 21, "add": "big", "node": {"allocatable": {"cpu": "64", "pods": 10}}}]})
    assert added["inputs"]["changes"] == 1
    assert added["totals"]["whatIf"]["utilisation"]["cpu"] < added["totals"]["recorded"]["utilisation"]["cpu"]


def test_capacity_factors_round_down_to_the_unit() -> None:
    half = [CapacityChange("cpu", Fraction(1, 2)), CapacityChange("example.com/gpu", Fraction(1, 3), {"rack": "r1"})]
    node = {"name": "n1", "labels": {"rack": "r1"}, "allocatable": {"cpu": "3", "example.com/gpu": "5", "pods": 4}}
    assert scaled(node, half)["allocatable"] == {"cpu": "1500m", "example.com/gpu": "1", "pods": 4}
    other = {**node, "labels": {"rack": "r2"}}
    assert scaled(other, half)["allocatable"] == {"cpu": "1500m", "example.com/gpu": "5", "pods": 4}
    undeclared = {"name": "n2", "labels": {}, "allocatable": {"memory": "1Gi"}}
    assert scaled(undeclared, half) is undeclared
    assert scaled({**node, "allocatable": {"cpu": "1001m"}}, [CapacityChange("cpu", Fraction(1, 2))]
                  )["allocatable"] == {"cpu": "500m"}


def test_halved_cpu_leaves_the_big_gang_unschedulable(stream: dict[str, Any]) -> None:
    doc = _json(stream, {"capacity": [{"resource": "cpu", "factor": "0.5"}]})
    assert _row(doc, "urgent")["whatIf"]["scheduledAt"] is None  # 4 pods of 2 cpu on 2-cpu nodes: 2 at most
    assert doc["totals"]["whatIf"]["neverScheduled"] >= 1


def test_a_range_starts_from_the_state_at_from(stream: dict[str, Any]) -> None:
    doc = _json(stream, {"from": 12})
    assert doc["from"] == 12 and [w["name"] for w in doc["workloads"]] == ["train", "urgent"]  # live at 12
    assert doc["inputs"]["recorded"] == sum(1 for e in stream["events"] if e["position"] > 12 and e["type"] in (
        "NodeUpserted", "WorkloadDeleted"))
    assert all(w["whatIf"] == w["recorded"] for w in doc["workloads"])
    assert _json(stream, {}, "--until", "9")["until"] == 9


@pytest.mark.parametrize(("changes", "named"), [
    ({"nodes": [{"at": 2, "remove": "n7"}]}, "nodes.0.remove"),
    ({"nodes": [{"at": 2, "cordon": "n9"}]}, "nodes.0.cordon"),
    ({"nodes": [{"at": 99, "remove": "n1"}]}, "nodes.0.at"),
    ({"nodes": [{"at": 2, "remove": "n1", "cordon": "n2"}]}, "nodes.0"),
    ({"nodes": [{"at": 2, "add": "n9"}]}, "nodes.0.node"),
    ({"withdraw": ["team-z/none"]}, "withdraw.0"),
    ({"withdraw": ["no-slash"]}, "withdraw.0"),
    ({"capacity": [{"resource": "cpu", "factor": 0}]}, "capacity.0.factor"),
    ({"capacity": [{"resource": "cpu", "factor": "-1"}]}, "capacity.0.factor"),
    ({"priorityClasses": {"high": "x"}}, "priorityClasses.high"),
    ({"bogus": 1}, "bogus"),
    ({"scoring": {"strategy": "Nope"}}, "scoring.strategy"),
    ({"scoring": {"strategy": "FragmentationAware"}}, "scoring.fragmentationAware"),
    ({"scoring": {"strategy": "LeastAllocated", "fragmentationAware": {}}}, "scoring.fragmentationAware"),
])
def test_changes_that_cannot_apply_exit_2_naming_the_entry(stream: dict[str, Any], changes: Any, named: str) -> None:
    result = _what_if(stream, changes)
    assert result.exit_code == 2, result.output
    assert result.stdout == "" and len(result.stderr.splitlines()) == 1 and f": {named}: " in result.stderr


def test_the_table_shows_differences_as_arrows(stream: dict[str, Any]) -> None:
    result = _what_if(stream, {"withdraw": ["team-b/urgent"]})
    assert result.exit_code == 0
    lines = result.stdout.splitlines()
    assert lines[0].split()[:2] == ["NAMESPACE/NAME", "SUBMITTED"]
    assert "team-b/urgent (withdrawn)" in lines[2] and "→" not in lines[2]
    assert "1 → 0" in lines[1]  # train's preemptions suffered
    assert "preemptions: 1 → 0" in result.stdout


def test_parse_changes_names_every_bad_entry() -> None:
    with pytest.raises(InputValidationError) as caught:
        parse_changes({"nodes": [{"at": -1, "remove": ""}], "capacity": [{"resource": "cpu"}], "x": 1})
    locs = [e["loc"] for e in caught.value.errors]
    assert ["nodes", 0, "at"] in locs and ["nodes", 0, "remove"] in locs
    assert ["capacity", 0, "factor"] in locs and ["x"] in locs


def test_the_domain_report_is_pure(stream: dict[str, Any]) -> None:
    rows = [(e["position"], e["type"], e["schemaVersion"], e["data"]) for e in stream["events"]]
    one = report(C, domain_events(rows), Changes())
    assert report(C, domain_events(rows), Changes()) == one


def test_a_broken_chain_exits_1(stream: dict[str, Any], tmp_path: Path) -> None:
    lines = Path(stream["file"]).read_text().splitlines()
    altered = json.loads(lines[6])
    altered["data"]["altered"] = True
    lines[6] = json.dumps(altered)
    bad = tmp_path / "bad.jsonl"
    bad.write_text("\n".join(lines) + "\n")
    changes = tmp_path / "c.yaml"
    changes.write_text("{}")
    result = CliRunner().invoke(cli, ["replay", "--from-file", str(bad), "--what-if", str(changes)])
    assert result.exit_code == 1 and "hash chain broken at position 7" in result.stderr


def test_least_allocated_spreads_the_what_if_world(stream: dict[str, Any]) -> None:
    doc = _json(stream, {"scoring": {"strategy": "LeastAllocated"}})
    assert doc["inputs"]["skipped"] == 0 and len(doc["workloads"]) == 2
    assert _json(stream, {"scoring": {"strategy": "MostAllocated"}})["workloads"] == _json(stream, {})["workloads"]
