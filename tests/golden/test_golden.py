"""Golden streams (audit.md, *Golden streams*): every kept export re-decides `identical` or
`equivalent` (or exactly what expected.json names), and a stream freshly recorded by this code
through the public API re-decides `identical`."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from service.app.audit import read_jsonl, replay
from service.domain.model.rules import RULES
from tests.golden import generate

HERE = Path(__file__).parent
KEPT = sorted(HERE.glob("*.jsonl"))
EXPECTED: dict[str, Any] = json.loads((HERE / "expected.json").read_text())


def _verify(path: Path) -> dict[str, Any]:
    envelopes = list(read_jsonl(str(path)))
    return replay(envelopes, envelopes[0]["cluster"], verify=True).summary()


def test_the_kept_set_is_there_and_expected_names_kept_files():
    assert {"4ab9e9d.jsonl", "1c258d3.jsonl"} <= {p.name for p in KEPT}
    assert set(EXPECTED) <= {p.name for p in KEPT}


@pytest.mark.parametrize("path", KEPT, ids=[p.name for p in KEPT])
def test_a_kept_stream_still_replays(path: Path) -> None:
    summary = _verify(path)
    expected = EXPECTED.get(path.name)
    if expected is None:
        assert summary["verdict"] in ("identical", "equivalent"), summary.get("divergence")
        assert summary["chainOk"] is True
    else:  # a rules raise made it diverge: exactly there
        assert summary["verdict"] == expected["verdict"], summary.get("divergence")
        assert (summary["divergence"] or {}).get("position") == expected.get("position")
        assert summary["rules"]["current"] >= expected["rules"]


def test_a_fresh_stream_is_identical(tmp_path: Path) -> None:
    out = tmp_path / "fresh.jsonl"
    generate.record(out)
    summary = _verify(out)
    assert summary["verdict"] == "identical", summary.get("divergence")
    assert summary["rules"] == {"current": RULES, "recorded": [RULES]}
    kinds = {json.loads(line)["type"] for line in out.read_text().splitlines()}
    assert len(kinds) >= 15  # every decision type and most inputs
