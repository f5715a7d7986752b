"""A replica's identity (replicas.md, *Replicas*): its id and the URL it advertises to the others.

    replica_id(None, host_name, port)     -> "<host>-<port>-<6 random hex digits>", new at every start
    advertise_url(None, "0.0.0.0", 8000)  -> "http://<host name>:8000"

This release gives every process its identity (`gangplank serve --replica-id/--advertise-url`)
and puts it on every answer (`Gangplank-Replica`); membership, ownership and forwarding are not
built yet (docs/design.md, *Replicas*).
"""
from __future__ import annotations

import re
import secrets
import socket
from typing import TYPE_CHECKING

from service.schemas.names import CLUSTER_PATTERN

if TYPE_CHECKING:
    from service.config import Settings

REPLICA_HEADER = "gangplank-replica"
_ID = re.compile(CLUSTER_PATTERN)
_WILDCARDS = {"0.0.0.0", "::", ""}


class ReplicaIdError(ValueError):
    """A --replica-id that does not match the cluster-name pattern of model.md."""


def host_part(host_name: str) -> str:
    """The host name lower-cased, each character outside [a-z0-9-] replaced by '-', cut to 40."""
    return re.sub(r"[^a-z0-9-]", "-", host_name.lower())[:40]


def replica_id(given: str | None, host_name: str | None = None, port: int = 8000) -> str:
    """The given id (checked), else `<host>-<port>-<6 random hex digits>`."""
    if given:
        if not _ID.match(given) or len(given) > 63:
            raise ReplicaIdError(f"replica id {given!r} must match {CLUSTER_PATTERN} (at most 63 characters)")
        return given
    host = host_part(host_name if host_name is not None else socket.gethostname()) or "gangplank"
    return f"{host}-{port}-{secrets.token_hex(3)}"


def advertise_url(given: str | None, host: str, port: int) -> str:
    """The given URL (without a trailing slash), else http://<host>:<port> of --host and --port,
    a wildcard host replaced by the machine's host name."""
    if given:
        return given.rstrip("/")
    if host in _WILDCARDS:
        host = socket.gethostname()
    return f"http://[{host}]:{port}" if ":" in host else f"http://{host}:{port}"


def resolve_identity(settings: Settings) -> None:
    """Fill in settings.replica_id and settings.advertise_url (their defaults) for `serve`."""
    settings.replica_id = replica_id(settings.replica_id, None, settings.port)
    settings.advertise_url = advertise_url(settings.advertise_url, settings.host, settings.port)
