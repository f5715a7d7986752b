"""The placement routine of model.md *Placing a group*.

`attempt(...)` answers "where would these pods of this group go, now?" without
changing the state for good: it places pods on a trial basis (so each pod sees
those placed before it) and undoes them before returning. The same routine serves
the scheduling pass and the preemption simulation (which first removes victims).

Scores are MostAllocated, screened with floats and decided exactly with
Fractions, so equal means are equal whatever their terms; ties go to the smaller
node name (its rank), and for topology to the smaller label value.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

import numpy as np

from service.domain import affinity as af
from service.domain import dra, explain_topology, filters, fragmentation, scoring
from service.domain.explain_topology import add_counts
from service.domain.model import PodShape
from service.domain.state import ClusterState, Group

_EPS = 1e-9



@dataclass
class Attempt:
    """The outcome of placing (some of) a group's pods."""
    placements: list[tuple[int, int]] = field(default_factory=list)  # (pod, node row)
    claims: list[dra.Allocation] = field(default_factory=list)
    domain: str | None = None
    placeable: int = 0
    need: int = 1
    failure: dict[str, Any] | None = None  # per-node reasons of the first pod that did not fit

    @property
    def ok(self) -> bool:
        return self.placeable >= self.need and self.placeable > 0


class Trial:
    """Usage added on a trial basis, undone by `rollback`."""

    def __init__(self, state: ClusterState) -> None:
        self.state = state
        self.rows: list[tuple[int, np.ndarray]] = []
        self.ledger = dra.Ledger(state.dra, state.nodes)

    def add(self, node: int, vec: np.ndarray) -> None:
        nodes = self.state.nodes
        nodes.used[node] += vec
        nodes.touched.append(node)
        self.rows.append((node, vec))

    def rollback(self) -> None:
        self.rollback_to((0, 0))

    def mark(self) -> tuple[int, int]:
        """Where the trial stands now: `rollback_to` it undoes only what came after."""
        return len(self.rows), len(self.ledger.new_allocations())

    def rollback_to(self, mark: tuple[int, int]) -> None:
        nodes = self.state.nodes
        used = nodes.used
        later = self.rows[mark[0]:]
        for node, vec in reversed(later):
            used[node] -= vec
        nodes.note_touched(node for node, _ in later)
        del self.rows[mark[0]:]
        self.ledger.rollback_to(mark[1])


# -- scoring ------------------------------------------------------------------------------
def _requested_cols(state: ClusterState, g: Group, shape: int) -> np.ndarray:
    cols = [state.nodes.resources[r] for r, _ in g.workload.spec.shapes[shape].requests]
    return np.array(cols, dtype=np.int64)


def _exact(num_row: np.ndarray, alloc_row: np.ndarray) -> Fraction:
    return sum((Fraction(int(u), int(a)) for u, a in zip(num_row, alloc_row) if a > 0), Fraction(0))


def _pick(state: ClusterState, rows: np.ndarray, scores: np.ndarray, cols: np.ndarray, vec: np.ndarray) -> int:
    """The best row: highest exact score, then smallest node name (O(rows), no sorting)."""
    top = scores.max()
    band = rows[scores >= top - _EPS * max(1.0, abs(top))]
    if len(band) == 1:
        return int(band[0])
    nodes = state.nodes
    used = np.take(nodes.used, band, axis=0)[:, cols]
    alloc = np.take(nodes.alloc, band, axis=0)[:, cols]
    if (used == used[0]).all() and (alloc == alloc[0]).all():
        # the common tie, equal rows (empty nodes, say): the smallest name, without the sort
        # _exact_order would do over thousands of rows
        return int(band[np.argmin(nodes.rank()[band])])
    return int(band[_exact_order(state, band, cols, vec)[0]])


def _exact_order(state: ClusterState, band: np.ndarray, cols: np.ndarray, vec: np.ndarray) -> np.ndarray:
    """The permutation of a band of near-equal float scores that puts it best first:
    exact score, then node name.

    Identical rows need none (they are in name order already: equal floats, then
    name). On equal allocatable the exact scores are integers over the least common
    multiple of the allocatables; otherwise Fractions.
    """
    nodes = state.nodes
    used = np.take(nodes.used, band, axis=0)[:, cols] + vec[cols]
    alloc = np.take(nodes.alloc, band, axis=0)[:, cols]
    rank = nodes.rank()[band]
    if (used == used[0]).all() and (alloc == alloc[0]).all():
        return np.argsort(rank, kind="stable")
    if (alloc == alloc[0]).all():
        a = [int(x) for x in alloc[0]]
        positive = [x for x in a if x > 0]
        lcm = math.lcm(*positive) if positive else 1
        if lcm * len(a) < 2**62 and (used <= alloc).all():
            weights = np.array([lcm // x if x > 0 else 0 for x in a], dtype=np.int64)
            exact = used @ weights  # the score times lcm, exactly
            return np.lexsort((rank, -exact))
    exact_f = [_exact(u, al) for u, al in zip(used, alloc)]
    return np.array(sorted(range(len(band)), key=lambda i: (-exact_f[i], rank[i])), dtype=np.int64)


def _row_fits(state: ClusterState, row: int, vec: np.ndarray) -> bool:
    nodes = state.nodes
    return bool(np.all(nodes.alloc[row] - nodes.used[row] >= vec))


# -- the routine --------------------------------------------------------------------------
def base_mask(state: ClusterState, g: Group, shape: int) -> np.ndarray:
    """Rows a pod of this shape may use at all: every static row of the filter table passes."""
    return filters.static_mask(state.nodes, g.workload.spec.shapes[shape])


def place_in(state: ClusterState, g: Group, pods: list[int], allowed: np.ndarray | None,
             trial: Trial, explain: bool) -> tuple[list[tuple[int, int]], dict[str, Any] | None]:
    """Place pods one by one, in order, each on its best feasible row (trial usage).

    Returns the placements and, when `explain`, the per-node reasons of the first pod
    that did not fit. A pod that does not fit is skipped; a later pod of another shape
    may still fit. Consecutive pods of one shape keep going to the last row chosen
    while it still fits: its score only grew and nothing else changed, so it stays best.
    """
    placements: list[tuple[int, int]] = []
    failure: dict[str, Any] | None = None
    wl = g.workload
    i = 0
    while i < len(pods):
        shape = g.spec.pod_shapes[pods[i]]
        run_end = i
        while run_end < len(pods) and g.spec.pod_shapes[pods[run_end]] == shape:
            run_end += 1
        vec = state.shape_vector(wl, shape)
        mask = base_mask(state, g, shape)
        if allowed is not None:
            mask = mask & allowed
        cols = _requested_cols(state, g, shape)
        rows, scores = _fitting_rows(state, np.flatnonzero(mask), cols, vec)
        devices = dra.pod_needs_devices(g, pods[i])
        run = pods[i:run_end]
        failed: int | None = None
        strategy = scoring.strategy_of(state)
        for tier_rows, tier_scores in _tiers(state, wl.spec.shapes[shape], rows, scores):
            if strategy is not None:  # the scheduler configuration's node order (sharing.md)
                failed = fragmentation.place_run(state, g, run, tier_rows, vec, trial, placements, strategy)
            elif devices:
                failed = _place_run_devices(state, g, run, tier_rows, tier_scores, cols, vec, trial, placements)
            else:
                failed = _place_run(state, run, tier_rows, tier_scores, cols, vec, trial, placements)
            if failed is None:
                break
            run = run[run.index(failed):]  # the pods after it were not tried: on to the next tier
        if failed is not None and explain and failure is None:
            failure = explain_pod(state, g, failed, allowed, trial)
        i = run_end
    return placements, failure


def _tiers(state: ClusterState, shape: PodShape, rows: np.ndarray,
           scores: np.ndarray) -> list[tuple[np.ndarray, np.ndarray]]:
    """The feasible rows split by model.md *Placing a group* step 2's first two keys (preferred
    weights, then untolerated PreferNoSchedule taints: one exact integer, affinity.order_key),
    best first; the score orders each tier. Pods of one shape fill a tier before the next: a row
    only fills up, so a tier that cannot take a pod never takes a later one of the run. Without
    preferred terms or PreferNoSchedule taints, one tier: the score alone, as before."""
    order = af.order_key(state.nodes, shape)
    if order is None or not len(rows):
        return [(rows, scores)]
    keys = order[rows]
    levels = np.unique(keys)
    if len(levels) == 1:
        return [(rows, scores)]
    return [(rows[keys == level], scores[keys == level]) for level in levels[::-1]]


def _fitting_rows(state: ClusterState, rows: np.ndarray, cols: np.ndarray,
                  vec: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The rows with room for one pod of `vec`, and their float scores: the sum over the
    requested columns of (used + request) / allocatable (for screening; exact ties are
    settled with Fractions). Column by column in one fixed order, so that identical rows
    get identical floats; allocatables (and their inverses) come from a per-column cache,
    and when every row is wanted nothing is gathered at all."""
    if not len(rows):
        return rows, np.zeros(0)
    nodes = state.nodes
    everything = len(rows) == nodes.count  # rows is then arange(count)
    used = nodes.used[: nodes.count] if everything else np.take(nodes.used, rows, axis=0)
    ok = np.ones(len(rows), dtype=bool)
    for c in np.flatnonzero(vec):
        a = nodes.alloc_column(int(c))[0]
        ok &= (a if everything else a[rows]) - used[:, c] >= vec[c]
    scores = np.zeros(len(rows))
    for c in cols:
        inv = nodes.alloc_column(c)[1]
        scores += (used[:, c] + vec[c]) * (inv if everything else inv[rows])
    return rows[ok], scores[ok]


def _place_run(state: ClusterState, run: list[int], rows: np.ndarray, scores: np.ndarray, cols: np.ndarray,
               vec: np.ndarray, trial: Trial, placements: list[tuple[int, int]]) -> int | None:
    """Place identical pods that need no devices; returns the first pod that fits nowhere.

    Only the rows chosen here change during the run, and a chosen row keeps every pod it
    can take before the next row is chosen (its score only grows). So the rows are
    ranked once, by float score then node name, and walked in that order; a band of
    near-equal floats is put in exact order once (`_exact_order`).
    """
    nodes = state.nodes
    if len(run) <= 4:
        return _place_few(state, run, rows, scores, cols, vec, trial, placements)
    rank = nodes.rank()
    order = np.lexsort((rank[rows], -scores))
    rows, scores = rows[order], scores[order]  # scores stay aligned with rows
    neg = -scores  # ascending, never reordered: counts the rows above a threshold
    nz = np.flatnonzero(vec)
    p = -1  # position in `rows` of the row in use; rows[:p] are used up
    room = 0  # further pods it takes
    settled = 0  # rows[p:settled] are in exact order, and the rows after them score lower
    for pod in run:
        if room <= 0:
            p += 1
            if p >= len(rows):
                return pod
            if p + 1 < len(rows) and p + 1 >= settled:
                # the band: rows within float noise of the best remaining float score; the
                # used-up rows all score above it, so they are the first p counted by neg
                top = scores[p:max(settled, p + 1)].max()
                q = int(np.searchsorted(neg, -(top - _EPS * max(1.0, abs(top))), side="right"))
                if q > settled and q - p > 1:
                    perm = _exact_order(state, rows[p:q], cols, vec)
                    rows[p:q], scores[p:q] = rows[p:q][perm], scores[p:q][perm]
                settled = max(settled, q)
            chosen = int(rows[p])
            free = nodes.alloc[chosen, nz] - nodes.used[chosen, nz]
            room = int((free // vec[nz]).min())  # >= 1: the rows were filtered by fit
        room -= 1
        trial.add(int(rows[p]), vec)
        placements.append((pod, int(rows[p])))
    return None


def _place_few(state: ClusterState, run: list[int], rows: np.ndarray, scores: np.ndarray, cols: np.ndarray,
               vec: np.ndarray, trial: Trial, placements: list[tuple[int, int]]) -> int | None:
    """_place_run for a few pods: pick each new row in O(rows) instead of ranking them all
    (ranking thousands of equal, empty nodes costs more than the whole rest)."""
    nodes = state.nodes
    nz = np.flatnonzero(vec)
    last, room = -1, 0
    for pod in run:
        if room <= 0:
            if last >= 0:  # full: drop it; nothing else changed
                keep = rows != last
                rows, scores = rows[keep], scores[keep]
            if not len(rows):
                return pod
            last = _pick(state, rows, scores, cols, vec)
            free = nodes.alloc[last, nz] - nodes.used[last, nz]
            room = int((free // vec[nz]).min())
        room -= 1
        trial.add(last, vec)
        placements.append((pod, last))
    return None


def _place_run_devices(state: ClusterState, g: Group, run: list[int], rows: np.ndarray, scores: np.ndarray,
                       cols: np.ndarray, vec: np.ndarray, trial: Trial,
                       placements: list[tuple[int, int]]) -> int | None:
    """Place identical pods with device claims: each row is also checked against the devices.

    As _place_run: only the rows chosen here change, so the rows are ranked once and
    walked; a row whose devices cannot serve the pod is dropped for the rest of the run
    (its devices only get fewer), and when a shared claim gets allocated the rows that
    cannot reach its devices are dropped too."""
    ledger = trial.ledger
    shared_seen = ledger.shared_made
    if len(rows):
        keep = ledger.viable(g, run[0], rows)  # enough free devices, shared claims in reach
        rows, scores = rows[keep], scores[keep]
    order = np.lexsort((state.nodes.rank()[rows], -scores))
    rows, scores = rows[order], scores[order]
    p = 0  # rows[:p] are used up or dropped
    settled = 0  # rows[p:settled] are in exact order, and the rows after them score lower
    last = -1
    for pod in run:
        if last >= 0 and _row_fits(state, last, vec) and ledger.try_pod(g, pod, last):
            chosen = last
        else:
            if last >= 0:
                p += 1  # drop the filled row: only it changed
            chosen = -1
            while p < len(rows):
                if p + 1 < len(rows) and p + 1 >= settled:
                    top = scores[p:max(settled, p + 1)].max()
                    tol = top - _EPS * max(1.0, abs(top))
                    below = np.flatnonzero(scores[p + 1:] < tol)
                    q = p + 1 + int(below[0]) if len(below) else len(rows)
                    if q > settled and q - p > 1:
                        perm = _exact_order(state, rows[p:q], cols, vec)
                        rows[p:q], scores[p:q] = rows[p:q][perm], scores[p:q][perm]
                    settled = max(settled, q)
                cand = int(rows[p])
                if _row_fits(state, cand, vec) and ledger.try_pod(g, pod, cand):
                    chosen = cand
                    break
                p += 1
                if ledger.shared_made != shared_seen:  # a shared claim now pins the reach
                    keep = ledger.viable(g, pod, rows[p:])
                    rows = np.concatenate([rows[:p], rows[p:][keep]])
                    scores = np.concatenate([scores[:p], scores[p:][keep]])
                    settled = p  # the order past p is the float order again, unsettled
                    shared_seen = ledger.shared_made
        if chosen < 0:
            return pod
        trial.add(chosen, vec)
        placements.append((pod, chosen))
        last = chosen  # its score only grew: no rescoring needed while it fits
    return None


def explain_pod(state: ClusterState, g: Group, pod: int, allowed: np.ndarray | None,
                trial: Trial) -> dict[str, Any]:
    """Per-node reasons why this pod fits nowhere, as kube-scheduler's filters say them."""
    shape = g.spec.pod_shapes[pod]
    needs = dra.pod_needs_devices(g, pod)
    check = filters.Pod(state.nodes, g.workload.spec.shapes[shape], state.shape_vector(g.workload, shape),
                        allowed, needs)
    live = state.nodes.live_indices()
    if allowed is None:
        counts, seen = filters.explain(check, live)
        inside = counts
    else:
        # the nodes `allowed` admits apart (counts over disjoint rows add up): when every topology
        # domain fails, each domain's own nodes are counted from its own try (explain_topology)
        inside, seen = filters.explain(check, live[allowed[live]])
        counts = add_counts(dict(inside), filters.explain(check, live[~allowed[live]])[0])
    short = seen[filters.DEVICES_ROW.name]
    detail = dra.explain_pod(trial.ledger, g, pod, short) if needs and len(short) else None
    return {"nodes": int(len(live)), "counts": counts, "devices": detail, "pod": pod, "inside": inside}


def explanation(failure: dict[str, Any] | None, placeable: int, min_count: int,
                total_nodes: int, gang: tuple[int, int] | None = None) -> dict[str, Any]:
    """The recorded explanation: Kubernetes' message plus structured reasons. For a gang, `gang` is
    (pods placed or placeable, pods of the group): the message then ends with the count against
    minCount, as Kueue and Volcano users read it (docs/design.md)."""
    counts = failure["counts"] if failure else {}
    nodes = failure["nodes"] if failure else total_nodes
    items = sorted(f"{v} {k}" for k, v in counts.items())
    message = f"0/{nodes} nodes are available"
    message += (": " + ", ".join(items) + ".") if items else "."
    if gang is not None:
        message += f" {gang[0]}/{gang[1]} pods of the gang fit, minCount {min_count}."
    reasons = sorted(({"reason": k, "nodes": v} for k, v in counts.items()),
                     key=lambda r: f"{r['nodes']} {r['reason']}")
    out: dict[str, Any] = {"message": message, "reasons": reasons, "placeablePods": placeable,
                           "minCount": min_count, "preemption": None}
    if failure and failure.get("devices"):
        out["devices"] = failure["devices"]
    return out


def _domain_score(state: ClusterState, g: Group, in_domain: np.ndarray,
                  placements: list[tuple[int, int]]) -> Fraction:
    """Mean over requested resources of (used + the group's new pods) / allocatable, summed over the domain."""
    nodes = state.nodes
    requested: dict[str, int] = {}
    for r, _ in g.workload.spec.shapes[g.spec.pod_shapes[placements[0][0]]].requests:
        requested.setdefault(r, 0)
    for pod, _ in placements:
        for r, q in g.workload.spec.shapes[g.spec.pod_shapes[pod]].requests:
            requested[r] = requested.get(r, 0) + q
    if not requested:
        return Fraction(0)
    rows = np.flatnonzero(in_domain)
    total = Fraction(0)
    for r, add in requested.items():
        col = nodes.resources[r]
        alloc = int(nodes.alloc[rows, col][nodes.declared[rows, col]].sum())  # declared only (pods may be unlimited)
        if alloc > 0:
            total += Fraction(int(nodes.used[rows, col].sum()) + add, alloc)
    return total / len(requested)


def _argmax_first(k: Any, candidates: list[int]) -> int:
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


class _DomainFits:
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


def _domain_fits(state: ClusterState, g: Group, shape: int, layout: Any, vec: np.ndarray,
                 cols: np.ndarray) -> _DomainFits:
    nodes = state.nodes
    touched = nodes.touched
    spec = g.workload.spec.shapes[shape]
    key = (vec.tobytes(), spec.node_selector, spec.tolerations, spec.required)  # what base_mask reads
    hit: _DomainFits | None = layout.fits.get(key)
    # a new resource column, and every reset of `touched`, bumps the epoch
    if hit is None or hit.epoch != nodes.usage_epoch:
        if len(layout.fits) >= _FIT_CACHES:
            layout.fits.clear()
        used = np.take(nodes.used, layout.order, axis=0)
        eligible = base_mask(state, g, shape)[layout.order]
        fit = _fit_counts(layout, used, nodes.alloc, cols, vec, _FIT_CAP)
        fit[~eligible] = 0
        hit = layout.fits[key] = _DomainFits(nodes.usage_epoch, len(touched), used, eligible, fit,
                                             np.add.reduceat(fit, layout.starts),
                                             np.add.reduceat(used, layout.starts))
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


def _uniform_domains(state: ClusterState, g: Group, pods: list[int], need: int, layout: Any,
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
        fits = _domain_fits(state, g, shape, layout, vec, cols)
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
        usums = np.add.reduceat(used[:, rcols], starts)[fidx]
    dens = []
    fl: Any = 0.0
    for j, (col, (_, q)) in enumerate(zip(rcols, requests)):
        a = nodes.domain_alloc_sums(key, col)[fidx]
        dens.append(a)
        fl = fl + np.where(a > 0, (usums[:, j] + kf * float(q)) / np.where(a > 0, a, 1), 0.0)
    top = float(fl.max())
    band = np.flatnonzero(fl >= top - _EPS * max(1.0, abs(top)))  # indices into feasible, ascending
    if len(band) == 1:
        return feasible[int(band[0])], k
    # exact scores (Python integers); domains with equal sums score equally (identical racks
    # in an emptyish cluster are scored once)
    amounts = [q for _, q in requests]
    rows = np.column_stack([usums, kf, *dens])[band].tolist()
    scores: dict[tuple[int, ...], Fraction] = {}
    best_i, best = -1, Fraction(-1)
    for i, row in zip(band.tolist(), rows):
        t = tuple(row)
        score = scores.get(t)
        if score is None:
            r, kk = len(amounts), t[len(amounts)]
            score = scores[t] = sum((Fraction(u + kk * q, a) for u, q, a in zip(t[:r], amounts, t[r + 1:])
                                     if a > 0), Fraction(0))
        if score > best:  # strictly: ties keep the smaller label value (earlier index)
            best_i, best = i, score
    return feasible[best_i], k


def uniform_count(state: ClusterState, g: Group, pods: list[int], need: int) -> tuple[int, int | None] | None:
    """What `attempt` would place, from per-domain sums alone, for a topology group of one
    shape without claims and no domain chosen yet: (pods placed, the domain chosen or None);
    None where that does not apply."""
    key = g.spec.topology_key
    if key is None or g.domain is not None:
        return None
    layout = state.nodes.layout(key)
    fast = _uniform_domains(state, g, pods, need, layout, list(range(len(layout.values))), None)
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
    fits = _domain_fits(state, g, shape, nodes.layout(g.spec.topology_key), vec, np.flatnonzero(vec))
    k = np.minimum(fits.ksum, len(pods))
    requests = [(nodes.resources[r], q) for r, q in g.workload.spec.shapes[shape].requests]

    def numerators(d: int) -> list[int]:
        return [int(fits.usums[d, col]) + int(k[d]) * q for col, q in requests]

    return k, numerators


def attempt(state: ClusterState, g: Group, pods: list[int], need: int, *,
            restrict: np.ndarray | None = None, explain: bool = True,
            keep_trial: Trial | None = None) -> Attempt:
    """Where these pods would go now: the gang rule (at least `need`), topology, devices.

    `restrict` limits the rows considered (the preemption search uses it to simulate only
    the domains that can be feasible). With `keep_trial`, the chosen placement's usage stays
    applied on that trial (the caller rolls it back); otherwise nothing is left changed.
    """
    key = g.spec.topology_key
    if key is None:
        trial = keep_trial or Trial(state)
        mark = trial.mark()  # a kept trial may hold other groups' pods (a tree: composite.py)
        placements, failure = place_in(state, g, pods, restrict, trial, explain)
        result = Attempt(placements=placements, placeable=len(placements), need=need, failure=failure,
                         claims=trial.ledger.new_allocations()[mark[1]:])
        if keep_trial is None or not result.ok:
            trial.rollback_to(mark)
        return result

    layout = state.nodes.layout(key)
    ids, values = layout.ids, layout.values
    if g.domain is not None:
        candidates = [values.index(g.domain)] if g.domain in values else []
    elif restrict is None:
        candidates = list(range(len(values)))  # every value has a live node
    else:
        candidates = [int(d) for d in np.unique(ids[(ids >= 0) & restrict])]
    fast = _uniform_domains(state, g, pods, need, layout, candidates, restrict)
    if fast is not None:
        chosen_d, k = fast
        if chosen_d is None:
            widest = _argmax_first(k, candidates)  # the domain that could hold the most
            if not explain:
                return Attempt(need=need, placeable=int(k[widest]))
            return Attempt(need=need, placeable=int(k[widest]), domain=values[widest],
                           failure=explain_topology.uniform_failure(state, g, pods[0], ids, candidates, restrict))
        else:
            candidates = [chosen_d]
    best: tuple[Fraction, int] | None = None
    best_attempt: Attempt | None = None
    fallback: Attempt | None = None  # the domain that placed most, for the explanation
    tried: list[tuple[np.ndarray, dict[str, Any]]] = []  # (allowed, failure) of each failed domain
    for d in candidates:
        in_domain = ids == d
        allowed = in_domain if restrict is None else in_domain & restrict
        trial = Trial(state)
        placements, failure = place_in(state, g, pods, allowed, trial, explain)
        res = Attempt(placements=placements, placeable=len(placements), need=need, failure=failure,
                      claims=trial.ledger.new_allocations(), domain=values[d])
        if res.ok:
            score = _domain_score(state, g, in_domain, placements) \
                if placements and len(candidates) > 1 else Fraction(0)
            trial.rollback()
            # highest score wins; ties go to the smaller label value (earlier d)
            if best is None or score > best[0]:
                best, best_attempt = (score, d), res
        else:
            trial.rollback()
            if failure is not None:
                tried.append((allowed, failure))
            if fallback is None or res.placeable > fallback.placeable:
                fallback = res
    if best_attempt is None:
        result = fallback or Attempt(need=need)
        result.placeable = result.placeable if fallback else 0
        if explain:
            first = result.failure
            result.failure = explain_topology.every_domain_failed(state, g, first["pod"] if first else pods[0],
                                                                  tried, first)
        result.placements = []
        return result
    if keep_trial is not None:
        # re-apply the winner on the caller's trial
        assert best_attempt.domain is not None  # a domain was chosen
        d = values.index(best_attempt.domain)
        allowed = (ids == d) if restrict is None else (ids == d) & restrict
        mark = keep_trial.mark()
        placements, _ = place_in(state, g, pods, allowed, keep_trial, False)
        best_attempt.placements = placements
        best_attempt.claims = keep_trial.ledger.new_allocations()[mark[1]:]
    return best_attempt
