"""`WorkloadBuilder`: the body of a workload (model.md, composite.md *Shape*), checked before sending.

    WorkloadBuilder("train-7").priority_class("high") \\
        .gang("workers", min_count=4, topology="example.com/rack") \\
        .pods("worker", count=4, requests={"cpu": "8", "example.com/gpu": "8"}).build()

A tree opens a composite pod group with `composite(...)`, adds its pod groups (`gang`/`basic`, each
followed by its `pods`) and child composites, and closes it with `end()`. `build()` raises
`BuildError` (a ValueError) naming every offending field, located as the server would locate it.
"""
from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from gangplank_client import quantity
from gangplank_client.errors import FieldError

_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
MAX_ENTRIES, MAX_COUNT, MAX_GROUPS, MAX_PODS, MAX_DEPTH = 8, 64, 64, 10_000, 4
PRIORITY_RANGE = (-2147483648, 1_000_000_000)
Loc = tuple[str | int, ...]


class BuildError(ValueError):
    """The body cannot be valid; `errors` names each offending field."""

    def __init__(self, errors: list[FieldError]) -> None:
        self.errors = errors
        super().__init__("invalid workload:\n" + "\n".join(f"  {e}" for e in errors))


def label_error(value: object) -> str | None:
    """Why `value` is not a DNS-1123 label (None: it is one)."""
    if not isinstance(value, str) or not _LABEL.match(value):
        return f"{value!r} is not a DNS-1123 label (lower case alphanumerics and '-')"
    if len(value) > 63:
        return f"{value!r} is longer than 63 characters"
    return None


def _claims(claims: Sequence[Mapping[str, str]] | None) -> list[dict[str, str]] | None:
    return [dict(c) for c in claims] if claims else None


class WorkloadBuilder:
    def __init__(self, name: str, namespace: str | None = None) -> None:
        self._body: dict[str, Any] = {"name": name}
        if namespace is not None:
            self._body["namespace"] = namespace
        self._roots: list[dict[str, Any]] = []
        self._groups: list[dict[str, Any]] = []  # a flat workload's pod groups
        self._open: list[dict[str, Any]] = []  # the composite pod groups opened, outermost first
        self._group: dict[str, Any] | None = None  # where pods() adds

    # -- the workload ---------------------------------------------------------------------------
    def priority(self, value: int) -> WorkloadBuilder:
        self._body["priority"] = value
        return self

    def priority_class(self, name: str) -> WorkloadBuilder:
        self._body["priorityClassName"] = name
        return self

    def preemption_policy(self, policy: str) -> WorkloadBuilder:
        self._body["preemptionPolicy"] = policy
        return self

    def resource_claim(self, name: str, template: str) -> WorkloadBuilder:
        """A claim shared by every pod of the workload that names it (model.md, *Sharing*)."""
        self._body.setdefault("resourceClaims", []).append({"name": name, "resourceClaimTemplateName": template})
        return self

    def claim_template(self, name: str, spec: Mapping[str, Any]) -> WorkloadBuilder:
        self._body.setdefault("resourceClaimTemplates", []).append({"name": name, "spec": dict(spec)})
        return self

    # -- groups ---------------------------------------------------------------------------------
    def gang(self, name: str, *, min_count: int, topology: str | None = None, disruption_mode: str | None = None,
             count: int | None = None, resource_claims: Sequence[Mapping[str, str]] | None = None) -> WorkloadBuilder:
        """Open an all-or-nothing pod group (in the composite opened last, if any)."""
        return self._add_group(name, {"gang": {"minCount": min_count}}, topology, disruption_mode, count,
                               resource_claims)

    def basic(self, name: str, *, topology: str | None = None, disruption_mode: str | None = None,
              count: int | None = None, resource_claims: Sequence[Mapping[str, str]] | None = None) -> WorkloadBuilder:
        """Open a pod group whose pods are placed each on its own."""
        return self._add_group(name, {"basic": {}}, topology, disruption_mode, count, resource_claims)

    def pods(self, name: str, *, count: int = 1, requests: Mapping[str, str | int] | None = None,
             node_selector: Mapping[str, str] | None = None, tolerations: Sequence[Mapping[str, Any]] | None = None,
             affinity: Mapping[str, Any] | None = None,
             resource_claims: Sequence[Mapping[str, str]] | None = None) -> WorkloadBuilder:
        """Add a pod entry (`count` identical pods named <name>-0 …) to the pod group opened last."""
        if self._group is None:
            raise ValueError("pods() needs a pod group: call gang() or basic() first")
        entry: dict[str, Any] = {"name": name, "count": count, "requests": dict(requests or {})}
        for key, value in (("nodeSelector", dict(node_selector or {})), ("tolerations", list(tolerations or [])),
                           ("affinity", dict(affinity or {})), ("resourceClaims", _claims(resource_claims))):
            if value:
                entry[key] = value
        self._group["pods"].append(entry)
        return self

    def composite(self, name: str, *, min_group_count: int | None = None, topology: str | None = None,
                  disruption_mode: str | None = None, count: int | None = None) -> WorkloadBuilder:
        """Open a composite pod group (gang of `min_group_count` children, or basic without it)."""
        cpg: dict[str, Any] = {"name": name, "schedulingPolicy": {"gang": {"minGroupCount": min_group_count}}
                               if min_group_count is not None else {"basic": {}}}
        for key, value in (("count", count), ("topology", {"key": topology} if topology else None),
                           ("disruptionMode", disruption_mode)):
            if value is not None:
                cpg[key] = value
        cpg["podGroups"], cpg["compositePodGroups"] = [], []
        (self._open[-1]["compositePodGroups"] if self._open else self._roots).append(cpg)
        self._open.append(cpg)
        self._group = None
        return self

    def end(self) -> WorkloadBuilder:
        """Close the composite pod group opened last."""
        if not self._open:
            raise ValueError("end() without an open composite()")
        self._open.pop()
        self._group = None
        return self

    def _add_group(self, name: str, policy: dict[str, Any], topology: str | None, disruption_mode: str | None,
                   count: int | None, claims: Sequence[Mapping[str, str]] | None) -> WorkloadBuilder:
        group: dict[str, Any] = {"name": name, "schedulingPolicy": policy}
        for key, value in (("count", count), ("topology", {"key": topology} if topology else None),
                           ("disruptionMode", disruption_mode), ("resourceClaims", _claims(claims))):
            if value is not None:
                group[key] = value
        group["pods"] = []
        (self._open[-1]["podGroups"] if self._open else self._groups).append(group)
        self._group = group
        return self

    # -- the body -------------------------------------------------------------------------------
    def build(self) -> dict[str, Any]:
        """The body for `Client.submit`; BuildError naming every field that cannot be valid."""
        body = dict(self._body)
        if self._groups:
            body["podGroups"] = self._groups
        if self._roots:
            body["compositePodGroups"] = [_pruned(r) for r in self._roots]
        errors = validate(body)
        if errors:
            raise BuildError(errors)
        return body


def _pruned(cpg: dict[str, Any]) -> dict[str, Any]:
    """A composite without its empty child lists (the server wants at least one child in all)."""
    out = {k: v for k, v in cpg.items() if k not in ("podGroups", "compositePodGroups") or v}
    if "compositePodGroups" in out:
        out["compositePodGroups"] = [_pruned(c) for c in out["compositePodGroups"]]
    return out


def _copies(entry: Mapping[str, Any]) -> int:
    count = entry.get("count", 1)
    return count if isinstance(count, int) and not isinstance(count, bool) and count > 0 else 1


def validate(body: Mapping[str, Any]) -> list[FieldError]:
    """What the client can tell is wrong with a workload body (the server checks the rest)."""
    v = _Validator(body)
    v.workload()
    return v.errors


class _Validator:
    def __init__(self, body: Mapping[str, Any]) -> None:
        self.body = body
        self.errors: list[FieldError] = []
        self.names: dict[str, Loc] = {}  # every group name after expansion, where it came from
        self.pods = self.groups = self.cpgs = 0
        self.templates = {t.get("name") for t in body.get("resourceClaimTemplates") or ()}

    def err(self, loc: Loc, msg: str) -> None:
        self.errors.append(FieldError(("body", *loc), msg))

    def workload(self) -> None:
        b = self.body
        for key in ("name", "namespace"):
            if key in b and (why := label_error(b[key])):
                self.err((key,), why)
        if "priority" in b and "priorityClassName" in b:
            self.err(("priorityClassName",), "give either priority or priorityClassName, not both")
        if "priority" in b and not (isinstance(b["priority"], int)
                                    and PRIORITY_RANGE[0] <= b["priority"] <= PRIORITY_RANGE[1]):
            self.err(("priority",), f"must be an integer in {PRIORITY_RANGE[0]}..{PRIORITY_RANGE[1]}")
        if b.get("preemptionPolicy") not in (None, "PreemptLowerPriority", "Never"):
            self.err(("preemptionPolicy",), "must be PreemptLowerPriority or Never")
        self.claims(("resourceClaims",), b.get("resourceClaims"))
        flat, roots = b.get("podGroups") or [], b.get("compositePodGroups") or []
        if flat and roots:
            self.err(("compositePodGroups",), "give either podGroups or compositePodGroups, not both")
        elif not flat and not roots:
            self.err(("podGroups",), "a workload needs at least one pod group")
        elif flat:
            self.entries(("podGroups",), flat)
            for i, g in enumerate(flat):
                if "count" in g:
                    self.err(("podGroups", i, "count"), "count is only allowed inside a composite pod group")
                self.group(("podGroups", i), g, g.get("name", ""), 1)
        else:
            self.entries(("compositePodGroups",), roots)
            self.tree(("compositePodGroups",), roots, None, False, 1, None)
        if self.pods > MAX_PODS:
            self.err(("podGroups",), f"{self.pods} pods: at most {MAX_PODS} in a workload")
        if self.groups > MAX_GROUPS or self.cpgs > MAX_GROUPS:
            self.err(("compositePodGroups",), f"{self.groups} pod groups and {self.cpgs} composite pod groups "
                     f"after expansion: at most {MAX_GROUPS} of each")

    def entries(self, loc: Loc, items: Sequence[Any]) -> None:
        if len(items) > MAX_ENTRIES:
            self.err(loc, f"{len(items)} entries: at most {MAX_ENTRIES}")

    def stamped(self, loc: Loc, entry: Mapping[str, Any], prefix: str | None) -> list[str]:
        """The names an entry expands to (composite.md, *Shape*: `count` and prefixes)."""
        base = f"{prefix}-{entry.get('name')}" if prefix is not None else str(entry.get("name"))
        if (why := label_error(entry.get("name"))) is not None:
            self.err((*loc, "name"), why)
            return []
        count = entry.get("count")
        if count is None:
            return [base]
        if not isinstance(count, int) or not 1 <= count <= MAX_COUNT:
            self.err((*loc, "count"), f"must be an integer in 1..{MAX_COUNT}")
            return []
        return [f"{base}-{i}" for i in range(count)]

    def named(self, loc: Loc, name: str) -> None:
        if len(name) > 63:
            self.err((*loc, "name"), f"expands to {name!r}, longer than 63 characters")
        elif name in self.names:
            self.err((*loc, "name"), f"{name!r} is used twice in this workload")
        self.names[name] = loc

    def tree(self, loc: Loc, cpgs: Sequence[Mapping[str, Any]], prefix: str | None, in_copy: bool, level: int,
             parent_mode: str | None) -> None:
        for i, cpg in enumerate(cpgs):
            here = (*loc, i)
            mode = cpg.get("disruptionMode") or parent_mode
            if cpg.get("disruptionMode") not in (None, "Single", "All"):
                self.err((*here, "disruptionMode"), "must be Single or All")
            if parent_mode == "All" and cpg.get("disruptionMode") == "Single":
                self.err((*here, "disruptionMode"), "a child of a composite with disruptionMode All must be All")
            groups, children = cpg.get("podGroups") or [], cpg.get("compositePodGroups") or []
            self.entries((*here, "podGroups"), groups)
            self.entries((*here, "compositePodGroups"), children)
            if level + 1 > MAX_DEPTH and groups:
                self.err((*here, "podGroups"), f"a pod group here is at level {level + 1}: at most {MAX_DEPTH}")
            if level + 1 >= MAX_DEPTH and children:
                self.err((*here, "compositePodGroups"), f"nesting deeper than {MAX_DEPTH} levels with its pod groups")
            n_children = sum(_copies(g) for g in (*groups, *children))
            if not groups and not children:
                self.err(here, "a composite pod group needs at least one child")
            gang = (cpg.get("schedulingPolicy") or {}).get("gang")
            if gang is not None:
                mgc = gang.get("minGroupCount")
                if not isinstance(mgc, int) or not 1 <= mgc <= max(n_children, 1):
                    self.err((*here, "schedulingPolicy", "gang", "minGroupCount"),
                             f"must be between 1 and the number of children ({n_children})")
            for name in self.stamped(here, cpg, prefix if in_copy else None):
                self.cpgs += 1
                self.named(here, name)
                copy = in_copy or "count" in cpg
                for j, g in enumerate(groups):
                    gloc = (*here, "podGroups", j)
                    if g.get("disruptionMode") not in (None, "Single", "All"):
                        self.err((*gloc, "disruptionMode"), "must be Single or All")
                    elif mode == "All" and g.get("disruptionMode") == "Single":
                        self.err((*gloc, "disruptionMode"), "a child of a composite with disruptionMode All must be All")
                    for gname in self.stamped(gloc, g, name if copy else None):
                        self.group(gloc, g, gname, level + 1)
                self.tree((*here, "compositePodGroups"), children, name, copy, level + 1, mode)

    def group(self, loc: Loc, g: Mapping[str, Any], name: str, level: int) -> None:
        self.groups += 1
        if level == 1 and (why := label_error(name)):
            self.err((*loc, "name"), why)
        self.named(loc, name)
        if g.get("disruptionMode") not in (None, "Single", "All"):
            self.err((*loc, "disruptionMode"), "must be Single or All")
        pods = g.get("pods") or []
        if not pods:
            self.err((*loc, "pods"), "a pod group needs at least one pod entry")
        total, seen = 0, set()
        for i, p in enumerate(pods):
            ploc = (*loc, "pods", i)
            if (why := label_error(p.get("name"))) is not None:
                self.err((*ploc, "name"), why)
            elif p["name"] in seen:
                self.err((*ploc, "name"), f"{p['name']!r} is used twice in this pod group")
            seen.add(p.get("name"))
            count = p.get("count", 1)
            if not isinstance(count, int) or isinstance(count, bool) or count < 1:
                self.err((*ploc, "count"), "must be a positive integer")
                count = 0
            total += count
            for res, amount in (p.get("requests") or {}).items():
                if res == "pods":
                    self.err((*ploc, "requests", res), "a pod cannot request pods")
                elif (why := quantity.check(amount, res)) is not None:
                    self.err((*ploc, "requests", res), why)
            self.claims((*ploc, "resourceClaims"), p.get("resourceClaims"))
        self.pods += total
        self.claims((*loc, "resourceClaims"), g.get("resourceClaims"))
        policy = g.get("schedulingPolicy") or {}
        if ("gang" in policy) == ("basic" in policy):
            self.err((*loc, "schedulingPolicy"), 'give exactly one of {"basic": {}} or {"gang": {"minCount": N}}')
        elif "gang" in policy:
            mc = policy["gang"].get("minCount")
            if not isinstance(mc, int) or isinstance(mc, bool) or not 1 <= mc <= max(total, 1):
                self.err((*loc, "schedulingPolicy", "gang", "minCount"), f"must be between 1 and the group's pods "
                         f"({total})")

    def claims(self, loc: Loc, claims: Sequence[Mapping[str, Any]] | None) -> None:
        for i, c in enumerate(claims or ()):
            if (why := label_error(c.get("name"))) is not None:
                self.err((*loc, i, "name"), why)
            if c.get("resourceClaimTemplateName") not in self.templates:
                self.err((*loc, i, "resourceClaimTemplateName"),
                         f"no resourceClaimTemplates entry is named {c.get('resourceClaimTemplateName')!r}")
