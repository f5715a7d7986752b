"""Kafka messages in and out: parsing a command record, its fingerprint, its dead letter.

A record on the command topic is either a valid command (a `Submission` for the application
service, with the message `id` as idempotency key) or malformed (a dead letter carrying the
original bytes and the headers of kafka.md).
"""
from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Any

from service.app.commands import Command, Origin, Submission
from service.clock import utc_now
from service.schemas.common import MAX_BODY_BYTES
from service.schemas.envelope import validate_envelope
from service.schemas.errors import InputValidationError
from service.store.base import DeadLetter, canonical_record_json

# The `error` header is a one-line summary; a message with many errors is cut here.
MAX_ERROR_HEADER = 4096
# A command is held to HTTP's limit (a body over 1 MiB is a 413 there), plus room for its envelope:
# an oversized command would also make events too large for the decision topic of a broker with
# Kafka's default message size limit, stalling the outbox relay behind them.
MAX_COMMAND_BYTES = MAX_BODY_BYTES + 4096
FINGERPRINT_PREFIX = "cmd-sha256:"
KEY_REUSED = "idempotency key reused with a different command"
KEY_TAKEN_BY_HTTP = "idempotency key already used by an HTTP request; not applied again"


def command_fingerprint(command: Command) -> str:
    """sha256 of the canonical command (type, cluster, namespace, name, validated body).

    Prefixed, so that an idempotency record written by the HTTP adapter (whose fingerprint is
    a bare sha256 of method, path and raw body) is told apart from a Kafka one."""
    document = {"type": command.type, "cluster": command.cluster, "namespace": command.namespace,
                "name": command.name, "body": command.body}
    return FINGERPRINT_PREFIX + hashlib.sha256(canonical_record_json(document).encode("utf-8")).hexdigest()


@dataclass(frozen=True)
class Parsed:
    """A valid command record."""
    key: str  # the message id: the idempotency key
    item: Submission

    @property
    def cluster(self) -> str:
        return self.item.command.cluster


@dataclass(frozen=True)
class Malformed:
    error: str


def parse_record(value: bytes | None, *, topic: str, received_at: str | None = None) -> Parsed | Malformed:
    """Validate one record value (service/schemas: JSON, envelope, body)."""
    if value is None:
        return Malformed("(root): empty message (no value)")
    if len(value) > MAX_COMMAND_BYTES:
        return Malformed(f"(root): the message has {len(value)} bytes; a command has at most {MAX_COMMAND_BYTES} "
                         f"(a body over {MAX_BODY_BYTES} bytes is a 413 over HTTP)")
    try:
        message = validate_envelope(value)
    except InputValidationError as exc:
        return Malformed(str(exc))
    except RecursionError:  # pragma: no cover - parse_json already guards this
        return Malformed("(root): nested too deeply")
    command = message.command
    origin = Origin(source="kafka", actor=f"kafka:{topic}", command_id=message.id,
                    received_at=received_at or utc_now())
    return Parsed(message.id, Submission(command, origin, message.id, command_fingerprint(command)))


def parse_values(values: list[bytes | None], topic: str) -> list[Parsed | Malformed]:
    """parse_record for one poll's record values, in order, with one `receivedAt` for the poll
    (precise enough, and a worker process can do it: everything here is picklable)."""
    received: str | None = None
    out: list[Parsed | Malformed] = []
    for value in values:
        parsed = parse_record(value, topic=topic, received_at=received)
        if received is None and isinstance(parsed, Parsed):
            received = parsed.item.origin.received_at
        out.append(parsed)
    return out


def dead_letter(dlq_topic: str, *, key: bytes | None, value: bytes | None, error: str,
                topic: str, partition: int, offset: int) -> DeadLetter:
    """The dead letter of a record: its original bytes and the four headers of kafka.md."""
    text = error if len(error) <= MAX_ERROR_HEADER else error[:MAX_ERROR_HEADER - 1] + "…"
    headers = [("error", text.encode("utf-8")), ("source-topic", topic.encode("utf-8")),
               ("source-partition", str(partition).encode("ascii")),
               ("source-offset", str(offset).encode("ascii"))]
    return DeadLetter(topic=dlq_topic, key=key, value=value if value is not None else b"", headers=headers)


def key_conflict_error(stored_fingerprint: str | None) -> str:
    if stored_fingerprint is not None and not stored_fingerprint.startswith(FINGERPRINT_PREFIX):
        return KEY_TAKEN_BY_HTTP
    return KEY_REUSED


def header(headers: Any, name: str) -> bytes | None:
    """The value of a header in a record's header list (first match)."""
    for key, value in headers or ():
        if key == name:
            return bytes(value)
    return None
