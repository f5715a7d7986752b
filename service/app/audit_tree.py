"""`audit explain` lines for trees of composite pod groups (composite.md)."""
from __future__ import annotations

from typing import Any


def submitted(d: dict[str, Any], when: str, namespace: str, name: str) -> str:
    roots = d["spec"]["compositePodGroups"]
    return (f"{when} Submitted {namespace}/{name} with priority {d['priority']} ({d['preemptionPolicy']}), "
            f"{len(roots)} composite pod group root(s): " + ", ".join(_cpg_summary(r) for r in roots) + ".")


def _cpg_summary(c: dict[str, Any]) -> str:
    policy = c.get("schedulingPolicy") or {"basic": {}}
    rule = f"minGroupCount {policy['gang']['minGroupCount']}" if "gang" in policy else "basic"
    topo = f", topology {c['topology']['key']}" if c.get("topology") else ""
    count = f" ×{c['count']}" if "count" in c else ""
    children = [g["name"] + (f" ×{g['count']}" if "count" in g else "") for g in c.get("podGroups") or ()]
    children += [_cpg_summary(x) for x in c.get("compositePodGroups") or ()]
    return f"{c['name']}{count} ({rule}{topo}: {', '.join(children)})"


def _why(x: dict[str, Any], depth: int) -> list[str]:
    """An explanation tree, indented: each CPG's message, each unsatisfied pod group's reasons."""
    where = f" in {x['domain']['key']}={x['domain']['value']}" if x.get("domain") and x["domain"].get("value") else ""
    lines = [f"{'    ' * depth}{x['message']}{where}."]
    for child in x.get("children") or ():
        sub = child.get("explanation")
        if sub is None:
            continue
        if child["kind"] == "CompositePodGroup":
            lines += _why(sub, depth + 1)
        else:
            lines.append(f"{'    ' * (depth + 1)}group {child['name']}: {sub['message']}")
    return lines


def scheduled(d: dict[str, Any], when: str) -> list[str]:
    placed = sum(len(g["pods"]) for g in d["groups"])
    lines = [f"{when} Composite pod group {d['compositePodGroup']} admitted: {placed} pod(s) in "
             f"{len(d['groups'])} group(s)."]
    for c in d["composites"]:
        where = f" in {c['domain']['key']}={c['domain']['value']}" if c.get("domain") else ""
        lines.append(f"    {c['compositePodGroup']}: {'satisfied' if c['satisfied'] else 'not satisfied'}{where}")
    for g in d["groups"]:
        lines.append(f"    group {g['podGroup']} (in {g['parent']}): {len(g['pods'])} pod(s), "
                     f"{g['placedPods']} placed (minCount {g['minCount']})")
    if d.get("explanation"):
        lines += ["    still lacking:"] + ["    " + line for line in _why(d["explanation"], 1)]
    return lines


def unschedulable(d: dict[str, Any], when: str) -> list[str]:
    x = d["explanation"]
    pre = f" Preemption: {x['preemption']}." if x.get("preemption") else ""
    return [f"{when} Composite pod group {d['compositePodGroup']} waiting as a whole.{pre}"] + _why(x, 1)
