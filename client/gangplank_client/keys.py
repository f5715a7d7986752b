"""The idempotency key of a submission, derived from what is submitted (client.md, lifecycle.md *Names
used again*): the same body sent again to the same cluster and namespace is a replay of the first
submission, not a second workload; the same body sent after its workload was deleted is a new
incarnation of the name, because the key includes the position of the incarnation it replaces.

`Client.submit` (without a key) and the `gangplank submit`/`apply` commands derive the key so.
"""
from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from typing import Any

from gangplank_client import models as m


def submission_key(cluster: str, namespace: str, body: Mapping[str, Any], *, replaces: int | None = None,
                   dry_run: bool = False) -> str:
    """`submit-` and 40 hex digits of the SHA-256 of the canonical JSON of what is submitted, where,
    and the incarnation it replaces (None: the name's first)."""
    parts: list[Any] = [cluster, namespace, dict(body), dry_run]
    if replaces is not None:
        parts.append(replaces)
    text = json.dumps(parts, sort_keys=True, separators=(",", ":"))
    return "submit-" + hashlib.sha256(text.encode()).hexdigest()[:40]


def replaced(current: m.WorkloadView | None) -> int | None:
    """The incarnation a submission of the name replaces, given the name's latest view (None when the
    name was never submitted): a deleted one's position; while one lives, the one it replaced, so
    that submitting the same body again is a replay of that live one's submission."""
    if current is None:
        return None
    if current.status.deleted_at is not None:
        return current.position
    return current.previous
