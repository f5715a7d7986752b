"""Schema evolution: older versions of an event type's data are upcast when read.

Register `(type, version) -> function(data) -> data at version + 1`; `upcast`
applies the chain up to the current version of the type (events.SCHEMA_VERSIONS),
so an old stream replays under new code to the same state.
"""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

from service.domain.model.events import DECISION_TYPES, POD_GROUP_PREEMPTED, SCHEMA_VERSIONS
from service.domain.model.reasons import node_reason

Upcaster = Callable[[dict[str, Any]], dict[str, Any]]
UPCASTERS: dict[tuple[str, int], Upcaster] = {}


def register(event_type: str, from_version: int) -> Callable[[Upcaster], Upcaster]:
    def wrap(fn: Upcaster) -> Upcaster:
        UPCASTERS[(event_type, from_version)] = fn
        return fn
    return wrap


def upcast(event_type: str, version: int, data: dict[str, Any]) -> dict[str, Any]:
    current = SCHEMA_VERSIONS.get(event_type, 1)
    while version < current:
        step = UPCASTERS.get((event_type, version))
        if step is None:
            raise ValueError(f"no upcaster for {event_type} v{version}")
        data = step(data)
        version += 1
    if version > current:
        raise ValueError(f"{event_type} v{version} is newer than this code (v{current})")
    return data


# -- decisions, version 1 -> 2 (audit.md, *Old records keep their words*) ----------------------
# Version 1 stored prose; version 2 stores codes and numbers and `rules`. An upcast decision reads
# as rules 0; its words become `message` fields of the same objects (shown as recorded), each node
# reason gets the code whose words it is (or `Unrecognized`), and fields version 1 lacked stay absent.

def _explanation_v1(x: Any) -> Any:
    if not isinstance(x, dict):
        return x
    out = dict(x)
    if isinstance(x.get("reasons"), list):
        out["reasons"] = [{**{k: v for k, v in r.items() if k != "reason"}, **node_reason(r["reason"])}
                          if isinstance(r, dict) and isinstance(r.get("reason"), str) else r
                          for r in x["reasons"]]
    if isinstance(x.get("children"), list):
        out["children"] = [{**c, "explanation": _explanation_v1(c.get("explanation"))} if isinstance(c, dict) else c
                           for c in x["children"]]
    return out


def _why_to_message(unit: Any) -> Any:
    if not isinstance(unit, dict) or "why" not in unit:
        return unit
    out = {k: v for k, v in unit.items() if k != "why"}
    out["message"] = unit["why"]
    return out


def _decision_v1(data: dict[str, Any]) -> dict[str, Any]:
    out = dict(data)
    if "explanation" in out:
        out["explanation"] = _explanation_v1(out["explanation"])
    if isinstance(out.get("groups"), list):  # CompositePodGroupScheduled: each group's own explanation
        out["groups"] = [{**g, "explanation": _explanation_v1(g["explanation"])}
                         if isinstance(g, dict) and "explanation" in g else g for g in out["groups"]]
    pre = out.get("preemption")
    if isinstance(pre, dict):
        pre = dict(pre)
        for key in ("victims", "reprieved"):
            if isinstance(pre.get(key), list):
                pre[key] = [_why_to_message(u) for u in pre[key]]
        out["preemption"] = pre
    out["rules"] = 0
    return out


def _preempted_v1(data: dict[str, Any]) -> dict[str, Any]:
    out = _decision_v1(data)
    if isinstance(out.get("reason"), str):  # version 1: the victim's why, in words
        out["message"] = out.pop("reason")
    return out


for _type in DECISION_TYPES:
    register(_type, 1)(_preempted_v1 if _type == POD_GROUP_PREEMPTED else _decision_v1)
