"""What the browser tests stand on: a real `gangplank serve` subprocess (an SQLite file, a free
loopback port, a signing key so checkpoints are signed), the recorded scenario of the golden
streams sent to it over HTTP (a preemption, node loss, a tree, shared devices, a NoExecute taint, a
cordon), a tampered copy of its store served by a second process, and headless Chromium (Debian's
`chromium` and `chromium-driver`) driven by selenium, whose console and network logs are read after
every page: a script error, a console error, or a request to another host fails the test.

    python -m tests.console.support      # record the scenario, serve it, print the console's URL
"""
from __future__ import annotations

import json
import os
import socket
import sqlite3
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx

from tests.golden.generate import scenario

ROOT = Path(__file__).resolve().parents[2]
CLUSTER = "golden"
CHROMIUM = os.environ.get("GANGPLANK_CHROMIUM", "/usr/bin/chromium")
CHROMEDRIVER = os.environ.get("GANGPLANK_CHROMEDRIVER", "/usr/bin/chromedriver")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class Server:
    process: subprocess.Popen[str]
    base: str
    database: Path
    banner: str = ""
    log: Path | None = None

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
        if self.process.poll() is None:
            try:  # a long poll still waiting holds a graceful shutdown up to its end: not worth it here
                self.process.wait(timeout=3)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=10)


def serve(database: Path, workdir: Path, *, signing_key: Path | None = None, tokens: Path | None = None,
          extra_env: dict[str, str] | None = None) -> Server:
    """`python -m service serve` on a free port; returns once it printed its banner (migrations ran)."""
    return started(spawn(database, workdir, signing_key=signing_key, tokens=tokens, extra_env=extra_env))


def spawn(database: Path, workdir: Path, *, signing_key: Path | None = None, tokens: Path | None = None,
          extra_env: dict[str, str] | None = None) -> Server:
    """The server process, started (see `started`: several start side by side)."""
    port = free_port()
    url = f"sqlite+aiosqlite:///{database}"
    env = {**os.environ, **(extra_env or {})}
    for name in ("GANGPLANK_TOKENS", "GANGPLANK_DATABASE_URL", "GANGPLANK_SIGNING_KEY", "GANGPLANK_KAFKA_BOOTSTRAP"):
        env.pop(name, None)
    args = [sys.executable, "-m", "service", "serve", "--host", "127.0.0.1", "--port", str(port), "--database-url", url]
    if signing_key is not None:
        args += ["--signing-key", str(signing_key)]
    if tokens is not None:
        args += ["--tokens", str(tokens)]
    log = workdir / f"serve-{port}.log"
    process = subprocess.Popen(args, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=log.open("w"), text=True)
    return Server(process, f"http://127.0.0.1:{port}", database, "", log)


def started(server: Server) -> Server:
    """Wait for the server's banner (printed once the API answers)."""
    assert server.process.stdout is not None
    server.banner = server.process.stdout.readline()
    if not server.banner:
        server.process.wait(timeout=30)
        raise RuntimeError(f"gangplank serve did not start: {server.log.read_text()[-2000:] if server.log else ''}")
    return server


def record(base: str, headers: dict[str, str] | None = None) -> dict[str, int]:
    """The golden scenario, request by request; the statuses seen (no 5xx)."""
    statuses: dict[str, int] = {}
    with httpx.Client(base_url=base, timeout=60, headers=headers) as client:
        for method, path, body in scenario():
            answer = client.request(method, f"/v1/clusters/{CLUSTER}{path}", json=body)
            assert answer.status_code < 500, (method, path, answer.text)
            statuses[str(answer.status_code)] = statuses.get(str(answer.status_code), 0) + 1
    return statuses


def keygen(workdir: Path) -> Path:
    key = workdir / "signing.pem"
    subprocess.run([sys.executable, "-m", "service", "keygen", "--out", str(key)], cwd=ROOT, check=True,
                   capture_output=True, text=True)
    return key


def tampered_copy(database: Path, target: Path, position: int) -> Path:
    """A copy of the store (SQLite's backup: what is committed) with one event's data changed in
    place, its hash left as it was: the chain breaks there."""
    with sqlite3.connect(database) as source, sqlite3.connect(target) as copy:
        source.backup(copy)
    with sqlite3.connect(target) as db:
        (data,) = db.execute("select data from events where cluster = ? and position = ?", (CLUSTER, position)).fetchone()
        value = json.loads(data)
        value["tampered"] = True
        db.execute("update events set data = ? where cluster = ? and position = ?",
                   (json.dumps(value, sort_keys=True, separators=(",", ":")), CLUSTER, position))
    return target


# -- the browser ------------------------------------------------------------------------------------

@dataclass
class Browser:
    driver: Any
    allowed: set[str] = field(default_factory=set)  # host:port the pages may talk to

    def logs(self) -> tuple[list[dict[str, Any]], list[str]]:
        """(console entries, URLs requested) since the last call."""
        console = self.driver.get_log("browser")
        urls = []
        for entry in self.driver.get_log("performance"):
            message = json.loads(entry["message"])["message"]
            if message.get("method") == "Network.requestWillBeSent":
                urls.append(message["params"]["request"]["url"])
        return console, urls

    def check(self) -> None:
        """No script or console error, no request to another host (a 4xx answer the page shows in
        words is the network's entry, not a script error)."""
        console, urls = self.logs()
        errors = [e for e in console if e.get("level") in ("SEVERE", "WARNING")
                  and not (e.get("source") == "network" and _client_error(e.get("message", "")))]
        assert not errors, errors
        foreign = [u for u in urls if urlsplit(u).scheme not in ("data", "blob", "about")
                   and urlsplit(u).netloc not in self.allowed]
        assert not foreign, foreign


def _client_error(message: str) -> bool:
    return any(f"status of {s}" in message for s in (401, 403, 404, 422))


def chrome(width: int = 1280, height: int = 800, dark: bool = False) -> Any:
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for arg in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu",
                f"--window-size={width},{height}", "--disable-extensions", "--no-first-run",
                "--disable-background-networking", "--disable-component-update", "--disable-sync",
                "--disable-default-apps", "--disable-features=Translate,OptimizationHints,MediaRouter",
                "--force-dark-mode" if dark else "--force-color-profile=srgb"):
        options.add_argument(arg)
    if dark:
        options.add_argument("--blink-settings=preferredColorScheme=0")
    options.set_capability("goog:loggingPrefs", {"browser": "ALL", "performance": "ALL"})
    return webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)


def main() -> None:  # pragma: no cover - a developer's tool
    workdir = Path(os.environ.get("TMPDIR", "/tmp")) / f"gangplank-console-{os.getpid()}"
    workdir.mkdir(parents=True, exist_ok=True)
    key = keygen(workdir)
    server = serve(workdir / "store.db", workdir, signing_key=key, extra_env={"GANGPLANK_CHECKPOINT_EVENTS": "50"})
    print(record(server.base))
    print(server.banner.strip(), flush=True)
    try:
        while server.process.poll() is None:
            time.sleep(1)
    finally:
        server.stop()


if __name__ == "__main__":
    main()
