"""The tree of a composite workload (composite.md *Shape*): `compositePodGroups`."""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Literal

from pydantic import Field, StrictInt, model_validator

from service.domain.model import composite as tree
from service.schemas.common import StrictModel
from service.schemas.errors import raise_errors
from service.schemas.groups import MAX_PODS_PER_WORKLOAD, PodGroup, Topology
from service.schemas.names import DNSLabel, dns1123_label_error

MAX_CHILDREN = 8  # entries in each list, before expansion
MAX_ROOTS = 8

Errors = list[tuple[tuple[Any, ...], str]]


class CompositeGangPolicy(StrictModel):
    """Satisfied while at least `minGroupCount` children are."""
    min_group_count: StrictInt = Field(ge=1, le=tree.MAX_EXPANDED_GROUPS + tree.MAX_EXPANDED_CPGS)


class CompositeBasicPolicy(StrictModel):
    """Satisfied while at least one child is: `{}`."""


class CompositeSchedulingPolicy(StrictModel):
    """Exactly one of `basic` or `gang`."""
    basic: CompositeBasicPolicy = None  # type: ignore[assignment]  # may be absent, never null: see StrictModel
    gang: CompositeGangPolicy = None  # type: ignore[assignment]  # may be absent, never null: see StrictModel

    @model_validator(mode="after")
    def _exactly_one(self) -> CompositeSchedulingPolicy:
        if (self.basic is None) == (self.gang is None):
            raise_errors("CompositeSchedulingPolicy", [((), "exactly one of basic or gang must be set")])
        return self


class TreePodGroup(PodGroup):
    """A pod group inside a composite pod group: as in a flat workload, plus `count`."""
    count: StrictInt = Field(None, ge=1, le=tree.MAX_COUNT,  # type: ignore[assignment]  # may be absent, never null: see StrictModel
                             description="Stamps identical copies named <name>-0 … <name>-<count-1>.")


class CompositePodGroup(StrictModel):
    """A composite pod group (KEP-6012): a group of pod groups and composite pod groups."""
    name: DNSLabel
    count: StrictInt = Field(None, ge=1, le=tree.MAX_COUNT,  # type: ignore[assignment]  # may be absent, never null: see StrictModel
                             description="Stamps identical copies named <name>-0 … <name>-<count-1>.")
    scheduling_policy: CompositeSchedulingPolicy = None  # type: ignore[assignment]  # may be absent, never null: see StrictModel
    topology: Topology = None  # type: ignore[assignment]  # may be absent, never null: see StrictModel
    disruption_mode: Literal["Single", "All"] = Field(
        None, description="A child that gives none takes its parent's; a root's default is Single.")  # type: ignore[arg-type]  # may be absent, never null: see StrictModel
    pod_groups: list[TreePodGroup] = Field(default_factory=list, max_length=MAX_CHILDREN)
    composite_pod_groups: list[CompositePodGroup] = Field(default_factory=list, max_length=MAX_CHILDREN)

    @property
    def expanded_children(self) -> int:
        return sum(c.count or 1 for c in self.pod_groups) + sum(c.count or 1 for c in self.composite_pod_groups)

    @model_validator(mode="after")
    def _check(self) -> CompositePodGroup:
        errors: Errors = []
        if not self.pod_groups and not self.composite_pod_groups:
            errors.append(((), "a composite pod group has at least one child (podGroups or compositePodGroups)"))
        gang = self.scheduling_policy.gang if self.scheduling_policy is not None else None
        if gang is not None and self.pod_groups + self.composite_pod_groups \
                and gang.min_group_count > self.expanded_children:
            errors.append((("schedulingPolicy", "gang", "minGroupCount"),
                           f"must be at most the number of children ({self.expanded_children}, after expansion)"))
        if self.disruption_mode == "All":
            kinds: tuple[tuple[str, Sequence[TreePodGroup | CompositePodGroup]], ...] = (
                ("podGroups", self.pod_groups), ("compositePodGroups", self.composite_pod_groups))
            for field, children in kinds:
                for i, child in enumerate(children):
                    if "disruption_mode" in child.model_fields_set and child.disruption_mode != "All":
                        errors.append(((field, i, "disruptionMode"),
                                       "must be All (or unset) under a composite pod group with disruptionMode All"))
        raise_errors("CompositePodGroup", errors)
        return self


CompositePodGroup.model_rebuild()


def tree_errors(roots: list[CompositePodGroup]) -> Errors:
    """The rules over the whole tree: depth, sizes after expansion, and distinct expanded names."""
    raw = [r.model_dump(mode="json", by_alias=True, exclude_unset=True) for r in roots]
    errors: Errors = tree.depth_errors(raw)
    if errors:
        return errors
    cpgs, groups, pods = tree.expanded_sizes(raw)
    for what, n, most in (("composite pod groups", cpgs, tree.MAX_EXPANDED_CPGS),
                          ("pod groups", groups, tree.MAX_EXPANDED_GROUPS),
                          ("pods", pods, MAX_PODS_PER_WORKLOAD)):
        if n > most:
            errors.append((("compositePodGroups",), f"a workload has at most {most} {what} after expansion "
                                                    f"(this one has {n})"))
    if errors:
        return errors
    expanded = tree.expand(raw)
    seen: set[str] = set()
    named: set[tuple[Any, ...]] = set()  # one error per entry, not per stamped copy
    for name, loc in sorted([(c.name, c.loc) for c in expanded.cpgs] + [(g.name, g.loc) for g in expanded.groups],
                            key=lambda item: _loc_order(item[1])):
        problem = dns1123_label_error(name)
        if problem is not None:
            problem = f"expanded name {name!r}: {problem}"
        elif name in seen:
            problem = f"expanded name {name!r} is not distinct in the workload (compared after expansion)"
        seen.add(name)
        if problem is not None and loc not in named:
            named.add(loc)
            errors.append(((*loc, "name"), problem))
    return errors


def _loc_order(loc: tuple[Any, ...]) -> tuple[Any, ...]:
    """Body order: an entry before the entries nested in it; podGroups before compositePodGroups."""
    return tuple((0 if part == "podGroups" else 1) if isinstance(part, str) else part for part in loc)


def pod_group_locs(pod_groups: list[PodGroup] | None,
                   roots: list[CompositePodGroup] | None) -> list[tuple[tuple[Any, ...], PodGroup]]:
    """Every pod group entry with its location: the flat list, or every entry in the tree."""
    if pod_groups is not None:
        return [(("podGroups", i), g) for i, g in enumerate(pod_groups)]
    out: list[tuple[tuple[Any, ...], PodGroup]] = []
    stack: list[tuple[tuple[Any, ...], CompositePodGroup]] = [
        (("compositePodGroups", i), r) for i, r in reversed(list(enumerate(roots or ())))]
    while stack:
        loc, node = stack.pop()
        out.extend(((*loc, "podGroups", i), g) for i, g in enumerate(node.pod_groups))
        stack.extend(((*loc, "compositePodGroups", i), c) for i, c in reversed(list(enumerate(node.composite_pod_groups))))
    return out
