"""Taints, tolerations and node affinity: the rules, operator by operator and effect by effect, and
their vectorised forms over the node table equal to the per-node rules (hypothesis)."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from service.domain.model.specs import NodeSpec, PodShape, node_affinity_from_body, tolerations_from_body
from service.domain.nodes import affinity as af
from service.domain.nodes.table import NodeTable

GPU = ("nvidia.com/gpu", "present", "NoSchedule")


def tol(key: str = "", operator: str = "Equal", value: str = "", effect: str = "") -> tuple[str, str, str, str]:
    return (key, operator, value, effect)


# -- tolerations ---------------------------------------------------------------------------------
@pytest.mark.parametrize(("toleration", "taint", "expected"), [
    (tol("nvidia.com/gpu", "Exists", effect="NoSchedule"), GPU, True),
    (tol("nvidia.com/gpu", "Exists"), GPU, True),  # an empty effect matches every effect
    (tol("nvidia.com/gpu", "Exists", effect="NoExecute"), GPU, False),  # other effect
    (tol("nvidia.com/gpu", "Exists", effect="PreferNoSchedule"), GPU, False),
    (tol("nvidia.com/gpu", "Equal", "present", "NoSchedule"), GPU, True),
    (tol("nvidia.com/gpu", "Equal", "present"), GPU, True),
    (tol("nvidia.com/gpu", "Equal", "absent", "NoSchedule"), GPU, False),  # other value
    (tol("nvidia.com/gpu", "Equal", "", "NoSchedule"), GPU, False),
    (tol("nvidia.com/gpu", "Equal", "", "NoSchedule"), ("nvidia.com/gpu", "", "NoSchedule"), True),
    (tol("example.com/gpu", "Exists"), GPU, False),  # other key
    (tol("", "Exists"), GPU, True),  # empty key with Exists: every taint
    (tol("", "Exists", effect="NoSchedule"), GPU, True),
    (tol("", "Exists", effect="NoExecute"), GPU, False),  # ... of that effect only
    (tol("", "Exists"), ("a", "b", "NoExecute"), True),
    (tol("a", "Exists", effect="NoExecute"), ("a", "b", "NoExecute"), True),
    (tol("a", "Equal", "b", "PreferNoSchedule"), ("a", "b", "PreferNoSchedule"), True),
])
def test_a_toleration_tolerates_a_taint_as_kubernetes_says(toleration, taint, expected):
    assert af.tolerates(toleration, taint) is expected


def test_the_first_untolerated_hard_taint_in_the_nodes_order():
    taints = [("soft", "", "PreferNoSchedule"), ("b", "1", "NoExecute"), GPU]
    assert af.first_untolerated((), taints) == ("b", "1", "NoExecute")  # PreferNoSchedule never keeps a pod off
    assert af.first_untolerated((tol("b", "Exists"),), taints) == GPU
    assert af.first_untolerated((tol("b", "Exists"), tol("nvidia.com/gpu", "Exists")), taints) is None
    assert af.untolerated_count((), taints, "PreferNoSchedule") == 1
    assert af.taint_reason(GPU) == "node(s) had untolerated taint {nvidia.com/gpu: present}"
    assert af.taint_reason(("node.kubernetes.io/unreachable", "", "NoExecute")) == \
        "node(s) had untolerated taint {node.kubernetes.io/unreachable: }"
    assert af.tolerates_no_execute((), [GPU]) and not af.tolerates_no_execute((), taints)


# -- node affinity -------------------------------------------------------------------------------
LABELS = {"model": "H100", "gen": "9", "zero": "007", "big": "9" * 30, "word": "ten", "empty": ""}


@pytest.mark.parametrize(("req", "expected"), [
    (("model", "In", ("H100", "H200")), True),
    (("model", "In", ("A100",)), False),
    (("missing", "In", ("x",)), False),
    (("empty", "In", ("",)), True),
    (("model", "NotIn", ("A100",)), True),
    (("model", "NotIn", ("H100",)), False),
    (("missing", "NotIn", ("x",)), True),  # a node without the label matches NotIn
    (("model", "Exists", ()), True),
    (("empty", "Exists", ()), True),
    (("missing", "Exists", ()), False),
    (("model", "DoesNotExist", ()), False),
    (("missing", "DoesNotExist", ()), True),
    (("gen", "Gt", ("8",)), True),
    (("gen", "Gt", ("9",)), False),
    (("gen", "Lt", ("10",)), True),  # integers, not strings ("9" > "10" as text)
    (("gen", "Lt", ("9",)), False),
    (("zero", "Gt", ("6",)), True),  # leading zeros parse as Go's ParseInt does
    (("zero", "Lt", ("008",)), True),
    (("word", "Gt", ("0",)), False),  # not an integer: no match
    (("word", "Lt", ("0",)), False),
    (("big", "Gt", ("0",)), False),  # beyond int64: not an integer
    (("missing", "Gt", ("0",)), False),  # missing: no match
    (("missing", "Lt", ("0",)), False),
    (("empty", "Lt", ("1",)), False),
])
def test_each_operator(req, expected):
    assert af.requirement_matches(req, LABELS) is expected


def test_terms_fields_and_weights():
    h100 = (("model", "In", ("H100",)),)
    assert af.term_matches((h100, ()), LABELS, "n1")
    assert not af.term_matches(((), ()), LABELS, "n1")  # a term with no expression matches nothing
    assert af.term_matches(((), (("metadata.name", "In", ("n1",)),)), LABELS, "n1")
    assert not af.term_matches(((), (("metadata.name", "In", ("n1",)),)), LABELS, "n2")
    assert af.term_matches(((), (("metadata.name", "NotIn", ("n1",)),)), LABELS, "n2")
    assert not af.term_matches((h100, (("metadata.name", "NotIn", ("n1",)),)), LABELS, "n1")  # all must hold
    both = ((("model", "In", ("H100",)), ("gen", "Gt", ("10",))), ())
    assert not af.term_matches(both, LABELS, "n1")
    assert af.required_matches((), LABELS, "n1")  # no required affinity: every node
    assert af.required_matches((both, (h100, ())), LABELS, "n1")  # any term
    assert not af.required_matches((both, ((), ())), LABELS, "n1")
    preferred = ((50, (h100, ())), (30, (h100, ())), (20, both), (7, ((), ())))
    assert af.preferred_weight(preferred, LABELS, "n1") == 80


def test_bodies_become_canonical_shapes():
    """Equal meaning, equal shape: order of tolerations, terms, expressions and values does not matter."""
    a = node_affinity_from_body({"nodeAffinity": {
        "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
            {"matchExpressions": [{"key": "m", "operator": "In", "values": ["b", "a"]},
                                  {"key": "g", "operator": "Exists"}]}, {}]},
        "preferredDuringSchedulingIgnoredDuringExecution": [
            {"weight": 5, "preference": {}}, {"weight": 5, "preference": {}}]}})
    b = node_affinity_from_body({"nodeAffinity": {
        "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
            {}, {"matchExpressions": [{"key": "g", "operator": "Exists", "values": []},
                                      {"key": "m", "operator": "In", "values": ["a", "b", "a"]}]}]},
        "preferredDuringSchedulingIgnoredDuringExecution": [
            {"weight": 5, "preference": {"matchExpressions": []}}, {"weight": 5, "preference": {}}]}})
    assert a == b
    assert len(a[1]) == 2  # equal preferred terms both count
    assert node_affinity_from_body(None) == ((), ()) == node_affinity_from_body({"nodeAffinity": {}})
    assert tolerations_from_body([{"key": "b", "operator": "Exists"}, {"key": "a", "value": "x"}]) == \
        tolerations_from_body([{"key": "a", "operator": "Equal", "value": "x", "effect": ""},
                               {"key": "b", "operator": "Exists"}])


# -- vectorised = per node -------------------------------------------------------------------------
KEYS = ["model", "gen", "zone"]
VALUES = ["", "1", "2", "10", "007", "H100", "H200", "x"]
taints_st = st.lists(st.tuples(st.sampled_from(["a", "b", "nvidia.com/gpu"]), st.sampled_from(["", "1", "present"]),
                               st.sampled_from(["NoSchedule", "PreferNoSchedule", "NoExecute"])),
                     max_size=3, unique_by=lambda t: (t[0], t[2]))
nodes_st = st.lists(st.tuples(st.dictionaries(st.sampled_from(KEYS), st.sampled_from(VALUES), max_size=3),
                              taints_st, st.booleans()), min_size=1, max_size=12)
toleration_st = st.one_of(
    st.tuples(st.just(""), st.just("Exists"), st.just(""), st.sampled_from(["", "NoSchedule", "NoExecute"])),
    st.tuples(st.sampled_from(["a", "b", "nvidia.com/gpu"]), st.just("Exists"), st.just(""),
              st.sampled_from(["", "NoSchedule", "PreferNoSchedule", "NoExecute"])),
    st.tuples(st.sampled_from(["a", "b", "nvidia.com/gpu"]), st.just("Equal"), st.sampled_from(["", "1", "present"]),
              st.sampled_from(["", "NoSchedule", "PreferNoSchedule", "NoExecute"])))
requirement_st = st.one_of(
    st.tuples(st.sampled_from(KEYS), st.sampled_from(["In", "NotIn"]),
              st.lists(st.sampled_from(VALUES), min_size=1, max_size=3, unique=True).map(lambda v: tuple(sorted(v)))),
    st.tuples(st.sampled_from(KEYS), st.sampled_from(["Exists", "DoesNotExist"]), st.just(())),
    st.tuples(st.sampled_from(KEYS), st.sampled_from(["Gt", "Lt"]), st.sampled_from(["0", "1", "2", "9", "010"]).map(
        lambda v: (v,))))
field_st = st.tuples(st.just("metadata.name"), st.sampled_from(["In", "NotIn"]),
                     st.sampled_from(["n0", "n1", "n5", "nx"]).map(lambda v: (v,)))
term_st = st.tuples(st.lists(requirement_st, max_size=3).map(tuple), st.lists(field_st, max_size=1).map(tuple))


def _table(nodes: list[tuple[dict[str, str], list, bool]], removed: int | None = None) -> NodeTable:
    table = NodeTable()
    for i, (labels, taints, cordoned) in enumerate(nodes):
        table.upsert(NodeSpec(f"n{i}", tuple(sorted(labels.items())), (("cpu", 1000),), cordoned, tuple(taints)))
    if removed is not None and removed < len(nodes):
        table.remove(f"n{removed}")
    return table


@settings(max_examples=300, deadline=None)
@given(nodes=nodes_st, tolerations=st.lists(toleration_st, max_size=3).map(lambda t: tuple(sorted(set(t)))),
       required=st.lists(term_st, max_size=3).map(tuple),
       preferred=st.lists(st.tuples(st.integers(1, 100), term_st), max_size=3).map(tuple),
       removed=st.none() | st.integers(0, 11))
def test_vectorised_masks_equal_the_per_node_rules(nodes, tolerations, required, preferred, removed):
    table = _table(nodes, removed)
    shape = PodShape((), (), (), tolerations, required, preferred)
    live = table.live_indices()
    taint_ok = af.taint_mask(table, tolerations)
    fit = af.affinity_mask(table, required)
    weights = af.preferred_weights(table, preferred)
    order = af.order_key(table, shape)
    for row in live.tolist():
        labels, taints, name = table.labels[row], table.specs[row].taints, table.names[row]
        assert taint_ok[row] == (af.first_untolerated(tolerations, taints) is None)
        assert fit[row] == af.required_matches(required, labels, name)
        assert weights[row] == af.preferred_weight(preferred, labels, name)
        penalty = af.untolerated_count(tolerations, taints, "PreferNoSchedule")
        expected = af.preferred_weight(preferred, labels, name) * af.PENALTY_SPAN - penalty
        assert (0 if order is None else order[row]) == (expected if order is not None else 0)
        if order is None:
            assert not preferred and penalty == 0
    # explanations: each live row that fails is counted under its first untolerated taint
    failures = af.taint_failures(table, tolerations, live)
    counted = np.zeros(len(live), dtype=int)
    for reason, fails in failures:
        for i in np.flatnonzero(fails).tolist():
            first = af.first_untolerated(tolerations, table.specs[live[i]].taints)
            assert first is not None and af.taint_reason(first) == reason
        counted += fails
    assert (counted == ~taint_ok[live]).all()


def test_masks_follow_node_changes():
    table = _table([({"model": "H100"}, [GPU], False), ({"model": "A100"}, [], False)])
    required = (((("model", "In", ("H100",)),), ()),)
    assert af.taint_mask(table, ()).tolist() == [False, True]
    assert af.affinity_mask(table, required).tolist() == [True, False]
    table.upsert(NodeSpec("n0", (("model", "A100"),), (("cpu", 1000),), False, ()))
    table.upsert(NodeSpec("n2", (("model", "H100"),), (("cpu", 1000),), False, (GPU,)))
    assert af.taint_mask(table, ()).tolist() == [True, True, False]
    assert af.affinity_mask(table, required).tolist() == [False, False, True]
    assert af.taint_mask(table, ((GPU[0], "Exists", "", ""),)).tolist() == [True, True, True]


def test_a_table_without_taints_costs_one_cached_array():
    table = _table([({}, [], False)] * 3)
    first = af.taint_mask(table, ())
    assert first is af.taint_mask(table, ()) and first.all()
    assert af.order_key(table, PodShape((), (), ())) is None


def test_the_mask_cache_is_bounded():
    """Masks are kept per pod shape until the next node change; many shapes in between start it over."""
    from service.domain.nodes.table import MASKS_MAX
    table = _table([({"k": "1"}, [], False)] * 2)
    for i in range(MASKS_MAX + 10):
        assert af.affinity_mask(table, (((("k", "In", (str(i),)),), ()),)).tolist() == [i == 1] * 2
    assert 0 < len(table.masks) <= MASKS_MAX
