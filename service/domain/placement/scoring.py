"""The scheduler configuration's scoring strategies (sharing.md, *The scheduler configuration*).

`Scheduler` is the recorded configuration (`ClusterState.scheduler`; None: never configured,
MostAllocated). The seam is `strategy_of(state)`, the one function of the state that says which
strategy ranks the feasible nodes; placement (`routine.PLACE_RUN`) holds one way to place per
strategy name. A caller (what-if replay) puts a configuration of its own in force with `configure`,
as the fold of `SchedulerConfigured` does.

`FragmentationAware` ranks a pod's feasible nodes by the band of the fragmentation increase,
then the node's idle total, then the node name, and chooses each GPU within the node by the
same measure (`Measure`). All integer arithmetic (numpy int64 over a per-node GPU layout).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from service.domain.dra import capacity
from service.domain.dra.claims import Request
from service.domain.model.quantity import CPU, parse_quantity

if TYPE_CHECKING:
    from service.domain.dra.devices import DeviceState
    from service.domain.nodes.table import NodeTable

MOST_ALLOCATED = "MostAllocated"
LEAST_ALLOCATED = "LeastAllocated"
FRAGMENTATION_AWARE = "FragmentationAware"
STRATEGIES = (MOST_ALLOCATED, LEAST_ALLOCATED, FRAGMENTATION_AWARE)
BIG = 1 << 62  # a need no device meets


@dataclass(frozen=True)
class Shape:
    weight: int
    cpu: int  # millicores
    devices: bool
    count: int = 1
    selectors: tuple[str, ...] = ()
    requests: tuple[tuple[str, int], ...] = ()  # capacity.requests, base units


@dataclass(frozen=True)
class Scheduler:
    """A recorded configuration (the SchedulerConfigured input's data, defaults filled in)."""
    type: str
    device_class: str = ""
    capacity: str = ""
    tolerance: int = 80
    shapes: tuple[Shape, ...] | None = None
    history: tuple[int, int] | None = None  # (pods, coverage)
    look_ahead: bool = False

    @property
    def strategy(self) -> str:
        return self.type


def parse_shape(body: dict[str, Any], weight: int | None = None) -> Shape:
    dev = body.get("devices")
    cpu = parse_quantity(body.get("cpu", 0), CPU)
    w = int(body.get("weight", 1)) if weight is None else weight
    if dev is None:
        return Shape(w, cpu, False)
    reqs = (dev.get("capacity") or {}).get("requests") or {}
    return Shape(w, cpu, True, int(dev.get("count", 1)),
                 tuple(s["cel"]["expression"] for s in dev.get("selectors") or ()),
                 tuple(sorted((n, parse_quantity(v, n.rpartition("/")[2])) for n, v in reqs.items())))


def parse_scheduler(data: dict[str, Any]) -> Scheduler:
    """The recorded `scoringStrategy` (validated upstream) as a configuration."""
    s = data.get("scoringStrategy") or {}
    kind = s.get("type", MOST_ALLOCATED)
    fa = s.get("fragmentationAware")
    if kind != FRAGMENTATION_AWARE or not fa:
        return Scheduler(kind)
    target = fa.get("targetWorkload") or {}
    shapes = tuple(parse_shape(x) for x in target["shapes"]) if "shapes" in target else None
    hist = target.get("fromHistory")
    history = (int(hist.get("pods", 10000)), int(hist.get("coverage", 95))) if hist is not None else None
    return Scheduler(kind, fa["deviceClassName"], fa["capacity"], int(fa.get("tolerance", 80)), shapes, history,
                     bool(fa.get("lookAhead", False)))


def recorded(scoring_strategy: dict[str, Any]) -> dict[str, Any]:
    """The SchedulerConfigured data of a (validated) configuration, every default filled in."""
    body = dict(scoring_strategy)
    fa = body.get("fragmentationAware")
    if fa is not None:
        fa = {"tolerance": 80, **fa}
        target = dict(fa["targetWorkload"])
        if "fromHistory" in target:
            target["fromHistory"] = {"pods": 10000, "coverage": 95, **target["fromHistory"]}
        if "shapes" in target:
            target["shapes"] = [_filled(x) for x in target["shapes"]]
        fa["targetWorkload"] = target
        body["fragmentationAware"] = fa
    return {"scoringStrategy": body}


def _filled(shape: dict[str, Any]) -> dict[str, Any]:
    out = {"cpu": "0", **shape}
    if "devices" in out:
        out["devices"] = {"count": 1, **out["devices"]}
    return out


def configure(state: Any, scoring_strategy: dict[str, Any] | None, position: int | None = None) -> None:
    """Put a configuration in force on a state: the fold of SchedulerConfigured, and the
    what-if replay's override (audit.md: a caller passes any strategy, as recorded; position None).
    Another node order voids every queue bound and may place any pending group."""
    state.scheduler = None if scoring_strategy is None else parse_scheduler({"scoringStrategy": scoring_strategy})
    state.scheduler_body = scoring_strategy
    state.scheduler_position = position
    state.index.classes.clear()
    state.index.dirty.update(range(state.nodes.count))


def scheduler_view(state: Any) -> dict[str, Any]:
    """GET /scheduler (sharing.md): the configuration in force, its position, the target the
    next decision would use."""
    body = getattr(state, "scheduler_body", None) or {"type": MOST_ALLOCATED}
    sched = strategy_of(state)
    target = None
    if sched.type == FRAGMENTATION_AWARE:
        shapes = target_shapes(state, sched)
        target = {"pods": sum(s.weight for s in shapes), "shapes": [shape_view(s) for s in shapes]}
    return {"scoringStrategy": body, "position": getattr(state, "scheduler_position", None),
            "targetWorkload": target}


DEFAULT = Scheduler(MOST_ALLOCATED)  # a cluster never configured: model.md's node score


def strategy_of(state: Any) -> Scheduler:
    """The one function of the state that chooses the strategy ranking nodes (placement's
    `PLACE_RUN` holds one way to place per name): the configuration in force, MostAllocated when
    none is (what-if replay puts its own in force with `configure`)."""
    sched: Scheduler | None = getattr(state, "scheduler", None)
    return DEFAULT if sched is None else sched


# -- the fragmentation measure -------------------------------------------------------------------
class Layout:
    """Per node row, the GPUs of the measure (devices of slices with that nodeName that match
    the class and have the capacity), padded; per target shape, which GPUs its selectors
    accept and what one allocation of its request needs of the measured capacity."""

    def __init__(self, ds: DeviceState, nodes: NodeTable, sched: Scheduler, shapes: tuple[Shape, ...]) -> None:
        from service.domain.dra.inventory import NODE
        index = ds.index(nodes)
        name = sched.capacity
        self.key = (ds.version, nodes.version, sched, shapes)
        base = index.matcher(nodes, ds, Request("", sched.device_class, False, 1, ()))
        per_row: dict[int, list[int]] = {}
        for row, ids in sorted((base.by_row if base is not None else {}).items()):
            for d in ids:
                dev = ds.devices[d]
                if dev.kind == NODE and name in dev.caps:
                    per_row.setdefault(row, []).append(d)
        n = nodes.count
        width = max((len(v) for v in per_row.values()), default=0)
        self.width = width
        self.gpu = np.full((n, max(width, 1)), -1, dtype=np.int64)
        for row, ids in per_row.items():
            self.gpu[row, :len(ids)] = ids
        self.real = self.gpu >= 0
        self.ids = self.gpu[self.real]
        self.value = np.zeros(self.gpu.shape, dtype=np.int64)
        self.shareable = np.zeros(self.gpu.shape, dtype=bool)
        for (r, c) in zip(*np.nonzero(self.real), strict=True):
            dev = ds.devices[int(self.gpu[r, c])]
            self.value[r, c] = dev.caps[name].value
            self.shareable[r, c] = dev.shareable
        self.total_weight = sum(s.weight for s in shapes)
        # F = Σ weight · f <= W · L per node, and ΔF twice that: int64 while it cannot reach 2^63,
        # else Python integers (an object array: every sum after it follows), exact either way
        top = float(self.value.sum(axis=1, dtype=np.float64).max()) if self.value.size else 0.0
        self.wide = 4.0 * max(self.total_weight, 1) * top >= 2.0**62  # (a float bound, with room to spare)
        if self.wide:
            self.value = self.value.astype(object)
        self.col: dict[int, tuple[int, int]] = {int(self.gpu[r, c]): (int(r), int(c))
                                                for r, c in zip(*np.nonzero(self.real), strict=True)}
        dev_shapes = [s for s in shapes if s.devices]
        self.weights = np.array([s.weight for s in dev_shapes], dtype=np.int64)
        self.cpu = np.array([s.cpu for s in dev_shapes], dtype=np.int64)
        self.count = np.array([s.count for s in dev_shapes], dtype=np.int64)
        self.need = np.stack([self._need(ds, nodes, index, sched, s.selectors, s.requests) for s in dev_shapes]) \
            if dev_shapes else np.zeros((0, *self.gpu.shape), dtype=np.int64)

    def _need(self, ds: DeviceState, nodes: NodeTable, index: Any, sched: Scheduler, selectors: tuple[str, ...],
              requests: tuple[tuple[str, int], ...]) -> np.ndarray:
        """Per GPU, what one allocation of a request with these selectors and amounts consumes
        of the measured capacity (BIG where it cannot take one on an empty device)."""
        out = np.full(self.gpu.shape, BIG, dtype=np.int64)
        m = index.matcher(nodes, ds, Request("", sched.device_class, False, 1, selectors, requests))
        ok = set(m.local_ids.tolist()) if m is not None else set()
        for d, (r, c) in self.col.items():
            if d not in ok:
                continue
            dev = ds.devices[d]
            if dev.shareable:
                got = capacity.consumption(dev.caps, requests)
                if got is not None and all(v <= dev.caps[n].value for n, v in got):
                    out[r, c] = dict(got)[sched.capacity]
            elif capacity.exclusive_fits(dev.caps, requests):
                out[r, c] = max(1, dev.caps[sched.capacity].value)  # an exclusive GPU serves whole
        return out

    def idle(self, ds: DeviceState, name: str) -> np.ndarray:
        """Per GPU, the idle amount of the measured capacity now (0 on the padding)."""
        idle = self.value.copy()
        if not len(self.ids):  # no GPU anywhere: nothing is idle (and nothing to index)
            return idle
        used = ds.cap_used.get(name)
        gpu = np.where(self.real, self.gpu, 0)
        if used is not None:
            idle -= np.where(self.shareable, used[gpu], 0)
        held = ds.busy[gpu] | (~self.shareable & (ds.share_count[gpu] > 0))
        idle[held & ~self.shareable] = 0
        idle[~self.real] = 0
        return idle


def band(delta: np.ndarray, total_weight: int, tolerance: int) -> np.ndarray:
    """⌈ΔF / (W · tolerance)⌉ (ΔF itself with tolerance 0; 0 with an empty target)."""
    if total_weight == 0:
        return np.zeros_like(delta)
    if tolerance == 0:
        return delta
    width = total_weight * tolerance
    return -((-delta) // width)


# -- the target workload ------------------------------------------------------------------------
def target_shapes(state: Any, sched: Scheduler) -> tuple[Shape, ...]:
    """The shapes the next decision uses: the given ones, or those derived from the
    submissions recorded before the input being decided (`state.history`)."""
    if sched.shapes is not None:
        return sched.shapes
    assert sched.history is not None
    pods, coverage = sched.history
    # while an input is decided, the submissions before it (its own pods weigh from the next input
    # on, whatever its pass records first); otherwise, for the next input, every one recorded
    before = state.deciding if state.deciding is not None else state.position + 1
    key = (before, sched.device_class, pods, coverage)
    cached = getattr(state, "_target", None)
    if cached is not None and cached[0] == key:
        return cached[1]  # type: ignore[no-any-return]
    shapes = derive(history_window(state, sched.device_class, pods, before), coverage)
    state._target = (key, shapes)
    return shapes


def history_window(state: Any, device_class: str, pods: int, before: int) -> list[Shape]:
    """The last `pods` counted pods of the submissions recorded before position `before`, in
    position order, a workload's pods in its view's order (sharing.md, *Target from history*)."""
    from service.domain.dra import claims as cl
    out: list[Shape] = []
    for wl in reversed(list(state.by_position.values())):
        if wl.position >= before:
            continue
        mine: list[Shape] = []
        for g in wl.groups:
            info = cl.info(state.dra, g)
            for s in g.spec.pod_shapes:
                shape = _pod_shape(wl.spec.shapes[s], info.shape_uses.get(s, ()) + info.extra, device_class)
                if shape is not None:
                    mine.append(shape)
        out.extend(reversed(mine))
        if len(out) >= pods:
            break
    return out[:pods][::-1]


def _pod_shape(pod: Any, uses: Any, device_class: str) -> Shape | None:
    cpu = dict(pod.requests).get(CPU, 0)
    own = []
    for use in uses:
        for req in use.template.requests:
            if req.device_class != device_class:
                continue
            if use.sharing != "Pod":
                return None
            own.append(req)
    if not own:
        return Shape(1, cpu, False)
    if len(own) > 1 or own[0].all:
        return None
    r = own[0]
    return Shape(1, cpu, True, r.count, r.selectors, r.capacity)


def derive(window: list[Shape], coverage: int) -> tuple[Shape, ...]:
    """Count the window's pods by shape, most first (ties by the smaller canonical JSON of the
    shape view), kept while 100 × kept < coverage × pods."""
    import json
    counts: dict[Shape, int] = {}
    for s in window:
        counts[s] = counts.get(s, 0) + 1
    order = sorted(counts, key=lambda s: (-counts[s], json.dumps(shape_view(s), sort_keys=True,
                                                                     separators=(",", ":"))))
    kept: list[Shape] = []
    covered = 0
    for s in order:
        if 100 * covered >= coverage * len(window):
            break
        kept.append(Shape(counts[s], s.cpu, s.devices, s.count, s.selectors, s.requests))
        covered += counts[s]
    return tuple(kept)


def shape_view(s: Shape) -> dict[str, Any]:
    from service.domain.model.quantity import format_quantity
    out: dict[str, Any] = {"weight": s.weight, "cpu": format_quantity(s.cpu, CPU)}
    if s.devices:
        dev: dict[str, Any] = {"count": s.count,
                               "capacity": {"requests": {n: capacity.canonical(v) for n, v in s.requests}}}
        if s.selectors:
            dev["selectors"] = [{"cel": {"expression": e}} for e in s.selectors]
        out["devices"] = dev
    return out
