"""The client commands of `gangplank` (shared/spec/client.md, *The `gangplank` command, as a client*),
talking to a running server over HTTP: submit, delete, finish (submit_cli), get (get_cli), describe
(describe_cli); what they share is in client_common."""
from __future__ import annotations

import typer

from service.cli import describe_cli, get_cli, submit_cli


def register(app: typer.Typer) -> None:
    """Add submit, finish, delete, describe and get to the `gangplank` command."""
    app.command("submit")(submit_cli.submit)
    app.command("finish")(submit_cli.finish)
    app.command("delete")(submit_cli.delete)
    app.command("describe")(describe_cli.describe)
    app.add_typer(get_cli.get_app, name="get")
