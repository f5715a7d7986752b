"""The allocation search: which of the candidate devices a claim gets on one node.

Requests in order, each taking the first free allowed devices; under matchAttribute
constraints the constrained attributes' values are tried in ascending order, first constraint
first, at most `SEARCH_BUDGET` partial combinations per claim and node (docs/dra.md).
"""
from __future__ import annotations

from typing import Any

from service.domain.dra.claims import Template
from service.domain.dra.inventory import Attr, Device

SEARCH_BUDGET = 100_000


def choose(t: Template, full: list[tuple[int, ...]], free: list[list[int]],
           devs: list[Device]) -> tuple[int, ...] | None:
    """The devices for `t`, given per request all candidates (`full`) and the free ones."""
    if not t.constraints:
        return greedy(t, free, None, devs)
    if len(t.requests) == 1 and not t.requests[0].all and t.constraints == ((t.constraints[0][0], (0,)),):
        return one_constrained(t.requests[0].count, t.constraints[0][0], free[0], devs)
    return constrained(t, full, free, devs)


def greedy(t: Template, free: list[list[int]], chosen: list[Any] | None,
           devs: list[Device]) -> tuple[int, ...] | None:
    """Requests in order, each taking the first free allowed devices."""
    taken: set[int] = set()
    out: list[int] = []
    for r, req in enumerate(t.requests):
        checks = [] if chosen is None else [(attr, chosen[c]) for c, (attr, members) in enumerate(t.constraints)
                                            if r in members]
        if req.all:
            for d in free[r]:
                if d in taken or any(devs[d].attr(a) != v for a, v in checks):
                    return None
            got = list(free[r])
        else:
            got = []
            for d in free[r]:
                if d in taken or any(devs[d].attr(a) != v for a, v in checks):
                    continue
                got.append(d)
                if len(got) == req.count:
                    break
            if len(got) < req.count:
                return None
        taken.update(got)
        out.extend(got)
    return tuple(out)


def one_constrained(count: int, attr: str, free: list[int], devs: list[Device]) -> tuple[int, ...] | None:
    """`constrained` for the common template: one ExactCount request under one matchAttribute.
    The smallest value held by `count` free devices wins; they are the first such, in order."""
    groups: dict[Attr, list[int]] = {}
    for d in free:
        v = devs[d].attr(attr)
        if v is not None:
            groups.setdefault(v, []).append(d)
    for i, v in enumerate(sorted(groups)):
        if i >= SEARCH_BUDGET:  # as the general search gives up
            return None
        got = groups[v]
        if len(got) >= count:
            return tuple(got[:count])
    return None


def constrained(t: Template, full: list[tuple[int, ...]], free: list[list[int]],
                devs: list[Device]) -> tuple[int, ...] | None:
    """Try the constrained attributes' values in ascending order, first constraint first."""
    values: list[list[Attr]] = []
    for attr, members in t.constraints:
        seen: set[Attr] = set()
        for r in members:
            for d in free[r]:
                v = devs[d].attr(attr)
                if v is not None:
                    seen.add(v)
        if not seen:
            return None
        values.append(sorted(seen, key=lambda tv: (tv[0], tv[1])))
    chosen: list[Any] = [None] * len(values)
    budget = [SEARCH_BUDGET]

    def feasible(upto: int) -> bool:
        # every ExactCount request bound by the constraints chosen so far keeps enough devices
        for r, req in enumerate(t.requests):
            checks = [(attr, chosen[c]) for c, (attr, members) in enumerate(t.constraints[:upto + 1])
                      if r in members]
            if not checks:
                continue
            pool = full[r] if req.all else free[r]
            ok = sum(1 for d in pool if all(devs[d].attr(a) == v for a, v in checks))
            if req.all and ok != len(pool):
                return False
            if not req.all and ok < req.count:
                return False
        return True

    def search(c: int) -> tuple[int, ...] | None:
        if c == len(values):
            return greedy(t, free, chosen, devs)
        for v in values[c]:
            budget[0] -= 1
            if budget[0] < 0:
                return None
            chosen[c] = v
            if not feasible(c):
                continue
            got = search(c + 1)
            if got is not None:
                return got
        chosen[c] = None
        return None

    return search(0)
