"""Commands: what HTTP requests and Kafka messages ask the service to do, and the answers.

A command carries a body already validated by service/schemas (shape, names, quantities,
CEL); the decider then checks it against the cluster's state. The answer is a typed result
(Accepted, Rejected, KeyReused, Replayed); only the adapters turn results into statuses
and documents (service/api/answers.py).
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal

from service.domain import Rejection
from service.store.base import DeadLetter, IdempotencyRecord


@dataclass(frozen=True)
class Command:
    cluster: str
    type: str  # one of service.app.registry.COMMAND_TYPES
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


@dataclass(frozen=True)
class Submission:
    """A command as an adapter hands it in: with its origin and, when it has one, its
    idempotency key and the fingerprint that tells a retry from another request."""
    command: Command
    origin: Origin
    idempotency_key: str | None = None
    fingerprint: str | None = None


# -- results ---------------------------------------------------------------------------------

@dataclass
class Accepted:
    """Decided (and committed, unless a dry run). `body`: the answer's view plus "decisions"
    (Policy.views), or only {"position", "decisions": [positions]}."""
    command_type: str
    body: dict[str, Any]
    positions: list[int] = field(default_factory=list)  # appended: the input, then its decisions
    dry_run: bool = False

    @property
    def created(self) -> bool:
        return self.command_type in ("SubmitWorkload", "CreatePodGroup") and not self.dry_run


@dataclass
class Rejected:
    """Refused by the state (unknown name, name taken, bad reference). Recorded as a
    CommandRejected event under Policy.record_rejections (then `positions` holds it)."""
    rejection: Rejection
    positions: list[int] = field(default_factory=list)


@dataclass
class KeyReused:
    """The idempotency key is stored for a different request: nothing done."""
    stored_fingerprint: str


@dataclass
class Replayed:
    """The key is stored for this very request: its stored answer, nothing done again."""
    status: int
    body: dict[str, Any]


Result = Accepted | Rejected | KeyReused | Replayed
# What an idempotency record keeps of a result, to answer a retry with: (status, body)
StoredAnswer = Callable[[Result], tuple[int, dict[str, Any]]]


@dataclass(frozen=True)
class Policy:
    """What differs between the adapters, in one object.

    record_rejections: a state rejection becomes a CommandRejected event (Kafka: the stream
      says what happened to every message); otherwise it is answered, nothing recorded (HTTP).
    views: an accepted command's answer carries its view (HTTP); otherwise only positions
      (Kafka: nobody reads the answer but a retry).
    stored_answer: what an idempotency record keeps (the adapter's own encoding of a result).
    key_reused_letter: (index in the unit, the stored record) -> the dead letter written, in the
      same transaction, for a submission whose key is taken by another request (Kafka).
    outside_ownership: among replicas, a unit for a cluster another replica owns is decided here
      anyway, as a writer outside ownership (through the cluster's writer lock, unfenced): Kafka runs,
      until they are handed to their owners (docs/replicas.md). Otherwise such a unit is NotOwner.
    """
    record_rejections: bool
    views: bool
    stored_answer: StoredAnswer
    key_reused_letter: Callable[[int, IdempotencyRecord], DeadLetter] | None = None
    outside_ownership: bool = False
