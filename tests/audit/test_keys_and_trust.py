"""Keys and verification (audit.md, *Signed checkpoints*): keygen never replaces a key without --force;
a wrong public key is reported as `signed by another key` with the chain intact and `trusted: false`;
with nothing to check nothing is trusted, and it is said; a file that is not a key and a checkpoint whose
position is not one are named as such."""
from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

from service.app.checkpoints import CheckpointMalformed, check, keygen
from tests.audit.test_checkpoints import _json, _run, signed  # noqa: F401  (the signed store, a fixture)
from tests.audit.test_cli_streams import C

ROOT = Path(__file__).resolve().parents[2]


def test_keygen_refuses_to_replace_a_key_without_force(tmp_path: Path) -> None:
    out = str(tmp_path / "signing.pem")
    first = _run(["keygen", "--out", out])
    assert first.exit_code == 0, first.output
    before = Path(out).read_bytes()
    again = _run(["keygen", "--out", out])
    assert again.exit_code == 2 and "exists" in again.stderr and "--force" in again.stderr
    assert Path(out).read_bytes() == before
    forced = _run(["keygen", "--out", out, "--force"])
    assert forced.exit_code == 0 and Path(out).read_bytes() != before
    only_pub = str(tmp_path / "other.pem")
    Path(only_pub + ".pub").write_text("kept")
    assert _run(["keygen", "--out", only_pub]).exit_code == 2 and Path(only_pub + ".pub").read_text() == "kept"


def test_pem_files_are_ignored_by_git(tmp_path: Path) -> None:
    ignored = subprocess.run(["git", "check-ignore", "-q", "signing.pem"], cwd=ROOT)
    assert ignored.returncode == 0  # the README's own Audit block writes signing.pem here


def test_a_wrong_key_is_another_key_with_the_chain_intact(signed: dict[str, Any], tmp_path: Path) -> None:  # noqa: F811
    other = str(tmp_path / "other.pem")
    keygen(other)
    url = f"sqlite+aiosqlite:///{signed['db']}"
    wrong = _run(["audit", "verify", "--cluster", C, "--database-url", url, "--public-key", other + ".pub"])
    assert wrong.exit_code == 1
    body = _json(wrong)
    assert body["ok"] is True and "firstBadPosition" not in body  # the chain holds
    assert body["checkpoints"]["trusted"] is False
    assert body["checkpoints"]["problem"].startswith("signed by another key")
    assert "signed by another key" in wrong.stderr and "hash chain broken" not in wrong.stderr
    assert "the hash chain is intact" in wrong.stderr
    replayed = _run(["replay", "--verify", "--cluster", C, "--database-url", url, "--public-key", other + ".pub"])
    assert replayed.exit_code == 1 and _json(replayed)["verdict"] == "identical"
    assert _json(replayed)["checkpoints"]["trusted"] is False and "signed by another key" in replayed.stderr
    good = _run(["audit", "verify", "--cluster", C, "--database-url", url, "--public-key", signed["pub"]])
    assert good.exit_code == 0 and _json(good)["checkpoints"]["trusted"] is True


def test_nothing_to_check_is_said_not_trusted(signed: dict[str, Any], tmp_path: Path) -> None:  # noqa: F811
    url = f"sqlite+aiosqlite:///{signed['db']}"
    exported = _run(["export", "--cluster", C, "--database-url", url]).stdout.splitlines()
    bare = tmp_path / "bare.jsonl"
    bare.write_text("\n".join(x for x in exported if json.loads(x)["type"] != "ChainCheckpoint") + "\n")
    result = _run(["replay", "--verify", "--from-file", str(bare), "--public-key", signed["pub"]])
    assert result.exit_code == 0, result.output
    assert _json(result)["checkpoints"] == {"count": 0, "lastPosition": None, "trusted": False}
    report = check([], {}.get, 10, object())  # type: ignore[arg-type]
    assert report.trusted is False and report.count == 0


def test_a_file_that_is_not_a_key_and_a_malformed_position_are_named(signed: dict[str, Any],  # noqa: F811
                                                                      tmp_path: Path) -> None:
    url = f"sqlite+aiosqlite:///{signed['db']}"
    junk = tmp_path / "junk.pub"
    junk.write_text("not a key at all\n")
    result = _run(["audit", "verify", "--cluster", C, "--database-url", url, "--public-key", str(junk)])
    assert result.exit_code == 2 and f"public key {junk}: not a key" in result.stderr, result.output
    assert "cannot be read" not in result.stderr
    lines = _run(["export", "--cluster", C, "--database-url", url]).stdout.splitlines()
    bad = [json.loads(x) for x in lines]
    for record in bad:
        if record["type"] == "ChainCheckpoint":
            record["position"] = "twelve"
            break
    path = tmp_path / "bad-position.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in bad) + "\n")
    malformed = _run(["replay", "--verify", "--from-file", str(path), "--public-key", signed["pub"]])
    assert malformed.exit_code == 2 and "malformed position ('twelve')" in malformed.stderr, malformed.output
    with pytest.raises(CheckpointMalformed):
        check([{"position": True}], {}.get, 10, None)
