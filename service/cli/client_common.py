"""What the client commands of `gangplank` share (shared/spec/client.md, *The `gangplank` command, as a
client*): the options that say which server, cluster and token; the client; failures as one line and an
exit code; tables and the json/yaml/name outputs.

They use the `gangplank-client` distribution, imported inside each command: the service itself never
imports the client (docs/client.md), so `gangplank serve` runs without it installed.
"""
from __future__ import annotations

import functools
import json
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any, NoReturn

import typer

if TYPE_CHECKING:
    from gangplank_client import Client, WorkloadView

ServerOpt = typer.Option("http://127.0.0.1:8000", "--server", metavar="URL", envvar="GANGPLANK_SERVER",
                         help="The server's URL.")
ClusterOpt = typer.Option("default", "--cluster", metavar="NAME", envvar="GANGPLANK_CLUSTER", help="The cluster.")
TokenOpt = typer.Option(None, "--token", metavar="TOKEN", envvar="GANGPLANK_TOKEN", help="The bearer token.")

OutputOpt = typer.Option(None, "--output", "-o", metavar="FORMAT", help="wide, json, yaml or name.")


def fail(message: str, code: int = 2) -> NoReturn:
    typer.echo(message, err=True)
    raise typer.Exit(code)


def connect(server: str, cluster: str, token: str | None) -> Client:
    try:
        from gangplank_client import Client
    except ImportError:  # pragma: no cover - scripts/serve and the test command install it
        fail("error: the client commands need gangplank-client: pip install -e client")
    from gangplank_client import RetryPolicy

    # fail fast (client.md): a refused connection is reported at once; 503s and timeouts are retried
    return Client(server, cluster=cluster, token=token, retry=RetryPolicy(refused=False))


def talking(command: Callable[..., None]) -> Callable[..., None]:
    """Problems, conversion errors and an unreachable server end the command with a message (exit 1
    for a refusal by the server, 2 for input that cannot be read or converted, 3 for a server that
    cannot be reached), never a traceback."""
    @functools.wraps(command)
    def run(*args: Any, **kwargs: Any) -> None:
        import httpx

        from gangplank_client import ProblemError
        try:
            command(*args, **kwargs)
        except ProblemError as exc:
            fail(f"error: {exc}", 1 if 400 <= exc.status < 500 else 3)
        except httpx.TransportError as exc:
            fail(f"error: cannot reach {kwargs.get('server')}: {exc}", 3)
        except KeyboardInterrupt:
            fail("interrupted", 130)
        except (OSError, ValueError) as exc:
            fail(f"error: {exc}")
    return run


def ns_name(value: str) -> tuple[str, str]:
    namespace, sep, name = value.partition("/")
    if not sep or not namespace or not name:
        fail(f"error: {value!r}: give NAMESPACE/NAME")
    return namespace, name



def emit(items: list[Any], output: str | None, names: list[str]) -> bool:
    """json/yaml/name output of views; False when a table is wanted."""
    if output in (None, "wide"):
        return False
    if output == "name":
        for n in names:
            typer.echo(n)
        return True
    data = [i.model_dump(mode="json", by_alias=True, exclude_none=True) for i in items]
    if output == "json":
        typer.echo(json.dumps({"items": data}, indent=2, sort_keys=True))
    elif output == "yaml":
        import yaml
        typer.echo(yaml.safe_dump({"items": data}, sort_keys=True), nl=False)
    else:
        fail(f"error: --output {output!r}: use wide, json, yaml or name")
    return True



def pages(c: Client, namespace: str | None) -> Iterator[WorkloadView]:
    after = None
    while True:
        page = c.list_workloads(namespace=namespace, after=after, limit=500)
        yield from page.items
        if page.next is None:
            return
        after = page.next


def table(rows: list[list[str]]) -> list[str]:
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return ["   ".join(cell.ljust(w) for cell, w in zip(row, widths)).rstrip() for row in rows]



def rendered(event: dict[str, Any]) -> dict[str, Any]:
    """An event's data with its messages rendered from the codes (events are served as stored)."""
    from service.domain.model.events import DECISION_TYPES
    from service.domain.model.reasons import render_decision
    from service.domain.model.upcasting import upcast
    data = event.get("data") or {}
    t = event.get("type", "")
    try:
        data = upcast(t, int(event.get("schemaVersion", 1)), data)
    except (ValueError, TypeError):
        return data  # a newer server's decision: shown as it came
    return render_decision(t, data) if t in DECISION_TYPES else data


def waiting_lines(x: dict[str, Any]) -> list[str]:
    """Why a group waits, in words: the message, each claim-level reason, the preemption outcome."""
    from service.cli.words import claim_words
    from service.domain.model.reasons import preemption_words

    lines = [f"    Waiting:     {x.get('message')}"]
    lines += [f"                 {claim_words(c)}" for c in (x.get("devices") or {}).get("claims") or ()]
    if x.get("preemption"):
        lines.append(f"    Preemption:  {x['preemption']}: {preemption_words(x['preemption'])}")
    return lines


def group_lines(g: Any, parent: str | None = None) -> list[str]:
    """A pod group's lines (an embedded group, a tree's, or a PodGroup object's status), indented."""
    lines = [f"    Phase:       {g.phase}"]
    if parent:
        lines.append(f"    Parent:      {parent}")
    lines.append(f"    Min Count:   {g.min_count}")
    lines.append(f"    Placed:      {g.placed_pods}/{len(g.pods)}")
    if g.succeeded_pods or g.failed_pods:
        lines.append(f"    Finished:    {g.succeeded_pods} succeeded, {g.failed_pods} failed")
    if g.domain:
        lines.append(f"    Domain:      {g.domain if isinstance(g.domain, str) else g.domain.value}")
    if g.explanation is not None:
        lines += waiting_lines(g.explanation.model_dump(by_alias=True))
    lines.append("    Pods:")
    rows = [[p.name, p.phase, p.node or ("<pending>" if p.phase == "Pending" else "<none>")] for p in g.pods]
    lines += ["      " + row for row in table([["NAME", "PHASE", "NODE"], *rows])]
    for claim in g.claims:
        devices = ", ".join(f"{d.pool}/{d.device}" for d in claim.devices) or "<not allocated>"
        lines.append(f"    Claim {claim.name} ({claim.sharing}): {devices}")
    if g.conditions:
        lines.append("    Conditions:")
        lines += ["      " + row for row in table([["TYPE", "STATUS", "REASON", "MESSAGE"],
                                                     *([c.type, c.status, c.reason or "", c.message or ""]
                                                       for c in g.conditions)])]
    return lines
