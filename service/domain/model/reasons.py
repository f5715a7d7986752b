"""Reasons as codes and numbers, words rendered when read (shared/spec/audit.md, *Reasons, not words*).

Decisions record why as codes with their numbers; the message a person reads is rendered from them
by the views, `audit explain`, the replay reports and the client commands. This module is the one
table of codes and words:

- node reasons (an explanation's `reasons`): `NODE_WORDS`, `node_reason` (words -> code, for the
  filters' counts and for upcasting version-1 decisions), `node_reasons` (counts -> sorted entries);
- victim units (`VICTIM_WORDS`) and the reprieve (`PREEMPTOR_STILL_FITS`);
- rendering: `render_explanation` (a pod group's or a composite's), `render_decision` (a decision's
  data, as the CLI shows it), `victim_words`, `preemption_words`.

An object that carries `message` (an upcast version-1 decision: its recorded words) is shown with
that message as recorded. Rewording here changes no stored byte.
"""
from __future__ import annotations

import re
from collections.abc import Mapping
from functools import lru_cache
from typing import Any

# -- node reasons (model.md *Placing a group* step 1; kube-scheduler's words) -------------------
NODE_UNSCHEDULABLE = "NodeUnschedulable"
UNTOLERATED_TAINT = "UntoleratedTaint"
NODE_AFFINITY = "NodeAffinity"
TOPOLOGY = "Topology"
INSUFFICIENT = "Insufficient"
TOO_MANY_PODS = "TooManyPods"
DEVICES = "Devices"
UNRECOGNIZED = "Unrecognized"  # an upcast reason whose words no code has: its text is its message

NODE_WORDS: dict[str, str] = {
    NODE_UNSCHEDULABLE: "node(s) were unschedulable",
    UNTOLERATED_TAINT: "node(s) had untolerated taint {{{key}: {value}}}",
    NODE_AFFINITY: "node(s) didn't match Pod's node affinity/selector",
    TOPOLOGY: "node(s) didn't match pod group topology",
    INSUFFICIENT: "Insufficient {resource}",
    TOO_MANY_PODS: "Too many pods",
    DEVICES: "cannot allocate all claims",
}
_NUMBERS = ("resource", "key", "value")  # the numbers a node reason may carry besides `nodes`
_BY_WORDS = {w: c for c, w in NODE_WORDS.items() if "{" not in w}
_TAINT = re.compile(r"node\(s\) had untolerated taint \{(.*?): (.*)\}", re.DOTALL)
_INSUFFICIENT = "Insufficient "

# -- victim units (model.md *Preemption* step 1) and the reprieve (step 3) ----------------------
DISRUPTION_MODE_ALL = "DisruptionModeAll"
GANG_AT_MIN_COUNT = "GangAtMinCount"
SURPLUS_EXCEEDED = "SurplusExceeded"
GANG_SURPLUS = "GangSurplus"
BASIC_PODS = "BasicPods"
PREEMPTOR_STILL_FITS = "PreemptorStillFits"
COMPOSITE_DISRUPTION_MODE_ALL = "CompositeDisruptionModeAll"  # a tree's highest All CPG: one unit
COMPOSITE_UNSATISFIED = "CompositeUnsatisfied"  # taken whole: the victims would leave this CPG unsatisfied

VICTIM_WORDS: dict[str, str] = {
    DISRUPTION_MODE_ALL: "whole group: its disruptionMode is All",
    GANG_AT_MIN_COUNT: "whole group: a gang with no pods placed above minCount {minCount}",
    SURPLUS_EXCEEDED: "whole group: as single pods the gang would have dropped below minCount {minCount}",
    GANG_SURPLUS: "single pods: the gang's pods above minCount {minCount} go one by one",
    BASIC_PODS: "single pods: a basic group's pods go one by one",
    COMPOSITE_DISRUPTION_MODE_ALL: "whole composite pod group: its disruptionMode is All",
    COMPOSITE_UNSATISFIED: "whole composite pod group: the victims would have left it unsatisfied",
}
_SINGLE = (GANG_SURPLUS, BASIC_PODS)
REPRIEVE_WORDS = {PREEMPTOR_STILL_FITS: "the preemptor still fits on its nodes with it in place"}

PREEMPTION_WORDS = {
    "PreemptionWouldNotHelp": "preemption would not help: removing every lower-priority victim leaves too "
                              "little room",
    "NoLowerPriorityVictims": "no lower-priority victims to preempt",
    "PreemptionNotAllowed": "preemption not allowed (preemptionPolicy Never)",
}


@lru_cache(maxsize=4096)
def _parse(words: str) -> tuple[tuple[str, str], ...]:
    code = _BY_WORDS.get(words)
    if code is not None:
        return (("reason", code),)
    if words.startswith(_INSUFFICIENT) and len(words) > len(_INSUFFICIENT):
        return (("reason", INSUFFICIENT), ("resource", words[len(_INSUFFICIENT):]))
    m = _TAINT.fullmatch(words)
    if m:
        return (("reason", UNTOLERATED_TAINT), ("key", m.group(1)), ("value", m.group(2)))
    return (("reason", UNRECOGNIZED), ("message", words))


def node_reason(words: str) -> dict[str, str]:
    """The code (and numbers) whose words these are; `Unrecognized` keeping the text as `message`."""
    return dict(_parse(words))


def node_words(reason: Mapping[str, Any]) -> str:
    """A node reason in words: its recorded `message` when it has one, else rendered from its code."""
    message = reason.get("message")
    if isinstance(message, str):
        return message
    template = NODE_WORDS.get(reason.get("reason", ""))
    if template is None:
        return str(reason.get("reason"))
    return template.format(**{k: reason.get(k, "") for k in _NUMBERS})


def _order(r: Mapping[str, Any]) -> tuple[str, ...]:
    return (r["reason"], *(str(r.get(k, "")) for k in _NUMBERS))


def node_reasons(counts: Mapping[str, int]) -> list[dict[str, Any]]:
    """The filters' counts (words -> nodes) as the recorded entries: codes with their numbers and
    `nodes`, sorted by reason, then resource, key, value."""
    return sorted(({**node_reason(k), "nodes": v} for k, v in counts.items()), key=_order)


# -- rendering ----------------------------------------------------------------------------------
def fit_error(explanation: Mapping[str, Any]) -> str:
    """Kubernetes' FitError sentence: `0/<nodes> nodes are available: <n> <words>, ....`"""
    parts = sorted(f"{r.get('nodes', 0)} {node_words(r)}" for r in explanation.get("reasons") or ())
    head = f"0/{explanation.get('nodes', 0)} nodes are available"
    return head + (": " + ", ".join(parts) + "." if parts else ".")


def pod_group_message(explanation: Mapping[str, Any]) -> str:
    """The message of a pod group's explanation: the recorded one (upcast), else the FitError
    sentence and, for a gang, its count against minCount (the project's wording)."""
    message = explanation.get("message")
    if isinstance(message, str):
        return message
    text = fit_error(explanation)
    if explanation.get("policy") == "gang":
        text += (f" {explanation.get('placeablePods', 0)}/{explanation.get('pods', 0)} pods of the gang fit, "
                 f"minCount {explanation.get('minCount', 0)}.")
    return text


def composite_message(explanation: Mapping[str, Any], name: str, total: int | None = None) -> str:
    message = explanation.get("message")
    if isinstance(message, str):
        return message
    children = explanation.get("children") or ()
    n = explanation.get("satisfiableChildren", 0)
    return (f'composite pod group "{name}": {n}/{total if total is not None else len(children)} children can be '
            f"scheduled, minGroupCount {explanation.get('minGroupCount', 0)}")


def render_explanation(explanation: Mapping[str, Any] | None, name: str | None = None,
                       total: int | None = None) -> dict[str, Any] | None:
    """A stored explanation as views show it: with `message` (rendered, or recorded for an upcast
    decision) and each reason's `message`; a composite's (it has `children`) with its children's.
    `name`/`total`: the composite's name and number of children (its message says them)."""
    if explanation is None:
        return None
    out = dict(explanation)
    if "children" in explanation:
        out["message"] = composite_message(explanation, name or "", total)
        out["children"] = [{**c, "explanation": render_explanation(c.get("explanation"), c.get("name"))}
                           for c in explanation.get("children") or ()]
        return out
    out["message"] = pod_group_message(explanation)
    out["reasons"] = [{**r, "message": node_words(r)} for r in explanation.get("reasons") or ()]
    return out


def victim_words(unit: Mapping[str, Any]) -> str:
    """Why a victim unit went (a PodGroupPreempted's data, or an entry of preemption.victims)."""
    message = unit.get("message")
    if isinstance(message, str):
        return message
    code = unit.get("reason", "")
    template = VICTIM_WORDS.get(code)
    if template is None:
        return str(code)
    text = template.format(minCount=unit.get("minCount", 0))
    if code in _SINGLE and unit.get("wholeGroup"):
        text += "; these were all its placed pods"
    return text


def reprieve_words(unit: Mapping[str, Any]) -> str:
    message = unit.get("message")
    if isinstance(message, str):
        return message
    return REPRIEVE_WORDS.get(unit.get("reason", ""), str(unit.get("reason")))


def preemption_words(code: str | None) -> str | None:
    return None if code is None else PREEMPTION_WORDS.get(code, code)


def render_decision(event_type: str, data: Mapping[str, Any]) -> dict[str, Any]:
    """A decision's data (read at the current schemaVersion) with every message rendered: the
    explanation, each victim's and reprieved unit's, a PodGroupPreempted's. For people (the CLI);
    events themselves are always served as stored."""
    out = dict(data)
    name = data.get("compositePodGroup") if event_type.startswith("Composite") else None
    if isinstance(data.get("explanation"), Mapping):
        out["explanation"] = render_explanation(data["explanation"], name)
    pre = data.get("preemption")
    if isinstance(pre, Mapping):
        out["preemption"] = {**pre,
                             "victims": [{**v, "message": victim_words(v)} for v in pre.get("victims") or ()],
                             "reprieved": [{**u, "message": reprieve_words(u)} for u in pre.get("reprieved") or ()]}
    if event_type == "PodGroupPreempted":
        out["message"] = victim_words(data)
    return out
