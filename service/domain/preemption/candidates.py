"""The candidate units of a preemption (model.md *Preemption* step 1), least important first.

Every placed pod below the preemptor's priority, in victim units (victims.py): a flat group's
units and a tree's (its highest `disruptionMode: All` CPG is one unit). `_Order` keeps the flat
groups' units of a state in removal order, brought up to date from the journal of moves (one
`np.lexsort` over what changed); `Candidates` takes the prefix below a priority and merges in
the units of the trees below it, so that every preemption (flat or tree, with or without trees
among its candidates) sees one array form: per unit, its pods' usage entries on the node table.
"""
from __future__ import annotations

import weakref
from typing import Any

import numpy as np

from service.domain.preemption import victims as vu
from service.domain.preemption.victims import Unit
from service.domain.state.cluster import ClusterState, Group


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

    def entry(self, state: ClusterState, g: Group, shape: int) -> tuple[list[int], list[int]]:
        """A pod shape's usage entries (columns, amounts), cached per workload and shape."""
        key = (g.workload.position, shape)
        hit = self.entries.get(key)
        if hit is None:
            vec = state.shape_vector(g.workload, shape)
            nz = np.flatnonzero(vec)
            hit = self.entries[key] = (nz.tolist(), vec[nz].tolist())
        return hit

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



class Candidates:
    """The candidate units for a preemptor of this priority, least important first: the prefix
    of the state's `_Order` below it and, merged in by importance, the units of lower trees.

    Unit u is `unit(u)`; its usage entries are `flat[starts[u]:ends[u]]` / `vals[...]` (a cell
    of the node table, row-major), on rows `rows[...]`. Flat units are `(gid, j)` of the order;
    a tree's unit has gid -1 - i and is `tree_units[i]`."""

    def __init__(self, state: ClusterState, priority: int) -> None:
        width = len(state.nodes.resource_names)
        order = _ORDERS.get(state)
        if order is None or order.width != width:
            order = _ORDERS[state] = _Order(width)
        order.sync(state)
        n = int(np.searchsorted(order.prio, priority, side="left"))
        self.groups, self.parts = order.groups, order.parts
        self.gid, self.j, self.whole = order.gid[:n], order.j[:n], order.whole[:n]
        self.starts, self.ends = order.starts[:n], order.ends[:n]
        e = int(self.ends[-1]) if n else 0
        self.flat, self.vals, self.rows = order.flat[:e], order.vals[:e], order.rows[:e]
        self.tree_units: list[Unit] = []
        trees = sorted({key[1] for key in order.tree_keys if key[0] < priority})  # their positions
        for pos in trees:
            self.tree_units.extend(vu.tree_units(state.by_position[pos]))
        if self.tree_units:
            self._merge(state, order, n, width)
        self.count = len(self.gid)

    def _merge(self, state: ClusterState, order: _Order, n: int, width: int) -> None:
        """Merge the trees' units into the flat prefix, by importance (removal order)."""
        cols: dict[str, list[int]] = {name: [] for name in ("prio", "single", "npods", "e_pos", "e_idx")}
        flat: list[int] = []
        vals: list[int] = []
        lens: list[int] = []
        for unit in self.tree_units:
            prio, _, npods, (pos, idx) = unit.importance
            for name, v in zip(cols, (-prio, 0 if unit.whole else 1, -npods, pos, idx)):
                cols[name].append(v)
            start = len(flat)
            for g, pods in unit.members:
                for p in pods:
                    hit = order.entry(state, g, g.spec.pod_shapes[p])
                    base = g.node_of[p] * width
                    flat.extend(base + c for c in hit[0])
                    vals.extend(hit[1])
            lens.append(len(flat) - start)
        t = len(self.tree_units)
        merged = {name: np.concatenate([getattr(order, name)[:n], np.array(v, dtype=np.int64)])
                  for name, v in cols.items()}
        perm = _removal_order(merged)
        nent = np.concatenate([order.nent[:n], np.array(lens, dtype=np.int64)])
        gid = np.concatenate([self.gid, -1 - np.arange(t, dtype=np.int64)])
        j = np.concatenate([self.j, np.zeros(t, dtype=np.int64)])
        whole = np.concatenate([self.whole, np.array([u.whole for u in self.tree_units], dtype=bool)])
        ent_start = np.cumsum(nent) - nent  # each unit's entries before the merge
        all_flat = np.concatenate([self.flat, np.array(flat, dtype=np.int64)])
        all_vals = np.concatenate([self.vals, np.array(vals, dtype=np.int64)])
        lens_p = nent[perm]
        self.ends = np.cumsum(lens_p)
        self.starts = self.ends - lens_p
        total = int(self.ends[-1]) if len(self.ends) else 0
        take = np.repeat(ent_start[perm] - self.starts, lens_p) + np.arange(total, dtype=np.int64)
        self.flat, self.vals = all_flat[take], all_vals[take]
        self.rows = self.flat // width
        self.gid, self.j, self.whole = gid[perm], j[perm], whole[perm]

    def unit(self, u: int) -> Unit:
        gid = int(self.gid[u])
        if gid < 0:
            return self.tree_units[-1 - gid]
        g, parts = self.groups[gid], self.parts[gid]
        assert g is not None and parts is not None  # a candidate's group is in
        return Unit.of(g, parts[int(self.j[u])], bool(self.whole[u]))

    def units(self, upto: int | None = None) -> list[Unit]:
        return [self.unit(u) for u in range(self.count if upto is None else upto)]

    def touching(self, row_mask: np.ndarray, upto: int | None = None) -> np.ndarray:
        """Per unit (of the first `upto`): has it a pod on a row of the mask?"""
        upto = self.count if upto is None else upto
        if upto == 0:
            return np.zeros(0, dtype=bool)
        end = int(self.ends[upto - 1])
        return np.logical_or.reduceat(row_mask[self.rows[:end]], self.starts[:upto])


def candidate_units(state: ClusterState, priority: int) -> list[Unit]:
    """Every candidate unit below this priority (flat groups' and trees'), least important first."""
    return Candidates(state, priority).units()
