"""States compared over every attribute, with a named list of exclusions.

`attributes(state)` walks a ClusterState through every attribute of every object it holds (the
node table, the device state, the queue and its index, workloads, groups, composites, ...), down to
plain values: numpy arrays as lists, sets sorted, a back-reference to a workload as its position. It
leaves out only what `EXCLUDED` names, each with why: caches rebuilt on demand, whose contents depend
on which reads happened, not on the events folded. Two folds of the same events must give equal
attributes; a new attribute is compared from the day it exists, unless it is named here.
"""
from __future__ import annotations

import dataclasses
import json
from array import array
from fractions import Fraction
from typing import Any

import numpy as np

# (class name, attribute) -> why it is not compared
EXCLUDED: dict[tuple[str, str], str] = {
    ("ClusterState", "_shape_vectors"): "request vectors per pod shape, built on first use (placement reads)",
    ("ClusterState", "_target"): "FragmentationAware's target shapes of the last decision, recomputed per position",
    ("NodeTable", "_col_cache"): "allocatable columns and inverses for scoring, rebuilt after an upsert",
    ("NodeTable", "_rank"): "node name ranks, rebuilt when a node is added",
    ("DeviceState", "fa_measure"): "FragmentationAware's per-layout measure and its ΔF caches",
    ("DeviceState", "_index"): "the device match index, rebuilt when devices or nodes change",
    ("DeviceState", "rank_of"): "device order ranks, written by the match index when it is built",
    ("DeviceState", "_shareable"): "whether any device is shareable, per device version",
    ("Group", "_pod_index"): "pod name -> index, built on first lookup",
    ("NodeTable", "touched"): "rows whose usage changed since the trials' row caches looked",
    ("QueueIndex", "node_changes"): "the trees' memo key (decide/trees.py): counts the label changes that queued "
                                    "entries read, so it follows what was queued when, not only the events (a "
                                    "workload submitted and deleted within a fast fold never queues; a restored "
                                    "state reads every label); the memos compare it with itself",
}
# and, comparing a live state with its replay, what the decider's passes leave behind: work they
# consumed or memos they took, which a fold of their events never makes
PASS_STATE: dict[tuple[str, str], str] = {
    ("QueueIndex", "dirty"): "rows changed since the last pass: a pass consumes them, a fold only adds",
    ("QueueIndex", "trees_quiet"): "the tree lane's memo of a pass that placed nothing",
    ("QueueIndex", "proofs"): "capacity proofs of waiting trees, taken by passes",
    ("QueueIndex", "classes"): "bounds of classes of groups that failed, learnt by passes",
    ("NodeTable", "masks"): "affinity masks, taken by placement",
    ("NodeTable", "_selector_cache"): "selector masks, taken by placement",
    ("NodeTable", "_domain_cache"): "topology domain layouts, taken by placement",
    ("DeviceState", "infos"): "claims.info per group, taken by placement",
    ("DeviceState", "freed"): "devices freed since the last pass took them",
    ("Composite", "memo"): "a root's picture of the cluster at its last failed try (trees in the pass)",
}
# dicts compared without their key order: looked up by key, never iterated where order shows
UNORDERED: dict[tuple[str, str], str] = {
    ("DeviceState", "used"): "what each device's live shares consume, by device id",
    ("DeviceState", "nshares"): "live shares per device id",
    ("DeviceState", "sharers"): "the claims sharing each device, by device id",
    ("QueueIndex", "read_keys"): "how many queued entries read each label key, by key",
    ("QueueIndex", "buckets"): "queued keys by class bucket: the pass heaps the buckets' heads by queue key",
    ("QueueIndex", "member_of"): "the bucket of each queued key, by key",
}
_FINISHED = "_finished"


def attributes(obj: Any, *, live: bool = False) -> Any:
    """The attribute tree of `obj` without EXCLUDED (and without PASS_STATE with `live`)."""
    return _walk(obj, {}, (), {**EXCLUDED, **PASS_STATE} if live else EXCLUDED)


def _walk(value: Any, seen: dict[int, Any], path: tuple[str, ...], excluded: dict[tuple[str, str], str]) -> Any:
    if value is None or isinstance(value, (bool, int, float, str, bytes)):
        return value
    if isinstance(value, Fraction):
        return ("Fraction", value.numerator, value.denominator)
    if isinstance(value, np.ndarray):
        return ("ndarray", str(value.dtype), value.tolist())
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, array):
        return list(value)
    if isinstance(value, (list, tuple)):
        return [_walk(v, seen, path, excluded) for v in value]
    if isinstance(value, (set, frozenset)):
        return ("set", sorted((_walk(v, seen, path, excluded) for v in value), key=repr))
    if isinstance(value, dict) or hasattr(value, "items") and hasattr(value, "keys"):  # key order kept
        return ("dict", [(_walk(k, seen, path, excluded), _walk(v, seen, path, excluded)) for k, v in value.items()])
    name = type(value).__name__
    if name in ("Workload", "Group", "Composite") and id(value) in seen:
        return ("ref", name, seen[id(value)])  # a back-reference (a group's workload)
    if dataclasses.is_dataclass(value) and type(value).__dataclass_params__.frozen:  # type: ignore[attr-defined]
        return (name, repr(value))  # an immutable spec: its value
    if name == "Workload":
        seen[id(value)] = value.__dict__.get("position")
    elif name in ("Group", "Composite"):
        seen[id(value)] = (name, len(seen))
    fields = dict(getattr(value, "__dict__", {}))
    for slot in getattr(type(value), "__slots__", ()):
        if hasattr(value, slot):
            fields[slot] = getattr(value, slot)
    if name == "Workload" and _FINISHED in fields:  # the compact form: its text read as values
        body, extras, *rest = fields[_FINISHED]
        fields[_FINISHED] = (json.loads(body) if isinstance(body, str) else body,
                             json.loads(extras) if isinstance(extras, str) else extras, *rest)
        for materialised in ("spec", "groups", "body", "composites"):  # rebuilt from it on first read
            fields.pop(materialised, None)
    out = {}
    for k, v in sorted(fields.items()):
        if (name, k) in excluded:
            continue
        walked = _walk(v, seen, (*path, k), excluded)
        if (name, k) in UNORDERED and isinstance(walked, tuple) and walked[0] == "dict":
            walked = ("dict", sorted(walked[1], key=repr))
        out[k] = walked
    return (name, out)


def differences(a: Any, b: Any, path: str = "") -> list[str]:
    """Where two attribute trees differ (for a readable failure)."""
    if type(a) is not type(b):
        return [f"{path}: {a!r:.200} != {b!r:.200}"]
    if isinstance(a, tuple) and len(a) == 2 and isinstance(a[1], dict) and isinstance(b[1], dict):
        out = []
        for k in sorted(set(a[1]) | set(b[1])):
            out += differences(a[1].get(k, "<absent>"), b[1].get(k, "<absent>"), f"{path}.{k}")
        return out
    if isinstance(a, (list, tuple)) and len(a) == len(b) and a != b:
        out = []
        for i, (x, y) in enumerate(zip(a, b)):
            out += differences(x, y, f"{path}[{i}]")
        return out or [f"{path}: {a!r:.200} != {b!r:.200}"]
    return [] if a == b else [f"{path}: {a!r:.200} != {b!r:.200}"]


def assert_same_state(got: Any, expected: Any, *, live: bool = False) -> None:
    """Every attribute equal, but those EXCLUDED (and PASS_STATE when `got` is a live state)."""
    a, b = attributes(got, live=live), attributes(expected, live=live)
    if a != b:
        raise AssertionError("states differ:\n" + "\n".join(differences(a, b)[:20]))
