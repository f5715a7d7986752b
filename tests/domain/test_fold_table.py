"""The one fold table (domain/fold/evolve.py): every event type has a fold entry or is a documented
no-op, the fast fold's handlers are named in it, and an unknown type stops a fold (evolve, the fast
fold, a catch-up) with an error naming the type and the position."""
from __future__ import annotations

import pytest

from service.domain import ClusterState, Event, evolve
from service.domain.fold import fast
from service.domain.fold.evolve import FOLDS, NO_OPS, UnknownEventType
from service.domain.model import events as ev

# Types declared before their fold lands (none now): the test fails while a type is neither folded,
# a documented no-op, nor listed here, and while a listed type has its fold (then drop it from here).
AWAITING_FOLD: set[str] = set()


def test_every_event_type_has_a_fold_entry_or_is_a_documented_no_op() -> None:
    types = set(ev.SCHEMA_VERSIONS)
    assert not set(FOLDS) & set(NO_OPS), "a type is folded and a no-op at once"
    assert all(why.strip() for why in NO_OPS.values()), "every no-op says why"
    assert set(FOLDS) | set(NO_OPS) <= types, "a fold of a type events.py does not declare"
    assert not AWAITING_FOLD & (set(FOLDS) | set(NO_OPS)), "it has a fold now: drop it from AWAITING_FOLD"
    assert types - set(FOLDS) - set(NO_OPS) == AWAITING_FOLD, "an event type without a fold entry"
    for t, fold in FOLDS.items():  # the fast fold's handlers exist
        for name in (fold.replay, fold.replay_lean):
            assert name is None or callable(getattr(fast.Replay, name)), (t, name)


def _stream() -> list[Event]:
    return [Event(1, ev.NODE_UPSERTED, {"name": "n1", "labels": {}, "allocatable": {"cpu": "4"}}),
            Event(2, "PodGroupRescheduled", {"namespace": "a", "workload": "w"}),
            Event(3, ev.NODE_REMOVED, {"name": "n1"})]


def test_an_unknown_event_type_stops_evolve_naming_type_and_position() -> None:
    state = ClusterState("c")
    events = _stream()
    evolve(state, events[0])
    with pytest.raises(UnknownEventType) as caught:
        evolve(state, events[1])
    assert caught.value.position == 2 and caught.value.type == "PodGroupRescheduled"
    assert "event 2" in str(caught.value) and "'PodGroupRescheduled'" in str(caught.value)
    assert state.position == 1  # not folded


@pytest.mark.parametrize("text", [False, True])
def test_an_unknown_event_type_stops_the_fast_fold(text: bool) -> None:
    import json

    rows = [(e.position, e.type, 1, json.dumps(e.data) if text else e.data) for e in _stream()]
    with pytest.raises(UnknownEventType) as caught:
        fast.replay(ClusterState("c"), rows)
    assert (caught.value.position, caught.value.type) == (2, "PodGroupRescheduled")
