"""Domain scores are exact whatever the quantities (model.md *Placing a group* step 5): a quantity
may be up to 2^62 base units, so a domain's sums need more than 64 bits."""
from __future__ import annotations

import pytest

from tests.domain.sim import Sim, basic, gang, pods
from tests.domain.test_composite import cpg, cpg_view, submit_tree

BIG = "4Ei"  # 2^62, the largest quantity


def cluster() -> Sim:
    s = Sim()
    s.node("a1", labels={"rack": "a"}, cpu="8", example_com_foo=BIG)
    s.node("a2", labels={"rack": "a"}, cpu="8", example_com_foo=BIG)  # rack a: 2^63 in all
    s.node("b1", labels={"rack": "b"}, cpu="8", example_com_foo=BIG)
    s.submit("fill", basic("g", pods(1, example_com_foo="2Ei")))  # rack a is the fuller: (2^61 + 1) / 2^63
    assert s.placements("fill") == {"p-0": "a1"}
    return s


@pytest.mark.parametrize("kind", ["basic", "gang"])
def test_the_fuller_domain_wins_when_its_sums_pass_int64(kind):
    s = cluster()
    group = basic if kind == "basic" else (lambda name, *e, **x: gang(name, 1, *e, **x))
    s.submit("w", group("g", pods(1, example_com_foo="1"), topology={"key": "rack"}))
    assert s.group("w")["domain"] == "a"
    s.assert_replay_equal()


def test_a_tree_chooses_the_fuller_domain_when_its_sums_pass_int64():
    s = cluster()
    submit_tree(s, "t", cpg("root", [gang("g", 1, pods(1, example_com_foo="1"))], topo="rack"))
    assert cpg_view(s, "t", "root")["domain"] == {"key": "rack", "value": "a"}
    s.assert_replay_equal()


def test_a_group_of_two_shapes_chooses_the_fuller_domain_when_its_sums_pass_int64():
    s = cluster()
    s.submit("w", gang("g", 2, pods(1, "x", example_com_foo="1"), pods(1, "y", cpu="1", example_com_foo="1"),
                       topology={"key": "rack"}))
    assert s.group("w")["domain"] == "a"


def test_fragmentation_aware_sums_are_exact_with_the_largest_capacities():
    """sharing.md: the measure is integer arithmetic compared exactly; a GPU's capacity may be up
    to 2^62, so a node's idle total L (and F = W·L) need more than 64 bits."""
    from tests.domain.test_fragmentation import cluster as gpu_cluster
    from tests.domain.test_fragmentation import configure, fa
    from tests.domain.test_sharing import gpu_node, sgpu, submit_share

    s = gpu_cluster()
    gpu_node(s, "n1", [sgpu("gpu-0", BIG), sgpu("gpu-1", BIG, index=1)])  # L = 2^63
    gpu_node(s, "n2", [sgpu("gpu-0", BIG)])  # L = 2^62: the fuller node takes the pod
    configure(s, fa([{"weight": 3, "cpu": "0"}]))
    submit_share(s, "w", "1")
    assert s.placements("w") == {"p-0": "n2"}
    s.assert_replay_equal()
