"""Replicas on PostgreSQL (docs/replicas.md): membership with leases on the database's clock, and
one owner per cluster with an epoch. Every statement here is asyncpg on connections of this module's
own: the *membership session* (held as long as the replica runs, renewing the lease) and a small
pool for assignments and the directory.

- `replicas` has a row per replica id: its incarnation (new at every start), advertised URL, lease,
  start and last renewal (the database's `now()`), and the backend pid and start of its membership
  session. A replica is **live** while that session exists (pg_stat_activity) and its last renewal is
  younger than its lease: a killed process is dead at once (its sessions end), a frozen one once its
  lease has run out.
- `owners` has a row per cluster that was ever owned: the owner's id and incarnation (empty when
  released) and the epoch, which grows by one at every change of owner. Changes of owner are
  serialised by one advisory lock (OWNERS_LOCK) and made in one transaction each.
- The fence: a writer's turn calls `gangplank_fence(cluster, id, incarnation, epoch)` (migration
  0003) in its own transaction, which holds the owner row FOR SHARE until the turn ends: an owner
  change waits for the turn, and a turn begun after the change is refused (`Fenced`), whole.
"""
from __future__ import annotations

import asyncio
import secrets
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import asyncpg

from .base import StoreUnavailable

OWNERS_LOCK = 0x6770_6F77_6E65  # "gpowne": every change of owner, and joining
# live(r): the membership session exists and the last renewal is younger than the lease
LIVE = ("(r.renewed_at > now() - make_interval(secs => r.lease_ms / 1000.0) AND EXISTS ("
        "SELECT 1 FROM pg_stat_activity a WHERE a.pid = r.backend_pid AND a.backend_start = r.backend_start))")
_LOADS = f"""
SELECT r.id, r.url, r.incarnation, {LIVE} AS live,
       (SELECT count(*) FROM owners o WHERE o.replica = r.id AND o.incarnation = r.incarnation) AS owned
  FROM replicas r ORDER BY r.id
"""
_OWNER = f"""
SELECT o.replica, o.incarnation, o.epoch, r.url, coalesce({LIVE}, false) AS live
  FROM owners o LEFT JOIN replicas r ON r.id = o.replica AND r.incarnation = o.incarnation
 WHERE o.cluster = $1
"""
_SET_OWNER = """
INSERT INTO owners (cluster, replica, incarnation, epoch, changed_at, reason, previous)
VALUES ($1, $2, $3, $4, now(), $5, $6)
ON CONFLICT (cluster) DO UPDATE SET replica = $2, incarnation = $3, epoch = $4, changed_at = now(), reason = $5,
       previous = $6
"""


class DuplicateReplica(Exception):
    """Another live process holds this replica id."""

    def __init__(self, replica: str, url: str) -> None:
        super().__init__(f"replica id {replica!r} is held by a live replica at {url}")
        self.replica, self.url = replica, url


@dataclass(frozen=True)
class Owner:
    """A cluster's recorded owner: `replica` is empty when it has none (released or never owned)."""
    cluster: str
    replica: str
    incarnation: str
    epoch: int
    url: str | None
    live: bool


@dataclass(frozen=True)
class Change:
    """A change of owner made by `assign` or `hand_over` (reason: new, failover or handover)."""
    owner: Owner
    previous: str | None
    reason: str | None  # None: no change (the cluster had a live owner)


@dataclass
class Load:
    id: str
    url: str
    incarnation: str
    live: bool
    owned: int


@dataclass
class Directory:
    """GET /v1/replicas: the replicas and the clusters each one owns."""
    replicas: list[dict[str, Any]] = field(default_factory=list)


def _stamp(value: datetime) -> str:
    return value.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def libpq(url: str) -> str:
    """The asyncpg (libpq) form of a SQLAlchemy PostgreSQL URL."""
    scheme, rest = url.split("://", 1)
    return "postgresql://" + rest if scheme.startswith("postgres") else url


class Membership:
    """This process as a replica: join, renew, and the directory of owners. See the module docstring."""

    def __init__(self, database_url: str, replica_id: str, url: str, lease_ms: int) -> None:
        self.dsn = libpq(database_url)
        self.id, self.url, self.lease_ms = replica_id, url, lease_ms
        self.incarnation = secrets.token_hex(8)
        self.renewed = float("-inf")  # time.monotonic() when the last successful renewal was sent
        self.evicted = False  # another incarnation took this id (after this one was dead to the others)
        self.left = False  # the membership session was ended on purpose: never renewed again
        self._session: asyncpg.Connection | None = None
        self._pool: asyncpg.Pool | None = None
        self._renewing = asyncio.Lock()

    # -- the lease ----------------------------------------------------------------------------------
    def lease_running(self) -> bool:
        return not self.evicted and time.monotonic() < self.renewed + self.lease_ms / 1000

    def lease_left(self) -> float:
        return self.renewed + self.lease_ms / 1000 - time.monotonic()

    async def _open_session(self) -> tuple[int, datetime]:
        if self._session is not None and not self._session.is_closed():
            self._session.terminate()
        self._session = await asyncpg.connect(self.dsn, timeout=self.lease_ms / 1000)
        row = await self._session.fetchrow(
            "SELECT pid, backend_start FROM pg_stat_activity WHERE pid = pg_backend_pid()")
        return int(row[0]), row[1]

    async def pool(self) -> asyncpg.Pool:
        if self._pool is None:
            self._pool = await asyncpg.create_pool(self.dsn, min_size=1, max_size=4)
        return self._pool

    async def join(self, wait: float = 10.0) -> None:
        """Record this replica (after migrations, before it says it is ready). A live replica with the
        same id is waited for up to `wait` seconds, then DuplicateReplica."""
        self.left = False
        pid, started = await self._open_session()
        pool = await self.pool()
        deadline = time.monotonic() + wait
        while True:
            sent = time.monotonic()
            async with pool.acquire() as conn, conn.transaction():
                await conn.execute("SELECT pg_advisory_xact_lock($1)", OWNERS_LOCK)
                other = await conn.fetchrow(f"SELECT r.url, {LIVE} AS live FROM replicas r WHERE r.id = $1", self.id)
                if other is None or not other["live"]:
                    await conn.execute(
                        "INSERT INTO replicas (id, incarnation, url, lease_ms, started_at, renewed_at, backend_pid,"
                        " backend_start) VALUES ($1, $2, $3, $4, now(), now(), $5, $6) ON CONFLICT (id) DO UPDATE"
                        " SET incarnation = $2, url = $3, lease_ms = $4, started_at = now(), renewed_at = now(),"
                        " backend_pid = $5, backend_start = $6", self.id, self.incarnation, self.url, self.lease_ms,
                        pid, started)
                    self.renewed = sent
                    return
            if time.monotonic() > deadline:
                raise DuplicateReplica(self.id, other["url"])
            await asyncio.sleep(0.2)

    async def renew(self) -> bool:
        """Renew the lease through the membership session (a new session when it was lost). False when
        the database cannot be reached (the lease runs on) or another incarnation took the id."""
        if self.left:
            return False
        async with self._renewing:
            sent = time.monotonic()
            try:
                session = self._session
                if session is None or session.is_closed():
                    pid, started = await self._open_session()
                    session = self._session
                    assert session is not None
                    done = await session.execute(
                        "UPDATE replicas SET renewed_at = now(), backend_pid = $3, backend_start = $4"
                        " WHERE id = $1 AND incarnation = $2", self.id, self.incarnation, pid, started,
                        timeout=self.lease_ms / 1000)
                else:
                    done = await session.execute("UPDATE replicas SET renewed_at = now() WHERE id = $1"
                                                 " AND incarnation = $2", self.id, self.incarnation,
                                                 timeout=self.lease_ms / 1000)
            except (TimeoutError, OSError, asyncpg.PostgresError, asyncpg.InterfaceError):
                if self._session is not None and not self._session.is_closed():
                    self._session.terminate()
                self._session = None
                return False
            if done.endswith(" 0"):
                self.evicted = True
                return False
            self.renewed = sent
            return True

    # -- owners ------------------------------------------------------------------------------------
    async def owner(self, cluster: str) -> Owner | None:
        """The cluster's recorded owner and whether it is live (None: never owned)."""
        row = await self._fetchrow(_OWNER, cluster)
        return None if row is None else Owner(cluster, row[0], row[1], int(row[2]), row[3], bool(row[4]))

    async def mine(self) -> dict[str, Change]:
        """The clusters recorded as this incarnation's: their epochs and how they came to it."""
        rows = await self._fetch("SELECT cluster, epoch, reason, previous FROM owners WHERE replica = $1"
                                 " AND incarnation = $2", self.id, self.incarnation)
        return {r[0]: Change(Owner(r[0], self.id, self.incarnation, int(r[1]), self.url, True), r[3], r[2])
                for r in rows}

    async def loads(self) -> list[Load]:
        rows = await self._fetch(_LOADS)
        return [Load(r[0], r[1], r[2], bool(r[3]), int(r[4])) for r in rows]

    async def assign(self, cluster: str) -> Change:
        """The cluster's owner, given one when it has no live owner: the live replica that owns the
        fewest clusters, this one first among equals, then the smallest id."""
        async def change(conn: asyncpg.Connection, current: Owner | None, live: list[Load]) -> Change:
            if current is not None and current.live:
                return Change(current, current.replica, None)
            if not live:
                raise StoreUnavailable("no live replica")
            target = min(live, key=lambda r: (r.owned, r.id != self.id, r.id))
            reason = "new" if current is None or not current.replica else "failover"
            return await self._record(conn, cluster, current, target, reason)
        result: Change = await self._changing(cluster, change)
        return result

    async def hand_over(self, cluster: str, epoch: int, to: str | None = None) -> Change | None:
        """Give an owned cluster to `to` (or the least loaded other live replica); with no live peer,
        release it. None when it is no longer this replica's at `epoch`."""
        async def change(conn: asyncpg.Connection, current: Owner | None, live: list[Load]) -> Change | None:
            if current is None or (current.replica, current.incarnation, current.epoch) != \
                    (self.id, self.incarnation, epoch):
                return None
            peers = [r for r in live if r.id != self.id and (to is None or r.id == to)]
            if not peers:
                await conn.execute(_SET_OWNER, cluster, "", "", epoch + 1, "release", self.id)
                return Change(Owner(cluster, "", "", epoch + 1, None, False), self.id, "release")
            target = min(peers, key=lambda r: (r.owned, r.id))
            return await self._record(conn, cluster, current, target, "handover")
        result: Change | None = await self._changing(cluster, change)
        return result

    async def _record(self, conn: asyncpg.Connection, cluster: str, current: Owner | None, target: Load,
                      reason: str) -> Change:
        epoch = (current.epoch if current is not None else 0) + 1
        previous = current.replica if current is not None and current.replica else None
        await conn.execute(_SET_OWNER, cluster, target.id, target.incarnation, epoch, reason, previous)
        return Change(Owner(cluster, target.id, target.incarnation, epoch, target.url, True), previous, reason)

    async def _changing(self, cluster: str, change: Any) -> Any:
        """One change of owner: under OWNERS_LOCK, the owner row locked (a turn of its owner in flight
        is waited for: its FOR SHARE), the live replicas and their loads read in the same transaction."""
        try:
            pool = await self.pool()
            async with pool.acquire() as conn, conn.transaction():
                await conn.execute(f"SET LOCAL lock_timeout = {max(5000, 2 * self.lease_ms)}")
                await conn.execute("SELECT pg_advisory_xact_lock($1)", OWNERS_LOCK)
                await conn.execute("SELECT 1 FROM owners WHERE cluster = $1 FOR UPDATE", cluster)
                row = await conn.fetchrow(_OWNER, cluster)
                current = None if row is None else Owner(cluster, row[0], row[1], int(row[2]), row[3], bool(row[4]))
                loads = [Load(r[0], r[1], r[2], bool(r[3]), int(r[4])) for r in await conn.fetch(_LOADS)]
                return await change(conn, current, [r for r in loads if r.live])
        except (TimeoutError, OSError, asyncpg.InterfaceError, asyncpg.PostgresError) as exc:
            raise StoreUnavailable(f"{type(exc).__name__}: {exc}") from exc

    async def directory(self) -> list[dict[str, Any]]:
        """Every live replica and every dead one still recorded as an owner, in id order, with the
        clusters each owns in name order."""
        rows = await self._fetch(f"SELECT r.id, r.url, r.incarnation, {LIVE} AS live, r.started_at, r.renewed_at"
                                 " FROM replicas r ORDER BY r.id")
        owned = await self._fetch("SELECT cluster, replica, incarnation, epoch FROM owners WHERE replica <> ''"
                                  " ORDER BY cluster")
        items = []
        for r in rows:
            clusters = [{"name": o[0], "epoch": int(o[3])} for o in owned if (o[1], o[2]) == (r[0], r[2])]
            if r[3] or clusters:
                items.append({"id": r[0], "url": r[1], "live": bool(r[3]), "startedAt": _stamp(r[4]),
                              "renewedAt": _stamp(r[5]), "clusters": clusters})
        return items

    async def _fetch(self, sql: str, *args: Any) -> list[Any]:
        try:
            pool = await self.pool()
            return list(await pool.fetch(sql, *args))
        except (TimeoutError, OSError, asyncpg.InterfaceError, asyncpg.PostgresError) as exc:
            raise StoreUnavailable(f"{type(exc).__name__}: {exc}") from exc

    async def _fetchrow(self, sql: str, *args: Any) -> Any:
        rows = await self._fetch(sql, *args)
        return rows[0] if rows else None

    async def leave(self) -> None:
        """End the membership session: the others see this replica dead at once. Lookups of owners (the
        pool) go on until `close`, for the requests still being answered."""
        self.left = True
        if self._session is not None and not self._session.is_closed():
            await self._session.close()
        self._session = None

    async def close(self) -> None:
        await self.leave()
        if self._pool is not None:
            await self._pool.close()
            self._pool = None
