"""PUT/GET /scheduler (sharing.md, *The scheduler configuration*) over HTTP."""
from __future__ import annotations

import pytest

FA = {"scoringStrategy": {"type": "FragmentationAware", "fragmentationAware": {
    "deviceClassName": "gpu", "capacity": "milli",
    "targetWorkload": {"shapes": [{"weight": 2, "cpu": "3152m",
                                   "devices": {"capacity": {"requests": {"milli": "810"}}}}]}}}}


@pytest.mark.parametrize("body, loc", [
    ({"scoringStrategy": {"type": "FragmentationAware"}}, ["body", "scoringStrategy", "fragmentationAware"]),
    ({"scoringStrategy": {"type": "MostAllocated", "fragmentationAware": FA["scoringStrategy"]["fragmentationAware"]}},
     ["body", "scoringStrategy", "fragmentationAware"]),
    ({"scoringStrategy": {"type": "Random"}}, ["body", "scoringStrategy", "type"]),
    ({"scoringStrategy": {"type": "MostAllocated"}, "extra": 1}, ["body", "extra"]),
])
def test_bad_configurations_are_422_naming_the_field(client, cluster, body, loc):
    r = client.put(f"/v1/clusters/{cluster}/scheduler", json=body)
    assert r.status_code == 422
    assert loc in [e["loc"] for e in r.json()["errors"]]
    assert client.get(f"/v1/clusters/{cluster}/scheduler").json()["position"] is None


def test_configure_and_read_back(client, cluster):
    r = client.get(f"/v1/clusters/{cluster}/scheduler")
    assert r.status_code == 200
    assert r.json() == {"scoringStrategy": {"type": "MostAllocated"}, "position": None, "targetWorkload": None}
    r = client.put(f"/v1/clusters/{cluster}/scheduler", json=FA)
    assert r.status_code == 200, r.text
    view = r.json()
    assert view["decisions"] == [] and isinstance(view["position"], int)
    assert view["scoringStrategy"]["fragmentationAware"]["tolerance"] == 80
    assert view["targetWorkload"] == {"pods": 2, "shapes": [
        {"weight": 2, "cpu": "3152m", "devices": {"count": 1, "capacity": {"requests": {"milli": "810"}}}}]}
    assert client.get(f"/v1/clusters/{cluster}/scheduler").json()["position"] == view["position"]


def test_the_kafka_command_carries_the_body_only():
    from service.schemas.envelope import validate_envelope
    from service.schemas.errors import InputValidationError
    msg = validate_envelope({"id": "k1", "cluster": "c1", "type": "ConfigureScheduler", "body": FA})
    assert msg.command.type == "ConfigureScheduler" and msg.command.name == "scheduler"
    try:
        validate_envelope({"id": "k2", "cluster": "c1", "type": "UpsertNode", "body": {"allocatable": {}}})
    except InputValidationError as exc:
        assert ["name"] in [e["loc"] for e in exc.errors]
    else:
        raise AssertionError("a node command without a name must fail")



HISTORY = {"scoringStrategy": {"type": "FragmentationAware", "fragmentationAware": {
    "deviceClassName": "gpu", "capacity": "milli", "targetWorkload": {"fromHistory": {}}}}}


def _twenty(client, cluster):
    for i in range(20):
        r = client.post(f"/v1/clusters/{cluster}/namespaces/a/workloads", json={
            "name": f"w{i}", "podGroups": [{"name": "g", "schedulingPolicy": {"basic": {}},
                                            "pods": [{"name": "p", "requests": {"cpu": "1"}}]}]})
        assert r.status_code == 201, r.text


@pytest.mark.parametrize("configure_first", [False, True])
def test_the_target_from_history_counts_every_submission_recorded(client, cluster, configure_first):
    """sharing.md *Target from history*: the scheduler view shows the target the next decision
    uses, which counts every submission recorded so far (twenty pods: twenty)."""
    if configure_first:
        assert client.put(f"/v1/clusters/{cluster}/scheduler", json=HISTORY).status_code == 200
    _twenty(client, cluster)
    if not configure_first:
        r = client.put(f"/v1/clusters/{cluster}/scheduler", json=HISTORY)
        assert r.status_code == 200, r.text
        assert r.json()["targetWorkload"] == {"pods": 20, "shapes": [{"weight": 20, "cpu": "1"}]}
    view = client.get(f"/v1/clusters/{cluster}/scheduler").json()
    assert view["targetWorkload"] == {"pods": 20, "shapes": [{"weight": 20, "cpu": "1"}]}


def test_fragmentation_aware_places_on_a_cluster_without_devices(client, cluster):
    """FragmentationAware with no device anywhere: every GPU measure is empty, pods are placed."""
    assert client.put(f"/v1/clusters/{cluster}/scheduler", json=FA).status_code == 200
    r = client.put(f"/v1/clusters/{cluster}/nodes/n1", json={"allocatable": {"cpu": "8"}})
    assert r.status_code == 200, r.text
    body = {"name": "w", "podGroups": [{"name": "g", "schedulingPolicy": {"basic": {}},
                                        "pods": [{"name": "p", "requests": {"cpu": "1"}}]}]}
    dry = client.post(f"/v1/clusters/{cluster}/namespaces/a/workloads?dryRun=true", json=body)
    assert dry.status_code == 200 and dry.json()["decisions"][0]["type"] == "PodGroupScheduled", dry.text
    r = client.post(f"/v1/clusters/{cluster}/namespaces/a/workloads", json=body)
    assert r.status_code == 201, r.text
    assert [d["type"] for d in r.json()["decisions"]] == ["PodGroupScheduled"]
    r = client.put(f"/v1/clusters/{cluster}/nodes/n2", json={"allocatable": {"cpu": "8"}})
    assert r.status_code == 200, r.text
