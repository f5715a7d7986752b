"""Allocation with consumable capacity (sharing.md, *Allocation*).

Used for a claim when the cluster publishes a shareable device or the claim asks for capacity
or has a `distinctAttribute`; otherwise `search` keeps model.md's exclusive allocation. Requests
in order, each taking, one device after another, a device that can take it: the first in the
device order, or the one a `Chooser` (the scoring strategy's device choice) prefers among them.
`matchAttribute` values are tried in ascending order, first constraint first; no backtracking
across requests otherwise.
"""
from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from service.domain.dra.claims import Request, Share, Template
from service.domain.dra.inventory import Attr
from service.domain.dra.search import SEARCH_BUDGET
from service.domain.nodes.table import NodeTable

if TYPE_CHECKING:
    from service.domain.dra.devices import DeviceState

Chosen = tuple[tuple[int, ...], tuple[Share | None, ...] | None]
Amounts = tuple[tuple[str, int], ...]
# (eligible devices with what each would consume (None: exclusive), consumption chosen so far
# in this allocation) -> the index of the device to take
Chooser = Callable[[list[tuple[int, Amounts | None]], dict[int, dict[str, int]]], int]


def allocate(ds: DeviceState, nodes: NodeTable, t: Template, row: int,
             chooser: Chooser | None = None) -> Chosen | None:
    index = ds.index(nodes)
    cands: list[tuple[int, ...]] = []
    for req in t.requests:
        m = index.matcher(nodes, ds, req)
        if m is None:
            return None
        cands.append(m.candidates(nodes, row))
    if not t.constraints:
        return _greedy(ds, t, cands, None, chooser)
    devs = ds.devices
    values: list[list[Attr]] = []
    for attr, members in t.constraints:
        seen: set[Attr] = set()
        for r in members:
            for d in cands[r]:
                v = devs[d].attr(attr)
                if v is not None and not ds.busy[d]:
                    seen.add(v)
        if not seen:
            return None
        values.append(sorted(seen, key=lambda tv: (tv[0], tv[1])))
    chosen: list[Any] = [None] * len(values)
    budget = [SEARCH_BUDGET]

    def search(c: int) -> Chosen | None:
        if c == len(values):
            return _greedy(ds, t, cands, chosen, chooser)
        for v in values[c]:
            budget[0] -= 1
            if budget[0] < 0:
                return None
            chosen[c] = v
            got = search(c + 1)
            if got is not None:
                return got
        chosen[c] = None
        return None

    return search(0)


def _greedy(ds: DeviceState, t: Template, cands: list[tuple[int, ...]], chosen: list[Any] | None,
            chooser: Chooser | None) -> Chosen | None:
    devs = ds.devices
    extra: dict[int, dict[str, int]] = {}
    exclusive: set[int] = set()
    held: list[set[Attr]] = [set() for _ in t.distinct]
    ids: list[int] = []
    shares: list[Share | None] = []
    for r, req in enumerate(t.requests):
        checks = [] if chosen is None else [(attr, chosen[c]) for c, (attr, members) in enumerate(t.constraints)
                                            if r in members]
        apart = [(c, attr) for c, (attr, members) in enumerate(t.distinct) if r in members]
        mine: set[int] = set()
        k = 0
        while req.all or k < req.count:
            eligible: list[tuple[int, Amounts | None]] = []
            for d in cands[r]:
                if d in mine or d in exclusive:
                    continue
                dev = devs[d]
                if any(dev.attr(a) != v for a, v in checks):
                    continue
                if apart and not _apart(dev.attr, apart, held):
                    continue
                got = _can_take(ds, d, req, extra)
                if got is False:
                    if req.all:
                        return None
                    continue
                eligible.append((d, got if got is not True else None))
                if chooser is None or req.all:
                    break
            if not eligible:
                if req.all and k == len(cands[r]) and k > 0:
                    break
                return None
            d, amounts = eligible[0] if chooser is None or len(eligible) == 1 else eligible[chooser(eligible, extra)]
            mine.add(d)
            for c, attr in apart:
                held[c].add(devs[d].attr(attr))  # type: ignore[arg-type]  # _apart checked it is set
            if amounts is None:
                exclusive.add(d)
                shares.append(None)
            else:
                more = extra.setdefault(d, {})
                for name, v in amounts:
                    more[name] = more.get(name, 0) + v
                shares.append((req.name, k, amounts))
            ids.append(d)
            k += 1
            if req.all and k == len(cands[r]):
                break
    if all(s is None for s in shares):
        return tuple(ids), None
    return tuple(ids), tuple(shares)


def _apart(attr: Callable[[str], Attr | None], apart: list[tuple[int, str]], held: list[set[Attr]]) -> bool:
    for c, name in apart:
        v = attr(name)
        if v is None or v in held[c]:
            return False
    return True


def _can_take(ds: DeviceState, d: int, req: Request, extra: dict[int, dict[str, int]]) -> Amounts | bool:
    """The consumption on a shareable device, True on a free exclusive one, False otherwise."""
    if ds.devices[d].shareable:
        got = ds.can_share(d, req, extra)
        return False if got is None else got
    return ds.can_take_exclusive(d, req) and d not in extra
