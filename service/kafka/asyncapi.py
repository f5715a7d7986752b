"""The AsyncAPI 3.0 document of the Kafka topics (shared/spec/kafka.md), self-contained.

Generated into contracts/asyncapi.json by `python -m service.contracts`. The JSON Schemas are
those of contracts/schemas/ (the same code generates both), with references rewritten to point
into `components.schemas`; the event envelope and the dead-letter headers are described here.
Topic names are the defaults; each is a setting (docs/kafka.md).
"""
from __future__ import annotations

import copy
from typing import Any

from service.config import Settings
from service.domain.model import events as ev
from service.schemas.jsonschema import component_schemas, envelope_schema
from service.schemas.names import CLUSTER_PATTERN

BINDING_VERSION = "0.5.0"
HASH = {"type": "string", "pattern": "^[0-9a-f]{64}$"}
TIMESTAMP = {"type": "string", "format": "date-time",
             "description": "RFC 3339 UTC with microseconds, e.g. 2026-11-30T10:00:00.001234Z"}
CLUSTER = {"type": "string", "pattern": CLUSTER_PATTERN, "maxLength": 63}
DIGITS = {"type": "string", "pattern": "^[0-9]+$"}


def _rewrite_refs(node: Any) -> Any:
    """"Node.json" (a file beside CommandEnvelope.json) -> "#/components/schemas/Node"."""
    if isinstance(node, list):
        return [_rewrite_refs(item) for item in node]
    if not isinstance(node, dict):
        return node
    out = {}
    for key, value in node.items():
        if key == "$ref" and isinstance(value, str) and value.endswith(".json") and "/" not in value:
            out[key] = f"#/components/schemas/{value[:-len('.json')]}"
        else:
            out[key] = _rewrite_refs(value)
    return out


def command_envelope_schema() -> dict[str, Any]:
    schema: dict[str, Any] = _rewrite_refs(copy.deepcopy(envelope_schema()))
    schema.pop("$schema", None)
    return schema


def event_envelope_schema() -> dict[str, Any]:
    """events.md: one event of a cluster's stream, as stored and as published."""
    return {
        "title": "EventEnvelope",
        "description": "One event of a cluster's stream. `position` is gapless per cluster; "
                       "`hash` = sha256(prevHash + canonical JSON of the envelope without hash and prevHash). "
                       "Delivery is at least once: dedupe on (cluster, position).",
        "type": "object",
        "additionalProperties": False,
        "required": ["cluster", "position", "type", "schemaVersion", "data", "metadata", "recordedAt",
                     "prevHash", "hash"],
        "properties": {
            "cluster": CLUSTER,
            "position": {"type": "integer", "minimum": 1},
            "type": {"type": "string", "enum": list(ev.INPUT_TYPES + ev.DECISION_TYPES)},
            "schemaVersion": {"type": "integer", "minimum": 1},
            "data": {"type": "object", "description": "The event's data; its shape is fixed by type and schemaVersion."},
            "metadata": {
                "type": "object",
                "required": ["commandId", "source", "actor", "causationPosition", "receivedAt"],
                "properties": {
                    "commandId": {"type": ["string", "null"],
                                  "description": "The Kafka message id or HTTP Idempotency-Key (a generated id "
                                                 "for an HTTP request without one)."},
                    "source": {"type": "string", "enum": ["http", "kafka", "cli"]},
                    "actor": {"type": "string"},
                    "causationPosition": {"type": ["integer", "null"], "minimum": 1,
                                          "description": "null for an input; for a decision, the position of "
                                                         "the input that caused it."},
                    "receivedAt": TIMESTAMP,
                },
            },
            "recordedAt": TIMESTAMP,
            "prevHash": HASH,
            "hash": HASH,
        },
    }


def dead_letter_headers_schema() -> dict[str, Any]:
    return {
        "title": "DeadLetterHeaders",
        "description": "Kafka record headers of a dead letter (values are UTF-8 bytes).",
        "type": "object",
        "required": ["error", "source-topic", "source-partition", "source-offset"],
        "properties": {
            "error": {"type": "string", "description": "Why the message was refused: the validation errors as "
                                                       "`loc: msg; ...` (cut at 4,096 characters), or "
                                                       "`idempotency key reused with a different command`."},
            "source-topic": {"type": "string"},
            "source-partition": DIGITS,
            "source-offset": DIGITS,
        },
    }


def chain_checkpoint_schema() -> dict[str, Any]:
    """A ChainCheckpoint record (audit.md, *Signed checkpoints*)."""
    text = {"type": "string"}
    return {
        "title": "ChainCheckpoint", "type": "object", "additionalProperties": False,
        "required": ["type", "cluster", "position", "hash", "signedAt", "keyId", "signature"],
        "properties": {
            "type": {"const": "ChainCheckpoint"}, "cluster": text, "position": {"type": "integer", "minimum": 1},
            "hash": {"type": "string", "pattern": "^[0-9a-f]{64}$", "description": "The chain hash at position."},
            "signedAt": text,
            "keyId": {"type": "string", "pattern": "^[0-9a-f]{64}$",
                      "description": "SHA-256 (hex) of the raw Ed25519 public key."},
            "signature": {"type": "string", "description": "Base64 Ed25519 signature of the canonical JSON of "
                                                           "cluster, position, hash, signedAt and keyId."},
        },
    }


def asyncapi_document(settings: Settings | None = None) -> dict[str, Any]:
    s = settings or Settings(database_url="")
    schemas: dict[str, Any] = dict(component_schemas())
    for name, schema in (("CommandEnvelope", command_envelope_schema()),
                         ("EventEnvelope", event_envelope_schema()),
                         ("DeadLetterHeaders", dead_letter_headers_schema()),
                         ("ChainCheckpoint", chain_checkpoint_schema())):
        assert name not in schemas, name
        schemas[name] = schema
    return {
        "asyncapi": "3.0.0",
        "info": {
            "title": "Gangplank Kafka API",
            "version": "1.0.0",
            "description": "Commands in on one topic, every event out on another, malformed commands to a dead-letter "
                           "topic (docs/kafka.md). Topic names and the consumer group are settings; the "
                           "defaults are shown. See docs/kafka.md for the delivery guarantees.",
        },
        "defaultContentType": "application/json",
        "channels": _channels(s),
        "operations": _operations(s),
        "components": {"messages": _messages(), "schemas": schemas},
    }


def _channels(s: Settings) -> dict[str, Any]:
    # a topic's partitions and replicas only when set: by default the broker's defaults decide
    kafka_binding = {**{k: v for k, v in (("partitions", s.kafka_partitions),
                                          ("replicas", s.kafka_replication_factor)) if v is not None},
                     "bindingVersion": BINDING_VERSION}
    return {
        "commands": {
            "address": s.commands_topic,
            "title": "Commands",
            "description": "Commands to the scheduler, key = cluster. Effectively once: a message's effect and "
                           "the consumed offset commit in one database transaction; its `id` is the idempotency "
                           "key (shared with HTTP's Idempotency-Key).",
            "messages": {"command": {"$ref": "#/components/messages/Command"}},
            "bindings": {"kafka": {"topic": s.commands_topic, **kafka_binding}},
        },
        "deadLetters": {
            "address": s.dlq_topic,
            "title": "Dead letters",
            "description": "Malformed commands (not JSON, unknown type, failing validation, idempotency key "
                           "reused with another command): the original bytes with four headers. Written "
                           "through the same transaction as the consumed offset; published at least once "
                           "(dedupe on source-topic, source-partition, source-offset).",
            "messages": {"deadLetter": {"$ref": "#/components/messages/DeadLetter"}},
            "bindings": {"kafka": {"topic": s.dlq_topic, **kafka_binding}},
        },
        "decisions": {
            "address": s.decisions_topic,
            "title": "Decision feed",
            "description": "Every event of every cluster (inputs, rejections, decisions), key = cluster, in "
                           "position order per cluster, at least once: dedupe on (cluster, position). With a "
                           "signing key, also the signed checkpoints (records with \"type\": \"ChainCheckpoint\" "
                           "and no envelope fields: tell them apart by type, dedupe on (cluster, position, keyId)).",
            "messages": {"event": {"$ref": "#/components/messages/Event"},
                         "checkpoint": {"$ref": "#/components/messages/ChainCheckpoint"}},
            "bindings": {"kafka": {"topic": s.decisions_topic, **kafka_binding}},
        },
    }


def _operations(s: Settings) -> dict[str, Any]:
    kafka_binding = {"bindingVersion": BINDING_VERSION}
    return {
        "consumeCommands": {
            "action": "receive",
            "channel": {"$ref": "#/channels/commands"},
            "summary": "Gangplank consumes commands (one consumer group for all replicas).",
            "messages": [{"$ref": "#/channels/commands/messages/command"}],
            "bindings": {"kafka": {"groupId": {"type": "string", "enum": [s.consumer_group]}, **kafka_binding}},
        },
        "publishDeadLetters": {
            "action": "send",
            "channel": {"$ref": "#/channels/deadLetters"},
            "summary": "Gangplank dead-letters malformed commands.",
            "messages": [{"$ref": "#/channels/deadLetters/messages/deadLetter"}],
        },
        "publishEvents": {
            "action": "send",
            "channel": {"$ref": "#/channels/decisions"},
            "summary": "Gangplank publishes every committed event from its transactional outbox.",
            "messages": [{"$ref": "#/channels/decisions/messages/event"},
                         {"$ref": "#/channels/decisions/messages/checkpoint"}],
        },
    }


def _messages() -> dict[str, Any]:
    cluster_key = {"kafka": {"key": {"type": "string", "pattern": CLUSTER_PATTERN,
                                     "description": "The cluster name: a cluster's messages share a partition."},
                             "bindingVersion": BINDING_VERSION}}
    return {
        "Command": {
            "name": "Command", "title": "Command envelope", "contentType": "application/json",
            "payload": {"$ref": "#/components/schemas/CommandEnvelope"},
            "bindings": cluster_key,
        },
        "DeadLetter": {
            "name": "DeadLetter", "title": "Dead letter", "contentType": "application/octet-stream",
            "summary": "The refused message's original bytes (not necessarily JSON) and key.",
            "headers": {"$ref": "#/components/schemas/DeadLetterHeaders"},
            "payload": {"description": "The original record value, byte for byte."},
        },
        "Event": {
            "name": "Event", "title": "Event envelope", "contentType": "application/json",
            "payload": {"$ref": "#/components/schemas/EventEnvelope"},
            "bindings": cluster_key,
        },
        "ChainCheckpoint": {
            "name": "ChainCheckpoint", "title": "Signed checkpoint of a cluster's hash chain",
            "contentType": "application/json",
            "payload": {"$ref": "#/components/schemas/ChainCheckpoint"},
            "bindings": cluster_key,
        },
    }
