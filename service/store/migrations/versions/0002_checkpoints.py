"""signed checkpoints of the hash chain (audit.md, Signed checkpoints)

Revision ID: 0002
Revises: 0001
Create Date: 2026-12-01
"""
from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "checkpoints",
        sa.Column("cluster", sa.Text, nullable=False),
        sa.Column("position", sa.BigInteger, nullable=False, autoincrement=False),
        sa.Column("key_id", sa.Text, nullable=False),
        sa.Column("hash", sa.Text, nullable=False),
        sa.Column("signed_at", sa.Text, nullable=False),
        sa.Column("signature", sa.Text, nullable=False),
        sa.PrimaryKeyConstraint("cluster", "position", "key_id", name="checkpoints_pkey"),
    )


def downgrade() -> None:
    op.drop_table("checkpoints")
