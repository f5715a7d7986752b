"""Why a workload waits, and who preempted it, in words for the client commands (client.md, *Why it
waits, in the table and in describe*): the claim-level reasons of an explanation (`devices.claims`, as
`audit explain` gives them) and a preemptor, never a JSON dump."""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any


def claim_words(c: Mapping[str, Any]) -> str:
    """One claim entry of an explanation: `DeviceClassNotFound: class gpu.example.com`, with the
    claim, pod and request it concerns and the nodes that gave it."""
    reason = str(c.get("reason"))
    if reason == "DeviceClassNotFound":
        why = f"DeviceClassNotFound: class {c.get('deviceClassName')}"
    elif reason == "TemplateNotFound":
        why = "TemplateNotFound: the claim's ResourceClaimTemplate does not exist"
    elif reason == "InsufficientDevices":
        why = f"InsufficientDevices: class {c.get('deviceClassName')}, needs {c.get('needed')}"
        if c.get("available") is not None:
            why += f", at most {c['available']} free"
        if c.get("reachable") is not None:
            why += f" of {c['reachable']} reachable on one node"
    elif reason == "ConstraintNotSatisfied":
        why = "ConstraintNotSatisfied: " + "; ".join(
            f"matchAttribute {k.get('matchAttribute')} over {', '.join(k.get('requests') or ())}"
            for k in c.get("constraints") or ())
    elif reason == "AllocatedDevicesNotReachable":
        why = "AllocatedDevicesNotReachable: the claim's devices, already allocated, are not reachable there"
    else:
        why = reason
    who = f"claim {c.get('claim')}" + (f" of pod {c['pod']}" if c.get("pod") else "")
    if c.get("request"):
        who += f", request {c['request']}"
    nodes = c.get("nodes")
    return f"{who}: {why}" + (f" (on {nodes} node{'s' if nodes != 1 else ''})" if isinstance(nodes, int) else "")


def waiting(explanation: Mapping[str, Any] | None) -> list[str]:
    """The explanation's message, then each claim-level reason; [] without an explanation."""
    if not explanation:
        return []
    lines = [str(explanation.get("message") or "")]
    lines += [claim_words(c) for c in (explanation.get("devices") or {}).get("claims") or ()]
    return lines


def first_reason(explanation: Mapping[str, Any] | None) -> str:
    """The message with the first claim-level reason, for one line (a table cell, submit's line)."""
    lines = waiting(explanation)
    if not lines:
        return ""
    claims = (explanation or {}).get("devices") or {}
    first = (claims.get("claims") or [None])[0]
    if first is None:
        return lines[0]
    return f"{lines[0]} {_reason_only(first)}."


def _reason_only(c: Mapping[str, Any]) -> str:
    text = claim_words(c)
    return text.split(": ", 1)[1].rsplit(" (on ", 1)[0] if ": " in text else text


def preemptor_words(data: Mapping[str, Any]) -> str:
    """`preempted by team-b/urgent (priority 1000)` from a PodGroupPreempted's data."""
    p = data.get("preemptor") or {}
    group = f" group {p['podGroup']}" if p.get("podGroup") else ""
    priority = f" (priority {p['priority']})" if p.get("priority") is not None else ""
    return f"preempted by {p.get('namespace')}/{p.get('workload')}{group}{priority}"
