"""Schema evolution: an old stream replays under new code to an identical state."""
from __future__ import annotations

import copy
import json

from service.app.audit import replay
from service.domain.model import events as ev
from service.domain.model import upcasting
from service.domain.read.views import canonical
from service.store.base import GENESIS_HASH, chain_hash
from tests.domain.sim import Sim, basic, pods


def _envelopes(sim: Sim, versions: dict[int, int] | None = None) -> list[dict]:
    out, prev = [], GENESIS_HASH
    for e in sim.events:
        body = {"cluster": "c1", "position": e.position, "type": e.type,
                "schemaVersion": (versions or {}).get(e.position, ev.SCHEMA_VERSIONS[e.type]), "data": e.data,
                "metadata": {}, "recordedAt": "2026-11-30T10:00:00.000000Z"}
        h = chain_hash(prev, body)
        out.append({**body, "prevHash": prev, "hash": h})
        prev = h
    return out


def test_v1_stream_replays_under_v2_with_upcaster(monkeypatch):
    sim = Sim()
    sim.node("n1", cpu="4", labels={"zone": "a"})
    sim.submit("w", basic("g", pods(2, cpu="1")))
    sim.node("n2", cpu="2")
    v1 = _envelopes(sim)
    live = canonical(sim.state)

    # v2 of NodeUpserted renames "labels" to "nodeLabels"; code reads v2, an upcaster lifts v1
    monkeypatch.setitem(ev.SCHEMA_VERSIONS, ev.NODE_UPSERTED, 2)
    monkeypatch.setitem(upcasting.UPCASTERS, (ev.NODE_UPSERTED, 1),
                        lambda d: {**{k: v for k, v in d.items() if k != "labels"}, "nodeLabels": d["labels"]})
    import importlib
    evolve_mod = importlib.import_module("service.domain.fold.evolve")
    original = evolve_mod.FOLDS[ev.NODE_UPSERTED].apply

    def v2_handler(state, e):
        data = {**{k: v for k, v in e.data.items() if k != "nodeLabels"}, "labels": e.data["nodeLabels"]}
        return original(state, ev.Event(e.position, e.type, data))

    monkeypatch.setitem(evolve_mod.FOLDS, ev.NODE_UPSERTED, evolve_mod.Fold(v2_handler))
    result = replay(copy.deepcopy(v1), "c1", verify=False)
    assert canonical(result.state) == live
    assert result.state.nodes.labels[0] == {"zone": "a"}


def test_newer_version_than_code_is_refused():
    try:
        upcasting.upcast(ev.NODE_UPSERTED, 99, {})
    except ValueError as exc:
        assert "newer" in str(exc)
    else:  # pragma: no cover
        raise AssertionError("expected a refusal")


def test_export_chain_and_reverify_offline():
    sim = Sim()
    sim.node("n1", cpu="2")
    sim.submit("w", basic("g", pods(3, cpu="1")))
    envs = _envelopes(sim)
    ok = replay(envs, "c1", verify=True)
    assert ok.ok and ok.head == envs[-1]["hash"]
    tampered = json.loads(json.dumps(envs))
    tampered[1]["data"]["name"] = "w2"
    bad = replay(tampered, "c1", verify=True)
    assert not bad.chain_ok and bad.first_bad_hash == 2
