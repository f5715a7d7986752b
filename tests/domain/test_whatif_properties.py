"""What-if properties (audit.md, *What-if*) on random streams with preemption, node loss and devices:
`{}` re-decides the stream as recorded (every workload's whatIf equals its recorded, from any `from`),
and the report is the same twice."""
from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from service.domain.read.whatif import Changes, what_if
from tests.domain import strategies, test_properties

SETTINGS = settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _check_unchanged(events: list, start: int) -> None:
    doc = what_if("c", events, Changes(start=start), 1)
    assert doc["inputs"]["skipped"] == 0 and doc["inputs"]["changes"] == 0
    for w in doc["workloads"]:
        assert w["whatIf"] == w["recorded"], w
    assert doc["totals"]["whatIf"] == doc["totals"]["recorded"]
    assert what_if("c", events, Changes(start=start), 1) == doc


@SETTINGS
@given(strategies.preemption_streams(), st.data())
def test_nothing_changed_is_the_record_with_preemption_and_devices(cmds, data):
    events = strategies.run(cmds).events
    if events:
        _check_unchanged(events, data.draw(st.integers(0, events[-1].position)))


@SETTINGS
@given(strategies.streams(), st.data())
def test_nothing_changed_is_the_record_on_random_streams(cmds, data):
    events = test_properties.run(cmds).events
    if events:
        _check_unchanged(events, data.draw(st.integers(0, events[-1].position)))
