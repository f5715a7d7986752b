"""replicas: membership with leases, one owner per cluster with an epoch, the append's fence

Revision ID: 0003
Revises: 0002
Create Date: 2026-12-06
"""
from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None

# Raised inside a writer's turn when the cluster's owner is not the replica (incarnation, epoch)
# that takes the turn. FOR SHARE holds the owner row until the turn ends, so an owner change waits
# for the turn and a turn that starts after the change is refused (service/store/membership.py).
FENCE = """
CREATE OR REPLACE FUNCTION gangplank_fence(p_cluster text, p_replica text, p_incarnation text, p_epoch bigint)
RETURNS void LANGUAGE plpgsql AS $$
BEGIN
  PERFORM 1 FROM owners WHERE cluster = p_cluster AND replica = p_replica AND incarnation = p_incarnation
     AND epoch = p_epoch FOR SHARE;
  IF NOT FOUND THEN
    RAISE EXCEPTION 'gangplank fenced: cluster % is not owned by % at epoch %', p_cluster, p_replica, p_epoch
      USING ERRCODE = 'GP409';
  END IF;
END $$
"""


def upgrade() -> None:
    op.create_table(
        "replicas",
        sa.Column("id", sa.Text, primary_key=True),
        sa.Column("incarnation", sa.Text, nullable=False),
        sa.Column("url", sa.Text, nullable=False),
        sa.Column("lease_ms", sa.Integer, nullable=False),
        sa.Column("started_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("renewed_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("backend_pid", sa.Integer, nullable=False),
        sa.Column("backend_start", sa.DateTime(timezone=True), nullable=True),
    )
    op.create_table(
        "owners",
        sa.Column("cluster", sa.Text, primary_key=True),
        sa.Column("replica", sa.Text, nullable=False),
        sa.Column("incarnation", sa.Text, nullable=False),
        sa.Column("epoch", sa.BigInteger, nullable=False),
        sa.Column("changed_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("reason", sa.Text, nullable=True),  # of the last change: new, failover, handover, release
        sa.Column("previous", sa.Text, nullable=True),  # the owner before it
    )
    if op.get_bind().dialect.name == "postgresql":
        op.execute(FENCE)


def downgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        op.execute("DROP FUNCTION IF EXISTS gangplank_fence(text, text, text, bigint)")
    op.drop_table("owners")
    op.drop_table("replicas")
