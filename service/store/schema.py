"""Table definitions used by the SQL event store.

The tables are created only by the Alembic migrations in service/store/migrations/versions/; these
definitions mirror them so that the store can build its statements with SQLAlchemy Core.
JSON columns are TEXT on both backends: `data` and `metadata` hold the canonical JSON
that was hashed, byte for byte.
"""
from __future__ import annotations

import sqlalchemy as sa

metadata = sa.MetaData()

# BIGINT on PostgreSQL; on SQLite an autoincrementing key must be declared INTEGER.
BigInt = sa.BigInteger().with_variant(sa.Integer(), "sqlite")

events = sa.Table(
    "events", metadata,
    sa.Column("cluster", sa.Text, primary_key=True),
    sa.Column("position", sa.BigInteger, primary_key=True, autoincrement=False),
    sa.Column("type", sa.Text, nullable=False),
    sa.Column("schema_version", sa.Integer, nullable=False),
    sa.Column("data", sa.Text, nullable=False),
    sa.Column("metadata", sa.Text, nullable=False),
    sa.Column("recorded_at", sa.Text, nullable=False),
    sa.Column("prev_hash", sa.Text, nullable=False),
    sa.Column("hash", sa.Text, nullable=False),
)

clusters = sa.Table(
    "clusters", metadata,
    sa.Column("name", sa.Text, primary_key=True),
    sa.Column("last_position", sa.BigInteger, nullable=False),
    sa.Column("head_hash", sa.Text, nullable=False),
)

idempotency = sa.Table(
    "idempotency", metadata,
    sa.Column("key", sa.Text, primary_key=True),
    sa.Column("fingerprint", sa.Text, nullable=False),
    sa.Column("status", sa.Integer, nullable=False),
    sa.Column("body", sa.Text, nullable=False),
    sa.Column("cluster", sa.Text, nullable=True),
    sa.Column("position", sa.BigInteger, nullable=True),
    sa.Column("created_at", sa.Text, nullable=False),
)

outbox = sa.Table(
    "outbox", metadata,
    sa.Column("id", BigInt, primary_key=True, autoincrement=True),
    sa.Column("topic", sa.Text, nullable=False),
    sa.Column("key", sa.LargeBinary, nullable=True),
    sa.Column("value", sa.LargeBinary, nullable=False),
    sa.Column("headers", sa.Text, nullable=False),
    sa.Column("cluster", sa.Text, nullable=True),
    sa.Column("position", sa.BigInteger, nullable=True),
)

consumer_offsets = sa.Table(
    "consumer_offsets", metadata,
    sa.Column("group", sa.Text, primary_key=True),
    sa.Column("topic", sa.Text, primary_key=True),
    sa.Column("partition", sa.Integer, primary_key=True, autoincrement=False),
    sa.Column("offset", sa.BigInteger, nullable=False),
)

snapshots = sa.Table(
    "snapshots", metadata,
    sa.Column("cluster", sa.Text, primary_key=True),
    sa.Column("position", sa.BigInteger, primary_key=True, autoincrement=False),
    sa.Column("version", sa.Text, primary_key=True),
    sa.Column("blob", sa.LargeBinary, nullable=False),
)

# signed chain heads (audit.md, *Signed checkpoints*): beside the stream, never events
checkpoints = sa.Table(
    "checkpoints", metadata,
    sa.Column("cluster", sa.Text, primary_key=True),
    sa.Column("position", sa.BigInteger, primary_key=True, autoincrement=False),
    sa.Column("key_id", sa.Text, primary_key=True),
    sa.Column("hash", sa.Text, nullable=False),
    sa.Column("signed_at", sa.Text, nullable=False),
    sa.Column("signature", sa.Text, nullable=False),
)

# replicas.md: membership (one row per replica id, its lease renewed on the database's clock) and
# each cluster's owner with its epoch (service/store/membership.py; used on PostgreSQL only)
replicas = sa.Table(
    "replicas", metadata,
    sa.Column("id", sa.Text, primary_key=True),
    sa.Column("incarnation", sa.Text, nullable=False),
    sa.Column("url", sa.Text, nullable=False),
    sa.Column("lease_ms", sa.Integer, nullable=False),
    sa.Column("started_at", sa.DateTime(timezone=True), nullable=False),
    sa.Column("renewed_at", sa.DateTime(timezone=True), nullable=False),
    sa.Column("backend_pid", sa.Integer, nullable=False),
    sa.Column("backend_start", sa.DateTime(timezone=True), nullable=True),
)

owners = sa.Table(
    "owners", metadata,
    sa.Column("cluster", sa.Text, primary_key=True),
    sa.Column("replica", sa.Text, nullable=False),
    sa.Column("incarnation", sa.Text, nullable=False),
    sa.Column("epoch", sa.BigInteger, nullable=False),
    sa.Column("changed_at", sa.DateTime(timezone=True), nullable=False),
    sa.Column("reason", sa.Text, nullable=True),
    sa.Column("previous", sa.Text, nullable=True),
)

ALL_TABLES = ("events", "clusters", "idempotency", "outbox", "consumer_offsets", "snapshots", "checkpoints",
              "replicas", "owners")
