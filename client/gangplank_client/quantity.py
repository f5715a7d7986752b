"""Kubernetes resource quantities, as the client needs them (the service has its own parser; the
client does not import the service, and a test checks that both agree).

Amounts are exact `Fraction`s of the base unit. `units` reads a quantity as the scheduler does:
cpu in millicores (`MilliValue`), every other resource in whole units (`Value`), both rounded up.
"""
from __future__ import annotations

import math
import re
from fractions import Fraction

_SUFFIX = {
    "": Fraction(1), "n": Fraction(1, 10**9), "u": Fraction(1, 10**6), "m": Fraction(1, 1000),
    "k": Fraction(10**3), "M": Fraction(10**6), "G": Fraction(10**9), "T": Fraction(10**12),
    "P": Fraction(10**15), "E": Fraction(10**18),
    "Ki": Fraction(2**10), "Mi": Fraction(2**20), "Gi": Fraction(2**30), "Ti": Fraction(2**40),
    "Pi": Fraction(2**50), "Ei": Fraction(2**60),
}
_QUANTITY = re.compile(r"^(?P<num>[+-]?(?:\d+(?:\.\d*)?|\.\d+))"
                       r"(?:(?P<suffix>Ki|Mi|Gi|Ti|Pi|Ei|[numkMGTPE])|(?P<exp>[eE][+-]?\d+))?$")
MAX_UNITS = 2**62
CPU = "cpu"


def parse(value: object) -> Fraction:
    """The exact amount of a quantity string or integer, in base units; ValueError if malformed."""
    if isinstance(value, bool) or not isinstance(value, int | str):
        raise ValueError("must be a quantity string or an integer")
    if isinstance(value, int):
        return Fraction(value)
    match = _QUANTITY.match(value)
    if match is None:
        raise ValueError(f"{value!r} is not a valid quantity")
    amount = Fraction(match["num"])
    if match["exp"]:
        exponent = int(match["exp"][1:])
        if abs(exponent) > 30:
            raise ValueError(f"{value!r} is out of range")
        return amount * Fraction(10) ** exponent
    return amount * _SUFFIX[match["suffix"] or ""]


def check(value: object, resource: str) -> str | None:
    """Why the server would refuse `value` as an amount of `resource` (None: it accepts it):
    malformed, negative, not whole millicores of cpu or whole units of anything else, too large."""
    try:
        amount = parse(value)
    except ValueError as exc:
        return str(exc)
    if amount < 0:
        return f"{value!r} is negative"
    scaled = amount * 1000 if resource == CPU else amount
    if scaled.denominator != 1:
        return f"{value!r} is not representable in {'millicores' if resource == CPU else 'whole units'} of {resource}"
    if scaled > MAX_UNITS:
        return f"{value!r} is out of range"
    return None


def units(amount: Fraction, resource: str) -> int:
    """What the scheduler reads: cpu in millicores, anything else in whole units, rounded up."""
    return math.ceil(amount * 1000) if resource == CPU else math.ceil(amount)


def format_units(n: int, resource: str) -> str:
    """A quantity string for `units` (cpu: "2" or "1500m"; others: "64Gi" when a power of 1024 divides
    it, else a plain integer), as the service writes them."""
    if resource == CPU:
        return str(n // 1000) if n % 1000 == 0 else f"{n}m"
    for suffix, power in (("Ei", 60), ("Pi", 50), ("Ti", 40), ("Gi", 30), ("Mi", 20), ("Ki", 10)):
        if n >= 1 << power and n % (1 << power) == 0:
            return f"{n >> power}{suffix}"
    return str(n)
