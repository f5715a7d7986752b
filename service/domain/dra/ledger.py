"""Trial allocation while placement places pods: `Ledger.try_pod` allocates on trial, holding
devices or counting shares through the trial's statement (nodes/statement.py); `rollback` undoes it,
last in first out."""
from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from service.domain.dra import claims as cl
from service.domain.dra.claims import POD, Allocation, ClaimKey
from service.domain.dra.devices import DeviceState
from service.domain.dra.index import Index, MatcherKey
from service.domain.dra.sharing import Chooser
from service.domain.nodes.statement import Statement
from service.domain.nodes.table import NodeTable

if TYPE_CHECKING:
    from service.domain.model.workload import Group


class Ledger:
    """Allocations made on a trial basis while pods are placed; `rollback` undoes them."""

    def __init__(self, ds: DeviceState, nodes: NodeTable, statement: Statement | None = None) -> None:
        self.ds = ds
        self.nodes = nodes
        self.statement = statement if statement is not None else Statement(nodes, ds)  # the devices held, shared
        self._new: list[Allocation] = []
        self._marks: list[int] = []  # per allocation: the statement's mark before it
        self._claims: dict[ClaimKey, Allocation] = {}
        self.shared_made = 0  # shared claims allocated in this trial (placement re-filters on change)
        self.chooser: Chooser | None = None  # the scoring strategy's device choice (fragmentation.py)

    def allocation(self, key: ClaimKey) -> Allocation | None:
        got = self._claims.get(key)
        return got if got is not None else self.ds.claims.get(key)

    def try_pod(self, g: Group, pod: int, node: int) -> bool:
        """Allocate what this pod needs on this node (on trial); False if it cannot."""
        ds, nodes = self.ds, self.nodes
        mark = len(self._new)
        statement = self.statement
        for use in cl.pod_uses(ds, g, pod):
            key = cl.key(g, pod, use)
            alloc = self.allocation(key)
            if alloc is not None:
                if use.consumer and not all(ds.reaches(nodes, d, node) for d in alloc.device_ids):
                    self._undo(mark)
                    return False
                continue
            got = ds.allocate(nodes, use.template, node, self.chooser)
            if got is None:
                self._undo(mark)
                return False
            ids, shares = got
            a = Allocation(key, use.name, use.sharing, pod if use.sharing == POD else None, ids, shares)
            self._marks.append(statement.mark())
            self._new.append(a)
            self._claims[key] = a
            for i, d in enumerate(ids):
                share = a.share(i)
                if share is None:
                    statement.hold(d)
                else:
                    statement.share(d, share[2])
            if use.sharing != POD:
                self.shared_made += 1
        return True

    def _undo(self, mark: int) -> None:
        """Undo the allocations after the first `mark`: their devices through the statement."""
        if len(self._new) > mark:
            self.statement.discard(self._marks[mark])
        self.forget(mark)

    def forget(self, mark: int) -> None:
        """Drop the records of the allocations after the first `mark` (the statement undid them)."""
        while len(self._new) > mark:
            a = self._new.pop()
            self._marks.pop()
            del self._claims[a.claim]

    def new_allocations(self) -> list[Allocation]:
        return list(self._new)

    def rollback(self) -> None:
        self._undo(0)

    def rollback_to(self, mark: int) -> None:
        """Undo the allocations after the first `mark` (Trial.rollback_to)."""
        self._undo(mark)

    def viable(self, g: Group, pod: int, rows: np.ndarray) -> np.ndarray:
        """A cheap necessary condition, per row, for `try_pod` to succeed: enough free matching
        devices for every claim still to allocate, and reach of the shared claims allocated."""
        ds, nodes = self.ds, self.nodes
        mask = np.ones(len(rows), dtype=bool)
        need: dict[MatcherKey, int] = {}
        index: Index | None = None
        for use in cl.pod_uses(ds, g, pod):
            alloc = self.allocation(cl.key(g, pod, use))
            if alloc is not None:
                if use.consumer:
                    mask &= ds.reach_mask(nodes, alloc.device_ids)[rows]
                continue
            if use.template.error is not None:
                return np.zeros(len(rows), dtype=bool)
            index = index or ds.index(nodes)
            for req in use.template.requests:
                m = index.matcher(nodes, ds, req)
                if m is None:
                    return np.zeros(len(rows), dtype=bool)
                key = (req.device_class, req.selectors)
                if req.all:
                    mask &= m.counts(nodes, None)[rows] >= 1
                else:
                    need[key] = need.get(key, 0) + req.count
        if need:
            assert index is not None
            for matcher_key, count in need.items():
                m = index.matchers[matcher_key]
                assert m is not None
                mask &= m.counts(nodes, ds.busy)[rows] >= count
        return mask
