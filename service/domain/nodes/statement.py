"""One statement over the node table and the device state, as Volcano's `Statement`.

Whatever the decider does on a trial basis goes through it: usage added to a node row (a pod
placed on trial), a batch of usage entries taken off or put back (the victims a preemption
removes), a device held or freed, a share counted or uncounted. Each operation is recorded;
`discard(mark)` undoes those after the mark, last first; every change of usage is noted for
the caches that follow the table row by row (`NodeTable.note_touched`, `usage_changed`).
Placement's trial (its allocations in dra.Ledger), the tree routine (on one trial), the
preemption's removal (with dra.Release) and the explanations' what-fits-here all use it; the
fold (evolve) writes the state for good and does not.
"""
from __future__ import annotations

from typing import Any, Protocol

import numpy as np

from service.domain.nodes.table import NodeTable

USE, ENTRIES, HOLD, SHARE = range(4)


class Devices(Protocol):
    """What the statement changes of the device state (dra.DeviceState)."""
    busy: np.ndarray

    def add_share(self, d: int, amounts: tuple[tuple[str, int], ...], sign: int) -> None: ...


class Statement:
    def __init__(self, nodes: NodeTable | None, devices: Devices | None = None) -> None:
        self.nodes = nodes
        self.devices = devices
        self.ops: list[tuple[int, Any, Any, int]] = []  # (kind, what, amount, sign)

    def mark(self) -> int:
        """Where the statement stands now: `discard` it undoes only what came after."""
        return len(self.ops)

    # -- operations -------------------------------------------------------------------------
    def use(self, row: int, vec: np.ndarray) -> None:
        """A pod's requests added to a node row."""
        nodes = self.nodes
        assert nodes is not None
        nodes.used[row] += vec
        nodes.touched.append(row)
        self.ops.append((USE, row, vec, 1))

    def entries(self, flat: np.ndarray, vals: np.ndarray, sign: int, float_exact: bool) -> None:
        """Usage entries (cells of the table, row-major, and amounts) added (sign 1) or taken off (-1)."""
        assert self.nodes is not None
        _apply(self.nodes, flat, vals, sign, float_exact)
        self.ops.append((ENTRIES, (flat, float_exact), vals, sign))

    def hold(self, d: int, held: bool = True) -> None:
        """An exclusive device taken (held) or given back."""
        assert self.devices is not None
        busy = self.devices.busy
        self.ops.append((HOLD, d, bool(busy[d]), 1))
        busy[d] = held

    def hold_all(self, ids: np.ndarray, held: bool) -> None:
        """Several devices taken or given back at once."""
        assert self.devices is not None
        busy = self.devices.busy
        self.ops.append((HOLD, ids, busy[ids].copy(), 1))
        busy[ids] = held

    def share(self, d: int, amounts: tuple[tuple[str, int], ...], sign: int = 1) -> None:
        """One share's consumption counted (sign 1) or uncounted (-1) on a shareable device."""
        assert self.devices is not None
        self.devices.add_share(d, amounts, sign)
        self.ops.append((SHARE, d, amounts, sign))

    # -- undo -------------------------------------------------------------------------------
    def discard(self, mark: int = 0) -> None:
        """Undo every operation after `mark`, last first."""
        ops = self.ops
        nodes = self.nodes
        rows: list[int] = []
        for kind, what, amount, sign in reversed(ops[mark:]):
            if kind == USE:
                assert nodes is not None
                nodes.used[what] -= amount
                rows.append(what)
            elif kind == ENTRIES:
                assert nodes is not None
                _apply(nodes, what[0], amount, -sign, what[1])
            elif kind == HOLD:
                assert self.devices is not None
                self.devices.busy[what] = amount
            else:
                assert self.devices is not None
                self.devices.add_share(what, amount, -sign)
        if rows and nodes is not None:
            nodes.note_touched(rows)
        del ops[mark:]

    def forget(self) -> None:
        """Keep what was done and drop its record (a sequence that came back where it started)."""
        self.ops.clear()


def _flat_used(nodes: NodeTable) -> np.ndarray:
    used = nodes.used
    if not used.flags.c_contiguous:  # pragma: no cover - the table keeps it contiguous
        nodes.used = used = np.ascontiguousarray(used)
    return used.reshape(-1)  # a view: changes go to the table


def _apply(nodes: NodeTable, flat: np.ndarray, vals: np.ndarray, sign: int, float_exact: bool) -> None:
    """Add (sign 1) or take off (-1) these usage entries, exactly.

    Many entries are summed per cell with one float `bincount`, exact when `float_exact`
    (no sum of entries can reach 2**52); few, or huge amounts, go through `ufunc.at`.
    A few entries (one unit, as the walk of prefixes removes them) are listed as touched
    rows, so the row caches follow them; more start those caches over.
    """
    used = _flat_used(nodes)
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
