"""scripts/serve and scripts/test install into .venv only when their inputs changed (issue 18), so a
second start needs no package index. Run on a copy of the scripts with a stand-in .venv whose
`python` records each call and whose pip fails on demand (no real install, no network)."""
from __future__ import annotations

import os
import shutil
import stat
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

FAKE_PYTHON = """#!/usr/bin/env bash
# a stand-in venv python: records its arguments; pip fails while .venv/pip-fails exists
echo "$*" >> "$(dirname "$0")/../calls"
if [ "$1" = -c ]; then echo "3.11.0 (stand-in)"; exit 0; fi
if [ "$1 $2" = "-m pip" ] && [ -e "$(dirname "$0")/../pip-fails" ]; then echo "no index" >&2; exit 1; fi
exit 0
"""


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    shutil.copytree(ROOT / "scripts", tmp_path / "scripts")
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    bin_ = tmp_path / ".venv" / "bin"
    bin_.mkdir(parents=True)
    for name, text in (("python", FAKE_PYTHON), ("gangplank", "#!/usr/bin/env bash\necho \"$*\"\n")):
        (bin_ / name).write_text(text)
        (bin_ / name).chmod((bin_ / name).stat().st_mode | stat.S_IXUSR)
    return tmp_path


def _run(tree: Path, script: str, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "PYTHON"}
    return subprocess.run([str(tree / "scripts" / script), *args], cwd=tree, capture_output=True, text=True,
                          env=env, timeout=60)


def _pip_calls(tree: Path) -> list[str]:
    calls = (tree / ".venv" / "calls").read_text().splitlines() if (tree / ".venv" / "calls").exists() else []
    (tree / ".venv" / "calls").unlink(missing_ok=True)
    return [c for c in calls if c.startswith("-m pip")]


@pytest.mark.parametrize("script,install", [("serve", "-m pip install --quiet -e . -e client"),
                                            ("test", "-m pip install --quiet -e .[test] -e client[test]")])
def test_a_second_start_installs_nothing_and_works_offline(tree: Path, script: str, install: str) -> None:
    first = _run(tree, script, "--port", "9")
    assert first.returncode == 0, first.stderr
    assert install in _pip_calls(tree)
    (tree / ".venv" / "pip-fails").touch()  # no package index from now on
    second = _run(tree, script, "--port", "9")
    assert second.returncode == 0, second.stderr
    assert _pip_calls(tree) == []
    if script == "serve":
        assert second.stdout == "serve --port 9\n"


def test_a_changed_input_installs_again_and_a_failed_install_leaves_no_stamp(tree: Path) -> None:
    assert _run(tree, "test").returncode == 0
    _pip_calls(tree)
    (tree / ".venv" / "pip-fails").touch()
    for changed in ("pyproject.toml", "client/pyproject.toml"):
        path = tree / changed
        path.parent.mkdir(exist_ok=True)
        path.write_text(path.read_text() + "\n# changed\n" if path.exists() else "[project]\nname = 'c'\n")
        for _ in range(2):  # the failed install wrote no stamp: the next start tries again
            failed = _run(tree, "test")
            assert failed.returncode != 0 and "no index" in failed.stderr
            assert _pip_calls(tree), changed
    (tree / ".venv" / "pip-fails").unlink()
    assert _run(tree, "test").returncode == 0
    assert _pip_calls(tree)
    assert _run(tree, "test").returncode == 0 and _pip_calls(tree) == []


def test_serve_uses_the_test_install(tree: Path) -> None:
    assert _run(tree, "test").returncode == 0
    _pip_calls(tree)
    (tree / ".venv" / "pip-fails").touch()
    assert _run(tree, "serve").returncode == 0 and _pip_calls(tree) == []


def test_the_first_start_says_it_is_installing(tree: Path) -> None:
    """A newcomer's first `scripts/serve` installs for a minute or two: it says so before, and when done;
    a second start says nothing of it."""
    first = _run(tree, "serve", "--port", "9")
    assert first.returncode == 0, first.stderr
    lines = first.stderr.splitlines()
    assert lines[0].startswith("scripts/serve: installing Gangplank and its dependencies into .venv")
    assert lines[-1] == "scripts/serve: installed; starting"
    second = _run(tree, "serve", "--port", "9")
    assert second.returncode == 0 and "installing" not in second.stderr
