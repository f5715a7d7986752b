"""DRA device allocation (model.md *Devices*): pure, deterministic, indexed per node.

State (`ClusterState.dra`, a `DeviceState`):
- devices, one per identity (driver, pool, device name), with a stable integer id; a device
  published by several slices is provided by the one with the smallest name (docs/dra.md);
- the live claims (`claims`: claim key -> Allocation) and, per device, whether it is busy
  (`busy`, a numpy bool array by device id). `busy` is also where trial allocations
  (`Ledger`) and the preemption simulation (`Release`) mark and unmark devices; both undo
  what they did, last in first out, like the node table's trial usage.

Claim keys: ("Pod", workload position, group index, pod index, name),
("PodGroup", workload position, group index, name), ("Workload", workload position, name).

Indexes (`_Index`, rebuilt lazily when slices, classes or nodes change): per matcher
(device class + request selectors) the matching devices in (slice name, device name) order,
split into node-local devices (with their node row, for a bincount of free devices per node)
and shared slices (allNodes / nodeSelector, counted once and spread over their node mask);
per node row, the candidate list a claim on that node draws from.

CEL: each expression is compiled once; results are cached per (expression, what CEL can see
of a device), so identical devices are evaluated once. An expression that errors, or yields
anything but true, does not match.
"""
from __future__ import annotations

import functools
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import cel
import numpy as np

from service.domain import events as ev
from service.domain.quantity import QuantityError, parse_quantity

if TYPE_CHECKING:
    from service.domain.state import ClusterState, Group, Workload

POD = "Pod"
GROUP = "PodGroup"
WORKLOAD = "Workload"

_NODE, _ALL, _SEL = 0, 1, 2  # how a slice reaches nodes
_TAGS = {"bool": 0, "int": 1, "string": 2, "version": 3}  # ascending order of mixed-type values
# matchAttribute search: at most this many partial combinations per claim and node (docs/dra.md)
_SEARCH_BUDGET = 100_000


# -- CEL ------------------------------------------------------------------------------------
@functools.lru_cache(maxsize=4096)
def _program(expression: str) -> Any:
    try:
        return cel.compile(expression)
    except Exception:  # validated upstream; anything that still fails matches nothing
        return None


def _context(ctx_key: tuple) -> dict[str, Any]:
    driver, attrs, caps = ctx_key
    return {"device": {
        "driver": driver,
        "attributes": {domain: {name: value for name, _tag, value in items} for domain, items in attrs},
        "capacity": {domain: dict(items) for domain, items in caps},
    }}


@functools.lru_cache(maxsize=1 << 16)
def _evaluate(expression: str, ctx_key: tuple) -> bool:
    program = _program(expression)
    if program is None:
        return False
    try:
        return program.execute(_context(ctx_key)) is True
    except Exception:  # an evaluation error means "does not match"
        return False


def _split(qualified: str, driver: str) -> tuple[str, str]:
    domain, sep, name = qualified.rpartition("/")
    return (domain, name) if sep else (driver, qualified)


# -- inventory records ----------------------------------------------------------------------
class _Slice:
    __slots__ = ("name", "driver", "pool", "kind", "node", "selector", "devices")

    def __init__(self, name: str, body: dict[str, Any]) -> None:
        self.name = name
        self.driver = body.get("driver", "")
        self.pool = (body.get("pool") or {}).get("name", "")
        if body.get("nodeName"):
            self.kind, self.node, self.selector = _NODE, body["nodeName"], ()
        elif body.get("nodeSelector"):
            self.kind, self.node, self.selector = _SEL, None, tuple(sorted(body["nodeSelector"].items()))
        else:
            self.kind, self.node, self.selector = _ALL, None, ()
        self.devices: dict[str, dict[str, Any]] = {d["name"]: d for d in body.get("devices") or ()}

    def ident(self, device: str) -> tuple[str, str, str]:
        return (self.driver, self.pool, device)


class _Device:
    __slots__ = ("id", "ident", "slice", "kind", "node", "selector", "ctx_key", "attrs", "alive")

    def __init__(self, did: int, ident: tuple[str, str, str]) -> None:
        self.id = did
        self.ident = ident
        self.slice = ""
        self.kind = _ALL
        self.node: str | None = None
        self.selector: tuple = ()
        self.ctx_key: tuple = (ident[0], (), ())
        self.attrs: dict[str, tuple[int, Any]] = {}
        self.alive = False

    def load(self, sl: _Slice, body: dict[str, Any]) -> None:
        self.slice, self.kind, self.node, self.selector = sl.name, sl.kind, sl.node, sl.selector
        driver = sl.driver
        attrs: dict[str, tuple[int, Any]] = {}
        by_domain: dict[str, list[tuple[str, int, Any]]] = {}
        for qualified, typed in sorted((body.get("attributes") or {}).items()):
            if not isinstance(typed, dict) or len(typed) != 1:
                continue
            (kind, value), = typed.items()
            tag = _TAGS.get(kind)
            if tag is None:
                continue
            domain, name = _split(qualified, driver)
            attrs[f"{domain}/{name}"] = (tag, value)
            by_domain.setdefault(domain, []).append((name, tag, value))
        caps: dict[str, list[tuple[str, int]]] = {}
        for qualified, cap in sorted((body.get("capacity") or {}).items()):
            domain, name = _split(qualified, driver)
            try:
                amount = parse_quantity((cap or {}).get("value"), name)
            except QuantityError:
                continue
            caps.setdefault(domain, []).append((name, amount))
        self.attrs = attrs
        self.ctx_key = (driver, tuple((d, tuple(v)) for d, v in sorted(by_domain.items())),
                        tuple((d, tuple(v)) for d, v in sorted(caps.items())))
        self.alive = True

    def attr(self, qualified: str) -> tuple[int, Any] | None:
        if "/" in qualified:
            return self.attrs.get(qualified)
        return self.attrs.get(f"{self.ident[0]}/{qualified}")


# -- claim templates and who uses which claim -------------------------------------------------
@dataclass(frozen=True)
class _Request:
    name: str
    device_class: str
    all: bool
    count: int
    selectors: tuple[str, ...]


@dataclass(frozen=True)
class _Template:
    requests: tuple[_Request, ...]
    constraints: tuple[tuple[str, tuple[int, ...]], ...]  # (matchAttribute, request indices)
    error: str | None = None


def _parse_template(spec: Any) -> _Template:
    if spec is None:
        return _Template((), (), "TemplateNotFound")
    devices = (spec or {}).get("devices") or {}
    requests = []
    for r in devices.get("requests") or ():
        exactly = r.get("exactly") or {}
        requests.append(_Request(
            name=r.get("name", ""), device_class=exactly.get("deviceClassName", ""),
            all=exactly.get("allocationMode", "ExactCount") == "All", count=int(exactly.get("count", 1)),
            selectors=tuple(s["cel"]["expression"] for s in exactly.get("selectors") or ())))
    index = {r.name: i for i, r in enumerate(requests)}
    constraints = []
    for c in devices.get("constraints") or ():
        attr = c.get("matchAttribute")
        if not attr:
            continue
        names = c.get("requests")
        members = tuple(range(len(requests))) if not names else tuple(index[n] for n in names if n in index)
        constraints.append((attr, members))
    return _Template(tuple(requests), tuple(constraints))


@dataclass(frozen=True)
class _Use:
    """One claim a pod (or its group) needs: its name, sharing and template."""
    name: str
    sharing: str
    template: _Template
    consumer: bool  # a pod references it (it must reach its devices)


class _GroupInfo:
    __slots__ = ("shape_uses", "extra", "group_uses", "wl_uses", "any")

    def __init__(self, shape_uses: dict[int, tuple[_Use, ...]], extra: tuple[_Use, ...],
                 group_uses: tuple[_Use, ...], wl_uses: tuple[_Use, ...]) -> None:
        self.shape_uses = shape_uses
        self.extra = extra  # unreferenced group claims, then unreferenced workload claims
        self.group_uses = group_uses  # every group claim, spec order
        self.wl_uses = wl_uses  # workload claims this group's view shows
        self.any = bool(extra or group_uses or wl_uses or any(shape_uses.values()))


def _resolve(wl: Workload, gi: int, ref: Any) -> str:
    gs = wl.spec.groups[gi]
    if any(r.name == ref.name and r.template == ref.template for r in gs.claims):
        return GROUP
    if any(r.name == ref.name and r.template == ref.template for r in wl.spec.claims):
        return WORKLOAD
    return POD


def _build_info(wl: Workload, gi: int) -> _GroupInfo:
    spec = wl.spec
    templates = {name: body for name, body in spec.templates}
    parsed: dict[str, _Template] = {}

    def template(name: str) -> _Template:
        if name not in parsed:
            parsed[name] = _parse_template(templates.get(name))
        return parsed[name]

    wl_referenced: set[str] = set()
    for j, gs in enumerate(spec.groups):
        for s in set(gs.pod_shapes):
            for ref in spec.shapes[s].claims:
                if _resolve(wl, j, ref) == WORKLOAD:
                    wl_referenced.add(ref.name)
    gs = spec.groups[gi]
    shape_uses: dict[int, tuple[_Use, ...]] = {}
    group_referenced: set[str] = set()
    own_wl: set[str] = set()
    for s in sorted(set(gs.pod_shapes)):
        uses = []
        for ref in spec.shapes[s].claims:
            sharing = _resolve(wl, gi, ref)
            uses.append(_Use(ref.name, sharing, template(ref.template), True))
            if sharing == GROUP:
                group_referenced.add(ref.name)
            elif sharing == WORKLOAD:
                own_wl.add(ref.name)
        shape_uses[s] = tuple(uses)
    group_uses = tuple(_Use(r.name, GROUP, template(r.template), r.name in group_referenced) for r in gs.claims)
    wl_all = tuple(_Use(r.name, WORKLOAD, template(r.template), r.name in wl_referenced) for r in spec.claims)
    extra = tuple(u for u in group_uses if not u.consumer) + tuple(u for u in wl_all if not u.consumer)
    wl_uses = tuple(u for u in wl_all if u.name in own_wl or not u.consumer)
    return _GroupInfo(shape_uses, extra, group_uses, wl_uses)


def _key(g: Group, pod: int, use: _Use) -> tuple:
    if use.sharing == POD:
        return (POD, g.workload.position, g.index, pod, use.name)
    if use.sharing == GROUP:
        return (GROUP, g.workload.position, g.index, use.name)
    return (WORKLOAD, g.workload.position, use.name)


@dataclass(frozen=True)
class Allocation:
    claim: tuple  # claim key
    name: str
    sharing: str
    pod: int | None  # the pod of a per-pod claim
    device_ids: tuple[int, ...]  # in allocation order


@dataclass(frozen=True)
class Loss:
    """Pods of one group whose claims lost devices, and the claims lost."""
    group: Group
    pods: list[int]
    claims: list[dict[str, Any]]


# -- the per-matcher index ------------------------------------------------------------------
class _Matcher:
    """The devices matching one (class, request selectors), alive, in (slice, device) order."""

    def __init__(self, state: ClusterState, ds: DeviceState, order: list[int],
                 exprs: tuple[str, ...]) -> None:
        nodes = state.nodes
        devs = ds.devices
        ids = [d for d in order if all(_evaluate(e, devs[d].ctx_key) for e in exprs)]
        local_ids: list[int] = []
        local_rows: list[int] = []
        self.by_row: dict[int, list[int]] = {}
        shared: dict[str, list[int]] = {}
        for d in ids:
            dev = devs[d]
            if dev.kind == _NODE:
                row = nodes.index.get(dev.node)  # type: ignore[arg-type]
                if row is not None:
                    local_ids.append(d)
                    local_rows.append(row)
                    self.by_row.setdefault(row, []).append(d)
            else:
                shared.setdefault(dev.slice, []).append(d)
        self.local_ids = np.array(local_ids, dtype=np.int64)
        self.local_rows = np.array(local_rows, dtype=np.int64)
        self.shared = [(np.array(v, dtype=np.int64), devs[v[0]].kind, devs[v[0]].selector)
                       for _, v in sorted(shared.items())]
        self.rank = ds.rank_of
        self._rows: dict[int, tuple[int, ...]] = {}
        self._total: np.ndarray | None = None

    def candidates(self, state: ClusterState, row: int) -> tuple[int, ...]:
        hit = self._rows.get(row)
        if hit is None:
            lst = list(self.by_row.get(row, ()))
            if self.shared:
                labels = state.nodes.labels[row]
                added = False
                for ids, kind, sel in self.shared:
                    if kind == _ALL or all(labels.get(k) == v for k, v in sel):
                        lst.extend(int(d) for d in ids)
                        added = True
                if added:
                    lst.sort(key=self.rank.__getitem__)
            hit = tuple(lst)
            self._rows[row] = hit
        return hit

    def counts(self, state: ClusterState, busy: np.ndarray | None) -> np.ndarray:
        """Matching devices each node row reaches (free ones only, given `busy`)."""
        n = state.nodes.count
        if busy is None and self._total is not None and len(self._total) == n:
            return self._total
        out = np.zeros(n, dtype=np.int64)
        if len(self.local_ids):
            rows = self.local_rows if busy is None else self.local_rows[~busy[self.local_ids]]
            out += np.bincount(rows, minlength=n)[:n]
        for ids, kind, sel in self.shared:
            k = len(ids) if busy is None else int(np.count_nonzero(~busy[ids]))
            if k:
                out += k * _reach_mask(state, kind, sel)
        if busy is None:
            self._total = out
        return out


def _reach_mask(state: ClusterState, kind: int, sel: tuple) -> np.ndarray:
    n = state.nodes.count
    if kind == _ALL:
        return state.nodes.alive[:n].astype(np.int64)
    return state.nodes.selector_mask(sel)[:n].astype(np.int64)


class _Index:
    def __init__(self, state: ClusterState, ds: DeviceState) -> None:
        self.state = state
        self.order = sorted((d.id for d in ds.devices if d.alive),
                            key=lambda i: (ds.devices[i].slice, ds.devices[i].ident[2]))
        ds.rank_of = {d: r for r, d in enumerate(self.order)}
        self.matchers: dict[tuple, _Matcher | None] = {}

    def matcher(self, state: ClusterState, ds: DeviceState, req: _Request) -> _Matcher | None:
        key = (req.device_class, req.selectors)
        if key not in self.matchers:
            cls = ds.classes.get(req.device_class)
            self.matchers[key] = None if cls is None else _Matcher(state, ds, self.order, cls + req.selectors)
        return self.matchers[key]


# -- the device state ------------------------------------------------------------------------
class DeviceState:
    def __init__(self) -> None:
        self.classes: dict[str, tuple[str, ...]] = {}  # class -> its selector expressions
        self.slices: dict[str, _Slice] = {}
        self.devices: list[_Device] = []  # by id
        self.ident_id: dict[tuple[str, str, str], int] = {}
        self.publishers: dict[tuple[str, str, str], list[str]] = {}
        self.busy = np.zeros(0, dtype=bool)
        self.claims: dict[tuple, Allocation] = {}
        self.owner: dict[int, tuple] = {}
        self.by_workload: dict[int, set[tuple]] = {}
        self.version = 0
        self.rank_of: dict[int, int] = {}
        self._index: tuple[int, int, _Index] | None = None
        self._info: dict[tuple[int, int], _GroupInfo] = {}
        self.lost: tuple[int, list[Allocation]] | None = None  # claims the last slice change lost

    # -- lookups ----------------------------------------------------------------------
    def index(self, state: ClusterState) -> _Index:
        cached = self._index
        if cached is None or cached[0] != self.version or cached[1] != state.nodes.version:
            cached = (self.version, state.nodes.version, _Index(state, self))
            self._index = cached
        return cached[2]

    def device_id(self, ident: tuple[str, str, str]) -> int:
        did = self.ident_id.get(ident)
        if did is None:
            did = len(self.devices)
            self.ident_id[ident] = did
            self.devices.append(_Device(did, ident))
            if did >= len(self.busy):
                self.busy = np.concatenate([self.busy, np.zeros(max(64, len(self.busy)), dtype=bool)])
        return did

    def reaches(self, state: ClusterState, did: int, row: int) -> bool:
        dev = self.devices[did]
        if not dev.alive:
            return False
        if dev.kind == _NODE:
            return state.nodes.index.get(dev.node) == row  # type: ignore[arg-type]
        if dev.kind == _ALL:
            return True
        labels = state.nodes.labels[row]
        return all(labels.get(k) == v for k, v in dev.selector)

    def reach_mask(self, state: ClusterState, ids: Iterable[int]) -> np.ndarray:
        n = state.nodes.count
        mask = np.ones(n, dtype=bool)
        for did in ids:
            dev = self.devices[did]
            if not dev.alive:
                return np.zeros(n, dtype=bool)
            if dev.kind == _NODE:
                row = state.nodes.index.get(dev.node)  # type: ignore[arg-type]
                one = np.zeros(n, dtype=bool)
                if row is not None:
                    one[row] = True
                mask &= one
            elif dev.kind == _SEL:
                mask &= state.nodes.selector_mask(dev.selector)[:n]
        return mask

    def reach_any(self, state: ClusterState, ids: Iterable[int]) -> np.ndarray:
        """Rows that reach at least one of these devices."""
        n = state.nodes.count
        mask = np.zeros(n, dtype=bool)
        for did in ids:
            dev = self.devices[did]
            if not dev.alive:
                continue
            if dev.kind == _NODE:
                row = state.nodes.index.get(dev.node)  # type: ignore[arg-type]
                if row is not None:
                    mask[row] = True
            elif dev.kind == _ALL:
                return np.ones(n, dtype=bool)
            else:
                mask |= state.nodes.selector_mask(dev.selector)[:n]
        return mask

    def take_freed(self) -> set[int]:
        """Devices freed since the last call (the queue's bounds grow where they are reached)."""
        freed = self.__dict__.get("freed") or set()
        self.__dict__["freed"] = set()
        return freed

    def usable(self, state: ClusterState, did: int) -> bool:
        """False for a device reachable only through a node that is gone."""
        dev = self.devices[did]
        if not dev.alive:
            return False
        if dev.kind != _NODE:
            return True
        row = state.nodes.index.get(dev.node)  # type: ignore[arg-type]
        return row is not None and bool(state.nodes.alive[row])

    # -- live claims ----------------------------------------------------------------------
    def add_claim(self, alloc: Allocation) -> None:
        old = self.claims.get(alloc.claim)
        if old is not None:
            self.drop_claim(old.claim)
        self.claims[alloc.claim] = alloc
        self.by_workload.setdefault(alloc.claim[1], set()).add(alloc.claim)
        for d in alloc.device_ids:
            self.owner[d] = alloc.claim
            self.busy[d] = True

    def drop_claim(self, key: tuple) -> Allocation | None:
        alloc = self.claims.pop(key, None)
        if alloc is None:
            return None
        keys = self.by_workload.get(key[1])
        if keys is not None:
            keys.discard(key)
            if not keys:
                del self.by_workload[key[1]]
        freed = self.__dict__.setdefault("freed", set())  # (a state pickled before it: none)
        for d in alloc.device_ids:
            if self.owner.get(d) == key:
                del self.owner[d]
                self.busy[d] = False
                freed.add(d)
        return alloc

    # -- allocation -----------------------------------------------------------------------
    def allocate(self, state: ClusterState, t: _Template, row: int) -> tuple[int, ...] | None:
        """The devices the claim gets on this node, or None: model.md's deterministic rule."""
        if t.error is not None or not t.requests:
            return None if t.error is not None else ()
        index = self.index(state)
        busy = self.busy
        full: list[tuple[int, ...]] = []
        free: list[list[int]] = []
        for req in t.requests:
            m = index.matcher(state, self, req)
            if m is None:
                return None
            cands = m.candidates(state, row)
            if req.all:
                if not cands or any(busy[d] for d in cands):
                    return None
                full.append(cands)
                free.append(list(cands))
            else:
                f = [d for d in cands if not busy[d]]
                if len(f) < req.count:
                    return None
                full.append(cands)
                free.append(f)
        if not t.constraints:
            return _greedy(t, free, None, self.devices)
        if len(t.requests) == 1 and not t.requests[0].all and t.constraints == ((t.constraints[0][0], (0,)),):
            return _one_constrained(t.requests[0].count, t.constraints[0][0], free[0], self.devices)
        return _constrained(t, full, free, self.devices)


def _greedy(t: _Template, free: list[list[int]], chosen: list[Any] | None,
            devs: list[_Device]) -> tuple[int, ...] | None:
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


def _one_constrained(count: int, attr: str, free: list[int], devs: list[_Device]) -> tuple[int, ...] | None:
    """_constrained for the common template: one ExactCount request under one matchAttribute.
    The smallest value held by `count` free devices wins; they are the first such, in order."""
    groups: dict[Any, list[int]] = {}
    for d in free:
        v = devs[d].attr(attr)
        if v is not None:
            groups.setdefault(v, []).append(d)
    for i, v in enumerate(sorted(groups)):
        if i >= _SEARCH_BUDGET:  # as the general search gives up
            return None
        got = groups[v]
        if len(got) >= count:
            return tuple(got[:count])
    return None


def _constrained(t: _Template, full: list[tuple[int, ...]], free: list[list[int]],
                 devs: list[_Device]) -> tuple[int, ...] | None:
    """Try the constrained attributes' values in ascending order, first constraint first."""
    values: list[list[Any]] = []
    for attr, members in t.constraints:
        seen: set = set()
        for r in members:
            for d in free[r]:
                v = devs[d].attr(attr)
                if v is not None:
                    seen.add(v)
        if not seen:
            return None
        values.append(sorted(seen, key=lambda tv: (tv[0], tv[1])))
    chosen: list[Any] = [None] * len(values)
    budget = [_SEARCH_BUDGET]

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
            return _greedy(t, free, chosen, devs)
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


# -- state access ------------------------------------------------------------------------------
def _info(state: ClusterState, g: Group) -> _GroupInfo:
    ds = state.dra
    key = (g.workload.position, g.index)
    info = ds._info.get(key)
    if info is None:
        info = _build_info(g.workload, g.index)
        ds._info[key] = info
    return info


def _pod_uses(state: ClusterState, g: Group, pod: int) -> tuple[_Use, ...]:
    info = _info(state, g)
    return info.shape_uses.get(g.spec.pod_shapes[pod], ()) + info.extra


def pod_needs_devices(g: Group, pod: int) -> bool:
    wl = g.workload.spec
    return bool(wl.shapes[g.spec.pod_shapes[pod]].claims or g.spec.claims or wl.claims)


def group_needs_devices(g: Group) -> bool:
    wl = g.workload.spec
    return bool(g.spec.claims or wl.claims or any(wl.shapes[s].claims for s in set(g.spec.pod_shapes)))


def any_allocated(state: ClusterState) -> bool:
    return bool(state.dra.claims)


# -- trial allocation (placement) ------------------------------------------------------------
class Ledger:
    """Allocations made on a trial basis while pods are placed; `rollback` undoes them."""

    def __init__(self, state: ClusterState) -> None:
        self.state = state
        self._new: list[Allocation] = []
        self._claims: dict[tuple, Allocation] = {}
        self.shared_made = 0  # shared claims allocated in this trial (placement re-filters on change)

    def allocation(self, key: tuple) -> Allocation | None:
        got = self._claims.get(key)
        return got if got is not None else self.state.dra.claims.get(key)

    def try_pod(self, g: Group, pod: int, node: int) -> bool:
        """Allocate what this pod needs on this node (on trial); False if it cannot."""
        state = self.state
        ds = state.dra
        mark = len(self._new)
        for use in _pod_uses(state, g, pod):
            key = _key(g, pod, use)
            alloc = self.allocation(key)
            if alloc is not None:
                if use.consumer and not all(ds.reaches(state, d, node) for d in alloc.device_ids):
                    self._undo(mark)
                    return False
                continue
            ids = ds.allocate(state, use.template, node)
            if ids is None:
                self._undo(mark)
                return False
            a = Allocation(key, use.name, use.sharing, pod if use.sharing == POD else None, ids)
            self._new.append(a)
            self._claims[key] = a
            for d in ids:
                ds.busy[d] = True
            if use.sharing != POD:
                self.shared_made += 1
        return True

    def _undo(self, mark: int) -> None:
        busy = self.state.dra.busy
        while len(self._new) > mark:
            a = self._new.pop()
            del self._claims[a.claim]
            for d in a.device_ids:
                busy[d] = False

    def new_allocations(self) -> list[Allocation]:
        return list(self._new)

    def rollback(self) -> None:
        self._undo(0)

    def viable(self, g: Group, pod: int, rows: np.ndarray) -> np.ndarray:
        """A cheap necessary condition, per row, for `try_pod` to succeed: enough free matching
        devices for every claim still to allocate, and reach of the shared claims allocated."""
        state = self.state
        ds = state.dra
        mask = np.ones(len(rows), dtype=bool)
        need: dict[tuple, int] = {}
        index = None
        for use in _pod_uses(state, g, pod):
            alloc = self.allocation(_key(g, pod, use))
            if alloc is not None:
                if use.consumer:
                    mask &= ds.reach_mask(state, alloc.device_ids)[rows]
                continue
            if use.template.error is not None:
                return np.zeros(len(rows), dtype=bool)
            index = index or ds.index(state)
            for req in use.template.requests:
                m = index.matcher(state, ds, req)
                if m is None:
                    return np.zeros(len(rows), dtype=bool)
                key = (req.device_class, req.selectors)
                if req.all:
                    mask &= m.counts(state, None)[rows] >= 1
                else:
                    need[key] = need.get(key, 0) + req.count
        if need:
            assert index is not None
            for (cls, sels), count in need.items():
                m = index.matchers[(cls, sels)]
                assert m is not None
                mask &= m.counts(state, ds.busy)[rows] >= count
        return mask


# -- explanations ---------------------------------------------------------------------------
def explain_pod(state: ClusterState, g: Group, pod: int, ledger: Ledger,
                rows: np.ndarray | None = None) -> dict[str, Any] | None:
    """Why the pod's claims cannot be allocated on these rows (nodes that passed every other
    filter): per claim and request, the nodes short of devices, with what they need and the
    most any of them has free / reaches; constraints that no free devices satisfy; shared
    claims whose allocated devices the nodes do not reach."""
    ds = state.dra
    if rows is None:
        rows = np.flatnonzero(state.nodes.schedulable[: state.nodes.count])
    rows = np.asarray(rows, dtype=np.int64)
    if not len(rows):
        return None
    entries: dict[tuple, dict[str, Any]] = {}
    pod_name = g.spec.pod_names[pod]

    def entry(order: tuple, base: dict[str, Any], k: int, **extra: Any) -> None:
        if k <= 0:
            return
        e = entries.get(order)
        if e is None:
            e = {**base, "nodes": 0, **extra}
            entries[order] = e
        e["nodes"] += k
        for name in ("available", "reachable"):
            if name in extra:
                e[name] = max(e[name], extra[name])

    uses = _pod_uses(state, g, pod)
    remaining = np.ones(len(rows), dtype=bool)
    need: dict[tuple, int] = {}
    index = ds.index(state)
    for u, use in enumerate(uses):
        base = {"claim": use.name, "sharing": use.sharing, "pod": pod_name if use.sharing == POD else None}
        alloc = ledger.allocation(_key(g, pod, use))
        if alloc is not None:
            if use.consumer:
                ok = ds.reach_mask(state, alloc.device_ids)[rows]
                entry((u, -1, 0), {**base, "reason": "AllocatedDevicesNotReachable"},
                      int(np.count_nonzero(remaining & ~ok)))
                remaining &= ok
            continue
        if use.template.error is not None:
            entry((u, -1, 1), {**base, "reason": use.template.error}, int(np.count_nonzero(remaining)))
            remaining[:] = False
            break
        for r, req in enumerate(use.template.requests):
            m = index.matcher(state, ds, req)
            rbase = {**base, "request": req.name, "deviceClassName": req.device_class,
                     "needed": "All" if req.all else req.count}
            if m is None:
                entry((u, r, 0), {**rbase, "reason": "DeviceClassNotFound"}, int(np.count_nonzero(remaining)))
                remaining[:] = False
                break
            total = m.counts(state, None)[rows]
            free = m.counts(state, ds.busy)[rows]
            if req.all:
                ok = (total >= 1) & (free == total)
            else:
                key = (req.device_class, req.selectors)
                need[key] = need.get(key, 0) + req.count
                ok = free >= need[key]
            bad = remaining & ~ok
            if bad.any():
                entry((u, r, 0), {**rbase, "reason": "InsufficientDevices"}, int(np.count_nonzero(bad)),
                      available=int(free[bad].max()), reachable=int(total[bad].max()))
            remaining &= ok
    for row in rows[remaining]:
        _diagnose(state, g, pod, int(row), ledger, uses, entry)
    if not entries:
        return None
    return {"claims": [entries[k] for k in sorted(entries)]}


def _diagnose(state: ClusterState, g: Group, pod: int, row: int, ledger: Ledger,
              uses: tuple[_Use, ...], entry: Any) -> None:
    """The exact first failure on one row (the counts said enough devices)."""
    ds = state.dra
    pod_name = g.spec.pod_names[pod]
    taken: list[int] = []
    try:
        for u, use in enumerate(uses):
            base = {"claim": use.name, "sharing": use.sharing, "pod": pod_name if use.sharing == POD else None}
            alloc = ledger.allocation(_key(g, pod, use))
            if alloc is not None:
                if use.consumer and not all(ds.reaches(state, d, row) for d in alloc.device_ids):
                    entry((u, -1, 0), {**base, "reason": "AllocatedDevicesNotReachable"}, 1)
                    return
                continue
            ids = ds.allocate(state, use.template, row)
            if ids is not None:
                for d in ids:
                    ds.busy[d] = True
                taken.extend(ids)
                continue
            unconstrained = _Template(use.template.requests, ())
            if use.template.constraints and ds.allocate(state, unconstrained, row) is not None:
                entry((u, len(use.template.requests), 0), {
                    **base, "reason": "ConstraintNotSatisfied",
                    "constraints": [{"matchAttribute": attr,
                                     "requests": [use.template.requests[i].name for i in members]}
                                    for attr, members in use.template.constraints]}, 1)
                return
            # a request short once earlier requests of this claim took their devices
            index = ds.index(state)
            for r, req in enumerate(use.template.requests):
                if ds.allocate(state, _Template(use.template.requests[: r + 1], ()), row) is None:
                    m = index.matcher(state, ds, req)
                    cands = m.candidates(state, row) if m is not None else ()
                    entry((u, r, 0), {**base, "request": req.name, "deviceClassName": req.device_class,
                                      "needed": "All" if req.all else req.count,
                                      "reason": "InsufficientDevices"}, 1,
                          available=sum(1 for d in cands if not ds.busy[d]), reachable=len(cands))
                    return
            entry((u, -1, 2), {**base, "reason": "InsufficientDevices"}, 1)  # pragma: no cover
            return
    finally:
        for d in taken:
            ds.busy[d] = False


# -- preemption simulation -----------------------------------------------------------------
class Release:
    """The devices victim units give back, prefix by prefix of the removal order: their pods'
    own claims, and a group (workload) claim once no pod of its group (workload) is left."""

    def __init__(self, state: ClusterState, units: list[tuple[Group, list[int]]]) -> None:
        self.state = state
        ds = state.dra
        left: dict[int, int] = {}
        wl_left: dict[int, int] = {}
        self.freed: list[np.ndarray] = []
        for g, pods in units:
            if id(g) not in left:
                left[id(g)] = g.placed
            wl = g.workload
            if wl.position not in wl_left:
                wl_left[wl.position] = sum(1 for o in wl.groups if o.placed)
            ids: list[int] = []
            keys = ds.by_workload.get(wl.position, ())
            if keys:
                info = _info(state, g)
                for p in pods:
                    for use in info.shape_uses.get(g.spec.pod_shapes[p], ()):
                        if use.sharing == POD:
                            a = ds.claims.get(_key(g, p, use))
                            if a is not None:
                                ids.extend(a.device_ids)
                left[id(g)] -= len(pods)
                if left[id(g)] == 0:
                    for use in info.group_uses:
                        a = ds.claims.get(_key(g, -1, use))
                        if a is not None:
                            ids.extend(a.device_ids)
                    wl_left[wl.position] -= 1
                    if wl_left[wl.position] == 0:
                        for key in sorted(k for k in keys if k[0] == WORKLOAD):
                            ids.extend(ds.claims[key].device_ids)
            else:
                left[id(g)] -= len(pods)
                if left[id(g)] == 0:
                    wl_left[wl.position] -= 1
            self.freed.append(np.array(ids, dtype=np.int64))
        self.applied = 0

    def set_prefix(self, units: int) -> None:
        busy = self.state.dra.busy
        for i in range(self.applied, units):
            busy[self.freed[i]] = False
        for i in range(units, self.applied):
            busy[self.freed[i]] = True
        self.applied = units


def held_devices(allocations: list[Allocation]) -> set[int]:
    return {d for a in allocations for d in a.device_ids}


def unit_conflicts(state: ClusterState, held: set[int], g: Group, pods: list[int]) -> bool:
    """Would putting these pods back take back any device in `held` (the preemptor's)?
    Counts their own claims and their group's and workload's claims."""
    ds = state.dra
    keys = ds.by_workload.get(g.workload.position)
    if not keys or not held:
        return False
    pods_set = set(pods)
    for key in keys:
        if key[0] == POD and (key[2] != g.index or key[3] not in pods_set):
            continue
        if key[0] == GROUP and key[2] != g.index:
            continue
        if any(d in held for d in ds.claims[key].device_ids):
            return True
    return False


# -- state changes (evolve) ------------------------------------------------------------------
def upsert_class(state: ClusterState, name: str, body: dict[str, Any]) -> None:
    state.device_classes[name] = body
    ds = state.dra
    ds.classes[name] = tuple(s["cel"]["expression"] for s in body.get("selectors") or ())
    ds.version += 1
    state.index.classes.clear()  # what devices match changed: every queue bound is void


def remove_class(state: ClusterState, name: str) -> None:
    state.device_classes.pop(name, None)
    state.dra.classes.pop(name, None)
    state.dra.version += 1
    state.index.classes.clear()


def upsert_slice(state: ClusterState, name: str, body: dict[str, Any]) -> None:
    state.resource_slices[name] = body
    _slice_changed(state, name, _Slice(name, body))


def remove_slice(state: ClusterState, name: str) -> None:
    state.resource_slices.pop(name, None)
    _slice_changed(state, name, None)


def _slice_changed(state: ClusterState, name: str, new: _Slice | None) -> None:
    ds = state.dra
    old = ds.slices.pop(name, None)
    idents: list[tuple[str, str, str]] = []
    if old is not None:
        for dev in old.devices:
            ident = old.ident(dev)
            idents.append(ident)
            pubs = ds.publishers.get(ident)
            if pubs is not None and name in pubs:
                pubs.remove(name)
    if new is not None:
        ds.slices[name] = new
        for dev in new.devices:
            ident = new.ident(dev)
            idents.append(ident)
            pubs = ds.publishers.setdefault(ident, [])
            pubs.append(name)
            pubs.sort()
    lost_keys: set[tuple] = set()
    for ident in idents:
        did = ds.device_id(ident)
        dev = ds.devices[did]
        pubs = ds.publishers.get(ident)
        if pubs:
            provider = ds.slices[pubs[0]]
            dev.load(provider, provider.devices[ident[2]])
        else:
            ds.publishers.pop(ident, None)
            dev.alive = False
            owner = ds.owner.get(did)
            if owner is not None:
                lost_keys.add(owner)
    lost = [a for a in (ds.drop_claim(k) for k in sorted(lost_keys)) if a is not None]
    ds.lost = (state.position + 1, lost)
    ds.version += 1
    state.index.classes.clear()  # devices came, went or changed: every queue bound is void


def workload_added(state: ClusterState, wl: Workload) -> None:
    return None


def workload_released(state: ClusterState, wl: Workload) -> None:
    """Deletion: every claim of the workload is freed."""
    ds = state.dra
    for key in sorted(ds.by_workload.get(wl.position, ())):
        ds.drop_claim(key)


def _claim_key(g: Group, desc: dict[str, Any]) -> tuple | None:
    sharing = desc.get("sharing")
    if sharing == POD:
        return (POD, g.workload.position, g.index, g.pod_index(desc["pod"]), desc["name"])
    if sharing == GROUP:
        return (GROUP, g.workload.position, g.index, desc["name"])
    if sharing == WORKLOAD:
        return (WORKLOAD, g.workload.position, desc["name"])
    return None


def claims_allocated(state: ClusterState, g: Group, claims: list[dict[str, Any]]) -> None:
    """Fold a decision's allocations (PodGroupScheduled / PodsScheduled "claims")."""
    ds = state.dra
    for c in claims:
        key = _claim_key(g, c)
        if key is None:
            continue
        ids = tuple(ds.device_id((d["driver"], d["pool"], d["device"])) for d in c.get("devices") or ())
        ds.add_claim(Allocation(key, c["name"], c["sharing"], key[3] if c["sharing"] == POD else None, ids))


def group_pods_released(state: ClusterState, g: Group, pods: list[int],
                        released: list[dict[str, Any]] | None = None) -> None:
    """Fold a PodGroupPreempted / PodsLost: free the claims its "claimsReleased" lists."""
    ds = state.dra
    for desc in released or ():
        key = _claim_key(g, desc)
        if key is not None:
            ds.drop_claim(key)


def _descriptor(state: ClusterState, key: tuple) -> dict[str, Any]:
    if key[0] == POD:
        g = state.by_position[key[1]].groups[key[2]]
        return {"name": key[4], "sharing": POD, "pod": g.spec.pod_names[key[3]]}
    return {"name": key[-1], "sharing": key[0], "pod": None}


def claims_released(state: ClusterState, g: Group, pods: list[int]) -> list[dict[str, Any]]:
    """The claims that releasing these placed pods of g frees (model.md *Devices*): their own
    claims; the group's claims when no pod of it stays placed; the workload's when no pod of
    it stays placed; and a shared claim holding a device that only a removed node reached,
    once none of its consumers stays placed."""
    ds = state.dra
    wl = g.workload
    keys = ds.by_workload.get(wl.position)
    if not keys:
        return []
    released = {p for p in pods if g.node_of[p] >= 0}
    remaining = g.placed - len(released)
    wl_empty = remaining == 0 and all(o.placed == 0 for o in wl.groups if o is not g)
    info = _info(state, g)
    out: list[tuple] = []
    for p in sorted(released):
        for use in info.shape_uses.get(g.spec.pod_shapes[p], ()):
            if use.sharing == POD:
                key = _key(g, p, use)
                if key in ds.claims:
                    out.append(key)
    for use in info.group_uses:
        key = _key(g, -1, use)
        if key in ds.claims and (remaining == 0 or _orphaned(state, key, g, released)):
            out.append(key)
    for key in sorted(k for k in keys if k[0] == WORKLOAD):
        if wl_empty or _orphaned(state, key, g, released):
            out.append(key)
    return [_descriptor(state, k) for k in out]


def _orphaned(state: ClusterState, key: tuple, g: Group, released: set[int]) -> bool:
    """A shared claim with a device gone with its node, and no consumer left placed."""
    ds = state.dra
    alloc = ds.claims[key]
    if all(ds.usable(state, d) for d in alloc.device_ids):
        return False
    wl = g.workload
    groups = [wl.groups[key[2]]] if key[0] == GROUP else wl.groups
    for o in groups:
        info = _info(state, o)
        for p, node in enumerate(o.node_of):
            if node < 0 or (o is g and p in released):
                continue
            if any(u.name == key[-1] and u.sharing == key[0]
                   for u in info.shape_uses.get(o.spec.pod_shapes[p], ())):
                return False
    return True


def losses(state: ClusterState, input_event: Any) -> list[Loss]:
    """After a slice change: the placed pods whose claims lost devices, by group."""
    if input_event.type not in (ev.RESOURCE_SLICE_UPSERTED, ev.RESOURCE_SLICE_REMOVED):
        return []
    ds = state.dra
    if ds.lost is None or ds.lost[0] != input_event.position or not ds.lost[1]:
        return []
    by_group: dict[tuple[int, int], tuple[Group, set[int], list[dict[str, Any]]]] = {}

    def add(g: Group, pods: Iterable[int], key: tuple) -> None:
        pods = list(pods)
        if not pods:
            return
        slot = by_group.setdefault((g.workload.position, g.index), (g, set(), []))
        slot[1].update(pods)
        desc = _descriptor(state, key)
        if desc not in slot[2]:
            slot[2].append(desc)

    for alloc in ds.lost[1]:
        key = alloc.claim
        wl = state.by_position[key[1]]
        if key[0] == POD:
            g = wl.groups[key[2]]
            if g.node_of[key[3]] >= 0:
                add(g, [key[3]], key)
            continue
        groups = [wl.groups[key[2]]] if key[0] == GROUP else wl.groups
        for g in groups:
            info = _info(state, g)
            add(g, (p for p, node in enumerate(g.node_of) if node >= 0 and any(
                u.name == key[-1] and u.sharing == key[0]
                for u in info.shape_uses.get(g.spec.pod_shapes[p], ()))), key)
    return [Loss(g, sorted(pods), descs) for _, (g, pods, descs) in sorted(by_group.items())]


# -- event data and views -----------------------------------------------------------------------
def _devices(state: ClusterState, ids: Iterable[int]) -> list[dict[str, str]]:
    devs = state.dra.devices
    return [{"driver": devs[d].ident[0], "pool": devs[d].ident[1], "device": devs[d].ident[2]} for d in ids]


def _reserved_for(g: Group, sharing: str, pod: int | None) -> list[dict[str, str]]:
    if sharing == POD:
        return [{"kind": "Pod", "name": g.spec.pod_names[pod]}]  # type: ignore[index]
    if sharing == GROUP:
        return [{"kind": "PodGroup", "name": g.spec.name}]
    return [{"kind": "Workload", "name": g.workload.spec.name}]


def _claim_view(state: ClusterState, g: Group, a: Allocation) -> dict[str, Any]:
    return {"name": a.name, "sharing": a.sharing,
            "pod": g.spec.pod_names[a.pod] if a.sharing == POD else None,  # type: ignore[index]
            "devices": _devices(state, a.device_ids), "reservedFor": _reserved_for(g, a.sharing, a.pod)}


def describe_allocations(state: ClusterState, g: Group, allocations: list[Allocation]) -> list[dict[str, Any]]:
    return [_claim_view(state, g, a) for a in allocations]


def claim_views(state: ClusterState, g: Group) -> list[dict[str, Any]]:
    """The allocated claims the group uses: its own, the workload's it uses, its pods'."""
    ds = state.dra
    if not ds.by_workload.get(g.workload.position):
        return []
    info = _info(state, g)
    out = []
    for use in info.group_uses + info.wl_uses:
        a = ds.claims.get(_key(g, -1, use))
        if a is not None:
            out.append(_claim_view(state, g, a))
    if any(u.sharing == POD for uses in info.shape_uses.values() for u in uses):
        for p, node in enumerate(g.node_of):
            if node < 0:
                continue
            for use in info.shape_uses.get(g.spec.pod_shapes[p], ()):
                if use.sharing == POD:
                    a = ds.claims.get(_key(g, p, use))
                    if a is not None:
                        out.append(_claim_view(state, g, a))
    return out


def canonical(state: ClusterState) -> Any:
    """Every allocation, and the devices marked busy (which must be exactly theirs)."""
    ds = state.dra
    devs = ds.devices
    return {
        "claims": [{"key": list(k), "devices": [list(devs[d].ident) for d in ds.claims[k].device_ids]}
                   for k in sorted(ds.claims)],
        "busy": sorted(list(devs[int(d)].ident) for d in np.flatnonzero(ds.busy)),
        "devices": sorted([list(d.ident), d.slice] for d in devs if d.alive),
    }
