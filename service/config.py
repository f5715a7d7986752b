"""Settings of a Gangplank process, from CLI flags and GANGPLANK_* environment variables."""
from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

DEFAULT_SQLITE = "gangplank.db"


def default_database_url() -> str:
    return os.environ.get("GANGPLANK_DATABASE_URL") or f"sqlite+aiosqlite:///{Path.cwd() / DEFAULT_SQLITE}"


def _flag(name: str, default: bool) -> bool:
    value = os.environ.get(name)
    return default if value is None else value.strip().lower() in ("1", "true", "yes", "on")


def _optional_int(value: str | None) -> int | None:
    return int(value) if value is not None and value.strip() else None


@dataclass
class Settings:
    database_url: str
    host: str = "127.0.0.1"
    port: int = 8000
    tokens_file: str | None = None
    migrate: bool = True
    kafka_bootstrap: str | None = None
    commands_topic: str = "gangplank.commands"
    dlq_topic: str = "gangplank.commands.dlq"
    decisions_topic: str = "gangplank.decisions"
    consumer_group: str = "gangplank"
    kafka_idempotence: bool = True  # Apache Kafka; brokers without InitProducerId (Tansu) need False
    # when the service creates the topics; None: the broker's default (num.partitions,
    # default.replication.factor)
    kafka_partitions: int | None = None
    kafka_replication_factor: int | None = None
    kafka_session_timeout_ms: int = 10_000  # consumer group session: how soon a dead replica's partitions move
    # command records are validated in this many worker processes, a poll ahead of deciding (0: inline)
    kafka_parse_workers: int = 1 if (os.cpu_count() or 1) > 1 else 0
    # How long the broker may hold an empty fetch. Apache Kafka answers as soon as a record arrives
    # (fetch.min.bytes 1), so this only paces idle fetches; brokers that answer only at the deadline
    # (Tansu) add up to this much latency to every command.
    kafka_fetch_max_wait_ms: int = 50
    snapshot_every: int = 1000
    signing_key: str | None = None  # an Ed25519 private key file (PEM, PKCS#8): sign chain checkpoints
    checkpoint_events: int = 1000  # a checkpoint every this many events
    checkpoint_seconds: float = 60.0  # and at least this often while events arrive
    replica_id: str | None = None  # replicas.md: None until serve resolves it (service.replica)
    advertise_url: str | None = None
    replica_lease_ms: int = 2000  # GANGPLANK_REPLICA_LEASE_MS, 500 to 60000 (docs/replicas.md)
    peer_token: str | None = None  # GANGPLANK_PEER_TOKEN: a token of the replica role, for the routes between replicas

    @classmethod
    def from_env(cls, **overrides: object) -> Settings:
        env = os.environ
        values: dict[str, object] = {
            "database_url": default_database_url(),
            "tokens_file": env.get("GANGPLANK_TOKENS") or None,
            "kafka_bootstrap": env.get("GANGPLANK_KAFKA_BOOTSTRAP") or None,
            "commands_topic": env.get("GANGPLANK_COMMANDS_TOPIC", cls.commands_topic),
            "dlq_topic": env.get("GANGPLANK_DLQ_TOPIC", cls.dlq_topic),
            "decisions_topic": env.get("GANGPLANK_DECISIONS_TOPIC", cls.decisions_topic),
            "consumer_group": env.get("GANGPLANK_CONSUMER_GROUP", cls.consumer_group),
            "kafka_idempotence": _flag("GANGPLANK_KAFKA_IDEMPOTENCE", True),
            "kafka_partitions": _optional_int(env.get("GANGPLANK_KAFKA_PARTITIONS")),
            "kafka_replication_factor": _optional_int(env.get("GANGPLANK_KAFKA_REPLICATION_FACTOR")),
            "kafka_session_timeout_ms": int(env.get("GANGPLANK_KAFKA_SESSION_TIMEOUT_MS",
                                                    cls.kafka_session_timeout_ms)),
            "kafka_parse_workers": int(env.get("GANGPLANK_KAFKA_PARSE_WORKERS", cls.kafka_parse_workers)),
            "kafka_fetch_max_wait_ms": int(env.get("GANGPLANK_KAFKA_FETCH_MAX_WAIT_MS",
                                                   cls.kafka_fetch_max_wait_ms)),
            "snapshot_every": int(env.get("GANGPLANK_SNAPSHOT_EVERY", cls.snapshot_every)),
            "signing_key": env.get("GANGPLANK_SIGNING_KEY") or None,
            "checkpoint_events": int(env.get("GANGPLANK_CHECKPOINT_EVENTS", cls.checkpoint_events)),
            "checkpoint_seconds": float(env.get("GANGPLANK_CHECKPOINT_SECONDS", cls.checkpoint_seconds)),
            "replica_id": env.get("GANGPLANK_REPLICA_ID") or None,
            "advertise_url": env.get("GANGPLANK_ADVERTISE_URL") or None,
            "replica_lease_ms": int(env.get("GANGPLANK_REPLICA_LEASE_MS", cls.replica_lease_ms)),
            "peer_token": env.get("GANGPLANK_PEER_TOKEN") or None,
        }
        values.update({k: v for k, v in overrides.items() if v is not None})
        return cls(**values)  # type: ignore[arg-type]
