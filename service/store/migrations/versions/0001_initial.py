"""initial event store schema

Revision ID: 0001
Revises:
Create Date: 2026-11-30
"""
from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None

_BigIntPK = sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def upgrade() -> None:
    op.create_table(
        "events",
        sa.Column("cluster", sa.Text, nullable=False),
        sa.Column("position", sa.BigInteger, nullable=False, autoincrement=False),
        sa.Column("type", sa.Text, nullable=False),
        sa.Column("schema_version", sa.Integer, nullable=False),
        sa.Column("data", sa.Text, nullable=False),
        sa.Column("metadata", sa.Text, nullable=False),
        sa.Column("recorded_at", sa.Text, nullable=False),
        sa.Column("prev_hash", sa.Text, nullable=False),
        sa.Column("hash", sa.Text, nullable=False),
        sa.PrimaryKeyConstraint("cluster", "position", name="events_pkey"),
    )
    op.create_table(
        "clusters",
        sa.Column("name", sa.Text, nullable=False),
        sa.Column("last_position", sa.BigInteger, nullable=False),
        sa.Column("head_hash", sa.Text, nullable=False),
        sa.PrimaryKeyConstraint("name", name="clusters_pkey"),
    )
    op.create_table(
        "idempotency",
        sa.Column("key", sa.Text, nullable=False),
        sa.Column("fingerprint", sa.Text, nullable=False),
        sa.Column("status", sa.Integer, nullable=False),
        sa.Column("body", sa.Text, nullable=False),
        sa.Column("cluster", sa.Text, nullable=True),
        sa.Column("position", sa.BigInteger, nullable=True),
        sa.Column("created_at", sa.Text, nullable=False),
        sa.PrimaryKeyConstraint("key", name="idempotency_pkey"),
    )
    op.create_table(
        "outbox",
        sa.Column("id", _BigIntPK, nullable=False, autoincrement=True),
        sa.Column("topic", sa.Text, nullable=False),
        sa.Column("key", sa.LargeBinary, nullable=True),
        sa.Column("value", sa.LargeBinary, nullable=False),
        sa.Column("headers", sa.Text, nullable=False),
        sa.Column("cluster", sa.Text, nullable=True),
        sa.Column("position", sa.BigInteger, nullable=True),
        sa.PrimaryKeyConstraint("id", name="outbox_pkey"),
    )
    op.create_table(
        "consumer_offsets",
        sa.Column("group", sa.Text, nullable=False),
        sa.Column("topic", sa.Text, nullable=False),
        sa.Column("partition", sa.Integer, nullable=False, autoincrement=False),
        sa.Column("offset", sa.BigInteger, nullable=False),
        sa.PrimaryKeyConstraint("group", "topic", "partition", name="consumer_offsets_pkey"),
    )
    op.create_table(
        "snapshots",
        sa.Column("cluster", sa.Text, nullable=False),
        sa.Column("position", sa.BigInteger, nullable=False, autoincrement=False),
        sa.Column("version", sa.Text, nullable=False),
        sa.Column("blob", sa.LargeBinary, nullable=False),
        sa.PrimaryKeyConstraint("cluster", "position", "version", name="snapshots_pkey"),
    )


def downgrade() -> None:
    for table in ("snapshots", "consumer_offsets", "outbox", "idempotency", "clusters", "events"):
        op.drop_table(table)
