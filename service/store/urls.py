"""What a database URL names, without opening it."""
from __future__ import annotations

from pathlib import Path

from sqlalchemy.engine import make_url
from sqlalchemy.exc import ArgumentError

from .engine import normalize_url


def sqlite_file(url: str) -> Path | None:
    """The file of an SQLite URL (relative to here with three slashes); None for other
    databases, in-memory ones, `file:` URIs and URLs that do not parse (opening says why)."""
    try:
        parsed = make_url(normalize_url(url))
    except ArgumentError:
        return None
    if parsed.get_backend_name() != "sqlite" or parsed.database in (None, "", ":memory:") \
            or parsed.query.get("uri"):
        return None
    return Path(parsed.database)
