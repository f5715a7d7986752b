"""The scheduler configuration and the FragmentationAware strategy (sharing.md)."""
from __future__ import annotations

import json
from typing import Any

import numpy as np

from service.domain import Event, handle
from service.domain.model import events as ev
from service.domain.placement import scoring
from service.domain.placement.fragmentation import Measure
from tests.domain.sim import Sim, basic, gang, pods
from tests.domain.test_devices import device_class, with_claims
from tests.domain.test_sharing import consumed, gpu_node, sgpu, share_tpl, submit_share


def configure(s: Sim, body: dict[str, Any]) -> list[Event]:
    inp = Event(s.state.position + 1, ev.SCHEDULER_CONFIGURED, json.loads(json.dumps(scoring.recorded(body))))
    out = handle(s.state, inp)
    s.events.append(inp)
    s.events.extend(out)
    s.last = out
    return out


def fa(shapes: list[dict[str, Any]] | None = None, tolerance: int = 80, **target: Any) -> dict[str, Any]:
    return {"type": "FragmentationAware", "fragmentationAware": {
        "deviceClassName": "gpu", "capacity": "milli", "tolerance": tolerance,
        "targetWorkload": target or {"shapes": shapes}}}


def share(milli: str, weight: int = 1, cpu: str = "0", count: int = 1) -> dict[str, Any]:
    return {"weight": weight, "cpu": cpu, "devices": {"count": count, "capacity": {"requests": {"milli": milli}}}}


def cluster() -> Sim:
    s = Sim("prod")
    device_class(s)
    return s


def test_node_fragmentation_is_the_specs_example():
    s = cluster()
    gpu_node(s, "n1", [sgpu(f"gpu-{i}", index=i) for i in range(4)], cpu="8")
    shapes = (scoring.parse_shape(share("1000", 2, "4000m")), scoring.parse_shape(share("500", 2, "2000m")),
              scoring.parse_shape({"weight": 1, "cpu": "10000m"}))
    sched = scoring.parse_scheduler({"scoringStrategy": fa([share("1")])})
    m = Measure(s.state, sched, shapes)
    rows = np.array([0])
    idle = np.array([[1000, 700, 300, 0]])
    assert m.f_rows(rows, idle, np.array([8000]))[0] == 4600  # 2·1000 + 2·300 + 2000
    assert m.f_rows(rows, idle, np.array([3000]))[0] == 6600  # A is not hosted: f_A = 2000


def test_fragmentation_aware_takes_the_gpu_that_keeps_a_share_whole_first_fit_does_not():
    s = cluster()
    gpu_node(s, "n1", [sgpu("gpu-0", index=0), sgpu("gpu-1", index=1)])
    submit_share(s, "pre", "400")  # gpu-0 idle 600, gpu-1 idle 1000
    configure(s, fa([share("500")]))
    submit_share(s, "a", "400")
    assert consumed(s, "a") == [("gpu-1", {"milli": "400"})]  # on gpu-0 the 600 would fall to 200: ΔF = +200
    s2 = cluster()
    gpu_node(s2, "n1", [sgpu("gpu-0", index=0), sgpu("gpu-1", index=1)])
    submit_share(s2, "pre", "400")
    submit_share(s2, "a", "400")
    assert consumed(s2, "a") == [("gpu-0", {"milli": "400"})]  # MostAllocated: first fit
    s.assert_replay_equal()


def test_fragmentation_aware_and_most_allocated_choose_different_nodes():
    def build() -> Sim:
        s = cluster()
        gpu_node(s, "na", [sgpu("gpu-0")], cpu="4")
        gpu_node(s, "nb", [sgpu("gpu-0")], cpu="4")
        s.submit("pre", basic("g", with_claims({**pods(1, cpu="2"), "nodeSelector": {}}, ("gpu", "t"))),
                 resourceClaimTemplates=[share_tpl("t", "600")])
        return s
    s = build()
    assert consumed(s, "pre") == [("gpu-0", {"milli": "600"})]
    pre_node = s.group("pre")["pods"][0]["node"]
    other = "na" if pre_node == "nb" else "nb"
    submit_share(s, "a", "300")  # MostAllocated: the node with more cpu used
    assert s.group("a")["pods"][0]["node"] == pre_node
    f = build()
    configure(f, fa([share("400")]))
    submit_share(f, "a", "300")
    # FA: on the used node 400 idle would fall to 100, of no use to a 400 share (ΔF = +100, band 2);
    # on the empty one 1000 falls to 700, still serving (ΔF = 0, band 0)
    assert f.group("a")["pods"][0]["node"] == other


def test_equal_bands_go_to_the_fuller_node_then_the_name():
    s = cluster()
    gpu_node(s, "na", [sgpu("gpu-0"), sgpu("gpu-1")])
    gpu_node(s, "nb", [sgpu("gpu-0")])
    configure(s, fa([share("100")]))
    submit_share(s, "a", "100")  # ΔF = 0 on both: nb has the smaller idle total
    assert s.group("a")["pods"][0]["node"] == "nb"


def test_tolerance_zero_compares_exactly_and_bands_round_up():
    assert scoring.band(np.array([0, 1, 80, 81, -1, -80, -81]), 1, 80).tolist() == [0, 1, 1, 2, 0, -1, -1]
    assert scoring.band(np.array([5, -3]), 2, 0).tolist() == [5, -3]
    assert scoring.band(np.array([5]), 0, 80).tolist() == [0]


def test_never_configured_and_most_allocated_decide_byte_for_byte_alike():
    def stream(configured: bool) -> list[str]:
        s = cluster()
        if configured:
            configure(s, {"type": "MostAllocated"})
        else:  # an input that changes nothing, so that positions (and shareIDs) agree
            s.run("UpsertPriorityClass", "pc", body={"value": 1})
        gpu_node(s, "n1", [sgpu("gpu-0"), sgpu("gpu-1")], cpu="8")
        gpu_node(s, "n2", [sgpu("gpu-0")], cpu="8")
        for i in range(6):
            submit_share(s, f"w{i}", str(200 + 100 * i))
        s.delete("w1")
        return [json.dumps([e.position, e.type, e.data], sort_keys=True) for e in s.events if not e.is_input]
    assert stream(False) == stream(True)


def test_scheduler_view_default_and_configured():
    s = cluster()
    assert scoring.scheduler_view(s.state) == {"scoringStrategy": {"type": "MostAllocated"}, "position": None,
                                               "targetWorkload": None}
    configure(s, fa([share("810", 3, "3152m"), {"weight": 1, "cpu": "12.5"}]))
    view = scoring.scheduler_view(s.state)
    assert view["position"] == s.state.position
    assert view["scoringStrategy"]["fragmentationAware"]["tolerance"] == 80
    assert view["targetWorkload"] == {"pods": 4, "shapes": [
        {"weight": 3, "cpu": "3152m", "devices": {"count": 1, "capacity": {"requests": {"milli": "810"}}}},
        {"weight": 1, "cpu": "12500m"}]}


def test_target_from_history_counts_submissions_before_the_input():
    s = cluster()
    gpu_node(s, "n1", [sgpu("gpu-0")])
    configure(s, fa(fromHistory={"pods": 3, "coverage": 100}))
    assert scoring.scheduler_view(s.state)["targetWorkload"] == {"pods": 0, "shapes": []}
    submit_share(s, "a", "300")
    submit_share(s, "b", "300")
    s.submit("c", basic("g", pods(1, cpu="1")))
    s.submit("d", basic("g", pods(1, cpu="1")))
    s.run("UpsertNode", "n2", body={"allocatable": {"cpu": "1"}})  # the next input counts d too
    view = scoring.scheduler_view(s.state)["targetWorkload"]
    assert view["pods"] == 3  # the last three: b, c, d
    assert [sh["weight"] for sh in view["shapes"]] == [2, 1]
    assert view["shapes"][0] == {"weight": 2, "cpu": "1"}
    s.assert_replay_equal()


def test_replay_equals_live_under_fragmentation_aware():
    s = cluster()
    gpu_node(s, "n1", [sgpu("gpu-0"), sgpu("gpu-1")], cpu="8")
    gpu_node(s, "n2", [sgpu("gpu-0"), sgpu("gpu-1", shareable=False)], cpu="8")
    configure(s, fa([share("500", 2), share("1000", 1), {"weight": 1, "cpu": "2"}]))
    for i in range(8):
        submit_share(s, f"w{i}", str(150 * (i % 4) + 200), count=1 + (i % 2))
    s.delete("w2")
    s.assert_replay_equal()


def test_a_submissions_own_pods_weigh_from_the_next_input_on_through_its_whole_pass():
    """sharing.md *Target from history*: the target deciding an input comes from the submissions
    before it, for every decision of its pass. w1 preempts w3, and w3 is placed again in the same
    pass: with the target of the last 4 pods before w1 (w0's two 500s, w3's two 200s)."""
    s = cluster()
    configure(s, fa(fromHistory={"pods": 4, "coverage": 100}))
    gpu_node(s, "n1", [sgpu("gpu-0"), sgpu("gpu-1", index=1)], cpu="8")
    gpu_node(s, "n2", [sgpu("gpu-0"), sgpu("gpu-1", "500", index=1)], cpu="8")
    submit_share(s, "w6", "700", group=gang, priority=1)
    submit_share(s, "w0", "500", pods_=2, group=gang, priority=1)
    submit_share(s, "w3", "200", pods_=2, group=gang, priority=0)
    assert s.placements("w3") == {"p-0": "n2", "p-1": "n1"}
    s.delete("w0")
    s.delete("w6")
    submit_share(s, "w1", "1000", pods_=2, group=gang, priority=2)
    assert s.types() == [ev.POD_GROUP_PREEMPTED, ev.POD_GROUP_SCHEDULED, ev.POD_GROUP_SCHEDULED]
    assert s.placements("w3") == {"p-0": "n1", "p-1": "n1"}
    s.assert_replay_equal()
