"""Taints, tolerations and node affinity (model.md, *Node affinity and tolerations*).

Two layers. The per-node rules, written as Kubernetes writes them (`tolerates`,
`requirement_matches`, `term_matches`, `required_matches`, `preferred_weight`): the reference,
and what a test reads. And their vectorised forms over the node table's rows, which placement
uses: a mask (or a count) per pod shape, cached in `NodeTable.masks` until the next node change.

- Taints: every row's tuple of taints is interned in the node table (`taint_sets`,
  `taint_ids`), so a pod's tolerations are checked once per distinct tuple and spread to the
  rows by indexing with `taint_ids`.
- Labels: a requirement is decided once per distinct value of its key (the table's per-key value
  ids, `NodeTable.domains`), then spread to the rows the same way. A node without the label has
  id -1, which indexes the extra last entry (False) of every per-value array.
"""
from __future__ import annotations

import re
from collections.abc import Iterable

import numpy as np

from service.domain.model import reasons as rs
from service.domain.model.specs import (
    NO_EXECUTE,
    NO_SCHEDULE,
    PREFER_NO_SCHEDULE,
    PodShape,
    Requirement,
    Taint,
    Term,
    Toleration,
)
from service.domain.nodes.table import NodeTable

NAME_FIELD = "metadata.name"
_INT64 = 2**63
_INTEGER = re.compile(r"[+-]?[0-9]+", re.ASCII)
# a taint this pod does not tolerate keeps it off the node; PreferNoSchedule only orders nodes
HARD_EFFECTS = (NO_SCHEDULE, NO_EXECUTE)
PENALTY_SPAN = 64  # above the most PreferNoSchedule taints a node has (32): see order_key


# -- the rules, per node -------------------------------------------------------------------------
def tolerates(toleration: Toleration, taint: Taint) -> bool:
    """Kubernetes' Toleration.ToleratesTaint: equal effects (an empty effect matches every effect),
    equal keys (an empty key matches every key), then `Exists`, or `Equal` with equal values."""
    key, operator, value, effect = toleration
    t_key, t_value, t_effect = taint
    if effect and effect != t_effect:
        return False
    if key and key != t_key:
        return False
    if operator == "Exists":
        return True
    return operator == "Equal" and value == t_value


def tolerated(tolerations: Iterable[Toleration], taint: Taint) -> bool:
    return any(tolerates(t, taint) for t in tolerations)


def first_untolerated(tolerations: tuple[Toleration, ...], taints: Iterable[Taint],
                      effects: tuple[str, ...] = HARD_EFFECTS) -> Taint | None:
    """The first taint (in the node's order) with one of `effects` that no toleration tolerates."""
    for taint in taints:
        if taint[2] in effects and not tolerated(tolerations, taint):
            return taint
    return None


def untolerated_count(tolerations: tuple[Toleration, ...], taints: Iterable[Taint], effect: str) -> int:
    return sum(1 for taint in taints if taint[2] == effect and not tolerated(tolerations, taint))


def taint_reason(taint: Taint) -> str:
    """kube-scheduler's TaintToleration message."""
    return rs.node_words({"reason": rs.UNTOLERATED_TAINT, "key": taint[0], "value": taint[1]})


def parse_integer(value: str) -> int | None:
    """A label value as Go's strconv.ParseInt(value, 10, 64) reads it; None when it cannot."""
    if not _INTEGER.fullmatch(value):
        return None
    number = int(value)
    return number if -_INT64 <= number < _INT64 else None


def _value_matches(operator: str, values: tuple[str, ...], label: str | None) -> bool:
    if operator == "In":
        return label is not None and label in values
    if operator == "NotIn":
        return label is None or label not in values
    if operator == "Exists":
        return label is not None
    if operator == "DoesNotExist":
        return label is None
    if operator in ("Gt", "Lt"):
        number = None if label is None else parse_integer(label)
        bound = parse_integer(values[0]) if len(values) == 1 else None
        if number is None or bound is None:
            return False
        return number > bound if operator == "Gt" else number < bound
    return False


def requirement_matches(req: Requirement, labels: dict[str, str]) -> bool:
    key, operator, values = req
    return _value_matches(operator, values, labels.get(key))


def field_matches(req: Requirement, name: str) -> bool:
    key, operator, values = req
    return key == NAME_FIELD and operator in ("In", "NotIn") and _value_matches(operator, values, name)


def term_matches(term: Term, labels: dict[str, str], name: str) -> bool:
    """Every expression and every field holds; a term with neither matches nothing."""
    expressions, fields = term
    if not expressions and not fields:
        return False
    return all(requirement_matches(r, labels) for r in expressions) and all(field_matches(r, name) for r in fields)


def required_matches(terms: tuple[Term, ...], labels: dict[str, str], name: str) -> bool:
    """Any term matches; no terms means no required node affinity (every node)."""
    return not terms or any(term_matches(t, labels, name) for t in terms)


def preferred_weight(preferred: tuple[tuple[int, Term], ...], labels: dict[str, str], name: str) -> int:
    return sum(weight for weight, term in preferred if term_matches(term, labels, name))


def tolerates_no_execute(tolerations: tuple[Toleration, ...], taints: Iterable[Taint]) -> bool:
    """A placed pod may stay on a node whose every NoExecute taint it tolerates."""
    return first_untolerated(tolerations, taints, (NO_EXECUTE,)) is None


# -- vectorised over the node table's rows ---------------------------------------------------------
def _per_set(nodes: NodeTable, values: list[int] | list[bool], dtype: type) -> np.ndarray:
    """Spread one value per distinct taint tuple to the rows."""
    return np.asarray(values, dtype=dtype)[nodes.taint_ids[: nodes.count]]


def taint_mask(nodes: NodeTable, tolerations: tuple[Toleration, ...]) -> np.ndarray:
    """Rows whose every NoSchedule and NoExecute taint the tolerations tolerate (all rows, dead
    ones too; read-only: the array is cached)."""
    key = ("taints", tolerations)
    hit = nodes.cached_mask(key)
    if hit is None:
        if len(nodes.taint_sets) == 1:  # no node has ever had a taint
            hit = np.ones(nodes.count, dtype=bool)
        else:
            hit = _per_set(nodes, [first_untolerated(tolerations, s) is None for s in nodes.taint_sets], bool)
        nodes.keep_mask(key, hit)
    return hit


def taint_failures(nodes: NodeTable, tolerations: tuple[Toleration, ...],
                   rows: np.ndarray) -> list[tuple[str, np.ndarray]]:
    """For explanations: (reason, failing) per distinct first untolerated taint among `rows`,
    `failing` a bool array over `rows`; in the order of the taint tuples' first appearance."""
    firsts = [first_untolerated(tolerations, s) for s in nodes.taint_sets]
    ids = nodes.taint_ids[rows]
    by_reason: dict[str, list[int]] = {}
    for set_id in np.unique(ids).tolist():
        taint = firsts[set_id]
        if taint is not None:
            by_reason.setdefault(taint_reason(taint), []).append(set_id)
    return [(reason, np.isin(ids, set_ids)) for reason, set_ids in by_reason.items()]


def _value_table(nodes: NodeTable, key: str, operator: str, values: tuple[str, ...]) -> np.ndarray:
    """Per row: does the requirement hold for its value of `key` (vectorised per distinct value)."""
    ids, known = nodes.domains(key)  # -1: no such label (or a dead row)
    per_value = np.zeros(len(known) + 1, dtype=bool)  # the last entry is for id -1
    if operator in ("In", "NotIn"):
        wanted = set(values)
        per_value[:-1] = [v in wanted for v in known]
    elif operator in ("Exists", "DoesNotExist"):
        per_value[:-1] = True
    elif operator in ("Gt", "Lt"):
        per_value[:-1] = [_value_matches(operator, values, v) for v in known]
    mask: np.ndarray = per_value[ids[: nodes.count]]
    return ~mask if operator in ("NotIn", "DoesNotExist") else mask


def _field_table(nodes: NodeTable, operator: str, values: tuple[str, ...]) -> np.ndarray:
    mask = np.zeros(nodes.count, dtype=bool)
    for name in values:
        row = nodes.index.get(name)
        if row is not None:
            mask[row] = True
    return ~mask if operator == "NotIn" else mask


def term_mask(nodes: NodeTable, term: Term) -> np.ndarray:
    expressions, fields = term
    if not expressions and not fields:
        return np.zeros(nodes.count, dtype=bool)
    mask = np.ones(nodes.count, dtype=bool)
    for key, operator, values in expressions:
        mask &= _value_table(nodes, key, operator, values)
    for key, operator, values in fields:
        if key != NAME_FIELD or operator not in ("In", "NotIn"):
            return np.zeros(nodes.count, dtype=bool)
        mask &= _field_table(nodes, operator, values)
    return mask


def affinity_mask(nodes: NodeTable, terms: tuple[Term, ...]) -> np.ndarray:
    """Rows that match any of the required terms (every row when there are none); cached, read-only."""
    key = ("required", terms)
    hit = nodes.cached_mask(key)
    if hit is None:
        hit = np.ones(nodes.count, dtype=bool)
        if terms:
            hit[:] = False
            for term in terms:
                hit |= term_mask(nodes, term)
        nodes.keep_mask(key, hit)
    return hit


def selector_affinity_mask(nodes: NodeTable, shape: PodShape) -> np.ndarray:
    """The NodeAffinity filter: every nodeSelector label and the required node affinity (read-only)."""
    selector = nodes.selector_mask(shape.node_selector)[: nodes.count]
    if not shape.required:
        return selector
    key = ("selector+required", shape.node_selector, shape.required)
    hit = nodes.cached_mask(key)
    if hit is None:
        hit = nodes.keep_mask(key, selector & affinity_mask(nodes, shape.required))
    return hit


def preferred_weights(nodes: NodeTable, preferred: tuple[tuple[int, Term], ...]) -> np.ndarray:
    """Per row, the sum of the weights of the preferred terms it matches (cached, read-only)."""
    key = ("preferred", preferred)
    hit = nodes.cached_mask(key)
    if hit is None:
        hit = np.zeros(nodes.count, dtype=np.int64)
        for weight, term in preferred:
            hit += weight * term_mask(nodes, term)
        nodes.keep_mask(key, hit)
    return hit


def prefer_no_schedule_counts(nodes: NodeTable, tolerations: tuple[Toleration, ...]) -> np.ndarray | None:
    """Per row, how many PreferNoSchedule taints the tolerations leave untolerated; None when no
    row has any (cached, read-only)."""
    if len(nodes.taint_sets) == 1:  # no node has ever had a taint
        return None
    key = ("prefer", tolerations)
    hit = nodes.cached_mask(key)
    if hit is None:
        counts = [untolerated_count(tolerations, s, PREFER_NO_SCHEDULE) for s in nodes.taint_sets]
        hit = nodes.keep_mask(key, _per_set(nodes, counts, np.int64))
    return hit if hit.any() else None


def order_key(nodes: NodeTable, shape: PodShape) -> np.ndarray | None:
    """model.md *Placing a group* step 2, before the score: per row, higher ranks first — the sum of
    the matched preferred weights, then the fewest untolerated PreferNoSchedule taints, as one
    exact integer (weight * PENALTY_SPAN - count). None when it is equal on every row (the pod has
    no preferred terms and no row has such a taint): the score alone orders the nodes."""
    penalty = prefer_no_schedule_counts(nodes, shape.tolerations)
    if not shape.preferred and penalty is None:
        return None
    key = ("order", shape.tolerations, shape.preferred)
    hit = nodes.cached_mask(key)
    if hit is None:
        hit = np.zeros(nodes.count, dtype=np.int64)
        if shape.preferred:
            hit += preferred_weights(nodes, shape.preferred) * PENALTY_SPAN
        if penalty is not None:
            hit -= penalty
        nodes.keep_mask(key, hit)
    return hit
