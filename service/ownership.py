"""A replica's ownership of clusters at run time (docs/replicas.md): which clusters this process owns
and with which epoch, where a request for a cluster goes, the lease kept running, the spread kept
even, and the hand-over on SIGTERM.

    ownership = Ownership(Membership(...), service)   # bootstrap.build_app, on PostgreSQL only
    await ownership.start()                            # join (after migrations), then the loop
    owner = await ownership.route(cluster, read=True)  # None: decide or answer here; else forward to it
    await ownership.leave()                            # hand every cluster over, end the membership

It is the store's and the command handler's `Fencing`: a turn is taken only for an owned cluster
while the lease runs, and a turn refused by the database (`fenced`) drops the cluster here.
"""
from __future__ import annotations

import asyncio
import contextlib
import time
from typing import TYPE_CHECKING

import structlog

from service import metrics
from service.store.base import StoreUnavailable
from service.store.membership import Change, Load, Membership, Owner

if TYPE_CHECKING:
    from service.app.service import Gangplank

log = structlog.get_logger("gangplank.replicas")
REBALANCE_SECONDS = 0.5  # a joiner gets its share one cluster per step from each loaded replica
DROP_AFTER = 30.0  # states of clusters this replica does not own are dropped within this
OWNER_CACHE_SECONDS = 1.0  # a forwarded request's owner is looked up again after this


class Ownership:
    def __init__(self, membership: Membership, service: Gangplank) -> None:
        self.membership = membership
        self.service = service
        self.owned: dict[str, int] = {}  # cluster -> epoch
        self.leaving: set[str] = set()
        self.left = False
        self._owners: dict[str, tuple[float, Owner]] = {}  # looked-up owners of other replicas' clusters
        self._unowned_since: dict[str, float] = {}
        self._tasks: list[asyncio.Task[None]] = []

    @property
    def id(self) -> str:
        return self.membership.id

    def live(self) -> bool:
        """checks.replica: joined and the lease running."""
        return not self.left and self.membership.lease_running()

    # -- Fencing --------------------------------------------------------------------------------
    def fence(self, cluster: str) -> tuple[str, str, int] | None:
        epoch = self.owned.get(cluster)
        if epoch is None or cluster in self.leaving or not self.membership.lease_running():
            return None
        return self.membership.id, self.membership.incarnation, epoch

    def fenced(self, cluster: str) -> None:
        metrics.FENCED_APPENDS.inc()
        log.warning("ownership.fenced", cluster=cluster, epoch=self.owned.get(cluster))
        self._lose(cluster)

    # -- owning ---------------------------------------------------------------------------------
    def _gain(self, change: Change) -> None:
        """This replica is the owner (from an assignment it made, or found recorded): counted and
        logged once per change, by the new owner."""
        owner = change.owner
        known = self.owned.get(owner.cluster) == owner.epoch
        self.owned[owner.cluster] = owner.epoch
        self._owners.pop(owner.cluster, None)
        metrics.OWNED_CLUSTERS.set(len(self.owned))
        if not known and change.reason in ("new", "failover", "handover"):
            metrics.OWNERSHIP_CHANGES.labels(reason=change.reason).inc()
            log.info("ownership.changed", cluster=owner.cluster, **{"from": change.previous}, to=owner.replica,
                     epoch=owner.epoch, reason=change.reason)

    def _lose(self, cluster: str) -> None:
        if self.owned.pop(cluster, None) is not None:
            metrics.OWNED_CLUSTERS.set(len(self.owned))
        self._owners.pop(cluster, None)
        self.service.cache.drop(cluster)

    def _mine(self, owner: Owner) -> bool:
        return owner.replica == self.membership.id and owner.incarnation == self.membership.incarnation

    async def _lease(self) -> None:
        """Once the lease has run out (frozen, or cut off from the database), renew before anything is
        decided or answered; then the owned clusters are checked against the database."""
        if self.membership.lease_running() or self.left:  # a replica that left owns nothing: lookups only
            return
        if not await self.membership.renew():
            raise StoreUnavailable("this replica's lease has run out and the database cannot be reached")
        await self._reconcile()

    async def _reconcile(self) -> None:
        """Keep only the clusters still recorded as this replica's, with their epochs."""
        recorded = await self.membership.mine()
        for cluster, epoch in list(self.owned.items()):
            if cluster in self.leaving:
                continue
            found = recorded.get(cluster)
            if found is None or found.owner.epoch != epoch:
                self._lose(cluster)

    async def _adopt(self) -> None:
        """Take on the clusters other replicas gave this one (a hand-over, or an assignment made by
        the replica that received a request)."""
        for cluster, change in (await self.membership.mine()).items():
            if self.owned.get(cluster) != change.owner.epoch and cluster not in self.leaving:
                self._gain(change)

    async def route(self, cluster: str, *, read: bool = False, again: bool = False) -> Owner | None:
        """None when this replica decides or answers the cluster's request; else the live owner to
        forward it to. A cluster without a live owner gets one (the least loaded live replica), except
        for a read of a cluster without events, which is answered here and gives it no owner.
        `again`: the owner looked up before failed or refused the request; look it up anew."""
        await self._lease()
        while cluster in self.leaving:  # handing it over now: wait for the new owner
            await asyncio.sleep(0.01)
        if cluster in self.owned:
            return None
        known = self._owners.get(cluster)
        if known is not None and not again and time.monotonic() - known[0] < OWNER_CACHE_SECONDS:
            return known[1]
        owner = await self.membership.owner(cluster)
        if owner is not None and owner.live:
            if self._mine(owner):  # given to this replica by another
                await self._adopt()
                return None
            self._owners[cluster] = (time.monotonic(), owner)
            return owner
        if read and await self.service.store.last_position(cluster) == 0:
            return None
        change = await self.membership.assign(cluster)
        if self._mine(change.owner):
            self._gain(change)
            return None
        self._owners[cluster] = (time.monotonic(), change.owner)
        return change.owner

    async def owner_live(self, cluster: str, owner: Owner) -> bool:
        """Is `owner` still the cluster's live owner (a forwarded request waits while it is)?"""
        now = await self.membership.owner(cluster)
        return now is not None and now.live and (now.replica, now.incarnation) == (owner.replica, owner.incarnation)

    # -- handing over ---------------------------------------------------------------------------
    async def hand_over(self, cluster: str, to: str | None = None) -> Change | None:
        """Stop starting batches for the cluster, let the batch in flight commit, then record the
        new owner with the next epoch (with no live peer: release it). Requests not decided yet get
        NotOwner and go on to the new owner."""
        epoch = self.owned.get(cluster)
        if epoch is None:
            return None
        self.leaving.add(cluster)
        try:
            entry = self.service.cache.loaded_entry(cluster)
            lock = entry.lock if entry is not None else contextlib.nullcontext()
            async with lock:  # the batch in flight commits first
                change = await self.membership.hand_over(cluster, epoch, to)
                self._lose(cluster)
        finally:
            self.leaving.discard(cluster)
        if change is not None and change.owner.replica:
            self._owners[cluster] = (time.monotonic(), change.owner)
            log.info("ownership.handed_over", cluster=cluster, to=change.owner.replica, epoch=change.owner.epoch)
        return change

    async def rebalance(self, loads: list[Load]) -> None:
        """One step towards an even spread: when this replica owns at least two more clusters than the
        least loaded live replica, it hands one (not busy, when it can) to that replica."""
        live = [load for load in loads if load.live]
        me = next((load for load in live if load.id == self.id), None)
        if me is None or len(live) < 2:
            return
        least = min(live, key=lambda load: (load.owned, load.id))
        if len(self.owned) - least.owned < 2:
            return
        batcher = self.service.commands.batcher
        candidates = sorted(self.owned, key=lambda c: (batcher.waiting(c), c))
        await self.hand_over(candidates[0], to=least.id)

    # -- the loop -------------------------------------------------------------------------------
    async def start(self) -> None:
        await self.membership.join()
        metrics.OWNED_CLUSTERS.set(0)
        loop = asyncio.get_running_loop()
        self._tasks = [loop.create_task(self._renewing()), loop.create_task(self._balancing())]
        log.info("replica.joined", replica=self.id, url=self.membership.url, lease_ms=self.membership.lease_ms)

    async def _renewing(self) -> None:
        period = self.membership.lease_ms / 4000
        while not self.left:
            renewed_session = self.membership._session is None
            ok = await self.membership.renew()
            if ok and renewed_session:
                with contextlib.suppress(StoreUnavailable):
                    await self._reconcile()
            await asyncio.sleep(period)

    async def _balancing(self) -> None:
        while not self.left:
            await asyncio.sleep(REBALANCE_SECONDS)
            try:
                if self.membership.lease_running():
                    await self._adopt()
                    await self.rebalance(await self.membership.loads())
                self._drop_unowned()
            except StoreUnavailable:
                continue
            except Exception:  # the loop must go on; the next step tries again
                log.exception("replica.balance_failed")

    def _drop_unowned(self) -> None:
        """States of clusters this replica does not own (read while they had no events) go."""
        now = time.monotonic()
        for cluster in self.service.cache.loaded():
            if cluster in self.owned:
                self._unowned_since.pop(cluster, None)
            elif now - self._unowned_since.setdefault(cluster, now) >= DROP_AFTER \
                    and not self.service.commands.batcher.waiting(cluster):
                self.service.cache.drop(cluster)
                self._unowned_since.pop(cluster, None)

    async def leave(self) -> None:
        """SIGTERM: hand each cluster over to the least loaded other live replica (release it when
        there is none), then end the membership session."""
        if self.left:
            return
        for cluster in sorted(self.owned):
            try:
                await self.hand_over(cluster)
            except StoreUnavailable as exc:
                log.warning("replica.handover_failed", cluster=cluster, error=str(exc))
        self.left = True
        for task in self._tasks:
            task.cancel()
        await self.membership.leave()
        log.info("replica.left", replica=self.id)

    async def close(self) -> None:
        await self.leave()
        await self.membership.close()
