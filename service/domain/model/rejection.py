"""What accept gives: the input event, or a Rejection (shared by commands.py and lifecycle.py)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Rejection:
    """A command the state refuses: 404 unknown, 409 exists, 422 bad reference."""
    status: int
    reason: str
    detail: str
    loc: tuple[Any, ...] | None = None


Accepted = tuple[str, dict[str, Any]]  # (input event type, its data)
