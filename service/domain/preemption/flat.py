"""Workload-aware preemption (model.md *Preemption*).

Simulate with every lower-priority candidate removed; if that cannot place what
the preemptor needs, evict nothing. Otherwise remove victim units least important
first until the placement routine places as many pods as it did with everything
removed, then reprieve the removed units most important first.

Cost (none of it changes a decision; tests/domain/test_preemption_properties.py
compares the decisions with tests/domain/reference_preemption.py, the
straightforward implementation):
- the candidate units, least important first, are kept per state in `_Order` and
  brought up to date from the groups whose placements changed (one `np.lexsort`);
- removing a prefix of them is one `bincount` over their usage entries;
- the first sufficient prefix is found by a binary search on an upper bound of
  what the placement routine would place, computed by arithmetic (`_UniformCount`
  per run of pods of one shape, per domain with topology), which only grows with the
  prefix; for pods of one shape that need no devices and no domain choice the bound
  is exact, otherwise the prefixes from there are walked one by one, running the
  routine only after a unit that could change its answer;
- the reprieve follows only the preemptor's nodes (in the columns it requests), in a
  small local copy: any other unit leaves them alone, so it fits (devices permitting).
"""
from __future__ import annotations

import weakref
from typing import Any, cast

import numpy as np

from service.domain import dra
from service.domain.model import reasons as rs
from service.domain.placement import routine as pl
from service.domain.preemption import search
from service.domain.preemption import victims as vu
from service.domain.preemption.victims import NO_VICTIMS, NOT_ALLOWED, WOULD_NOT_HELP, Plan, Refusal, Unit, Victim
from service.domain.state.cluster import ClusterState, Composite, Group

# the shared seam (victims.py): units, plans and reasons; re-exported here
__all__ = ["NOT_ALLOWED", "NO_VICTIMS", "WOULD_NOT_HELP", "Plan", "Refusal", "Unit", "Victim", "candidate_units",
           "plan", "plan_root", "victim_why"]


# -- candidate units ------------------------------------------------------------------------
def _snap(g: Group) -> list[Any]:
    """What a group's units are made of: its placements, and its Succeeded pods and minCount (a
    report or a scale can change its surplus without moving a pod)."""
    return [*g.placed_at, (g.succeeded, g.spec.min_count)]


_UNIT_FIELDS = ("prio", "single", "npods", "e_pos", "e_idx", "gid", "j", "nent")


def _removal_order(cols: dict[str, np.ndarray]) -> np.ndarray:
    """Least important first: lower priority, single pods before whole groups, fewer pods,
    placed later (the reverse of the reprieve's most-important-first order).

    Two int64 keys instead of five when the values allow (a cheaper `lexsort`):
    (priority, single, pods) and (placed_at position, index)."""
    prio, single, npods, e_pos, e_idx = (cols[n] for n in ("prio", "single", "npods", "e_pos", "e_idx"))
    if len(prio) and (int(prio.min()) >= -(2**31) and int(prio.max()) < 2**31 and int(npods.max()) < 2**14
                      and int(e_pos.max()) < 2**47 and int(e_idx.max()) < 2**14):
        k1 = ((prio + 2**31) << 15) | ((1 - single) << 14) | npods
        k2 = (e_pos << 14) | e_idx
        return np.lexsort((-k2, k1))
    return np.lexsort((-e_idx, -e_pos, npods, -single, prio))


class _Order:
    """Every unit of the running groups, least important first.

    Unit u (in that order) is pods `parts[gid[u]][j[u]]` of group `groups[gid[u]]`; its
    usage entries are `flat[starts[u]:ends[u]]` / `vals[...]`, on node rows `rows[...]`.
    Units sort by priority first, so the candidates below a priority are a prefix.
    Importance keys are unique (a unit's earliest `placed_at` is one of its own pods',
    and `placed_at` is unique per placed pod), so the order has no ties to break.

    Kept per state and brought up to date by `sync` from the state's journal of moves
    (`ClusterState.moves`): only groups whose placements changed since are taken out
    and put in again. A group keeps its `gid` while it is in.
    """

    def __init__(self, width: int) -> None:
        self.width = width
        self.cursor: int | None = None  # moves of the state's journal already applied
        self.groups: list[Group | None] = []  # per gid; None once out
        self.parts: list[list[list[int]] | None] = []  # per gid: its units' pods
        self.snaps: list[list[Any] | None] = []  # per gid: its placed_at when it came in
        self.by_key: dict[tuple[int, int, int], int] = {}  # running key -> gid, the groups in
        self.tree_keys: set[tuple[int, int, int]] = set()  # running keys of trees' pod groups (not units here)
        self.live = np.zeros(0, dtype=bool)  # per gid: in
        self.entries: dict[tuple[int, int], tuple[list[int], list[int]]] = {}  # (workload, shape) -> cols, amounts
        z = np.zeros(0, dtype=np.int64)
        # per unit, in removal order (_UNIT_FIELDS, set together by name)
        self.prio = self.single = self.npods = self.e_pos = self.e_idx = self.gid = self.j = self.nent = z
        self.whole = np.zeros(0, dtype=bool)
        self.flat = self.vals = self.rows = self.starts = self.ends = z

    def sync(self, state: ClusterState) -> None:
        """Make the units those of the state's running groups now."""
        moves = state.__dict__.get("moves")
        dropped = state.moves_dropped
        if moves is not None and self.cursor is not None and self.cursor >= dropped:
            new = moves[self.cursor - dropped:]
            self.cursor = dropped + len(moves)
            if not new:
                return
            changed = sorted(set(new))
        else:  # first sync, or the journal dropped moves not applied yet: compare every group
            running = state.running
            snaps = self.snaps
            changed = [key for key, g in running.items()
                       if (gid := self.by_key.get(key)) is None or snaps[gid] != _snap(g)]
            changed.extend(key for key in self.by_key if key not in running)
            changed.sort()
            self.cursor = None if moves is None else dropped + len(moves)
            self.tree_keys = {key for key, g in running.items() if g.spec.parent is not None}
        out: list[int] = []
        fresh: list[Group] = []
        running = state.running
        for key in changed:
            gid = self.by_key.pop(key, None)
            if gid is not None:
                out.append(gid)
                self.groups[gid] = self.parts[gid] = self.snaps[gid] = None
            g = running.get(key)
            if g is not None and g.spec.parent is not None:  # a tree's: its units span groups
                self.tree_keys.add(key)
            else:
                self.tree_keys.discard(key)
                if g is not None:
                    fresh.append(g)
        self.live[out] = False
        keep = self.live[self.gid]
        if fresh:
            new_units = self._units(state, fresh)
            self.live = np.concatenate([self.live, np.ones(len(fresh), dtype=bool)])
        elif keep.all():
            return
        cols = {name: getattr(self, name)[keep] for name in _UNIT_FIELDS}
        ent_keep = np.repeat(keep, self.nent)
        flat_a, vals_a = self.flat[ent_keep], self.vals[ent_keep]
        if fresh:
            new_cols, new_flat, new_vals = new_units
            cols = {name: np.concatenate([cols[name], new_cols[name]]) for name in _UNIT_FIELDS}
            flat_a, vals_a = np.concatenate([flat_a, new_flat]), np.concatenate([vals_a, new_vals])
            nent = cols["nent"]
            order = _removal_order(cols)
            cols = {name: a[order] for name, a in cols.items()}
            lens = cols["nent"]
            ends = np.cumsum(lens)
            ent_start = np.cumsum(nent) - nent  # each unit's entries before sorting
            total = int(ends[-1]) if len(ends) else 0
            perm = np.repeat(ent_start[order] - (ends - lens), lens) + np.arange(total, dtype=np.int64)
            flat_a, vals_a = flat_a[perm], vals_a[perm]
        for name in _UNIT_FIELDS:
            setattr(self, name, cols[name])
        self.whole = self.single == 0
        self.ends = np.cumsum(self.nent)
        self.starts = self.ends - self.nent
        self.flat, self.vals = flat_a, vals_a
        self.rows = flat_a // self.width
        if len(self.groups) > 2 * len(self.by_key) + 64:
            self._compact()

    def _units(self, state: ClusterState, fresh: list[Group]) -> tuple[dict[str, np.ndarray], np.ndarray, np.ndarray]:
        """The victim units of these groups (model.md *Preemption* step 1), given gids from
        `len(groups)` on: their columns, and their pods' usage entries unit by unit."""
        width = self.width
        entries = self.entries
        cols: dict[str, list[int]] = {name: [] for name in _UNIT_FIELDS}
        prio_l, single_l, npods_l = cols["prio"], cols["single"], cols["npods"]
        e_pos_l, e_idx_l, gid_l, j_l, nent_l = cols["e_pos"], cols["e_idx"], cols["gid"], cols["j"], cols["nent"]
        flat: list[int] = []
        vals: list[int] = []
        for g in fresh:
            spec = g.spec
            wl = g.workload
            wpos = wl.position
            node_of, placed_at, pod_shapes = g.node_of, g.placed_at, spec.pod_shapes
            placed = [i for i, n in enumerate(node_of) if n >= 0]
            whole = vu.group_is_whole(g)
            gid = len(self.groups)
            self.by_key[g.running_key] = gid
            self.groups.append(g)
            self.parts.append([placed] if whole else [[p] for p in placed])
            self.snaps.append(_snap(g))
            start = len(flat)
            for p in placed:
                shape = pod_shapes[p]
                hit = entries.get((wpos, shape))
                if hit is None:
                    vec = state.shape_vector(wl, shape)
                    nz = np.flatnonzero(vec)
                    hit = entries[(wpos, shape)] = (nz.tolist(), vec[nz].tolist())
                base = node_of[p] * width
                flat.extend([base + c for c in hit[0]])
                vals.extend(hit[1])
                if not whole:
                    at = placed_at[p]
                    assert at is not None  # a placed pod
                    e_pos_l.append(at[0])
                    e_idx_l.append(at[1])
                    nent_l.append(len(hit[0]))
            k = 1 if whole else len(placed)
            if whole:
                first = min(at for p in placed if (at := placed_at[p]) is not None)  # every one is
                e_pos_l.append(first[0])
                e_idx_l.append(first[1])
                nent_l.append(len(flat) - start)
            prio_l.extend([wl.spec.priority] * k)
            single_l.extend([0 if whole else 1] * k)
            npods_l.extend([len(placed)] * k if whole else [1] * k)
            gid_l.extend([gid] * k)
            j_l.extend(range(k))
        arrays = {name: np.array(v, dtype=np.int64) for name, v in cols.items()}
        return arrays, np.array(flat, dtype=np.int64), np.array(vals, dtype=np.int64)

    def _compact(self) -> None:
        """Renumber the groups in 0.. (gids of groups out are dropped)."""
        kept = np.flatnonzero(self.live)
        remap = np.full(len(self.groups), -1, dtype=np.int64)
        remap[kept] = np.arange(len(kept), dtype=np.int64)
        idx = kept.tolist()
        self.groups = [self.groups[i] for i in idx]
        self.parts = [self.parts[i] for i in idx]
        self.snaps = [self.snaps[i] for i in idx]
        self.by_key = {g.running_key: i for i, g in enumerate(self.groups) if g is not None}  # all are
        self.live = np.ones(len(kept), dtype=bool)
        self.gid = remap[self.gid]


# Kept by the ClusterState object itself: nothing in the state (pickled for snapshots)
# holds it, and it goes with its state.
_ORDERS: weakref.WeakKeyDictionary[ClusterState, _Order] = weakref.WeakKeyDictionary()


class _Candidates:
    """The candidate units for a preemptor of this priority, least important first:
    a prefix of the state's `_Order`."""

    def __init__(self, state: ClusterState, priority: int) -> None:
        width = len(state.nodes.resource_names)
        order = _ORDERS.get(state)
        if order is None or order.width != width:
            order = _ORDERS[state] = _Order(width)
        order.sync(state)
        n = int(np.searchsorted(order.prio, priority, side="left"))
        self.count = n
        self.trees = sorted({key[1] for key in order.tree_keys if key[0] < priority})  # their positions
        self.groups, self.parts = order.groups, order.parts
        self.gid, self.j, self.whole = order.gid[:n], order.j[:n], order.whole[:n]
        self.starts, self.ends = order.starts[:n], order.ends[:n]
        e = int(self.ends[-1]) if n else 0
        self.flat, self.vals, self.rows = order.flat[:e], order.vals[:e], order.rows[:e]

    def unit(self, u: int) -> Unit:
        gid = int(self.gid[u])
        g, parts = self.groups[gid], self.parts[gid]
        assert g is not None and parts is not None  # a candidate's group is in
        return Unit.of(g, parts[int(self.j[u])], bool(self.whole[u]))

    def touching(self, row_mask: np.ndarray, upto: int | None = None) -> np.ndarray:
        """Per unit (of the first `upto`): has it a pod on a row of the mask?"""
        upto = self.count if upto is None else upto
        if upto == 0:
            return np.zeros(0, dtype=bool)
        end = int(self.ends[upto - 1])
        return np.logical_or.reduceat(row_mask[self.rows[:end]], self.starts[:upto])


def _all(state: ClusterState, cand: _Candidates) -> list[Unit]:
    units = [cand.unit(u) for u in range(cand.count)]
    if cand.trees:
        for pos in cand.trees:
            units.extend(vu.tree_units(state.by_position[pos]))
        units.sort(key=lambda u: u.importance, reverse=True)
    return units


def candidate_units(state: ClusterState, priority: int) -> list[Unit]:
    """Every candidate unit below this priority (flat groups' and trees'), least important first."""
    return _all(state, _Candidates(state, priority))


def plan_root(state: ClusterState, root: Composite) -> Plan | Refusal:
    """A pending root's preemption plan (composite.md *Preemption*; preempt_search.py)."""
    return search.plan_root(state, root, candidate_units(state, root.workload.spec.priority))


def _flat_used(state: ClusterState) -> np.ndarray:
    used = state.nodes.used
    if not used.flags.c_contiguous:  # pragma: no cover - the table keeps it contiguous
        state.nodes.used = used = np.ascontiguousarray(used)
    return used.reshape(-1)  # a view: changes go to the table


def _apply(state: ClusterState, flat: np.ndarray, vals: np.ndarray, sign: int, float_exact: bool) -> None:
    """Add (sign 1) or take off (-1) these usage entries, exactly.

    Many entries are summed per cell with one float `bincount`, exact when `float_exact`
    (no sum of entries can reach 2**52); few, or huge amounts, go through `ufunc.at`.
    A few entries (one unit, as the walk of prefixes removes them) are listed as touched
    rows, so the row caches follow them; more start those caches over.
    """
    nodes = state.nodes
    used = _flat_used(state)
    if len(flat) < 256:
        nodes.note_touched((flat // nodes.used.shape[1]).tolist())
    else:
        nodes.usage_changed()
    if len(flat) < 256 or not float_exact:
        (np.add if sign > 0 else np.subtract).at(used, flat, vals)
        return
    delta = np.bincount(flat, weights=vals, minlength=len(used)).astype(np.int64)
    if sign > 0:
        used += delta
    else:
        used -= delta


class _Removal:
    """Units' usage taken off the node table in removal order, prefix by prefix
    (and, with `devices`, the device claims they would free)."""

    def __init__(self, state: ClusterState, cand: _Candidates, devices: bool = False) -> None:
        self.state = state
        self.release = None
        if devices:
            units = [cand.unit(u) for u in range(cand.count)]
            self.release = dra.Release(state.dra, [(u.group, u.pods) for u in units])
        self.flat = cand.flat
        self.vals = cand.vals
        self.ends = cand.ends
        self.float_exact = bool(len(cand.vals) == 0 or
                                float(np.abs(cand.vals).max()) * len(cand.vals) < 2.0 ** 52)
        self.applied = 0  # entries currently removed

    def set_prefix(self, units: int) -> None:
        target = int(self.ends[units - 1]) if units else 0
        if target > self.applied:
            _apply(self.state, self.flat[self.applied:target], self.vals[self.applied:target], -1,
                   self.float_exact)
        elif target < self.applied:
            _apply(self.state, self.flat[target:self.applied], self.vals[target:self.applied], 1,
                   self.float_exact)
        self.applied = target
        if self.release is not None:
            self.release.set_prefix(units)


class _UniformCount:
    """What `placement.place_in` places of `count` pods of one shape that need no devices,
    on the rows of its node-selector mask, computed from the usage table.

    `place_in` fills every row it can use before it gives up: a row is used while every
    column's free amount covers the request (`_row_fits`), so the pods it places are the
    smaller of `count` and the sum over usable rows of how many fit there. With `domains`
    (a domain id per row, -1 without the label) it counts per domain instead.
    """

    def __init__(self, state: ClusterState, g: Group, shape: int, count: int,
                 domains: np.ndarray | None = None) -> None:
        self.state = state
        self.count = count
        self.vec = state.shape_vector(g.workload, shape)
        mask = pl.base_mask(state, g, shape)
        if domains is not None:
            mask = mask & (domains >= 0)
        self.rows = np.flatnonzero(mask)
        self.cols = np.flatnonzero(self.vec)  # never empty: every pod uses one `pods`
        self.alloc = state.nodes.alloc[self.rows]
        self.domains = None if domains is None else domains[self.rows]

    def _fits(self) -> tuple[np.ndarray, np.ndarray]:
        """Per row: whether it is usable, and how many pods fit there (of the usable rows)."""
        free = self.alloc - self.state.nodes.used[self.rows]
        usable = np.all(free >= self.vec, axis=1)
        free = free[usable]
        return usable, np.minimum(np.min(free[:, self.cols] // self.vec[self.cols], axis=1), self.count)

    def __call__(self) -> int:
        if not len(self.rows):
            return 0
        return min(self.count, int(self._fits()[1].sum()))

    def by_domain(self, n: int) -> np.ndarray:
        """Per domain (of n): what the routine would place inside it."""
        if not len(self.rows):
            return np.zeros(n)
        usable, fit = self._fits()
        assert self.domains is not None
        return np.minimum(np.bincount(self.domains[usable], weights=fit, minlength=n), self.count)


def plan(state: ClusterState, g: Group, pods: list[int], need: int) -> Plan | Refusal:
    """A preemption plan for these pods of g, or the reason there is none."""
    priority = g.workload.spec.priority
    cand = _Candidates(state, priority)  # least important first
    if cand.trees:  # trees' units among the candidates: the plan is made unit by unit
        return search.plan_group(state, g, pods, need, _all(state, cand))
    if not cand.count:
        return Refusal(NO_VICTIMS, 0)
    devices = dra.group_needs_devices(g) and bool(state.dra.claims)
    removal = _Removal(state, cand, devices)
    try:
        removal.set_prefix(cand.count)
        key = g.spec.topology_key
        shapes = {g.spec.pod_shapes[p] for p in pods}
        plain = len(shapes) == 1 and not any(dra.pod_needs_devices(g, p) for p in pods)
        if key is None and plain:  # the routine's count is arithmetic (`_UniformCount`)
            everything = pl.Attempt(need=need, placeable=_UniformCount(state, g, next(iter(shapes)), len(pods))())
        else:
            everything = pl.attempt(state, g, pods, need, explain=False)
        if not everything.ok:
            return Refusal(WOULD_NOT_HELP, everything.placeable)
        k = everything.placeable
        lo = _first_sufficient(state, g, pods, need, k, cand, removal, plain, devices)
        removal.set_prefix(lo)
        trial = pl.Trial(state)
        chosen = pl.attempt(state, g, pods, need, explain=True, keep_trial=trial)
        if chosen.placeable < k:  # pragma: no cover - guarded by the search
            trial.rollback()
            return Refusal(WOULD_NOT_HELP, everything.placeable)
        victims_units, reprieved = _reprieve(state, chosen, cand, lo, pods, g, devices)
        trial.rollback()
    finally:
        removal.set_prefix(0)
    return Plan(placement=chosen, victims=vu.close(victims_units), reprieved=reprieved)


def _first_sufficient(state: ClusterState, g: Group, pods: list[int], need: int, k: int,
                      cand: _Candidates, removal: _Removal, plain: bool, devices: bool) -> int:
    """The smallest prefix of units (least important first) whose removal lets the placement
    routine place k pods: model.md's "remove one unit at a time until it places k".

    The routine's count need not grow with the prefix (pods of several shapes, devices, the
    domain chosen by score), so the prefixes are walked one by one; what makes that cheap is
    an upper bound that does grow with the prefix: each run of pods of one shape places at
    most what fits on the rows it may use (`_UniformCount`; with topology, inside one domain).
    A binary search finds the first prefix the bound allows, and for pods of one shape that
    need no devices and no domain choice the bound is the count, so that prefix is the answer.
    The walk then runs the routine only where the last unit removed could change its answer.
    """
    key = g.spec.topology_key
    domains, n_domains = _domains(state, g)
    runs = _runs(g, pods)
    counters = [_UniformCount(state, g, shape, n, domains) for shape, n in runs]

    def domain_bounds() -> np.ndarray:
        return cast(np.ndarray, sum(c.by_domain(n_domains) for c in counters))

    def bound() -> int:
        return sum(c() for c in counters) if domains is None else int(domain_bounds().max())

    lo, hi = 1, cand.count
    while lo < hi:
        mid = (lo + hi) // 2
        removal.set_prefix(mid)
        if bound() >= k:
            hi = mid
        else:
            lo = mid + 1
    if plain and (key is None or n_domains == 1):
        return lo
    # Rows whose usage the routine reads: where the pods may go and, with topology, every
    # node of a domain (the domain score sums them). With devices, any unit may free some.
    relevant = np.zeros(state.nodes.count, dtype=bool)
    for shape, _ in runs:
        relevant |= pl.base_mask(state, g, shape)
    if domains is not None:
        relevant |= domains >= 0
    touches = cand.touching(relevant) | devices
    first = lo
    uniform = False  # the last answer came from per-domain sums (pods of one shape, topology)
    chosen: int | None = None  # the domain it chose (it held fewer than k)
    base: list[int] = []  # and that domain's score numerators then
    while lo < cand.count:
        if lo == first or touches[lo - 1]:
            if uniform and domains is not None:
                touched = np.unique(domains[cand.rows[int(cand.starts[lo - 1]):int(cand.ends[lo - 1])]])
                mine = [int(d) for d in touched if d >= 0]
                counts, numerators = pl.uniform_domain_terms(state, g, pods)
                before = {d: (int(counts[d]), numerators(d)) for d in mine}
                removal.set_prefix(lo)
                if _still_short(state, g, pods, k, chosen, base, before):
                    lo += 1
                    continue
            else:
                removal.set_prefix(lo)
            fast = pl.uniform_count(state, g, pods, need) if plain else None
            uniform = fast is not None
            if fast is None:
                placed = _routine_count(state, g, pods, need, k, domains, n_domains, domain_bounds)
            else:
                placed, chosen = fast
                if chosen is not None:
                    base = pl.uniform_domain_terms(state, g, pods)[1](chosen)
            if placed >= k:
                return lo
        lo += 1
    return cand.count  # every unit removed: the routine places k, as it did at first


def _domains(state: ClusterState, g: Group) -> tuple[np.ndarray | None, int]:
    """The preemptor's topology domain per node row (-1: none), and how many there are."""
    key = g.spec.topology_key
    if key is None:
        return None, 0
    ids, values = state.nodes.domains(key)
    domains, n_domains = ids[: state.nodes.count], len(values)
    if g.domain is not None:  # later pods stay in the domain chosen first
        domains = np.where(domains == (values.index(g.domain) if g.domain in values else -2), 0, -1)
        n_domains = 1
    return domains, n_domains


def _runs(g: Group, pods: list[int]) -> list[tuple[int, int]]:
    """(shape, pods) per run of consecutive pods of one shape."""
    runs: list[tuple[int, int]] = []
    for p in pods:
        shape = g.spec.pod_shapes[p]
        if runs and runs[-1][0] == shape:
            runs[-1] = (shape, runs[-1][1] + 1)
        else:
            runs.append((shape, 1))
    return runs


def _routine_count(state: ClusterState, g: Group, pods: list[int], need: int, k: int,
                   domains: np.ndarray | None, n_domains: int, domain_bounds: Any) -> int:
    """What the routine places, or some count below k when it cannot place k. With a topology,
    only the domains whose bound reaches `need` are simulated: the others cannot be feasible, so
    the routine never chooses them (and when none is feasible it places fewer than k anyway)."""
    if domains is None or n_domains <= 1:
        return pl.attempt(state, g, pods, need, explain=False).placeable
    per_domain = domain_bounds()
    if per_domain.max() < k:
        return 0
    maybe = np.flatnonzero(per_domain >= need)
    if len(maybe) == n_domains:
        return pl.attempt(state, g, pods, need, explain=False).placeable
    keep = np.zeros(n_domains + 1, dtype=bool)  # the last entry: rows without the label
    keep[maybe] = True
    return pl.attempt(state, g, pods, need, restrict=keep[domains], explain=False).placeable


def _still_short(state: ClusterState, g: Group, pods: list[int], k: int, chosen: int | None, base: list[int],
                 before: dict[int, tuple[int, list[int]]]) -> bool:
    """After one more unit is removed, is it certain that the routine still chooses a domain
    holding fewer than k pods? For pods of one shape and a topology, where the last full answer
    chose `chosen` (which held fewer than k; `base`: its score numerators then), or no domain.
    `before`: the (count, numerators) of the domains the unit was in, before its removal.

    Kept true from that answer on: every domain that can hold k ranks below `chosen` as it
    ranked then. Only the unit's domains changed. One that can hold k now could before (else it
    may rank anywhere: ask the routine), and its score did not rise (no numerator rose; the
    denominators are fixed), so it still ranks below. `chosen` stays feasible (counts only grow
    with removals) and, if its score has not fallen, still outranks them all: whatever the
    routine chooses holds fewer than k. With no domain chosen, none could hold k.
    """
    counts, numerators = pl.uniform_domain_terms(state, g, pods)
    for d, (count, nums) in before.items():
        if int(counts[d]) >= k and (count < k or any(now > then for now, then in zip(numerators(d), nums))):
            return False
    if chosen is not None and chosen in before:
        return all(now >= then for now, then in zip(numerators(chosen), base))
    return True


def _reprieve(state: ClusterState, chosen: pl.Attempt, cand: _Candidates, removed: int, pods: list[int],
              g: Group, check: bool) -> tuple[list[Unit], list[Unit]]:
    """Put the first `removed` units back, most important first; keep those the preemptor survives.

    Runs with the removed units off the table and the preemptor's placement applied; the
    table is left as it is. Only the usage of the preemptor's nodes, in the columns it
    requests, is ever checked, so that is all that is followed (a small local copy): a
    unit with no pod on those nodes fits (unless it would take back the preemptor's
    devices), and putting a unit back changes only its own pods' nodes.
    """
    nodes = state.nodes
    width = len(nodes.resource_names)
    pre_rows = sorted({node for _, node in chosen.placements})
    on_pre = np.zeros(nodes.count, dtype=bool)
    on_pre[pre_rows] = True
    cols = np.flatnonzero(np.any(np.vstack(
        [state.shape_vector(g.workload, g.spec.pod_shapes[p]) for p in pods]), axis=0))
    touch = cand.touching(on_pre, removed).tolist()
    # usage entries of the removed units on the preemptor's nodes, in its columns
    end = int(cand.ends[removed - 1]) if removed else 0
    local_row = np.full(nodes.count, -1, dtype=np.int64)
    local_row[pre_rows] = np.arange(len(pre_rows))
    local_col = np.full(width, -1, dtype=np.int64)
    local_col[cols] = np.arange(len(cols))
    rows = cand.rows[:end]
    lr, lc = local_row[rows], local_col[cand.flat[:end] - rows * width]
    sel = np.flatnonzero((lr >= 0) & (lc >= 0))  # `pods` is one of the columns: every pod there
    owner = np.searchsorted(cand.ends[:removed], sel, side="right")
    entries: dict[int, list[tuple[int, int, int]]] = {}
    for u, r, c, v in zip(owner.tolist(), lr[sel].tolist(), lc[sel].tolist(), cand.vals[:end][sel].tolist()):
        entries.setdefault(u, []).append((r, c, v))
    used = nodes.used[pre_rows][:, cols].tolist()
    alloc = nodes.alloc[pre_rows][:, cols].tolist()
    units = [cand.unit(u) for u in range(removed)]
    devices = dra.Reprieve(state.dra, (m for unit in units for m in unit.members), chosen.claims) if check else None
    victims: list[Unit] = []
    kept: list[Unit] = []
    for u in range(removed - 1, -1, -1):  # most important first: the removal order reversed
        unit = units[u]
        fits = True
        if touch[u]:
            mine = entries[u]
            for r, c, v in mine:
                used[r][c] += v
            fits = all(x <= a for r in {r for r, _, _ in mine} for x, a in zip(used[r], alloc[r]))
            if fits and devices is not None and not devices.fits(unit.members):
                fits = False  # it would take back the preemptor's devices (sharing.md, *Preemption*)
            if not fits:
                for r, c, v in mine:
                    used[r][c] -= v
        elif devices is not None and not devices.fits(unit.members):
            fits = False
        (kept if fits else victims).append(unit)
    return victims, kept


def victim_why(g: Group, pods: list[int], whole_unit: bool, escalated: bool) -> str:
    """The code of the victim unit these pods of `g` are (model.md *Preemption* step 1; words in
    reasons.VICTIM_WORDS). Whether the whole group went is `wholeGroup`, not this."""
    spec = g.spec
    if whole_unit:
        return rs.DISRUPTION_MODE_ALL if spec.disruption_all else rs.GANG_AT_MIN_COUNT
    if escalated:
        return rs.SURPLUS_EXCEEDED
    return rs.GANG_SURPLUS if spec.gang else rs.BASIC_PODS
