"""No CLI command shows a traceback for any store content (issue 18): tampered, truncated,
reordered and garbage stores and exports give one line and exit 1 (the chain is broken: named, as
`audit verify` names it) or 2 (cannot run); `audit explain` checks the chain before it tells."""
from __future__ import annotations

import asyncio
import json
import shutil
import sqlite3
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from service.cli.main import app as cli
from tests.audit.test_cli_streams import C, _record

# damage to the SQLite store, and the position `audit verify` names (None: the chain holds)
DB_DAMAGE: dict[str, tuple[list[str], int | None]] = {
    "pod renamed in a preemption": (["UPDATE events SET data=replace(data,'\"w-0\"','\"p-9\"') WHERE position=8"], 8),
    "pod renamed in a placement": (["UPDATE events SET data=replace(data,'\"w-0\"','\"p-9\"') WHERE position=6"], 6),
    "workload renamed": (["UPDATE events SET data=replace(data,'\"train\"','\"tran\"') WHERE position=5"], 5),
    "data not JSON": (["UPDATE events SET data='not json' WHERE position=7"], 7),
    "data empty": (["UPDATE events SET data='{}' WHERE position=8"], 8),
    "data a list": (["UPDATE events SET data='[1]' WHERE position=5"], 5),
    "data null": (["UPDATE events SET data='null' WHERE position=12"], 12),
    "unknown type": (["UPDATE events SET type='Bogus' WHERE position=9"], 9),
    "decision turned input": (["UPDATE events SET type='NodeRemoved' WHERE position=6"], 6),
    "future schema version": (["UPDATE events SET schema_version=99 WHERE position=5"], 5),
    "metadata not JSON": (["UPDATE events SET metadata='xx' WHERE position=6"], 6),
    "hash garbage": (["UPDATE events SET hash='zz' WHERE position=3"], 3),
    "tail cut": (["DELETE FROM events WHERE position>15"], 16),
    "every event gone": (["DELETE FROM events"], 1),
    "event missing": (["DELETE FROM events WHERE position=8"], 8),
    "events swapped": (["UPDATE events SET position=1000 WHERE position=8", "UPDATE events SET position=8 WHERE "
                        "position=9", "UPDATE events SET position=9 WHERE position=1000"], 8),
    "snapshots gone": (["DELETE FROM snapshots"], None),
}
COMMANDS = [["replay"], ["replay", "--verify"], ["replay", "--until", "10"], ["export"], ["audit", "verify"],
            ["audit", "explain", "team-a/train"], ["audit", "explain", "team-b/urgent"]]


@pytest.fixture(scope="module")
def good(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    base = tmp_path_factory.mktemp("damage")
    db = base / "good.db"
    asyncio.run(_record(f"sqlite+aiosqlite:///{db}"))
    lines = CliRunner().invoke(cli, ["export", "--cluster", C, "--database-url", f"sqlite+aiosqlite:///{db}"]
                               ).stdout.splitlines()
    return {"base": base, "db": db, "lines": lines}


def _invoke(args: list[str]) -> Any:
    result = CliRunner().invoke(cli, args)
    # a traceback would be an exception other than the exit, or more than one line on stderr
    assert result.exception is None or isinstance(result.exception, SystemExit), (args, repr(result.exception))
    assert result.exit_code in (0, 1, 2), (args, result.exit_code, result.output)
    if result.exit_code:
        assert len(result.stderr.splitlines()) == 1, (args, result.stderr)
    return result


@pytest.mark.parametrize("damage", list(DB_DAMAGE))
def test_every_command_on_a_damaged_store_says_one_line(good: dict[str, Any], damage: str) -> None:
    statements, broken_at = DB_DAMAGE[damage]
    copy = good["base"] / f"{damage.replace(' ', '-')}.db"
    shutil.copy(good["db"], copy)
    with sqlite3.connect(copy) as conn:
        for sql in statements:
            conn.execute(sql)
    url = f"sqlite+aiosqlite:///{copy}"
    for command in COMMANDS:
        args = [*command[:2], "--cluster", C, "--database-url", url, *command[2:]]
        if command[:2] != ["audit", "explain"]:
            args = [*command, "--cluster", C, "--database-url", url]
        result = _invoke(args)
        if broken_at is None:
            assert result.exit_code == 0, (args, result.output)
        elif command[0] == "audit":  # both name the position, exit 1
            assert result.exit_code == 1, (args, result.output)
            assert f"hash chain broken at position {broken_at}" in result.stderr, (args, result.stderr)
        elif command == ["replay", "--verify"]:
            assert result.exit_code == 1 and f"position {broken_at}" in result.stderr, (args, result.output)
        elif result.exit_code == 1:  # a plain read that could not fold says where the chain broke
            assert f"hash chain broken at position {broken_at}" in result.stderr


def test_explain_on_a_tampered_store_names_the_broken_position(good: dict[str, Any]) -> None:
    copy = good["base"] / "tampered.db"
    shutil.copy(good["db"], copy)
    with sqlite3.connect(copy) as conn:  # the KeyError: 'p-9' of issue 18
        conn.execute("UPDATE events SET data=replace(data,'\"w-0\"','\"p-9\"') WHERE position=8")
    result = CliRunner().invoke(cli, ["audit", "explain", "--cluster", C, "--database-url",
                                      f"sqlite+aiosqlite:///{copy}", "team-a/train"])
    assert result.exit_code == 1 and result.stdout == ""
    assert result.stderr == "hash chain broken at position 8: the record was altered or cut there\n"


FILE_DAMAGE = {
    "a list": lambda ls: ls[:3] + ["[1, 2]"] + ls[4:],
    "a string": lambda ls: ls[:3] + ['"x"'] + ls[4:],
    "no position": lambda ls: ls[:3] + [json.dumps({k: v for k, v in json.loads(ls[3]).items() if k != "position"})]
    + ls[4:],
    "position a string": lambda ls: ls[:3] + [json.dumps({**json.loads(ls[3]), "position": "4"})] + ls[4:],
    "pod renamed": lambda ls: ls[:7] + [ls[7].replace('"w-0"', '"p-9"')] + ls[8:],
    "data replaced": lambda ls: ls[:6] + [json.dumps({**json.loads(ls[6]), "data": {"x": 1}})] + ls[7:],
    "unknown type": lambda ls: ls[:6] + [json.dumps({**json.loads(ls[6]), "type": "Bogus"})] + ls[7:],
    "cut in a line": lambda ls: ls[:5] + [ls[5][:40]],
    "binary": lambda ls: ls[:2] + ["\x00\xff garbage"],
    "reordered": lambda ls: ls[:7] + [ls[8], ls[7]] + ls[9:],
}


@pytest.mark.parametrize("damage", list(FILE_DAMAGE))
def test_a_damaged_export_says_one_line(good: dict[str, Any], damage: str) -> None:
    path = good["base"] / f"{damage.replace(' ', '-')}.jsonl"
    path.write_text("\n".join(FILE_DAMAGE[damage](good["lines"])) + "\n")
    for verify in ([], ["--verify"]):
        result = _invoke(["replay", "--from-file", str(path), "--cluster", C, *verify])
        assert result.exit_code in (1, 2), (damage, verify, result.output)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_any_byte_changed_in_an_export_is_no_traceback(good: dict[str, Any], tmp_path: Path, data: Any) -> None:
    text = bytearray(("\n".join(good["lines"]) + "\n").encode())
    for _ in range(data.draw(st.integers(1, 4))):
        text[data.draw(st.integers(0, len(text) - 1))] = data.draw(st.integers(0, 255))
    path = tmp_path / "fuzzed.jsonl"
    path.write_bytes(bytes(text))
    _invoke(["replay", "--from-file", str(path), "--cluster", C, "--verify"])
    _invoke(["replay", "--from-file", str(path)])
