"""Schema evolution: older versions of an event type's data are upcast when read.

Register `(type, version) -> function(data) -> data at version + 1`; `upcast`
applies the chain up to the current version of the type (events.SCHEMA_VERSIONS),
so an old stream replays under new code to the same state.
"""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

from service.domain.events import SCHEMA_VERSIONS

Upcaster = Callable[[dict[str, Any]], dict[str, Any]]
UPCASTERS: dict[tuple[str, int], Upcaster] = {}


def register(event_type: str, from_version: int) -> Callable[[Upcaster], Upcaster]:
    def wrap(fn: Upcaster) -> Upcaster:
        UPCASTERS[(event_type, from_version)] = fn
        return fn
    return wrap


def upcast(event_type: str, version: int, data: dict[str, Any]) -> dict[str, Any]:
    current = SCHEMA_VERSIONS.get(event_type, 1)
    while version < current:
        step = UPCASTERS.get((event_type, version))
        if step is None:
            raise ValueError(f"no upcaster for {event_type} v{version}")
        data = step(data)
        version += 1
    if version > current:
        raise ValueError(f"{event_type} v{version} is newer than this code (v{current})")
    return data
