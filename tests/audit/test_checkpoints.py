"""Signed checkpoints (audit.md, *Signed checkpoints*): an attacker with database access rewrites a
placement and recomputes every hash after it. `audit verify` alone passes; with the public key the
checkpoints name the forgery, from the store and from an export alike. An export of a broken chain
writes what it reads and exits 1."""
from __future__ import annotations

import asyncio
import base64
import json
import shutil
import sqlite3
from pathlib import Path
from typing import Any

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from typer.testing import CliRunner

from service.app.checkpoints import Checkpointer, Signer, check, key_id, keygen, load_public_key, signed_fields
from service.app.commands import Accepted, Command
from service.app.service import Gangplank
from service.cli.main import app as cli
from service.store import open_store
from service.store.codec import hash_input, sha256_hex
from service.store.migrate import upgrade
from tests.audit.test_cli_streams import C, execute

EVERY = 4


async def _record(url: str, key: str) -> None:
    """21 events with a preemption and a node loss, signed every 4 events, and the tail at the end."""
    await upgrade(url)
    svc = Gangplank(open_store(url), signer=Signer.from_file(key), checkpoint_events=EVERY)

    async def run(cmd: Command) -> None:
        assert isinstance(await execute(svc, cmd), Accepted)

    node = {"allocatable": {"cpu": "4", "pods": 2}}
    for i in range(1, 4):
        await run(Command(C, "UpsertNode", f"n{i}", body=node))
    await run(Command(C, "UpsertPriorityClass", "high", body={"value": 1000}))
    await run(Command(C, "SubmitWorkload", "train", "team-a", {
        "name": "train", "priority": 10,
        "podGroups": [{"name": "workers", "schedulingPolicy": {"gang": {"minCount": 4}},
                       "pods": [{"name": "w", "count": 4, "requests": {"cpu": "2"}}]}]}))
    await run(Command(C, "SubmitWorkload", "urgent", "team-b", {
        "name": "urgent", "priorityClassName": "high",
        "podGroups": [{"name": "main", "schedulingPolicy": {"gang": {"minCount": 4}},
                       "pods": [{"name": "m", "count": 6, "requests": {"cpu": "2"}}]}]}))
    await run(Command(C, "RemoveNode", "n3"))
    await run(Command(C, "UpsertNode", "n4", body=node))
    await run(Command(C, "DeleteWorkload", "urgent", "team-b"))
    for i in range(5, 9):
        await run(Command(C, "UpsertNode", f"n{i}", body=node))
    await svc.checkpoints.flush()
    await svc.store.close()


@pytest.fixture(scope="module")
def signed(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    base = tmp_path_factory.mktemp("signed")
    key = str(base / "key.pem")
    keygen(key)
    db = base / "good.db"
    asyncio.run(_record(f"sqlite+aiosqlite:///{db}", key))
    return {"base": base, "db": db, "key": key, "pub": key + ".pub"}


def _forge(db: Path, position: int) -> None:
    """Rewrite the event at `position` and recompute every hash from there (and the head)."""
    with sqlite3.connect(db) as conn:
        rows = conn.execute("SELECT position, type, schema_version, data, metadata, recorded_at, prev_hash "
                            "FROM events WHERE cluster=? ORDER BY position", (C,)).fetchall()
        prev = None
        for pos, type_, version, data, meta, recorded_at, prev_hash in rows:
            if pos < position:
                continue
            if pos == position:
                assert '"n1"' in data or '"n2"' in data, data
                data = data.replace('"n1"', '"nX"').replace('"n2"', '"n1"').replace('"nX"', '"n2"')
                prev = prev_hash
            h = sha256_hex(prev, hash_input(C, pos, type_, version, data, meta, recorded_at))
            conn.execute("UPDATE events SET data=?, prev_hash=?, hash=? WHERE cluster=? AND position=?",
                         (data, prev, h, C, pos))
            prev = h
        conn.execute("UPDATE clusters SET head_hash=? WHERE name=?", (prev, C))


def _run(args: list[str]) -> Any:
    result = CliRunner().invoke(cli, args)
    assert result.exception is None or isinstance(result.exception, SystemExit), repr(result.exception)
    return result


def _json(result: Any) -> dict[str, Any]:
    return json.loads(result.stdout[: result.stdout.rindex("}") + 1])


def _placement(db: Path) -> int:
    with sqlite3.connect(db) as conn:
        return int(conn.execute("SELECT min(position) FROM events WHERE type='PodGroupScheduled'").fetchone()[0])


def test_checkpoints_are_stored_every_n_events_and_listed(signed: dict[str, Any]) -> None:
    url = f"sqlite+aiosqlite:///{signed['db']}"

    async def read() -> list[Any]:
        store = open_store(url)
        try:
            return await store.checkpoints(C)
        finally:
            await store.close()

    cps = asyncio.run(read())
    public = load_public_key(signed["pub"])
    assert len(cps) >= 21 // EVERY and cps[-1].position == 21
    for cp in cps:
        assert cp.key_id == key_id(public)
        public.verify(base64.b64decode(cp.signature), signed_fields(cp.as_json()))  # raises when not valid
    with sqlite3.connect(signed["db"]) as conn:  # the stream's bytes are unchanged: no event was added
        assert conn.execute("SELECT count(*) FROM events").fetchone()[0] == 21


def test_a_forged_rehashed_stream_is_broken_under_the_public_key(signed: dict[str, Any]) -> None:
    forged = signed["base"] / "forged.db"
    shutil.copy(signed["db"], forged)
    at = _placement(forged)
    _forge(forged, at)
    url = f"sqlite+aiosqlite:///{forged}"
    # the chain alone is fooled
    plain = _run(["audit", "verify", "--cluster", C, "--database-url", url])
    assert plain.exit_code == 0 and _json(plain)["ok"] is True
    assert _json(plain)["checkpoints"] == {"count": _json(plain)["checkpoints"]["count"], "lastPosition": 21,
                                           "trusted": False}
    # the signatures are not
    trusted = _run(["audit", "verify", "--cluster", C, "--database-url", url, "--public-key", signed["pub"]])
    assert trusted.exit_code == 1
    body = _json(trusted)
    assert body["ok"] is False and body["firstBadPosition"] >= at
    assert f"hash chain broken at position {body['firstBadPosition']}" in trusted.stderr
    with sqlite3.connect(forged) as conn:  # the first checkpoint at or after the forged event
        first = conn.execute("SELECT min(position) FROM checkpoints WHERE position >= ?", (at,)).fetchone()[0]
    assert body["firstBadPosition"] == first
    replayed = _run(["replay", "--verify", "--cluster", C, "--database-url", url, "--public-key", signed["pub"]])
    assert replayed.exit_code == 1 and _json(replayed)["checkpoints"]["firstBadPosition"] == body["firstBadPosition"]
    # an export carries the checkpoints; verified from the file, the forgery shows the same way
    exported = _run(["export", "--cluster", C, "--database-url", url])
    assert exported.exit_code == 0  # the re-hashed chain holds
    lines = exported.stdout.splitlines()
    assert sum(json.loads(x)["type"] == "ChainCheckpoint" for x in lines) == body["checkpoints"]["count"]
    path = signed["base"] / "forged.jsonl"
    path.write_text(exported.stdout)
    from_file = _run(["replay", "--verify", "--from-file", str(path), "--public-key", signed["pub"]])
    assert from_file.exit_code == 1
    assert _json(from_file)["checkpoints"]["firstBadPosition"] == body["firstBadPosition"]


def test_the_true_stream_verifies_under_the_public_key(signed: dict[str, Any]) -> None:
    url = f"sqlite+aiosqlite:///{signed['db']}"
    verified = _run(["audit", "verify", "--cluster", C, "--database-url", url, "--public-key", signed["pub"],
                     "--require-checkpoints"])
    assert verified.exit_code == 0, verified.output
    assert _json(verified)["checkpoints"]["trusted"] is True
    exported = _run(["export", "--cluster", C, "--database-url", url]).stdout
    path = signed["base"] / "good.jsonl"
    path.write_text(exported)
    for source in (["--from-file", str(path)], ["--cluster", C, "--database-url", url]):
        result = _run(["replay", "--verify", *source, "--public-key", signed["pub"], "--require-checkpoints"])
        assert result.exit_code == 0, (source, result.output)
    # plain replays and explanations of an export skip its checkpoint lines
    assert _run(["replay", "--from-file", str(path)]).exit_code == 0


def test_another_key_a_cut_stream_and_a_missing_checkpoint_requirement(signed: dict[str, Any], tmp_path: Path) -> None:
    other = str(tmp_path / "other.pem")
    keygen(other)
    url = f"sqlite+aiosqlite:///{signed['db']}"
    wrong = _run(["audit", "verify", "--cluster", C, "--database-url", url, "--public-key", other + ".pub"])
    assert wrong.exit_code == 1 and "signed by key" in wrong.stderr
    path = tmp_path / "cut.jsonl"
    lines = _run(["export", "--cluster", C, "--database-url", url]).stdout.splitlines()
    path.write_text("\n".join(x for x in lines if json.loads(x).get("position", 0) <= 18
                              or json.loads(x)["type"] == "ChainCheckpoint") + "\n")
    cut = _run(["replay", "--verify", "--from-file", str(path), "--public-key", signed["pub"]])
    beyond = min(json.loads(x)["position"] for x in lines if '"ChainCheckpoint"' in x and json.loads(x)["position"] > 18)
    assert cut.exit_code == 1 and _json(cut)["checkpoints"]["firstBadPosition"] == beyond  # the stream must reach it
    bare = tmp_path / "bare.jsonl"
    bare.write_text("\n".join(x for x in lines if json.loads(x)["type"] != "ChainCheckpoint") + "\n")
    assert _run(["replay", "--verify", "--from-file", str(bare)]).exit_code == 0
    required = _run(["replay", "--verify", "--from-file", str(bare), "--require-checkpoints"])
    assert required.exit_code == 1


def test_export_of_a_broken_chain_writes_what_it_reads_and_exits_1(signed: dict[str, Any]) -> None:
    altered = signed["base"] / "altered.db"
    shutil.copy(signed["db"], altered)
    with sqlite3.connect(altered) as conn:
        conn.execute("UPDATE events SET data=replace(data,'\"w-0\"','\"w-9\"') WHERE position=?",
                     (_placement(altered),))
    result = _run(["export", "--cluster", C, "--database-url", f"sqlite+aiosqlite:///{altered}"])
    assert result.exit_code == 1
    assert result.stderr.strip().startswith(f"hash chain broken at position {_placement(altered)}")
    assert len([x for x in result.stdout.splitlines() if '"ChainCheckpoint"' not in x]) == 21


def test_check_by_rule() -> None:
    private = Ed25519PrivateKey.generate()
    signer, public = Signer(private), private.public_key()
    good = signer.sign(C, 4, "a" * 64, "2026-12-01T00:00:00.000000Z").as_json()
    hashes = {4: "a" * 64}
    assert check([good], hashes.get, 10, public).first_bad_position is None
    assert check([good], hashes.get, 3, public).first_bad_position == 4  # the stream ends before it
    assert check([good], {4: "b" * 64}.get, 10, public).first_bad_position == 4
    assert check([{**good, "hash": "b" * 64}], {4: "b" * 64}.get, 10, public).first_bad_position == 4
    assert check([{**good, "signature": "!!"}], hashes.get, 10, public).first_bad_position == 4
    untrusted = check([{**good, "signature": "!!"}], hashes.get, 10, None)
    assert untrusted.first_bad_position is None and untrusted.count == 1 and not untrusted.trusted
    assert check([], hashes.get, 10, public, require=True).first_bad_position == 1
    assert check([], hashes.get, 10, public).first_bad_position is None


async def test_checkpointer_signs_every_n_and_on_time() -> None:
    store = open_store("memory://")
    now = [0.0]
    cp = Checkpointer(store, Signer(Ed25519PrivateKey.generate()), every=10, seconds=60, clock=lambda: now[0],
                      outbox_topic="decisions")
    await cp.after_commit(C, 4, 4, "a" * 64)
    await cp.tick()
    assert await store.checkpoints(C) == []
    await cp.after_commit(C, 7, 11, "b" * 64)
    assert [c.position for c in await store.checkpoints(C)] == [11]
    await cp.after_commit(C, 2, 13, "c" * 64)
    now[0] = 59.0
    await cp.tick()
    assert len(await store.checkpoints(C)) == 1
    now[0] = 61.0
    await cp.tick()
    assert [c.position for c in await store.checkpoints(C)] == [11, 13]
    outbox = await store.outbox_batch()
    assert [json.loads(o.value)["type"] for o in outbox] == ["ChainCheckpoint", "ChainCheckpoint"]
    assert [o.key for o in outbox] == [C.encode(), C.encode()]
