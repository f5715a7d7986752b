"""`audit explain` words a preemptor's victims without contradicting itself (issue 18, point 4):
the victim's `why` names the unit kind; ", the whole group" says only whether the group went."""
from service.app import audit
from service.domain.model import events as ev
from service.domain.model.reasons import render_decision
from tests.domain.sim import Sim, basic, pods


def _victim_line(low_pods: int) -> str:
    s = Sim()
    s.node("n1", pods=low_pods)
    s.submit("low", basic("b", pods(low_pods)), priority=1)
    s.submit("high", basic("b", pods(1)), priority=10)
    d = next(e.data for e in s.last if e.type == ev.POD_GROUP_SCHEDULED)
    lines = audit._scheduled("[#9]", ev.POD_GROUP_SCHEDULED, render_decision(ev.POD_GROUP_SCHEDULED, d), None)
    return next(line.strip() for line in lines if "preempted" in line)


def test_a_single_pod_that_was_all_its_group_had():
    assert _victim_line(1) == ("preempted default/low group b (priority 1): 1 pod, the whole group — single pods: "
                               "a basic group's pods go one by one; these were all its placed pods.")


def test_a_single_pod_of_a_group_that_keeps_running():
    assert _victim_line(2) == ("preempted default/low group b (priority 1): 1 pod — single pods: "
                               "a basic group's pods go one by one.")
