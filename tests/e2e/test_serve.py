"""`gangplank serve` as a process (issue 18): one "listening on" line when the API answers, every
log line JSON (Alembic's too), and a port already in use as one error and exit 2, logged as not started."""
from __future__ import annotations

import json
import re
import socket
import subprocess
import sys
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[2]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _serve(port: int, db: Path) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-m", "service", "serve", "--port", str(port),
                             "--database-url", f"sqlite+aiosqlite:///{db}"],
                            cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def test_serve_announces_itself_logs_json_and_refuses_a_port_in_use(tmp_path: Path) -> None:
    port = _free_port()
    first = _serve(port, tmp_path / "a.db")
    try:
        assert first.stdout is not None
        line = first.stdout.readline()  # printed once the startup hooks (migrations) ran
        assert line == f"listening on http://127.0.0.1:{port} — API docs at /schema — console at http://127.0.0.1:{port}/ui\n"
        health = httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=10)
        assert health.status_code == 200
        host = re.sub(r"[^a-z0-9-]", "-", socket.gethostname().lower())[:40]
        assert re.fullmatch(rf"{re.escape(host)}-{port}-[0-9a-f]{{6}}", health.headers["gangplank-replica"])
        missing = httpx.get(f"http://127.0.0.1:{port}/no/such/path", timeout=10)
        assert missing.status_code == 404 and missing.headers["gangplank-replica"] == health.headers["gangplank-replica"]
        bad_id = subprocess.run([sys.executable, "-m", "service", "serve", "--port", str(_free_port()),
                                 "--replica-id", "Not_An_Id",
                                 "--database-url", f"sqlite+aiosqlite:///{tmp_path / 'c.db'}"],
                                cwd=ROOT, capture_output=True, text=True, timeout=120)
        assert bad_id.returncode == 2 and "replica id 'Not_An_Id' must match" in bad_id.stderr, bad_id
        second = subprocess.run([sys.executable, "-m", "service", "serve", "--port", str(port),
                                 "--database-url", f"sqlite+aiosqlite:///{tmp_path / 'b.db'}"],
                                cwd=ROOT, capture_output=True, text=True, timeout=120)
        assert second.returncode == 2, second
        assert second.stdout == ""
        *logged, error = second.stderr.splitlines()
        assert error == f"error: cannot listen on http://127.0.0.1:{port}: address already in use"
        assert not any("gangplank.started" in x for x in logged), logged
        assert not (tmp_path / "b.db").exists()  # nothing was started, nothing migrated
    finally:
        first.terminate()
        _, err = first.communicate(timeout=60)
    lines = [json.loads(x) for x in err.splitlines()]  # every line is JSON
    migration = [x for x in lines if x.get("logger") == "alembic.runtime.migration"]
    assert any(x["event"].startswith("Running upgrade") for x in migration), lines
    started = next(x for x in lines if x["event"] == "gangplank.started")
    assert started["auth"] == "none" and "open_api" not in started
    assert started["replica"] == health.headers["gangplank-replica"]
    assert all({"level", "timestamp"} <= x.keys() for x in lines)

