"""The PostgreSQL statements of the SQL store's hot paths, run on asyncpg directly (one round
trip each, no SQLAlchemy statement overhead): the append (one data-modifying CTE behind the
cluster row's guard, see service/store/postgres.py) and the single-statement reads."""
from __future__ import annotations

import re

PG_GUARD_UPDATE = """
    UPDATE clusters SET last_position = :new_last, head_hash = :new_head
     WHERE name = :cluster AND last_position = :expected AND head_hash = :prev_head
    RETURNING name"""
PG_GUARD_CREATE = """
    INSERT INTO clusters (name, last_position, head_hash) VALUES (:cluster, :new_last, :new_head)
    ON CONFLICT (name) DO NOTHING
    RETURNING name"""
PG_APPEND = """
WITH guard AS ({guard}),
ev AS (
    INSERT INTO events (cluster, position, type, schema_version, data, metadata, recorded_at, prev_hash, hash)
    SELECT :cluster, u.position, u.type, u.schema_version, u.data, u.metadata, :recorded_at, u.prev_hash, u.hash
      FROM unnest(CAST(:e_position AS bigint[]), CAST(:e_type AS text[]), CAST(:e_version AS integer[]),
                  CAST(:e_data AS text[]), CAST(:e_metadata AS text[]), CAST(:e_prev AS text[]),
                  CAST(:e_hash AS text[]))
           AS u(position, type, schema_version, data, metadata, prev_hash, hash)
     WHERE EXISTS (SELECT 1 FROM guard)),
idem AS (
    INSERT INTO idempotency (key, fingerprint, status, body, cluster, position, created_at)
    SELECT u.key, u.fingerprint, u.status, u.body, u.cluster, u.position, :recorded_at
      FROM unnest(CAST(:i_key AS text[]), CAST(:i_fingerprint AS text[]), CAST(:i_status AS integer[]),
                  CAST(:i_body AS text[]), CAST(:i_cluster AS text[]), CAST(:i_position AS bigint[]))
           AS u(key, fingerprint, status, body, cluster, position)
     WHERE EXISTS (SELECT 1 FROM guard)),
obx AS (
    INSERT INTO outbox (topic, key, value, headers, cluster, position)
    SELECT u.topic, u.key, u.value, u.headers, u.cluster, u.position
      FROM unnest(CAST(:o_topic AS text[]), CAST(:o_key AS bytea[]), CAST(:o_value AS bytea[]),
                  CAST(:o_headers AS text[]), CAST(:o_cluster AS text[]), CAST(:o_position AS bigint[]))
           WITH ORDINALITY AS u(topic, key, value, headers, cluster, position, ord)
     WHERE EXISTS (SELECT 1 FROM guard)
     ORDER BY u.ord),
offs AS (
    INSERT INTO consumer_offsets ("group", topic, partition, "offset")
    SELECT u.g, u.t, u.p, u.o
      FROM unnest(CAST(:f_group AS text[]), CAST(:f_topic AS text[]), CAST(:f_partition AS integer[]),
                  CAST(:f_offset AS bigint[])) AS u(g, t, p, o)
     WHERE EXISTS (SELECT 1 FROM guard)
    ON CONFLICT ("group", topic, partition) DO UPDATE SET "offset" = EXCLUDED."offset")
SELECT count(*) FROM guard
"""


def _numbered(sql: str) -> tuple[str, tuple[str, ...]]:
    """Named :params to asyncpg's $1.. placeholders, and the names in order."""
    names: list[str] = []

    def number(match: re.Match[str]) -> str:
        if match.group(1) not in names:
            names.append(match.group(1))
        return f"${names.index(match.group(1)) + 1}"

    return re.sub(r"(?<![:\w]):([a-z_]+)", number, sql), tuple(names)


# The hot path runs on the pool's asyncpg connection directly (one round trip, no SQLAlchemy
# statement overhead); everything else goes through SQLAlchemy.
PG_APPEND_UPDATE = _numbered(PG_APPEND.format(guard=PG_GUARD_UPDATE))
PG_APPEND_CREATE = _numbered(PG_APPEND.format(guard=PG_GUARD_CREATE))

PG_HEAD = "SELECT last_position, head_hash FROM clusters WHERE name = $1"
PG_IDEMPOTENCY = "SELECT key, fingerprint, status, body, cluster, position FROM idempotency WHERE key = $1"
# one row per stored key, or one row of NULLs; every row carries the cluster's last position
PG_HEAD_AND_IDEMPOTENCY = (
    "SELECT (SELECT last_position FROM clusters WHERE name = $1), i.key, i.fingerprint, i.status, i.body,"
    " i.cluster, i.position FROM (SELECT 1) AS one"
    " LEFT JOIN idempotency AS i ON i.key = ANY($2::text[])")
# Positions are gapless per cluster, so `limit` events after `after` are at most positions
# after+1 .. after+limit: the reads bound the range too, so that the plan never depends on the
# table's statistics (without them, e.g. right after a bulk load, PostgreSQL bitmap-scans every
# event after `after` and sorts them for each chunk: a long replay became quadratic).
PG_RANGE = " position > $2 AND position <= LEAST($4, COALESCE($2 + $3, $4))"
PG_READ_DATA = ("SELECT position, type, schema_version, data, hash FROM events"
                 " WHERE cluster = $1 AND" + PG_RANGE + " ORDER BY position LIMIT $3")
PG_READ_TEXT = ("SELECT position, type, schema_version, data FROM events"
                 " WHERE cluster = $1 AND" + PG_RANGE + " ORDER BY position LIMIT $3")
PG_OUTBOX_BATCH = "SELECT id, topic, key, value, headers, cluster, position FROM outbox ORDER BY id LIMIT $1"
PG_READ = ("SELECT cluster, position, type, schema_version, data, metadata, recorded_at, prev_hash, hash"
            " FROM events WHERE cluster = $1 AND" + PG_RANGE.replace("$4", "9223372036854775807")
            + " ORDER BY position LIMIT $3")
PG_READ_UNTIL = ("SELECT cluster, position, type, schema_version, data, metadata, recorded_at, prev_hash, hash"
                  " FROM events WHERE cluster = $1 AND" + PG_RANGE + " ORDER BY position LIMIT $3")
# A writer's turn's record without events (on the turn's connection): the append's inserts of
# idempotency records, outbox rows and offsets, behind a guard that always holds.
PG_RECORD = _numbered(PG_APPEND.format(guard="SELECT 1 AS name"))
