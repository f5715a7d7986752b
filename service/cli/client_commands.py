"""The client commands of `gangplank` (shared/spec/client.md, *The `gangplank` command, as a client*),
talking to a running server over HTTP: submit, delete, finish (submit_cli), get (get_cli), describe
(describe_cli); what they share is in client_common."""
from __future__ import annotations

import typer

from service.cli import apply_cli, describe_cli, get_cli, submit_cli


def register(app: typer.Typer) -> None:
    """Add submit, finish, delete, describe and get to the `gangplank` command."""
    app.command("submit")(submit_cli.submit)
    app.command("apply")(apply_cli.apply)
    app.command("finish")(submit_cli.finish)
    app.command("delete")(submit_cli.delete)
    app.command("describe")(describe_cli.describe)
    get_cli.register(app)
