"""Kubernetes resource quantities, held as exact integers.

`cpu` is held in millicores; every other resource in whole base units. Parsing is
exact (Decimal), so "1.5" cpu is 1500 and "1.5" bytes is an error rather than a
rounding.
"""
from __future__ import annotations

import re
from decimal import Decimal, InvalidOperation
from functools import lru_cache

_SUFFIX = {
    "": Decimal(1),
    "n": Decimal("1e-9"), "u": Decimal("1e-6"), "m": Decimal("1e-3"),
    "k": Decimal("1e3"), "M": Decimal("1e6"), "G": Decimal("1e9"),
    "T": Decimal("1e12"), "P": Decimal("1e15"), "E": Decimal("1e18"),
    "Ki": Decimal(2**10), "Mi": Decimal(2**20), "Gi": Decimal(2**30),
    "Ti": Decimal(2**40), "Pi": Decimal(2**50), "Ei": Decimal(2**60),
}
_QUANTITY = re.compile(
    r"^(?P<num>[+-]?(?:\d+(?:\.\d*)?|\.\d+))"
    r"(?:(?P<suffix>Ki|Mi|Gi|Ti|Pi|Ei|[numkMGTPE])|(?P<exp>[eE][+-]?\d+))?$"
)
# Large enough for any real cluster, small enough to keep arithmetic cheap and safe.
MAX_UNITS = 2**62

CPU = "cpu"
PODS = "pods"


class QuantityError(ValueError):
    """A quantity that is malformed, negative or not representable in its unit."""


def parse_quantity(value: object, resource: str) -> int:
    """Parse a quantity for `resource` into its integer unit (millicores for cpu)."""
    if isinstance(value, str):
        return _parse_cached(value, resource == CPU, resource)
    return _parse(value, resource)


@lru_cache(maxsize=4096)
def _parse_cached(value: str, _is_cpu: bool, resource: str) -> int:
    return _parse(value, resource)


def _parse(value: object, resource: str) -> int:
    if isinstance(value, bool):
        raise QuantityError("must be a quantity string or an integer")
    if isinstance(value, int):
        amount = Decimal(value)
    elif isinstance(value, str):
        match = _QUANTITY.match(value.strip()) if value == value.strip() else None
        if match is None:
            raise QuantityError(f"{value!r} is not a valid quantity")
        try:
            amount = Decimal(match["num"])
            if match["exp"]:
                exponent = int(match["exp"][1:])
                if abs(exponent) > 30:
                    raise QuantityError(f"{value!r} is out of range")
                amount = amount.scaleb(exponent)
            else:
                amount *= _SUFFIX[match["suffix"] or ""]
        except InvalidOperation as exc:  # pragma: no cover - regex guards this
            raise QuantityError(f"{value!r} is not a valid quantity") from exc
    else:
        raise QuantityError("must be a quantity string or an integer")
    if amount < 0:
        raise QuantityError(f"{value!r} is negative")
    if resource == CPU:
        amount *= 1000
    if amount != amount.to_integral_value():
        unit = "millicores" if resource == CPU else "whole units"
        raise QuantityError(f"{value!r} is not representable in {unit} of {resource}")
    units = int(amount)
    if units > MAX_UNITS:
        raise QuantityError(f"{value!r} is out of range")
    return units


def format_quantity(units: int, resource: str) -> str:
    """The canonical string of an integer amount (cpu: "2" or "500m")."""
    if resource == CPU:
        if units % 1000 == 0:
            return str(units // 1000)
        return f"{units}m"
    if units >= 1024:
        for suffix, power in (("Ei", 60), ("Pi", 50), ("Ti", 40), ("Gi", 30), ("Mi", 20), ("Ki", 10)):
            if units % (1 << power) == 0:
                return f"{units >> power}{suffix}"
    return str(units)


def parse_resources(values: dict[str, object]) -> dict[str, int]:
    return {name: parse_quantity(v, name) for name, v in values.items()}
