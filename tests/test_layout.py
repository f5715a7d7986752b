"""The layout rules of the developers' guide: modules <= 700 lines, functions <= 80; and the rules
written once (issue 21): the quorum rule only in service/domain/model/gang.py."""
from __future__ import annotations

import ast
import re
from pathlib import Path

SERVICE = Path(__file__).resolve().parents[1] / "service"


def _sources() -> list[tuple[Path, str]]:
    return [(p, p.read_text()) for p in sorted(SERVICE.rglob("*.py"))]


def test_modules_and_functions_stay_small() -> None:
    too_long: list[str] = []
    for path, src in _sources():
        if src.count("\n") > 700:
            too_long.append(f"{path.relative_to(SERVICE)}: {src.count(chr(10))} lines")
        for node in ast.walk(ast.parse(src)):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.end_lineno is not None:
                length = node.end_lineno - node.lineno + 1
                if length > 80:
                    too_long.append(f"{path.relative_to(SERVICE)}:{node.lineno} {node.name}: {length} lines")
    assert not too_long, too_long


def test_the_quorum_and_gang_rules_are_written_once() -> None:
    quorum = re.compile(r"[<>]=?\s*\w+(\.\w+)*\.min_group_count")
    need = re.compile(r"min_count if [\w.]*gang else 1")
    found = [f"{path.relative_to(SERVICE)}" for path, src in _sources()
             if path.name != "gang.py" and (quorum.search(src) or need.search(src))]
    assert not found, found
