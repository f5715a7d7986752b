"""The README's examples run as written and print what the README says they print: a real `gangplank
serve` on its embedded default (an SQLite file in the working folder), the *Try it* and *Walkthrough*
blocks run by bash with curl and the `gangplank` command, and their output compared with the README's
excerpts (the `audit explain` story, times left out; the `listening on` line)."""
from __future__ import annotations

import os
import re
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text()
DEFAULT_ADDRESS = "http://127.0.0.1:8000"
TIME = re.compile(r"^\S*\d{4}-\d\d-\d\dT[\d:.]+\S*\s+")  # a leading recordedAt


def section(title: str) -> str:
    start = README.index(f"## {title}")
    end = README.find("\n## ", start + 1)
    return README[start:end if end > 0 else None]


def blocks(text: str, language: str) -> list[str]:
    """The fenced blocks of `text` whose info string is `language` ("" for a plain fence)."""
    found, current, info = [], None, ""
    for line in text.splitlines():
        if line.startswith("```"):
            if current is None:
                current, info = [], line[3:].strip()
                continue
            if info == language:
                found.append("\n".join(current) + "\n")
            current = None
        elif current is not None:
            current.append(line)
    return found


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory):
    """`gangplank serve` in an empty folder, on its defaults but the port: (address, folder, its stdout line)."""
    folder = tmp_path_factory.mktemp("readme")
    port = _free_port()
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    for name in [k for k in env if k.startswith("GANGPLANK_")]:
        del env[name]
    proc = subprocess.Popen([sys.executable, "-m", "service", "serve", "--port", str(port)], cwd=folder, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline().strip()
        address = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            try:
                if httpx.get(f"{address}/healthz", timeout=1).status_code == 200:
                    break
            except httpx.TransportError:
                time.sleep(0.2)
        yield address, folder, line
    finally:
        proc.terminate()
        proc.wait(10)


def run_block(block: str, address: str, folder: Path) -> subprocess.CompletedProcess[str]:
    """A README block as a user runs it: its address made the test server's, `.venv/bin/gangplank` this
    interpreter's command."""
    script = block.replace(DEFAULT_ADDRESS, address).replace(".venv/bin/gangplank", f"{sys.executable} -m service")
    env = {k: v for k, v in os.environ.items() if not k.startswith("GANGPLANK_")}
    return subprocess.run(["bash", "-euo", "pipefail", "-c", script], cwd=folder, env={**env, "GANGPLANK_SERVER": address},
                          capture_output=True, text=True, timeout=300)


def test_serve_prints_the_line_the_readme_quotes(served):
    address, _, line = served
    quoted = " ".join(re.search(r"prints `(listening on [^`]+)`", section("Two commands")).group(1).split())
    assert line == quoted.replace(DEFAULT_ADDRESS, address)


def test_try_it_runs_as_written(served):
    address, folder, _ = served
    (block,) = blocks(section("Try it"), "bash")
    result = run_block(block, address, folder)
    assert result.returncode == 0, result.stderr
    assert '"phase":"Scheduled"' in result.stdout.replace(" ", "") and '"ok":true' in result.stdout.replace(" ", "")


def _matches(excerpt: str, line: str) -> bool:
    """An excerpt line against an output line (its time removed): equal, or, where the excerpt ends with
    `...`, the output line begins with what comes before it."""
    line = TIME.sub("", line)
    if excerpt.endswith(" ..."):
        return line.startswith(excerpt[:-4])
    return line == excerpt


def test_the_walkthrough_prints_what_the_readme_shows(served):
    """Up to `audit explain`, whose output ends as the README's excerpt does; then the rest (`audit verify`)."""
    address, folder, _ = served
    text = section("Walkthrough")
    (block,) = blocks(text, "bash")
    lines = block.splitlines()
    cut = next(i for i, line in enumerate(lines) if "audit explain" in line) + 1
    story = run_block("\n".join(lines[:cut]), address, folder)
    assert story.returncode == 0, story.stderr
    (excerpt,) = [b for b in blocks(text, "") if "[#" in b]
    wanted = excerpt.strip().splitlines()
    got = [line for line in story.stdout.splitlines() if line.strip()][-len(wanted):]
    mismatched = [(w, g) for w, g in zip(wanted, got, strict=True) if not _matches(w, g)]
    assert mismatched == [], "\n".join(f"README: {w}\n  code: {g}" for w, g in mismatched)
    rest = run_block("\n".join([*[line for line in lines[:cut] if line.startswith(("C=", "J="))], *lines[cut:]]),
                     address, folder)
    assert rest.returncode == 0, rest.stderr
