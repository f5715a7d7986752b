"""What-if replay for the adapters (audit.md, *What-if*): the recorded stream re-decided under the
changes (`service.domain.read.whatif`; the document is checked by `service.schemas.whatif`), nothing
recorded."""
from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from service.domain import Event
from service.domain.model import events as ev
from service.domain.model.upcasting import upcast
from service.domain.read.whatif import Changes, WhatIfInvalid, WhatIfUnfoldable, what_if

__all__ = ["WhatIfInvalid", "WhatIfUnfoldable", "domain_events", "report", "rules_current"]


def rules_current() -> int:
    """The decider's rules version (audit.md; 0 before it exists)."""
    try:
        from service.domain.model import rules  # type: ignore[attr-defined,unused-ignore]
    except ImportError:
        return 0
    return int(getattr(rules, "RULES", 0))


def domain_events(rows: Iterable[tuple[int, str, int, Any]]) -> list[Event]:
    """Stored rows (position, type, schemaVersion, data) as domain events, upcast."""
    current = ev.SCHEMA_VERSIONS
    return [Event(p, t, d if v == current.get(t, 1) else upcast(t, v, d)) for p, t, v, d in rows]


def report(cluster: str, events: list[Event], changes: Changes, until: int | None = None) -> dict[str, Any]:
    """The what-if report; `until` (the CLI's --until) overrides the document's. Raises
    WhatIfInvalid for an entry that cannot apply, WhatIfUnfoldable for a recorded event this code
    cannot fold or re-decide."""
    if until is not None:
        changes.until = until
    return what_if(cluster, events, changes, rules_current())
