"""The verdicts of `replay --verify` (shared/spec/audit.md, *Verifying across releases*).

`audit.replay(..., verify=True)` re-decides every input and hands each recorded decision, with the
decision re-decided at its position, to `compare`; `verdict`, `report` and `verdict_line` turn the
result into the report's fields and the line on stderr. Entry points for other audits (what-if
reports the same `rules`): `outcome` (a decision's data without its explanation parts), `compare`,
`differences`, `divergence`, `NewerRules`.
"""
from __future__ import annotations

from typing import Any

from service.domain.model.rules import RULES
from service.store.base import canonical_json

SAME, EXPLANATION, DIVERGED = "same", "explanation", "diverged"
IDENTICAL, EQUIVALENT, BROKEN = "identical", "equivalent", "broken"

_EVERYWHERE = ("explanation", "message", "reprieved")  # explanation parts at any depth
_UNIT = ("reason", "minCount", "why")  # and in a victim unit
_VICTIM_UNIT_TYPES = ("PodGroupPreempted",)


class NewerRules(ValueError):
    """A record with decisions of a newer rules version than the code's: it cannot be re-decided."""

    def __init__(self, position: int, recorded: int) -> None:
        super().__init__(f"the decision at position {position} was recorded under rules {recorded}, newer than "
                         f"this code's rules {RULES}: re-decide it with a release of rules {recorded} or later")
        self.position = position
        self.recorded = recorded


def rules_of(data: dict[str, Any]) -> int:
    """A decision's rules version: 0 when recorded without it (audit.md)."""
    value = data.get("rules", 0)
    return value if type(value) is int else 0


def _strip(value: Any, unit: bool = False) -> Any:
    if isinstance(value, dict):
        return {k: _strip(v, k == "victims") for k, v in value.items()
                if k not in _EVERYWHERE and not (unit and k in _UNIT)}
    if isinstance(value, list):
        return [_strip(v, unit) for v in value]
    return value


def outcome(event_type: str, data: dict[str, Any]) -> dict[str, Any]:
    """The decision's data without the explanation parts: `rules`; at any depth every `explanation`,
    `message` and `reprieved`; in a victim unit (a PodGroupPreempted's data, an entry of
    `preemption.victims`) `reason`, `minCount` and `why`."""
    out: dict[str, Any] = _strip({k: v for k, v in data.items() if k != "rules"})
    if event_type in _VICTIM_UNIT_TYPES:
        for k in _UNIT:
            out.pop(k, None)
    return out


def compare(recorded_type: str, recorded: dict[str, Any], redecided_type: str, redecided: dict[str, Any]) -> str:
    """SAME (type and data byte for byte, rules included), EXPLANATION (recorded under older rules,
    the same outcome) or DIVERGED."""
    if recorded_type == redecided_type and canonical_json(recorded) == canonical_json(redecided):
        return SAME
    if recorded_type == redecided_type and rules_of(recorded) < RULES and \
            canonical_json(outcome(recorded_type, recorded)) == canonical_json(outcome(redecided_type, redecided)):
        return EXPLANATION
    return DIVERGED


_MISSING = object()


def differences(recorded: Any, redecided: Any, path: list[Any] | None = None) -> list[dict[str, Any]]:
    """Every leaf where the two differ, as the path of keys and list indices from the root (a key or
    element on one side only has null on the other)."""
    path = path or []
    if isinstance(recorded, dict) and isinstance(redecided, dict):
        out: list[dict[str, Any]] = []
        for k in sorted(set(recorded) | set(redecided)):
            out += differences(recorded.get(k, _MISSING), redecided.get(k, _MISSING), [*path, k])
        return out
    if isinstance(recorded, list) and isinstance(redecided, list):
        out = []
        for i in range(max(len(recorded), len(redecided))):
            out += differences(recorded[i] if i < len(recorded) else _MISSING,
                               redecided[i] if i < len(redecided) else _MISSING, [*path, i])
        return out
    if recorded is not _MISSING and redecided is not _MISSING and canonical_json(recorded) == canonical_json(redecided):
        return []
    return [{"path": path, "recorded": None if recorded is _MISSING else recorded,
             "redecided": None if redecided is _MISSING else redecided}]


def divergence(position: int, recorded: tuple[str, dict[str, Any]] | None,
               redecided: tuple[str, dict[str, Any]] | None) -> dict[str, Any]:
    """The report's `divergence`: both sides' outcomes (null for a side with no decision there) and
    the leaves where they differ (`["type"]` when the types differ; the data's leaves when only the
    explanation parts differ, for a decision recorded under the current rules)."""
    def side(x: tuple[str, dict[str, Any]] | None) -> dict[str, Any] | None:
        return None if x is None else {"type": x[0], "outcome": outcome(x[0], x[1])}

    rec, red = side(recorded), side(redecided)
    if recorded is None or redecided is None or recorded[0] != redecided[0]:
        diffs = [{"path": ["type"], "recorded": rec and rec["type"], "redecided": red and red["type"]}]
    else:
        # recorded under the current rules with the same outcome: the leaves of the data that differ
        diffs = differences(outcome(*recorded), outcome(*redecided)) or differences(recorded[1], redecided[1])
    return {"position": position, "recorded": rec, "redecided": red, "differences": diffs}


def verdict(chain_ok: bool, diverged: bool, recorded_rules: set[int]) -> str:
    if not chain_ok:
        return BROKEN
    if diverged:
        return DIVERGED
    return EQUIVALENT if any(r < RULES for r in recorded_rules) else IDENTICAL


def report(verdict_: str, recorded_rules: set[int], explanation_diffs: int,
           divergence_: dict[str, Any] | None) -> dict[str, Any]:
    """The fields the verify report adds to the replay summary."""
    return {"verdict": verdict_, "rules": {"current": RULES, "recorded": sorted(recorded_rules)},
            "explanationDiffs": explanation_diffs, "divergence": divergence_ if verdict_ == DIVERGED else None}


def _leaf(d: dict[str, Any]) -> str:
    path = ".".join(str(p) for p in d["path"])
    return f"{path} recorded {canonical_json(d['recorded'])}, re-decided {canonical_json(d['redecided'])}"


def verdict_line(summary: dict[str, Any]) -> str:
    """The last line on stderr: the verdict in words."""
    v = summary["verdict"]
    older = [r for r in summary["rules"]["recorded"] if r < RULES]
    if v == IDENTICAL:
        return (f"identical: {summary['decisions']} decisions re-decided byte for byte under rules {RULES}, "
                f"chain intact")
    if v == EQUIVALENT:
        return (f"equivalent: same outcomes; {summary['explanationDiffs']} decisions differ only in explanations "
                f"(recorded under rules {', '.join(map(str, older))}, re-decided under rules {RULES})")
    if v == DIVERGED:
        d = summary["divergence"]
        first = d["differences"][0] if d["differences"] else None
        more = len(d["differences"]) - 1
        text = _leaf(first) if first else "the decisions differ"
        if more > 0:
            text += f" (and {more} more difference{'s' if more > 1 else ''})"
        return f"diverged at position {d['position']}: {text}"
    return f"hash chain broken at position {summary.get('firstBadPosition')}: the record was altered or cut there"
