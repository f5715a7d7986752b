"""Events in words, for the console (console.md): the lines `gangplank audit explain` prints
(service/app/audit.py renders them from the reason codes), cut per event.

- `GET /events?explain=true` adds `explained`: per event of the page, the workload or object it is
  about and its lines as `audit explain` words them for that workload (the decision's cause named
  unless it is the workload's own submission; an inventory input as audit explain names a cause:
  "Node n1 was removed at #23").
- `GET .../history?explain=true` adds `explained`: the workload's `audit explain`, each event's
  lines under its position, and the closing line under position null.
Events themselves are served as stored; these are rendered when read."""
from __future__ import annotations

import re
from typing import Any

from service.app import audit
from service.app.audit import _input_words as input_words  # audit explain's words for a cause
from service.domain.model import events as ev
from service.store.base import EventStore

_OBJECTS = {ev.NODE_UPSERTED: "node", ev.NODE_REMOVED: "node", ev.DEVICE_CLASS_UPSERTED: "device class",
            ev.DEVICE_CLASS_REMOVED: "device class", ev.RESOURCE_SLICE_UPSERTED: "resource slice",
            ev.RESOURCE_SLICE_REMOVED: "resource slice", ev.PRIORITY_CLASS_UPSERTED: "priority class",
            ev.SCHEDULER_CONFIGURED: "scheduler"}
_LINE = re.compile(r"^(\S+) \[#(\d+)\] (.*)$", re.DOTALL)
_DETAIL = "    "
_UNREADABLE = (KeyError, TypeError, ValueError, AttributeError, IndexError)


def workload_of(envelope: dict[str, Any]) -> tuple[str, str] | None:
    """The workload (namespace, name) an event is about, if any."""
    t, d = envelope["type"], envelope.get("data") or {}
    if t in (ev.WORKLOAD_SUBMITTED, ev.WORKLOAD_DELETED, ev.WORKLOAD_SCALED, ev.COMMAND_REJECTED):
        name = d.get("name") if t != ev.WORKLOAD_SCALED else d.get("workload", d.get("name"))
        namespace = d.get("namespace")
    else:
        namespace, name = d.get("namespace"), d.get("workload")
    if isinstance(namespace, str) and isinstance(name, str):
        return namespace, name
    return None


def about(envelope: dict[str, Any]) -> str | None:
    """What a timeline row names: `namespace/name`, or the object (`node n1`)."""
    workload = workload_of(envelope)
    if workload is not None:
        return f"{workload[0]}/{workload[1]}"
    kind, name = _OBJECTS.get(envelope["type"]), (envelope.get("data") or {}).get("name")
    if kind is None:
        return None
    return kind if kind == "scheduler" or not isinstance(name, str) else f"{kind} {name}"


def _cut(lines: list[str], position: int) -> list[str]:
    """The lines of one event (its first line without the time and position, then its details)."""
    out: list[str] = []
    for line in lines:
        if out and line.startswith(_DETAIL):
            out.append(line)
            continue
        if out:
            break
        found = _LINE.match(line)
        if found is not None and int(found.group(2)) == position:
            out.append(found.group(3))
    return out


def _capital(text: str) -> str:
    return text[:1].upper() + text[1:]


def event_lines(envelope: dict[str, Any], inputs: dict[int, dict[str, Any]]) -> list[str]:
    """One event in audit explain's words; `inputs`: envelopes by position, the decisions' causes."""
    position = envelope["position"]
    workload = workload_of(envelope)
    if workload is not None:
        history = [envelope]
        cause = inputs.get((envelope.get("metadata") or {}).get("causationPosition") or 0)
        if cause is not None and cause["type"] == ev.WORKLOAD_SUBMITTED and workload_of(cause) == workload:
            history = [cause, envelope]  # its own submission: audit explain does not name it as a cause
        try:
            lines = _cut(audit.explain(workload[0], workload[1], history, inputs), position)
        except _UNREADABLE:  # data this code did not write (a tampered copy): named by its type
            lines = []
        if lines:
            return lines
    if envelope["type"] in ev.INPUT_TYPES:
        return [_capital(input_words(envelope, position))]
    return [f"{envelope['type']} at #{position}"]


def explained_page(envelopes: list[dict[str, Any]], causes: dict[int, dict[str, Any]]) -> list[dict[str, Any]]:
    """`explained` of an event page: per event, what it is about and its lines."""
    inputs = {**causes, **{e["position"]: e for e in envelopes if e["type"] in ev.INPUT_TYPES}}
    out = []
    for envelope in envelopes:
        workload = workload_of(envelope)
        out.append({"position": envelope["position"], "about": about(envelope),
                    "namespace": workload[0] if workload else None, "workload": workload[1] if workload else None,
                    "lines": event_lines(envelope, inputs)})
    return out


def explained_history(namespace: str, name: str, history: list[dict[str, Any]],
                      causes: dict[int, dict[str, Any]]) -> list[dict[str, Any]]:
    """`explained` of a history: audit explain's lines, grouped under the position of their event."""
    out: list[dict[str, Any]] = []
    try:
        lines = audit.explain(namespace, name, history, causes)
    except _UNREADABLE:  # data this code did not write: each event on its own
        inputs = {**causes, **{e["position"]: e for e in history if e["type"] in ev.INPUT_TYPES}}
        return [{"position": e["position"], "lines": event_lines(e, inputs)} for e in history]
    for line in lines:
        found = _LINE.match(line)
        if found is not None:
            out.append({"position": int(found.group(2)), "lines": [found.group(3)]})
        elif line.startswith(_DETAIL) and out:
            out[-1]["lines"].append(line)
        else:
            out.append({"position": None, "lines": [line]})
    return out


class Summaries:
    """The room the adapters call (`Gangplank.summaries`): reads the causes a page lacks."""

    def __init__(self, store: EventStore) -> None:
        self.store = store

    async def _causes(self, cluster: str, envelopes: list[dict[str, Any]]) -> dict[int, dict[str, Any]]:
        inside = {e["position"] for e in envelopes}
        wanted = sorted({p for e in envelopes
                         if isinstance(p := (e.get("metadata") or {}).get("causationPosition"), int)
                         and p not in inside})
        found: dict[int, dict[str, Any]] = {}
        for position in wanted:
            for stored in await self.store.read(cluster, after=position - 1, limit=1):
                found[stored.position] = stored.envelope()
        return found

    async def page(self, cluster: str, envelopes: list[dict[str, Any]]) -> list[dict[str, Any]]:
        return explained_page(envelopes, await self._causes(cluster, envelopes))

    async def history(self, cluster: str, namespace: str, name: str,
                      envelopes: list[dict[str, Any]]) -> list[dict[str, Any]]:
        return explained_history(namespace, name, envelopes, await self._causes(cluster, envelopes))
