"""The package deploys: the built wheel, installed with plain pip into a fresh virtual environment,
migrates and serves from an empty folder (the migrations ship inside the package), on SQLite and on
PostgreSQL. Nothing of the source tree is importable there.

The fresh venv gets only the wheel (pip install --no-deps --no-index); its dependencies are those of
the test venv, reached through a .pth line (a plain path: the test venv's own .pth files, among them
the editable install of this checkout, are not read)."""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig
import time
from pathlib import Path

import httpx
import pytest

from service.kafka.testing import free_port
from service.store.testing import temporary_postgres_database

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A fresh venv holding the wheel built from a copy of the sources; its bin/ folder."""
    work = tmp_path_factory.mktemp("package")
    src = work / "src"
    src.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, src / name)
    shutil.copytree(ROOT / "service", src / "service", ignore=shutil.ignore_patterns("__pycache__"))
    run([sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "--no-build-isolation", "--no-index",
         "-w", str(work / "dist"), str(src)], cwd=work)
    wheels = list((work / "dist").glob("gangplank-*.whl"))
    assert len(wheels) == 1, wheels
    venv = work / "venv"
    run([sys.executable, "-m", "venv", "--without-pip", str(venv)], cwd=work)
    python = venv / "bin" / "python"
    run([sys.executable, "-m", "pip", "--python", str(python), "install", "--quiet", "--no-deps", "--no-index",
         str(wheels[0])], cwd=work)
    site = Path(run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                    cwd=work).strip())
    (site / "gangplank-test-dependencies.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    return venv / "bin"


def run(argv: list[str], cwd: Path, env: dict[str, str] | None = None) -> str:
    done = subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True, timeout=180)
    assert done.returncode == 0, (argv, done.stdout, done.stderr[-3000:])
    return done.stdout


def clean_env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if not k.startswith(("GANGPLANK_", "PYTHON", "VIRTUAL_ENV"))}


def test_the_installed_package_is_the_wheel_not_the_checkout(installed: Path, tmp_path: Path) -> None:
    where = run([str(installed / "python"), "-c",
                 "import service.store.migrate as m; print(m.__file__); print(m.MIGRATIONS_DIR)"],
                cwd=tmp_path, env=clean_env()).split()
    venv = installed.parent.resolve()
    assert all(Path(p).resolve().is_relative_to(venv) for p in where), where
    assert (Path(where[1]) / "versions").is_dir()


def test_migrate_and_serve_on_sqlite_from_an_empty_folder(installed: Path, tmp_path: Path) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    run([str(installed / "gangplank"), "migrate"], cwd=empty, env=clean_env())
    assert [p.name for p in empty.iterdir()] == ["gangplank.db"]
    serve_and_use(installed, empty, [])


async def test_migrate_and_serve_on_postgresql_from_an_empty_folder(installed: Path, tmp_path: Path) -> None:
    async with temporary_postgres_database("gp_package") as url:
        env = clean_env() | {"GANGPLANK_DATABASE_URL": url}
        run([str(installed / "gangplank"), "migrate"], cwd=tmp_path, env=env)
        serve_and_use(installed, tmp_path, ["--no-migrate"], env)
        assert list(tmp_path.iterdir()) == []  # nothing written here: the store is PostgreSQL


def serve_and_use(installed: Path, cwd: Path, args: list[str], env: dict[str, str] | None = None) -> None:
    port = free_port()
    proc = subprocess.Popen([str(installed / "gangplank"), "serve", "--port", str(port), *args], cwd=cwd,
                            env=env or clean_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        assert line.startswith(f"listening on http://127.0.0.1:{port}"), (line, proc.stderr and proc.stderr.read())
        base = f"http://127.0.0.1:{port}/v1/clusters/pkg"
        ready = httpx.get(f"http://127.0.0.1:{port}/readyz", timeout=10)
        assert ready.status_code == 200, ready.text
        node = {"labels": {}, "allocatable": {"cpu": "8", "memory": "16Gi"}}
        put = httpx.put(f"{base}/nodes/n1", json=node, timeout=10)
        assert put.status_code == 200, put.text
        assert httpx.get(f"{base}/audit/verify", timeout=10).json()["ok"] is True
        for path in ("/ui", "/ui/assets/app.js", "/ui/assets/views/state.js"):  # the console ships in the wheel
            assert httpx.get(f"http://127.0.0.1:{port}{path}", timeout=10).status_code == 200, path
    finally:
        proc.terminate()
        deadline = time.monotonic() + 30
        while proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        if proc.poll() is None:
            proc.kill()
        proc.communicate()
