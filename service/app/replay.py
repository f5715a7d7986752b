"""The replay service: one way to replay a cluster's stream, for `gangplank replay` and `GET /audit/replay`.

- `summary`: the state from every event (no snapshot), folded the fast way (`domain/fold/fast.py`,
  while the next batches are read), or event by event when the fast fold refuses the stream; the
  summary of `replay` without `--verify`.
- `verify`: every input re-decided and every decision compared (`audit.replay`), the hash chain
  recomputed, and the signed checkpoints checked against it and merged into the verdict (audit.md,
  *Verifying across releases*, *Signed checkpoints*), from the store; `verify_export` and
  `summary_export` the same from an export's envelopes.

The work that folds and re-decides runs in a worker thread: the caller's event loop (the server's
requests) goes on meanwhile. Nothing is recorded.
"""
from __future__ import annotations

import asyncio
import collections
from collections.abc import Callable
from operator import itemgetter
from typing import Any

from service.app import audit
from service.app.audit import ReplayResult
from service.app.cache import CATCH_UP_BATCH, ClusterCache
from service.app.checkpoints import CheckpointReport, check, load_public_key, well_formed
from service.domain import ClusterState
from service.domain.fold.fast import ReplayError
from service.domain.model import events as ev
from service.store.base import GENESIS_HASH, EventStore

Progress = Callable[[int], None]  # told the position reached, now and then


class ReplayService:
    def __init__(self, store: EventStore, cache: ClusterCache) -> None:
        self.store = store
        self.cache = cache

    # -- the summary ------------------------------------------------------------------------------
    async def summary(self, cluster: str, until: int | None = None,
                      progress: Progress | None = None) -> dict[str, Any] | None:
        """The summary of the state after every event (up to `until`); None without events."""
        if await self.store.last_position(cluster) == 0:
            return None
        result = await self._fast(cluster, until, progress)
        if result is None:  # a stream the fast fold refuses, or with a gap: event by event, which says where
            rows = await self._rows(cluster, until)
            envelopes = [{"cluster": cluster, "position": p, "type": t, "schemaVersion": v, "data": d}
                         for p, t, v, d in rows]
            result = await asyncio.to_thread(audit.replay, envelopes, cluster, until=until,
                                             progress=_every(progress))
        result.head = await self._recorded_head(cluster, result.state.position)
        return result.summary()

    async def _fast(self, cluster: str, until: int | None, progress: Progress | None) -> ReplayResult | None:
        result = ReplayResult(ClusterState(cluster))
        counts: collections.Counter[str] = collections.Counter()

        def seen(batch: list[Any]) -> None:
            counts.update(map(itemgetter(1), batch))
            if progress is not None:
                progress(batch[-1][0])

        try:
            await self.cache.fold_fast(result.state, until, observe=seen)
        except ReplayError:
            return None
        result.by_type = dict(counts)
        result.events = sum(counts.values())
        result.inputs = sum(n for t, n in counts.items() if t in ev.INPUT_TYPES)
        result.decisions = result.events - result.inputs
        return result if result.events == result.state.position else None

    # -- the verification ---------------------------------------------------------------------------
    async def verify(self, cluster: str, until: int | None = None, *, public_key: str | None = None,
                     require_checkpoints: bool = False, progress: Progress | None = None
                     ) -> tuple[dict[str, Any], CheckpointReport] | None:
        """The report of `replay --verify` from the store, with the checkpoints' report; None without
        events. Raises verify.NewerRules for decisions of newer rules, audit.StreamContentError for an
        event this code cannot fold while the chain holds."""
        last = await self.store.last_position(cluster)
        if last == 0:
            return None
        envelopes: list[dict[str, Any]] = []
        after = 0
        while batch := await self.store.read(cluster, after=after, limit=CATCH_UP_BATCH, until=until):
            envelopes.extend(e.envelope() for e in batch)
            after = batch[-1].position
        result = await asyncio.to_thread(audit.replay, envelopes, cluster, verify=True, until=until, last=last,
                                         progress=_every(progress))
        stored = [c.as_json() for c in await self.store.checkpoints(cluster, until)]
        public = load_public_key(public_key) if public_key else None
        hashes: dict[int, str] = {}
        if public is not None:
            reached = _reached(result)
            for position in sorted({c["position"] for c in stored if c["position"] <= reached}):
                found = await self.store.read(cluster, after=position - 1, limit=1)
                if found and found[0].position == position:
                    hashes[position] = found[0].hash
        report = check(stored, hashes.get, _reached(result), public, require=require_checkpoints)
        return _merged(result, report, bool(public_key) or require_checkpoints), report

    @staticmethod
    def verify_export(envelopes: list[dict[str, Any]], checkpoints: list[dict[str, Any]], cluster: str,
                      until: int | None, *, public_key: str | None = None, require_checkpoints: bool = False,
                      progress: Progress | None = None) -> tuple[dict[str, Any], CheckpointReport]:
        """`verify` over an export's envelopes and ChainCheckpoint records (no store)."""
        well_formed(checkpoints)  # a checkpoint whose position is not one is named as such
        end = until if until is not None else max((e["position"] for e in envelopes), default=0)
        # an export may end between an input and its decisions (`export --until N`): check the
        # positions the file holds, as --until does
        result = audit.replay(envelopes, cluster, verify=True, until=end, progress=_every(progress))
        if until is not None:
            checkpoints = [c for c in checkpoints if int(c.get("position", 0)) <= until]
        wanted = {int(c.get("position", 0)) for c in checkpoints}
        hashes = {e["position"]: e.get("hash") for e in envelopes if e["position"] in wanted}
        public = load_public_key(public_key) if public_key else None
        report = check(checkpoints, hashes.get, _reached(result), public, require=require_checkpoints)
        return _merged(result, report, bool(public_key) or require_checkpoints), report

    # -- reads ----------------------------------------------------------------------------------
    async def _rows(self, cluster: str, until: int | None) -> list[tuple[int, str, int, Any]]:
        rows: list[tuple[int, str, int, Any]] = []
        after = 0
        while batch := await self.store.read_data(cluster, after=after, limit=CATCH_UP_BATCH, until=until):
            rows.extend(batch)
            after = batch[-1][0]
        return rows

    async def _recorded_head(self, cluster: str, position: int) -> str:
        """The hash recorded on event `position` (as stored, not recomputed), or the genesis hash."""
        if position <= 0:
            return GENESIS_HASH
        last = await self.store.read(cluster, after=position - 1, limit=1)
        return last[0].hash if last else GENESIS_HASH


def _every(progress: Progress | None, step: int = 1000) -> Progress | None:
    if progress is None:
        return None
    return lambda position: progress(position) if position % step == 0 else None


def _reached(result: ReplayResult) -> int:
    """How far the recomputed chain holds: its checkpoints up to there can be checked."""
    return result.events if result.chain_ok else (result.first_bad_hash or 1) - 1


def _merged(result: ReplayResult, report: CheckpointReport, asked: bool) -> dict[str, Any]:
    """A failing checkpoint breaks the verdict (the first bad position the earlier of the two); the
    checkpoints' report joins the summary when there are any, or they were asked for."""
    another_key = report.another_key and result.chain_ok  # the chain intact, the checkpoints not trusted
    if report.first_bad_position is not None and not another_key and (
            result.chain_ok or report.first_bad_position < (result.first_bad_hash or 0)):
        result.chain_ok, result.first_bad_hash = False, report.first_bad_position
    summary = result.summary()
    if report.count or asked:  # an unsigned stream's report is as before
        summary["checkpoints"] = report.as_json()
    return summary


def summary_export(envelopes: list[dict[str, Any]], cluster: str, until: int | None,
                   progress: Progress | None = None) -> dict[str, Any]:
    """`summary` over an export's envelopes (no store): folded event by event, its head the hash
    the file records on the last event folded."""
    end = until if until is not None else max((e["position"] for e in envelopes), default=0)
    return audit.replay(envelopes, cluster, until=end, progress=_every(progress)).summary()
