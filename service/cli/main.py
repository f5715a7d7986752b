"""The `gangplank` command (shared/spec/cli.md): the command tree. Each concern's commands live in a
module of their own: serve_cli (serve, migrate, keygen), replay_cli (replay, export), audit_cli (audit
verify, audit explain), and the client commands that talk to a running server (client_commands)."""
from __future__ import annotations

from typing import Any

import typer
import typer.core

from service.cli import audit_cli, replay_cli, serve_cli
from service.cli.client_commands import register as register_client_commands
from service.cli.common import out
from service.cli.lifecycle_commands import register as register_lifecycle_commands

app = typer.Typer(help="Gangplank: an event-sourced gang scheduler.", no_args_is_help=True,
                  pretty_exceptions_enable=False)
audit_app = typer.Typer(help="Audit a cluster's stream.", no_args_is_help=True)
app.add_typer(audit_app, name="audit")

_typed = typer.core.TyperOption.display_type_rich


def _display_type(self: typer.core.TyperOption, ctx: Any) -> str | None:
    """No "<bool>" after a flag (typer shows one for --verify, --help): a flag takes no value; and
    no "<str>" after an argument, whose metavar says what it is."""
    return None if self.is_flag else _typed(self, ctx)


typer.core.TyperOption.display_type_rich = _display_type  # type: ignore[method-assign]
typer.core.TyperArgument.display_type_rich = lambda self, ctx: None  # type: ignore[method-assign]


def _version(value: bool) -> None:
    if value:
        from importlib.metadata import version

        out.print(f"gangplank {version('gangplank')}", markup=False, highlight=False)
        raise typer.Exit()


@app.callback()
def _root(_: bool = typer.Option(False, "--version", callback=_version, is_eager=True,
                                 help="Print the version and exit.")) -> None:
    """Gangplank: an event-sourced gang scheduler."""


app.command()(serve_cli.serve)
app.command()(serve_cli.migrate)
app.command()(serve_cli.keygen)
app.command()(replay_cli.replay)
app.command()(replay_cli.export)
audit_app.command("verify")(audit_cli.audit_verify)
audit_app.command("explain")(audit_cli.audit_explain)
register_client_commands(app)  # submit, get, describe, delete, finish (service/cli/client_commands.py)
register_lifecycle_commands(app)  # scale (service/cli/lifecycle_commands.py)


def main() -> None:  # pragma: no cover - `python -m service`
    app()
