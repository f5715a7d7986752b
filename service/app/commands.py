"""Commands: what HTTP requests and Kafka messages ask the service to do.

A command carries a body already validated by service/schemas (shape, names,
quantities, CEL); the decider then checks it against the cluster's state.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

CommandType = Literal[
    "UpsertNode", "RemoveNode", "UpsertDeviceClass", "RemoveDeviceClass",
    "UpsertResourceSlice", "RemoveResourceSlice", "UpsertPriorityClass",
    "SubmitWorkload", "DeleteWorkload",
]
COMMAND_TYPES: tuple[str, ...] = CommandType.__args__  # type: ignore[attr-defined]


@dataclass(frozen=True)
class Command:
    cluster: str
    type: str  # one of COMMAND_TYPES
    name: str
    namespace: str | None = None  # workloads only
    body: dict[str, Any] | None = None  # upserts and submissions: the validated JSON body


@dataclass(frozen=True)
class Origin:
    """Who asked and how; recorded in every event's metadata."""
    source: Literal["http", "kafka", "cli"]
    actor: str = "anonymous"
    command_id: str | None = None  # Idempotency-Key or Kafka message id
    received_at: str | None = None  # RFC 3339 UTC with microseconds; set by the adapter


@dataclass
class Outcome:
    """The answer to a command: an HTTP-like status and body.

    status: 200/201 accepted, 404 unknown name, 409 duplicate name or idempotency
    key reused with another request, 422 rejected by state (e.g. unknown priority
    class). `body` is the view (+ "decisions") on success, a problem document otherwise.
    """
    status: int
    body: dict[str, Any]
    positions: list[int] = field(default_factory=list)  # positions appended (empty when nothing recorded)
    replayed: bool = False  # answered from a stored idempotency record
