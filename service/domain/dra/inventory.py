"""Inventory records: resource slices and the devices they publish.

A device has one identity (driver, pool, device name) and a stable integer id; a device
published by several slices is provided by the one with the smallest name (docs/dra.md).
"""
from __future__ import annotations

from typing import Any

from service.domain.dra.capacity import Cap, parse_caps
from service.domain.dra.cel import CelKey
from service.domain.model.quantity import QuantityError, parse_quantity

NODE, ALL, SELECTOR = 0, 1, 2  # how a slice reaches nodes
_TAGS = {"bool": 0, "int": 1, "string": 2, "version": 3}  # ascending order of mixed-type values

Ident = tuple[str, str, str]  # (driver, pool, device name)
Selector = tuple[tuple[str, str], ...]
Attr = tuple[int, Any]  # (type tag, value): compares in the order of mixed-type values


def _split(qualified: str, driver: str) -> tuple[str, str]:
    domain, sep, name = qualified.rpartition("/")
    return (domain, name) if sep else (driver, qualified)


class Slice:
    __slots__ = ("name", "driver", "pool", "kind", "node", "selector", "devices")

    def __init__(self, name: str, body: dict[str, Any]) -> None:
        self.name = name
        self.driver: str = body.get("driver", "")
        self.pool: str = (body.get("pool") or {}).get("name", "")
        self.node: str | None
        self.selector: Selector
        if body.get("nodeName"):
            self.kind, self.node, self.selector = NODE, body["nodeName"], ()
        elif body.get("nodeSelector"):
            self.kind, self.node, self.selector = SELECTOR, None, tuple(sorted(body["nodeSelector"].items()))
        else:
            self.kind, self.node, self.selector = ALL, None, ()
        self.devices: dict[str, dict[str, Any]] = {d["name"]: d for d in body.get("devices") or ()}

    def ident(self, device: str) -> Ident:
        return (self.driver, self.pool, device)


class Device:
    __slots__ = ("id", "ident", "slice", "kind", "node", "selector", "ctx_key", "attrs", "alive", "shareable",
                 "caps")

    def __init__(self, did: int, ident: Ident) -> None:
        self.id = did
        self.ident = ident
        self.slice = ""
        self.kind = ALL
        self.node: str | None = None
        self.selector: Selector = ()
        self.ctx_key: CelKey = (ident[0], (), (), False)
        self.attrs: dict[str, Attr] = {}
        self.alive = False
        self.shareable = False  # allowMultipleAllocations (sharing.md)
        self.caps: dict[str, Cap] = {}  # by capacity name as written

    def load(self, sl: Slice, body: dict[str, Any]) -> None:
        self.slice, self.kind, self.node, self.selector = sl.name, sl.kind, sl.node, sl.selector
        driver = sl.driver
        attrs: dict[str, Attr] = {}
        by_domain: dict[str, list[tuple[str, int, Any]]] = {}
        for qualified, typed in sorted((body.get("attributes") or {}).items()):
            if not isinstance(typed, dict) or len(typed) != 1:
                continue
            (kind, value), = typed.items()
            tag = _TAGS.get(kind)
            if tag is None:
                continue
            domain, name = _split(qualified, driver)
            attrs[f"{domain}/{name}"] = (tag, value)
            by_domain.setdefault(domain, []).append((name, tag, value))
        caps: dict[str, list[tuple[str, int]]] = {}
        for qualified, cap in sorted((body.get("capacity") or {}).items()):
            domain, name = _split(qualified, driver)
            try:
                amount = parse_quantity((cap or {}).get("value"), name)
            except QuantityError:
                continue
            caps.setdefault(domain, []).append((name, amount))
        self.attrs = attrs
        self.shareable = body.get("allowMultipleAllocations") is True
        self.caps = parse_caps(body)
        self.ctx_key = (driver, tuple((d, tuple(v)) for d, v in sorted(by_domain.items())),
                        tuple((d, tuple(v)) for d, v in sorted(caps.items())), self.shareable)
        self.alive = True

    def attr(self, qualified: str) -> Attr | None:
        if "/" in qualified:
            return self.attrs.get(qualified)
        return self.attrs.get(f"{self.ident[0]}/{qualified}")
