"""CEL selectors of device classes and requests (model.md *Devices*).

Each expression is compiled once; results are cached per (expression, what CEL can see of a
device: its `ctx_key`), so identical devices are evaluated once. An expression that errors, or
yields anything but true, does not match.
"""
from __future__ import annotations

import functools
from typing import Any

import cel

# what CEL sees of a device: (driver, ((domain, ((name, tag, value), ...)), ...),
# ((domain, ((name, amount), ...)), ...), allowMultipleAllocations), hashable
CelKey = tuple[str, tuple[tuple[str, tuple[tuple[str, int, Any], ...]], ...],
               tuple[tuple[str, tuple[tuple[str, int], ...]], ...], bool]


@functools.lru_cache(maxsize=4096)
def _program(expression: str) -> Any:
    try:
        return cel.compile(expression)
    except Exception:  # validated upstream; anything that still fails matches nothing
        return None


def _context(ctx_key: CelKey) -> dict[str, Any]:
    driver, attrs, caps, shareable = ctx_key
    return {"device": {
        "driver": driver,
        "allowMultipleAllocations": shareable,
        "attributes": {domain: {name: value for name, _tag, value in items} for domain, items in attrs},
        "capacity": {domain: dict(items) for domain, items in caps},
    }}


@functools.lru_cache(maxsize=1 << 16)
def evaluate(expression: str, ctx_key: CelKey) -> bool:
    program = _program(expression)
    if program is None:
        return False
    try:
        return program.execute(_context(ctx_key)) is True
    except Exception:  # an evaluation error means "does not match"
        return False
