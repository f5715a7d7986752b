"""Consumable device capacity (sharing.md, *Shareable devices*, *Consumption*).

A device's capacities by name as written in its slice, each with its `value` and, on a
shareable device, its `requestPolicy`; what one allocation of a request consumes of each; and
the canonical strings of amounts (`"470"`, `"16Gi"`).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from service.domain.model.quantity import QuantityError, parse_quantity

Amounts = tuple[tuple[str, int], ...]  # (capacity name as written, amount), sorted by name


@dataclass(frozen=True)
class Cap:
    value: int
    default: int | None = None
    valid_values: tuple[int, ...] | None = None
    vmin: int | None = None
    vmax: int | None = None
    step: int | None = None


def _q(value: Any, name: str) -> int | None:
    try:
        return parse_quantity(value, name)
    except QuantityError:
        return None


def parse_caps(body: dict[str, Any]) -> dict[str, Cap]:
    """The device's capacities (malformed amounts are left out: validated upstream)."""
    out: dict[str, Cap] = {}
    for name, cap in sorted((body.get("capacity") or {}).items()):
        short = name.rpartition("/")[2]
        value = _q((cap or {}).get("value"), short)
        if value is None:
            continue
        policy = (cap or {}).get("requestPolicy") or {}
        default = _q(policy["default"], short) if "default" in policy else None
        valid = policy.get("validValues")
        rng = policy.get("validRange")
        out[name] = Cap(
            value, default,
            tuple(v for v in (_q(x, short) for x in valid) if v is not None) if valid is not None else None,
            _q(rng["min"], short) if rng and "min" in rng else None,
            _q(rng["max"], short) if rng and "max" in rng else None,
            _q(rng["step"], short) if rng and "step" in rng else None)
    return out


def consume(cap: Cap, asked: int | None) -> int | None:
    """What one allocation consumes of this capacity (None: the device cannot take it)."""
    if asked is None:
        return cap.default if cap.default is not None else cap.value
    if cap.valid_values is not None:
        for v in cap.valid_values:
            if v >= asked:
                return v
        return None
    if cap.vmin is not None:
        amount = max(asked, cap.vmin)
        if cap.step:
            over = amount - cap.vmin
            amount = cap.vmin + -(-over // cap.step) * cap.step
        if cap.vmax is not None and amount > cap.vmax:
            return None
        return amount
    return asked


def consumption(caps: dict[str, Cap], requests: Amounts) -> Amounts | None:
    """Per capacity of a shareable device, what one allocation of a request naming `requests`
    consumes; None when a requested name is missing or a policy refuses the amount."""
    asked = dict(requests)
    for name in asked:
        if name not in caps:
            return None
    out = []
    for name, cap in caps.items():
        got = consume(cap, asked.get(name))
        if got is None:
            return None
        out.append((name, got))
    return tuple(sorted(out))


def exclusive_fits(caps: dict[str, Cap], requests: Amounts) -> bool:
    """On an exclusive device a capacity request is a filter: every amount within `value`."""
    return all(name in caps and amount <= caps[name].value for name, amount in requests)


_BINARY = ("Ei", 60), ("Pi", 50), ("Ti", 40), ("Gi", 30), ("Mi", 20), ("Ki", 10)


def canonical(amount: int) -> str:
    """The integer in base units with the largest binary suffix that divides it (>= 1024)."""
    if amount >= 1024:
        for suffix, shift in _BINARY:
            unit = 1 << shift
            if amount >= unit and amount % unit == 0:
                return f"{amount // unit}{suffix}"
    return str(amount)


def amounts_view(amounts: Amounts) -> dict[str, str]:
    return {name: canonical(v) for name, v in amounts}


def parse_amounts(view: dict[str, Any] | None) -> Amounts:
    """`consumedCapacity` of an event back to amounts."""
    out = []
    for name, text in sorted((view or {}).items()):
        got = _q(text, name.rpartition("/")[2])
        out.append((name, got if got is not None else 0))
    return tuple(out)
