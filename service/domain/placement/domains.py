"""Topology domains (model.md *Placing a group* step 5, composite.md *The tree routine* step 3):
which domains are candidates, per-shape capacity per domain, and the domain choice from those
sums without simulating each domain where that provably gives the same answer.

- `candidates`: the candidate domains of a key on the rows allowed (a pinned domain alone).
- `DomainFits` / `domain_fits`: for one pod shape and layout, how many such pods fit on each row
  and per domain, kept up to date from the rows usage changed on (NodeTable.touched).
- `uniform_domains`: the gang rule and the domain choice for identical pods without claims,
  from those sums (identical pods fill a domain to exactly min(count, sum of fits)).
- `pinned_rows`: the rows inside the domains pinned for a CPG and its ancestors.

The domain score itself and the choice rule are scores.py's (`domain_score_of`, `DomainChoice`).
"""
from __future__ import annotations

from typing import Any

import numpy as np

from service.domain import dra
from service.domain.nodes import filters
from service.domain.nodes.table import exact_reduceat
from service.domain.placement import scores as sc
from service.domain.state.cluster import ClusterState, Group, Workload


def base_mask(state: ClusterState, g: Group, shape: int) -> np.ndarray:
    """Rows a pod of this shape may use at all: every static row of the filter table passes."""
    return filters.static_mask(state.nodes, g.workload.spec.shapes[shape])


def candidates(layout: Any, restrict: np.ndarray | None, pinned: str | None) -> list[int]:
    """The candidate domains (indices into layout.values, ascending value): the pinned one alone
    when a domain is pinned; otherwise every domain with a row in `restrict` (None: every row)."""
    ids, values = layout.ids, layout.values
    if pinned is not None:
        return [values.index(pinned)] if pinned in values else []
    if restrict is None:
        return list(range(len(values)))  # every value has a live node
    return [int(d) for d in np.unique(ids[(ids >= 0) & restrict])]


def pinned_rows(state: ClusterState, wl: Workload, ci: int | None) -> np.ndarray | None:
    """The rows inside the domains pinned for CPG ci and its ancestors (None: no pin)."""
    allowed: np.ndarray | None = None
    while ci is not None:
        c = wl.composites[ci]
        key = c.spec.topology_key
        if key is not None and c.domain is not None:
            layout = state.nodes.layout(key)
            d = layout.values.index(c.domain) if c.domain in layout.values else -2
            rows = layout.ids == d
            allowed = rows if allowed is None else allowed & rows
        ci = c.spec.parent
    return allowed


def argmax_first(k: Any, candidates: list[int]) -> int:
    """The domain that holds the most pods; ties go to the smaller label value."""
    return min(candidates, key=lambda d: (-int(k[d]), d))


_FLOAT_EXACT = 2**53  # integers below it divide exactly enough in float64 (floor of the quotient)


def _fit_counts(layout: Any, used: np.ndarray, alloc: np.ndarray, cols: np.ndarray, vec: np.ndarray,
                most: int) -> np.ndarray:
    """How many pods of request `vec` fit on each row of `layout.order`, capped at `most`.

    Column by column in float64, which is ~3x faster than integer floor division and
    exact here: for a, b < 2**53, floor(fl(a / b)) == a // b; a free amount at or above
    2**53 (the unlimited `pods`) only matters when the quotient could be small, i.e.
    when b is huge, and such a column is divided in integers.
    """
    fit: np.ndarray | None = None
    for c in cols:
        v = int(vec[c])
        free = layout.alloc_column(alloc, c) - used[:, c]
        if v <= _FLOAT_EXACT // (most + 1):
            if v != 1:
                free = free / v
        elif layout.alloc_max(alloc, c) < _FLOAT_EXACT:
            free = free / v
        else:
            free = free // v
        fit = free.astype(np.float64) if fit is None else np.minimum(fit, free, out=fit)
    assert fit is not None
    np.clip(fit, 0, most, out=fit)
    return fit.astype(np.int64)


_FIT_CAP = 10_001  # above any group's pod count (a workload has at most 10,000 pods)
_FIT_CACHES = 16  # pod shapes followed per layout


class DomainFits:
    """For one pod shape and layout: how many such pods fit on each row (in layout order,
    eligibility applied, capped at _FIT_CAP, which leaves min(sum, pods) unchanged for every
    group), their sums per domain, and the usage sums per domain. A layout lives until the next
    node change; within its life only usage changes, and every writer of usage lists the rows
    it changed in NodeTable.touched (or bumps usage_epoch): only those rows are recomputed."""

    __slots__ = ("epoch", "seen", "snap", "eligible", "fit", "ksum", "usums")

    def __init__(self, epoch: int, seen: int, snap: np.ndarray, eligible: np.ndarray, fit: np.ndarray,
                 ksum: np.ndarray, usums: np.ndarray) -> None:
        self.epoch, self.seen, self.snap, self.eligible = epoch, seen, snap, eligible
        self.fit, self.ksum, self.usums = fit, ksum, usums


def domain_fits(state: ClusterState, g: Group, shape: int, layout: Any, vec: np.ndarray,
                 cols: np.ndarray) -> DomainFits:
    nodes = state.nodes
    touched = nodes.touched
    spec = g.workload.spec.shapes[shape]
    key = (vec.tobytes(), spec.node_selector, spec.tolerations, spec.required)  # what base_mask reads
    hit: DomainFits | None = layout.fits.get(key)
    # a new resource column, and every reset of `touched`, bumps the epoch
    if hit is None or hit.epoch != nodes.usage_epoch:
        if len(layout.fits) >= _FIT_CACHES:
            layout.fits.clear()
        used = np.take(nodes.used, layout.order, axis=0)
        eligible = base_mask(state, g, shape)[layout.order]
        fit = _fit_counts(layout, used, nodes.alloc, cols, vec, _FIT_CAP)
        fit[~eligible] = 0
        hit = layout.fits[key] = DomainFits(nodes.usage_epoch, len(touched), used, eligible, fit,
                                             np.add.reduceat(fit, layout.starts),
                                             exact_reduceat(used, layout.starts, _usage_bound(nodes, layout, used)))
        return hit
    if hit.seen < len(touched):
        rows = np.array(sorted(set(touched[hit.seen:])), dtype=np.int64)
        hit.seen = len(touched)
        pos = layout.position_of[rows]
        inside = pos >= 0  # rows outside the layout (no label, dead) count nowhere
        if not inside.all():
            rows, pos = rows[inside], pos[inside]
        if len(pos):
            now = np.take(nodes.used, rows, axis=0)
            # a few rows: exact integer floor division (the same counts _fit_counts gives)
            free = np.take(nodes.alloc, rows, axis=0)[:, cols] - now[:, cols]
            fit = (free // vec[cols]).min(axis=1)
            np.clip(fit, 0, _FIT_CAP, out=fit)
            fit[~hit.eligible[pos]] = 0
            dom = layout.domain_of[pos]
            np.add.at(hit.ksum, dom, fit - hit.fit[pos])
            np.add.at(hit.usums, dom, now - hit.snap[pos])
            hit.fit[pos] = fit
            hit.snap[pos] = now
    return hit


def _usage_bound(nodes: Any, layout: Any, used: np.ndarray) -> int:
    """What a row's usage may reach while the layout lives: placements keep it within the declared
    allocatable; a node replaced smaller keeps what it had (and drops the layout anyway)."""
    declared = np.where(nodes.declared[layout.order], nodes.alloc[layout.order], 0)
    return max(int(used.max()) if used.size else 0, int(declared.max()) if declared.size else 0)


def uniform_domains(state: ClusterState, g: Group, pods: list[int], need: int, layout: Any,
                     candidates: list[int], restrict: np.ndarray | None) -> tuple[int | None, Any] | None:
    """Domain choice without simulating each domain, for pods of one shape and no claims.

    Identical pods placed one by one fill a domain to exactly min(count, sum over its
    rows of how many fit there), so the gang rule and the domain score follow from
    per-domain sums (one reduceat over the rows in domain order). Returns (chosen domain
    or None, per-domain counts), or None when the group is not uniform (the caller
    simulates every domain).
    """
    if g.class_key is None or len(candidates) <= 1 or dra.group_needs_devices(g):
        return None
    shape = g.spec.pod_shapes[pods[0]]
    if any(g.spec.pod_shapes[p] != shape for p in pods):
        return None
    nodes = state.nodes
    vec = state.shape_vector(g.workload, shape)
    cols = np.flatnonzero(vec)
    order, starts = layout.order, layout.starts
    if not len(order):
        return None, np.zeros(0, dtype=np.int64)
    if restrict is None:
        fits = domain_fits(state, g, shape, layout, vec, cols)
        k, usums_all, used = np.minimum(fits.ksum, len(pods)), fits.usums, None
    else:  # a preemption simulation: rows taken away, nothing worth keeping
        used = np.take(nodes.used, order, axis=0)
        fit = _fit_counts(layout, used, nodes.alloc, cols, vec, len(pods))
        eligible = base_mask(state, g, shape)[order] & restrict[order]
        fit[~eligible] = 0
        k, usums_all = np.minimum(np.add.reduceat(fit, starts), len(pods)), None
    ok = (k >= need) & (k > 0)
    if len(candidates) == len(k):  # every domain (candidates are sorted and distinct)
        feasible = np.flatnonzero(ok).tolist()
    else:
        feasible = [d for d in candidates if ok[d]]
    if len(feasible) <= 1:
        return (feasible[0] if feasible else None), k
    # domain score: mean over requested resources of (used + k * request) / allocatable, domain sums
    requests = g.workload.spec.shapes[shape].requests
    if not requests:
        return feasible[0], k
    key = g.spec.topology_key
    assert key is not None
    rcols = [nodes.resources[r] for r, _ in requests]
    fidx = np.array(feasible)
    kf = k[fidx]
    # exact integers, per feasible domain and resource
    if usums_all is not None:
        usums = usums_all[:, rcols][fidx]
    else:
        assert used is not None  # gathered by the preemption simulation's branch
        usums = exact_reduceat(used[:, rcols], starts)[fidx]
    dens = []
    fl: Any = 0.0
    for j, (col, (_, q)) in enumerate(zip(rcols, requests)):
        a = nodes.domain_alloc_sums(key, col)[fidx]
        dens.append(a)
        fl = fl + np.where(a > 0, (usums[:, j] + kf * float(q)) / np.where(a > 0, a, 1), 0.0)
    top = float(fl.max())
    band = np.flatnonzero(fl >= sc.band_floor(top))  # indices into feasible, ascending
    if len(band) == 1:
        return feasible[int(band[0])], k
    # exact scores; domains with equal sums score equally (identical racks in an emptyish
    # cluster are scored once)
    amounts = [q for _, q in requests]
    r = len(amounts)
    rows = np.column_stack([usums, kf, *dens])[band].tolist()
    seen: dict[tuple[int, ...], Any] = {}
    choice = sc.DomainChoice()
    for i, row in zip(band.tolist(), rows):
        t = tuple(row)
        score = seen.get(t)
        if score is None:
            kk = t[r]
            score = seen[t] = sc.domain_score_of((u + kk * q for u, q in zip(t[:r], amounts)), t[r + 1:])
        choice.offer(i, score)  # band is ascending: ties keep the smaller label value
    assert choice.best is not None
    return feasible[choice.best], k


def uniform_count(state: ClusterState, g: Group, pods: list[int], need: int) -> tuple[int, int | None] | None:
    """What `attempt` would place, from per-domain sums alone, for a topology group of one
    shape without claims and no domain chosen yet: (pods placed, the domain chosen or None);
    None where that does not apply."""
    key = g.spec.topology_key
    if key is None or g.domain is not None:
        return None
    layout = state.nodes.layout(key)
    fast = uniform_domains(state, g, pods, need, layout, list(range(len(layout.values))), None)
    if fast is None:
        return None
    chosen, k = fast
    return (0 if chosen is None else int(k[chosen])), chosen


def uniform_domain_terms(state: ClusterState, g: Group, pods: list[int]) -> tuple[np.ndarray, Any]:
    """Per domain, for pods of one shape without claims: how many of them it would hold now,
    and a function giving one domain's domain-score numerators, one per requested resource
    (its usage summed plus that many pods' requests; the denominators never change)."""
    shape = g.spec.pod_shapes[pods[0]]
    assert g.spec.topology_key is not None
    nodes = state.nodes
    vec = state.shape_vector(g.workload, shape)
    fits = domain_fits(state, g, shape, nodes.layout(g.spec.topology_key), vec, np.flatnonzero(vec))
    k = np.minimum(fits.ksum, len(pods))
    requests = [(nodes.resources[r], q) for r, q in g.workload.spec.shapes[shape].requests]

    def numerators(d: int) -> list[int]:
        return [int(fits.usums[d, col]) + int(k[d]) * q for col, q in requests]

    return k, numerators

