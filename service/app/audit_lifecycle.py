"""`audit explain`'s words for a job's life (lifecycle.md): changes of sizes (WorkloadScaled), PodGroup
objects created and deleted."""
from __future__ import annotations

from typing import Any, Protocol


class GroupRecord(Protocol):
    """What explain keeps of a group (audit._Group)."""
    min_count: int
    size: int
    pods: dict[str, str]


def scaled_input(d: dict[str, Any], at: str) -> str:
    """The input, as a cause ("team-a/train was scaled at #31")."""
    return f"{d.get('namespace')}/{d.get('workload')} was scaled {at}"


def _removed(pods: list[dict[str, Any]]) -> str:
    return ", ".join(f"{p['pod']} (on {p['node']})" if p.get("node") else f"{p['pod']} (Pending)" for p in pods)


def scaled(when: str, d: dict[str, Any], groups: dict[str, GroupRecord],
           new_group: Any) -> list[str]:
    """Each pod group and CPG the change touched; `groups` follows (`new_group(min_count, size)`
    makes the record of a group the change added)."""
    lines = []
    for r in d["podGroups"]:
        name, change = r["podGroup"], r["change"]
        policy = f"minCount {r['minCount']}" if r["minCount"] is not None else "basic"
        if change == "Removed":
            lines.append(f"{when} Group {name} removed by a change of sizes: {_removed(r['removedPods'])}.")
            groups.pop(name, None)
            continue
        parts = []
        if r["addedPods"]:
            parts.append(f"added {', '.join(r['addedPods'])} (Pending)")
        if r["removedPods"]:
            parts.append(f"removed the highest indices {_removed(r['removedPods'])}")
        verb = "Added group" if change == "Added" else "Scaled group"
        lines.append(f"{when} {verb} {name} to {r['podCount']} pods ({policy})"
                     + (": " + "; ".join(parts) if parts else "") + ".")
        g = groups.get(name)
        if g is None and change == "Added":
            groups[name] = new_group(r["minCount"] or 1, r["podCount"])
        elif g is not None:
            g.min_count, g.size = r["minCount"] or 1, r["podCount"]
            for p in r["removedPods"]:
                g.pods.pop(p["pod"], None)
    for c in d["compositePodGroups"]:
        quorum = f" (minGroupCount {c['minGroupCount']})" if c["minGroupCount"] is not None else ""
        lines.append(f"{when} Composite pod group {c['compositePodGroup']} {c['change'].lower()}{quorum}.")
    if not lines:
        lines.append(f"{when} A change of sizes that changed nothing.")
    return lines


def podgroup(when: str, t: str, d: dict[str, Any], groups: dict[str, GroupRecord], new_group: Any) -> str:
    """PodGroupCreated / PodGroupDeleted; `groups` follows."""
    if t == "PodGroupDeleted":
        groups.pop(d["name"], None)
        return f"{when} PodGroup {d['name']} deleted: its pods and claims were released."
    spec = d["spec"]
    pods = sum(int(p.get("count", 1)) for p in spec.get("pods") or ())
    gang = (spec.get("schedulingPolicy") or {}).get("gang")
    groups[d["name"]] = new_group(int(gang["minCount"]) if gang else 1, pods)
    template = f" from template {d['template']}" if d.get("template") else ""
    return (f"{when} PodGroup {d['name']} created{template}, priority {d['priority']}: {pods} pods, "
            + (f"gang minCount {gang['minCount']}" if gang else "basic") + ".")
