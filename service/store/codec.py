"""What every store backend writes and checks the same way: the stored canonical texts, the
hash input spliced from them, the outbox envelope, and the chain checks of verify().

Pure functions (no driver imports), shared by the SQL and the in-memory store so that both
hash, publish and verify byte for byte alike.
"""
from __future__ import annotations

import base64
import hashlib
import json
from collections.abc import Callable, Sequence
from typing import Any

import msgspec

from .base import IdempotencyRecord, canonical_json

# canonical_json() of a str: the C quoting function json.dumps(..., ensure_ascii=True) uses.
_quote: Callable[[str], str] = json.encoder.encode_basestring_ascii


def hash_input(cluster: str, position: int, type_: str, schema_version: int, data_json: str,
               metadata_json: str, recorded_at: str) -> str:
    """canonical_json() of the envelope without hash/prevHash, built from the already canonical
    data/metadata texts (keys in sorted order: cluster, data, metadata, position, recordedAt,
    schemaVersion, type). Equal to canonical_json(envelope) by construction; tested."""
    return (f'{{"cluster":{_quote(cluster)},"data":{data_json},"metadata":{metadata_json},'
            f'"position":{int(position)},"recordedAt":{_quote(recorded_at)},'
            f'"schemaVersion":{int(schema_version)},"type":{_quote(type_)}}}')


def envelope_json(cluster: str, position: int, type_: str, schema_version: int, data_json: str,
                  metadata_json: str, recorded_at: str, prev_hash: str, hash_: str) -> str:
    """canonical_json() of the full envelope (what the outbox publishes), spliced like
    hash_input(); equal to canonical_json(StoredEvent.envelope()) by construction; tested."""
    return (f'{{"cluster":{_quote(cluster)},"data":{data_json},"hash":{_quote(hash_)},'
            f'"metadata":{metadata_json},"position":{int(position)},"prevHash":{_quote(prev_hash)},'
            f'"recordedAt":{_quote(recorded_at)},"schemaVersion":{int(schema_version)},'
            f'"type":{_quote(type_)}}}')


def sha256_hex(prev_hash: str, text: str) -> str:
    return hashlib.sha256((prev_hash + text).encode("utf-8")).hexdigest()


_msgspec_decode = msgspec.json.Decoder().decode


def loads(text: str) -> Any:
    """json.loads of a stored canonical JSON text, 2-6x faster (msgspec gives the same values);
    json.loads for what msgspec refuses (lone surrogates, numbers beyond a double)."""
    try:
        return _msgspec_decode(text)
    except msgspec.DecodeError:
        return json.loads(text)


def checked_hash(prev: str, cluster: str, position: int, type_: str, version: int, data_json: str,
                 meta_json: str, recorded_at: str, stored_hash: str) -> str | None:
    """The stored hash when it recomputes from the row, else None. First over the stored
    canonical texts (the exact bytes that were hashed); only when that differs are data and
    metadata parsed and re-canonicalised, which is what an auditor holding an export computes."""
    h = sha256_hex(prev, hash_input(cluster, position, type_, version, data_json, meta_json, recorded_at))
    if h == stored_hash:
        return h
    try:
        envelope = {"cluster": cluster, "position": position, "type": type_, "schemaVersion": version,
                    "data": json.loads(data_json), "metadata": json.loads(meta_json), "recordedAt": recorded_at}
    except ValueError:
        return None
    h = sha256_hex(prev, canonical_json(envelope))
    return h if h == stored_hash else None


def tail_fault(count: int, last_recorded: int, until: int | None, recorded_head: str | None,
               chain_head: str) -> int | None:
    """After a good run of `count` events: the first bad position that the cluster's recorded
    head (last position and hash) reveals, if any."""
    target = last_recorded if until is None else min(until, last_recorded)
    if count < target:
        return count + 1  # missing at the tail
    if until is None and count > last_recorded:
        return last_recorded + 1  # rows beyond the recorded head
    if until is None and count and recorded_head is not None and recorded_head != chain_head:
        return count  # the recorded head does not match the chain
    return None


def encode_headers(headers: Sequence[tuple[str, bytes]]) -> str:
    """Kafka headers as stored in an outbox row: JSON of [name, base64 value] pairs."""
    return json.dumps([[name, base64.b64encode(value).decode("ascii")] for name, value in headers])


def decode_headers(text: str) -> list[tuple[str, bytes]]:
    if text == "[]":  # every event row
        return []
    return [(name, base64.b64decode(value)) for name, value in json.loads(text)]


def idempotency_record(row: Any) -> IdempotencyRecord:
    """A stored idempotency row: (key, fingerprint, status, body JSON, cluster, position)."""
    return IdempotencyRecord(key=row[0], fingerprint=row[1], status=int(row[2]), body=json.loads(row[3]),
                             cluster=row[4], position=None if row[5] is None else int(row[5]))
