"""FragmentationAware placement (sharing.md, *The FragmentationAware strategy*).

For each pod, every feasible node is keyed by (the band of ΔF, the node's idle total L before
the pod, the node name), smallest first; the first node where the pod's claims can be allocated
takes it, each GPU chosen by the same measure (`Chooser`). ΔF of a node is a pure function of
its GPUs' idle amounts and its free cpu: it is cached per pod shape and recomputed only for the
rows whose state changed since (`_Cache`), so a pod costs O(nodes) array work plus the changed
rows. Integer arithmetic throughout.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from service.domain.dra import claims as cl
from service.domain.dra.sharing import Chooser
from service.domain.model.quantity import CPU
from service.domain.placement import scoring as sc
from service.domain.placement.scoring import Layout, Scheduler, Shape

if TYPE_CHECKING:
    from service.domain.model.workload import Group
    from service.domain.placement.routine import Trial
    from service.domain.state.cluster import ClusterState


class _Cache:
    """ΔF per row for one pod shape, valid for the idle/free-cpu signature it was computed on."""

    def __init__(self, rows: int, width: int, wide: bool) -> None:
        self.idle = np.full((rows, width), -1, dtype=np.int64)
        self.free = np.full(rows, -1, dtype=np.int64)
        self.delta = np.zeros(rows, dtype=object if wide else np.int64)  # exact (Layout.wide)
        self.ok = np.zeros(rows, dtype=bool)


class Measure:
    """The layout, target and caches of one configuration on one cluster state."""

    def __init__(self, state: ClusterState, sched: Scheduler, shapes: tuple[Shape, ...]) -> None:
        self.sched = sched
        self.lay = Layout(state.dra, state.nodes, sched, shapes)
        self.needs: dict[Any, tuple[np.ndarray, bool]] = {}
        self.caches: dict[Any, _Cache] = {}

    def pod_need(self, state: ClusterState, req: cl.Request) -> tuple[np.ndarray, bool]:
        """Per GPU, what the request needs of the measured capacity; and whether every device
        it could take is one of the layout's GPUs (then rows where they do not fit are out)."""
        key = (req.selectors, req.capacity)
        got = self.needs.get(key)
        if got is None:
            ds, nodes = state.dra, state.nodes
            index = ds.index(nodes)
            need = self.lay._need(ds, nodes, index, self.sched, req.selectors, req.capacity)
            mt = index.matcher(nodes, ds, req)
            exact = mt is not None and not mt.shared and all(int(d) in self.lay.col for d in mt.local_ids)
            got = self.needs[key] = (need, exact)
        return got

    def free_cpu(self, state: ClusterState) -> np.ndarray:
        nodes = state.nodes
        col = _col(nodes, CPU)
        n = self.lay.gpu.shape[0]
        if col is None:
            return np.zeros(n, dtype=np.int64)
        return (nodes.alloc[:n, col] - nodes.used[:n, col]).astype(np.int64)

    # -- F and ΔF --------------------------------------------------------------------------
    def f_rows(self, rows: np.ndarray, idle: np.ndarray, free: np.ndarray) -> np.ndarray:
        lay = self.lay
        total = idle.sum(axis=1)
        out: np.ndarray = lay.total_weight * total
        if not len(lay.weights):
            return out
        need = lay.need[:, rows]
        serve = idle[None, :, :] >= need
        count = serve.sum(axis=2)
        served = (serve * idle[None, :, :]).sum(axis=2)
        hosted = (free[None, :] >= lay.cpu[:, None]) & (count >= lay.count[:, None])
        frag: np.ndarray = out - (lay.weights[:, None] * np.where(hosted, served, 0)).sum(axis=0)
        return frag

    def delta(self, rows: np.ndarray, idle: np.ndarray, free: np.ndarray, cpu: int,
              reqs: list[tuple[np.ndarray, int]]) -> tuple[np.ndarray, np.ndarray]:
        """ΔF of placing the pod on each of these rows (and whether its GPUs fit there): its
        cpu, then each device of its requests greedily where F after is smallest."""
        before = self.f_rows(rows, idle, free)
        free1 = free - cpu
        ok = np.ones(len(rows), dtype=bool)
        idle = idle.copy()
        shareable = self.lay.shareable[rows]
        after_f = self.f_rows(rows, idle, free1)
        for need_all, count in reqs:
            need = need_all[rows]
            taken = np.zeros(idle.shape, dtype=bool)
            for _ in range(count):
                best = np.full(len(rows), 1 << 200, dtype=object) if self.lay.wide else \
                    np.full(len(rows), np.iinfo(np.int64).max, dtype=np.int64)
                pick = np.full(len(rows), -1, dtype=np.int64)
                for c in range(idle.shape[1]):
                    can = (idle[:, c] >= need[:, c]) & ~taken[:, c] & (need[:, c] < sc.BIG)
                    if not can.any():
                        continue
                    trial = idle.copy()
                    trial[:, c] = np.where(shareable[:, c], idle[:, c] - need[:, c], 0)
                    f = self.f_rows(rows, trial, free1)
                    better = can & (f < best)
                    best[better] = f[better]
                    pick[better] = c
                ok &= pick >= 0
                r = np.flatnonzero(pick >= 0)
                col = pick[r]
                idle[r, col] = np.where(shareable[r, col], idle[r, col] - need[r, col], 0)
                taken[r, col] = True
                after_f = np.where(pick >= 0, best, after_f)
        return after_f - before, ok

    def deltas(self, state: ClusterState, key: Any, cpu: int, reqs: list[tuple[np.ndarray, int]],
               rows: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(ΔF, GPUs fit, L) on these rows, from the cache where their state did not change."""
        lay = self.lay
        idle_all = lay.idle(state.dra, self.sched.capacity)
        free_all = self.free_cpu(state)
        cache = self.caches.get(key)
        if cache is None:
            cache = self.caches[key] = _Cache(idle_all.shape[0], idle_all.shape[1], lay.wide)
        stale = rows[(cache.free[rows] != free_all[rows]) | (cache.idle[rows] != idle_all[rows]).any(axis=1)]
        if len(stale):
            d, ok = self.delta(stale, idle_all[stale], free_all[stale], cpu, reqs)
            cache.delta[stale], cache.ok[stale] = d, ok
            cache.idle[stale], cache.free[stale] = idle_all[stale], free_all[stale]
        return cache.delta[rows], cache.ok[rows], idle_all[rows].sum(axis=1)

    def chooser(self, state: ClusterState, row: int, cpu: int) -> Chooser:
        """The device choice on `row`: among the devices that can take a request, the one after
        which the node's F is smallest (with the pod's cpu and its devices so far), ties first."""
        lay = self.lay
        rows = np.array([row], dtype=np.int64)
        free = self.free_cpu(state)[rows] - cpu

        def choose(eligible: list[tuple[int, Any]], extra: dict[int, dict[str, int]]) -> int:
            idle = lay.idle(state.dra, self.sched.capacity)[rows].copy()
            name = self.sched.capacity
            for d, more in extra.items():
                pos = lay.col.get(d)
                if pos is not None and pos[0] == row:
                    idle[0, pos[1]] = max(0, idle[0, pos[1]] - more.get(name, 0)) if lay.shareable[pos] else 0
            base = int(self.f_rows(rows, idle, free)[0])
            best, best_i = None, 0
            for i, (d, amounts) in enumerate(eligible):
                pos = lay.col.get(d)
                f = base
                if pos is not None and pos[0] == row:
                    t = idle.copy()
                    used = dict(amounts or ()).get(name, 0)
                    t[0, pos[1]] = t[0, pos[1]] - used if amounts is not None else 0
                    f = int(self.f_rows(rows, t, free)[0])
                if best is None or f < best:
                    best, best_i = f, i
            return best_i
        return choose


def _col(nodes: Any, resource: str) -> int | None:
    try:
        return int(nodes.resource_names.index(resource))
    except ValueError:
        return None


def pod_requests(state: ClusterState, m: Measure, g: Group,
                 pod: int) -> tuple[Any, list[tuple[np.ndarray, int]], bool]:
    """The pod's own ExactCount requests of the measured class, as (need per GPU, count), and
    whether the layout says exactly where they fit."""
    reqs: list[tuple[np.ndarray, int]] = []
    key: list[Any] = []
    exact = True
    for use in cl.pod_uses(state.dra, g, pod):
        if use.sharing != cl.POD:
            exact = False
            continue
        for req in use.template.requests:
            if req.device_class == m.sched.device_class and not req.all:
                need, sure = m.pod_need(state, req)
                reqs.append((need, req.count))
                key.append((req.selectors, req.capacity, req.count))
                exact = exact and sure
            else:
                exact = False
    return tuple(key), reqs, exact


def measure_of(state: ClusterState, sched: Scheduler) -> Measure:
    shapes = sc.target_shapes(state, sched)
    m: Measure | None = getattr(state.dra, "fa_measure", None)
    lay_key = (state.dra.version, state.nodes.version, sched, shapes)
    if m is None or m.lay.key != lay_key:
        m = Measure(state, sched, shapes)
        state.dra.fa_measure = m  # type: ignore[attr-defined]  # a cache beside the device state
    return m


def place_run(state: ClusterState, g: Group, run: list[int], rows: np.ndarray, vec: np.ndarray,
              trial: Trial, placements: list[tuple[int, int]], sched: Scheduler) -> int | None:
    """Place the pods of one shape, each on its best row by the FragmentationAware order;
    returns the first pod that fits nowhere."""
    m = measure_of(state, sched)
    nodes = state.nodes
    lay = m.lay
    cpu_col = _col(state.nodes, CPU)
    cpu = int(vec[cpu_col]) if cpu_col is not None else 0
    rank = state.nodes.rank()
    for pod in run:
        nz = np.flatnonzero(vec)
        cand = rows[((nodes.alloc[rows][:, nz] - nodes.used[rows][:, nz]) >= vec[nz]).all(axis=1)] \
            if len(rows) else rows
        if not len(cand):
            return pod
        key, reqs, exact = pod_requests(state, m, g, pod)
        delta, ok, idle_total = m.deltas(state, (cpu, key), cpu, reqs, cand)
        if exact and reqs:  # rows where the pod's GPUs do not fit cannot take it
            cand, delta, idle_total = cand[ok], delta[ok], idle_total[ok]
        bands = sc.band(delta, lay.total_weight, sched.tolerance)
        order = np.lexsort((rank[cand], idle_total, bands))
        chosen = -1
        for i in order.tolist():
            row = int(cand[i])
            trial.ledger.chooser = m.chooser(state, row, cpu)
            try:
                fits = trial.ledger.try_pod(g, pod, row)
            finally:
                trial.ledger.chooser = None
            if fits:
                chosen = row
                break
        if chosen < 0:
            return pod
        trial.add(chosen, vec)
        placements.append((pod, chosen))
    return None
