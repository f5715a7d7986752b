"""`gangplank audit explain --from-file`: a workload's history from an export, without a database
(audit.md, *Causes in audit explain*)."""
from __future__ import annotations

from typing import Any


class NoEvents(Exception):
    """The file holds no events of the cluster."""


class ChainBroken(Exception):
    def __init__(self, position: int) -> None:
        super().__init__(position)
        self.position = position


def file_history(path: str, cluster: str, namespace: str, name: str,
                 position: int | None = None) -> tuple[Any, dict[int, Any], Any]:
    """The workload's history and the inputs that caused it, from an export: the hash chain first
    (ChainBroken naming the first bad position), then the events the fold lists for the workload
    (as GET .../history does from the store), and the names used again (audit.Names). (None, {},
    names) when the workload (its incarnation submitted at `position`) was never submitted."""
    from service.app.audit import Names, causation_positions, chain_break, read_jsonl, replay
    from service.domain.read.views import incarnations

    envelopes = [e for e in read_jsonl(path) if e.get("cluster", cluster) == cluster]
    if not envelopes:
        raise NoEvents(cluster)
    if (bad := chain_break(envelopes)) is not None:
        raise ChainBroken(bad)
    state = replay(envelopes, cluster).state
    names = Names(incarnations(state))
    wl = state.incarnation(namespace, name, position)
    if wl is None:
        return None, {}, names
    by_position = {e["position"]: e for e in envelopes}
    history = {"events": [by_position[p] for p in wl.events if p in by_position]}
    causes = {p: by_position[p] for p in causation_positions(history["events"]) if p in by_position}
    return history, causes, names
