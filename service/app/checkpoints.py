"""Signed checkpoints of the hash chain (audit.md, *Signed checkpoints*).

A writer with access to the database can rewrite an event and recompute every hash after it:
the chain then verifies. A checkpoint is the chain's head at a position, signed with an Ed25519
key the database never holds; an auditor holding the public key checks that the chain still
names the signed hash there.

- `Signer`: the private key (PEM, PKCS#8), its `keyId` (SHA-256 hex of the raw public key), and
  `sign(cluster, position, hash)`.
- `Checkpointer`: the room that signs each cluster's head every `every` events (after a commit)
  and, from a timer, at least every `seconds` while events arrive (`tick`). Checkpoints are stored
  beside the stream (`EventStore.save_checkpoint`, never as events), and published on the
  decision topic as records of type `ChainCheckpoint` when Kafka is configured.
- `check`: the verdict of a list of checkpoints against a recomputed chain, with a public key or
  (without one) only counted.
"""
from __future__ import annotations

import base64
import hashlib
import os
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import structlog
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

from service.store.base import Checkpoint, EventStore, canonical_json

CHECKPOINT_TYPE = "ChainCheckpoint"  # the record type on the decision topic and in exports
log = structlog.get_logger("gangplank.checkpoints")


class KeyFileError(ValueError):
    """A key file that cannot be read as the key it should hold (the message names the file)."""


def _raw_public(public: Ed25519PublicKey) -> bytes:
    return public.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)


def key_id(public: Ed25519PublicKey) -> str:
    """The SHA-256 (hex) of the raw 32-byte public key."""
    return hashlib.sha256(_raw_public(public)).hexdigest()


def signed_fields(cp: dict[str, Any]) -> bytes:
    """What a checkpoint's signature covers: the canonical JSON of its other fields."""
    return canonical_json({k: v for k, v in cp.items() if k not in ("signature", "type")}).encode("utf-8")


class Signer:
    def __init__(self, private: Ed25519PrivateKey) -> None:
        self._private = private
        self.key_id = key_id(private.public_key())

    @classmethod
    def from_file(cls, path: str) -> Signer:
        try:
            with open(path, "rb") as fh:
                key = serialization.load_pem_private_key(fh.read(), password=None)
        except (OSError, ValueError, TypeError) as exc:
            raise KeyFileError(f"signing key {path}: {exc}") from exc
        if not isinstance(key, Ed25519PrivateKey):
            raise KeyFileError(f"signing key {path}: not an Ed25519 private key")
        return cls(key)

    def sign(self, cluster: str, position: int, hash_: str, signed_at: str | None = None) -> Checkpoint:
        when = signed_at or utc_now()
        fields = {"cluster": cluster, "position": position, "hash": hash_, "signedAt": when, "keyId": self.key_id}
        signature = base64.b64encode(self._private.sign(signed_fields(fields))).decode("ascii")
        return Checkpoint(cluster, position, hash_, when, self.key_id, signature)


def utc_now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def load_public_key(path: str) -> Ed25519PublicKey:
    """An Ed25519 public key (PEM, SubjectPublicKeyInfo), or the public half of a private key file."""
    try:
        with open(path, "rb") as fh:
            data = fh.read()
        try:
            key: Any = serialization.load_pem_public_key(data)
        except ValueError:
            key = serialization.load_pem_private_key(data, password=None).public_key()
    except OSError as exc:
        raise KeyFileError(f"public key {path}: {exc.strerror or exc}") from exc
    except (ValueError, TypeError) as exc:
        raise KeyFileError(f"public key {path}: not a key: the file holds no PEM key (give FILE.pub as "
                           "gangplank keygen writes it)") from exc
    if not isinstance(key, Ed25519PublicKey):
        raise KeyFileError(f"public key {path}: not an Ed25519 key")
    return key


class KeyExists(FileExistsError):
    """keygen would replace a key: only with force."""


def keygen(out: str, *, force: bool = False) -> str:
    """A new key pair: the private key to `out` (PEM, PKCS#8, readable by its owner only), the
    public key to `out`.pub (PEM). Returns the key id. An existing `out` or `out`.pub is replaced only
    with `force` (KeyExists otherwise): the checkpoints its key signed verify with its public key only."""
    if not force:
        for path in (out, out + ".pub"):
            if os.path.lexists(path):
                raise KeyExists(f"{path} exists: keygen does not replace a key without --force (the checkpoints "
                                "it signed verify with its own public key only)")
    private = Ed25519PrivateKey.generate()
    pem = private.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                serialization.NoEncryption())
    fd = os.open(out, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as fh:
        fh.write(pem)
    public = private.public_key()
    with open(out + ".pub", "wb") as fh:
        fh.write(public.public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo))
    return key_id(public)


# -- checking ------------------------------------------------------------------------------------
@dataclass
class CheckpointReport:
    count: int
    last_position: int | None
    trusted: bool  # checked against a public key: there were checkpoints, and every one holds
    first_bad_position: int | None = None  # the first failing checkpoint's position (with a public key)
    problem: str | None = None  # what failed there, in words
    another_key: bool = False  # it failed only for being signed by another key (the chain may be intact)

    def as_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"count": self.count, "lastPosition": self.last_position, "trusted": self.trusted}
        if self.first_bad_position is not None:
            out["firstBadPosition"] = self.first_bad_position
            out["problem"] = self.problem
        return out


def check(checkpoints: Sequence[dict[str, Any]], hash_at: Callable[[int], str | None], reached: int,
          public: Ed25519PublicKey | None, *, require: bool = False) -> CheckpointReport:
    """Check checkpoints (dicts as `Checkpoint.as_json` gives them) in position order against the
    recomputed chain: `hash_at(position)` is its hash there (None beyond what it reached),
    `reached` the last position the chain verified to. Without `public` they are only counted.
    `require`: none at all is a failure (at position 1, the first event no signature covers)."""
    well_formed(checkpoints)
    ordered = sorted(checkpoints, key=lambda c: (int(c["position"]), str(c.get("signedAt", ""))))
    # nothing to check is said, never trusted
    report = CheckpointReport(len(ordered), int(ordered[-1]["position"]) if ordered else None,
                              public is not None and bool(ordered))
    if not ordered:
        if require:
            report.first_bad_position, report.problem = 1, "no signed checkpoint covers the stream (--require-checkpoints)"
        return report
    if public is None:
        return report
    wanted = key_id(public)
    for cp in ordered:
        position = int(cp.get("position", 0))
        why = _fault(cp, wanted, public, hash_at, reached)
        if why is not None:
            report.first_bad_position, report.problem, report.trusted = position, why, False
            report.another_key = cp.get("keyId") != wanted
            return report
    return report


class CheckpointMalformed(ValueError):
    """A checkpoint (of an export) that is not one: its position is not a position."""


def well_formed(checkpoints: Sequence[dict[str, Any]]) -> None:
    """CheckpointMalformed naming the first checkpoint whose position is not one."""
    for cp in checkpoints:
        position = cp.get("position")
        if type(position) is not int or position < 1:
            raise CheckpointMalformed(f"a signed checkpoint has a malformed position ({position!r}): not a position "
                                      "(an integer, 1 or more)")


def _fault(cp: dict[str, Any], wanted: str, public: Ed25519PublicKey, hash_at: Callable[[int], str | None],
           reached: int) -> str | None:
    position = int(cp.get("position", 0))
    if cp.get("keyId") != wanted:
        return (f"signed by another key: the checkpoint at position {position} is signed by key {cp.get('keyId')}, "
                f"not by the key given ({wanted})")
    try:
        public.verify(base64.b64decode(str(cp.get("signature", "")), validate=True), signed_fields(cp))
    except (InvalidSignature, ValueError):
        return f"checkpoint at position {position}: the signature is not valid"
    if position > reached:
        return f"checkpoint at position {position}: the stream ends at {reached}, before it"
    if hash_at(position) != cp.get("hash"):
        return f"checkpoint at position {position}: the chain's hash there is not the signed one"
    return None


# -- the room --------------------------------------------------------------------------------------
@dataclass
class _Head:
    position: int = 0  # the last position checkpointed
    pending: tuple[int, str] | None = None  # the newest head not checkpointed yet
    since: int = 0  # events appended since the last checkpoint
    at: float = 0.0  # monotonic time of the last checkpoint (or of the first event after it)


class Checkpointer:
    """Signs heads after commits (`after_commit`) and on a timer (`tick`); without a signer it does
    nothing. A failed save is logged and tried again with the next head: a checkpoint is a proof,
    never a condition of a commit."""

    def __init__(self, store: EventStore, signer: Signer | None, *, every: int = 1000, seconds: float = 60.0,
                 outbox_topic: str | None = None, clock: Callable[[], float] = time.monotonic) -> None:
        self.store = store
        self.signer = signer
        self.every = every
        self.seconds = seconds
        self.outbox_topic = outbox_topic
        self.clock = clock
        self.heads: dict[str, _Head] = {}
        self.saved = 0

    @property
    def enabled(self) -> bool:
        return self.signer is not None

    async def after_commit(self, cluster: str, appended: int, position: int, hash_: str) -> None:
        if self.signer is None or appended <= 0:
            return
        head = self.heads.get(cluster)
        if head is None:
            head = self.heads[cluster] = _Head(at=self.clock())
        if head.pending is None and head.since == 0:
            head.at = self.clock()  # the minute counts from the first event after a checkpoint
        head.since += appended
        head.pending = (position, hash_)
        if head.since >= self.every:
            await self._sign(cluster, head)

    async def tick(self) -> None:
        """Sign every head that waited `seconds` or more since its last checkpoint."""
        if self.signer is None:
            return
        now = self.clock()
        for cluster, head in list(self.heads.items()):
            if head.pending is not None and now - head.at >= self.seconds:
                await self._sign(cluster, head)

    async def flush(self) -> None:
        """Sign every head not checkpointed yet (at shutdown)."""
        for cluster, head in list(self.heads.items()):
            if head.pending is not None:
                await self._sign(cluster, head)

    async def _sign(self, cluster: str, head: _Head) -> None:
        assert self.signer is not None and head.pending is not None
        position, hash_ = head.pending
        if position <= head.position:
            head.pending, head.since = None, 0
            return
        cp = self.signer.sign(cluster, position, hash_)
        try:
            await self.store.save_checkpoint(cp, outbox_topic=self.outbox_topic)
        except Exception as exc:  # the next head tries again
            log.warning("checkpoint.failed", cluster=cluster, position=position, error=repr(exc))
            return
        self.saved += 1
        head.position, head.pending, head.since, head.at = position, None, 0, self.clock()
