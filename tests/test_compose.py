"""compose.yaml and the Dockerfile name only what exists: every service built from this repository
runs a `gangplank` command whose options the CLI parses, every GANGPLANK_* variable it sets is read
by the settings (it changes them), its health check asks a route the service answers, and the
services it depends on and the load balancer's upstreams are services of the file. The Dockerfile
copies paths that exist, installs the built wheel and runs `gangplank` outside the sources."""
from __future__ import annotations

import os
import re
import shlex
from pathlib import Path
from typing import Any

import pytest
import typer.main
import yaml

from service.cli.main import app
from service.config import Settings

ROOT = Path(__file__).resolve().parents[1]
COMPOSE: dict[str, Any] = yaml.safe_load((ROOT / "compose.yaml").read_text())
OURS = {name: svc for name, svc in COMPOSE["services"].items() if svc.get("build")}


def cli_parses(argv: list[str]) -> None:
    """argv as `gangplank` would take it: the command exists and every option and value parses."""
    group: Any = typer.main.get_command(app)  # a click group (typer's own copy of click)
    with group.make_context("gangplank", list(argv), resilient_parsing=False) as ctx:
        name, command, rest = group.resolve_command(ctx, list(argv))
        assert command is not None, argv
        command.make_context(name or "", rest, parent=ctx).close()  # raises on an unknown option or bad value


def test_the_file_has_the_services_the_docs_name() -> None:
    assert {"migrate", "gangplank-1", "gangplank-2"} <= set(OURS), sorted(OURS)
    assert OURS["migrate"]["command"][0] == "migrate"
    assert sum(1 for svc in OURS.values() if svc["command"][0] == "serve") >= 2


@pytest.mark.parametrize("name", sorted(OURS))
def test_each_command_is_one_the_cli_takes(name: str) -> None:
    cli_parses(OURS[name]["command"])
    with pytest.raises(Exception, match="No such option"):  # the check can fail
        cli_parses([*OURS[name]["command"], "--no-such-option"])


@pytest.mark.parametrize("name", sorted(OURS))
def test_each_setting_is_read(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    environment = OURS[name].get("environment", {})
    assert isinstance(environment, dict)
    for key in [k for k in os.environ if k.startswith("GANGPLANK_")]:
        monkeypatch.delenv(key)
    default = Settings.from_env()
    for key, value in environment.items():
        assert key.startswith("GANGPLANK_"), key
        with monkeypatch.context() as env:
            env.setenv(key, str(value))
            assert Settings.from_env() != default, f"{name}: {key} is not a setting (or has its default)"


@pytest.mark.parametrize("name", sorted(OURS))
def test_references_name_services_of_the_file(name: str) -> None:
    for other in OURS[name].get("depends_on", {}):
        assert other in COMPOSE["services"], other


def test_the_health_check_asks_a_route_that_answers() -> None:
    from litestar.testing import TestClient

    from service.bootstrap import build_app

    paths = set()
    for svc in OURS.values():
        if "healthcheck" in svc:
            paths |= set(re.findall(r"http://localhost:8000(/[\w/]+)", " ".join(svc["healthcheck"]["test"])))
    assert paths == {"/readyz"}
    with TestClient(build_app(Settings(database_url="memory://"))) as client:
        assert client.get("/readyz").status_code == 200


def test_the_load_balancer_sends_to_the_replicas() -> None:
    upstream = COMPOSE["configs"]["nginx"]["content"]
    servers = re.findall(r"server (\S+):8000", upstream)
    replicas = sorted(n for n, svc in OURS.items() if svc["command"][0] == "serve")
    assert sorted(servers) == replicas
    for name in replicas:
        argv = OURS[name]["command"]
        url = argv[argv.index("--advertise-url") + 1]
        assert url == f"http://{name}:8000"  # the others reach it at its service name


def dockerfile() -> list[tuple[str, str]]:
    text = re.sub(r"\\\n", " ", (ROOT / "Dockerfile").read_text())
    return [(line.split(None, 1)[0].upper(), line.split(None, 1)[1]) for line in text.splitlines()
            if line.strip() and not line.lstrip().startswith("#")]


def test_the_dockerfile_installs_the_wheel_and_runs_outside_the_sources() -> None:
    steps = dockerfile()
    for op, arg in steps:
        if op == "COPY" and "--from" not in arg:
            *sources, _ = shlex.split(arg)
            assert all((ROOT / s).exists() for s in sources), arg
    final = steps[max(i for i, (op, _) in enumerate(steps) if op == "FROM"):]
    runs = " && ".join(arg for op, arg in final if op == "RUN")
    assert re.search(r"pip install [^&]*\.whl", runs), runs
    workdir = [arg for op, arg in final if op == "WORKDIR"][-1]
    assert not any(arg.endswith(workdir) for op, arg in final if op == "COPY"), "runs from the sources"
    entry = next(arg for op, arg in final if op == "ENTRYPOINT")
    assert yaml.safe_load(entry) == ["gangplank"]
    cli_parses(yaml.safe_load(next(arg for op, arg in final if op == "CMD")))
