"""Signed checkpoints in SQL (PostgreSQL and SQLite): the `checkpoints` table, written with its
outbox record in one transaction. A mixin of SqlEventStore (service/store/sql.py)."""
from __future__ import annotations

from contextlib import AbstractAsyncContextManager
from typing import Any

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncConnection

from .base import Checkpoint
from .schema import checkpoints as t_checkpoints
from .schema import outbox as t_outbox
from .sql_errors import finishes_when_cancelled, translating


class SqlCheckpoints:
    _reader: Any
    _insert: Any

    def _write_tx(self) -> AbstractAsyncContextManager[AsyncConnection]:  # SqlEventStore's
        raise NotImplementedError

    @translating
    @finishes_when_cancelled
    async def save_checkpoint(self, checkpoint: Checkpoint, *, outbox_topic: str | None = None) -> None:
        stmt = self._insert(t_checkpoints).values(
            cluster=checkpoint.cluster, position=checkpoint.position, key_id=checkpoint.key_id,
            hash=checkpoint.hash, signed_at=checkpoint.signed_at, signature=checkpoint.signature,
        ).on_conflict_do_nothing(index_elements=[t_checkpoints.c.cluster, t_checkpoints.c.position,
                                                 t_checkpoints.c.key_id])
        async with self._write_tx() as conn:
            inserted = (await conn.execute(stmt)).rowcount
            if outbox_topic is not None and inserted:
                await conn.execute(sa.insert(t_outbox).values(
                    topic=outbox_topic, key=checkpoint.cluster.encode("utf-8"),
                    value=checkpoint.record_json().encode("utf-8"), headers="[]", cluster=checkpoint.cluster,
                    position=None))

    @translating
    async def checkpoints(self, cluster: str, until: int | None = None) -> list[Checkpoint]:
        c = t_checkpoints.c
        stmt = sa.select(c.cluster, c.position, c.hash, c.signed_at, c.key_id, c.signature).where(c.cluster == cluster)
        if until is not None:
            stmt = stmt.where(c.position <= until)
        async with self._reader.connect() as conn:
            rows = (await conn.execute(stmt.order_by(c.position, c.key_id))).all()
        return [Checkpoint(r[0], int(r[1]), r[2], r[3], r[4], r[5]) for r in rows]
