"""Settings of the HTTP adapter: access tokens and limits.

Tokens file (JSON, `gangplank serve --tokens FILE` / GANGPLANK_TOKENS):

    {"<token>": {"role": "admin"},
     "<token>": {"role": "submitter", "namespaces": ["team-a", "team-b"], "name": "ci-bot"},
     "<token>": {"role": "auditor", "name": "audit"}}

- a token is an RFC 6750 bearer token (letters, digits and `-._~+/`, optionally ending in `=`);
- `role` is admin (everything), submitter (workloads in its `namespaces`, `["*"]` meaning all,
  and reading the inventory) or auditor (every GET);
- `namespaces` is required for submitters and not allowed for other roles;
- `name` (optional) is the actor recorded in event metadata; default `<role>:<first 8 hex of
  sha256(token)>`, so that tokens never reach the event store.
Also accepted: a role alone for admins and auditors (`{"<token>": "auditor"}`), and a list of grants
carrying their token (`[{"token": "<token>", "role": "admin"}, ...]`, or that list under `"tokens"`).
No tokens configured (no file) means the API is open: see `is_open` / `resolve_bind_host`.
"""
from __future__ import annotations

import hashlib
import ipaddress
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any, Literal

import structlog
from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    RootModel,
    StrictStr,
    ValidationError,
    model_validator,
)
from pydantic_core import PydanticCustomError

from service.schemas.common import MAX_BODY_BYTES
from service.schemas.errors import pydantic_errors
from service.schemas.names import dns1123_label_error

DEFAULT_MAX_BODY_SIZE = MAX_BODY_BYTES
LOOPBACK_HOST = "127.0.0.1"
Role = Literal["admin", "submitter", "auditor", "replica"]  # replica: only the internal routes (replicas.md)

log = structlog.get_logger("gangplank.api")


@dataclass(frozen=True)
class TokenGrant:
    role: Role
    namespaces: frozenset[str] = frozenset()  # submitters; "*" = every namespace
    name: str | None = None

    def covers_namespace(self, namespace: str | None) -> bool:
        return namespace is not None and ("*" in self.namespaces or namespace in self.namespaces)


@dataclass(frozen=True)
class Principal:
    """Who is calling: the grant of the presented token (None when the API is open)."""
    actor: str
    grant: TokenGrant | None


ANONYMOUS = Principal(actor="anonymous", grant=None)


def token_digest(token: str) -> str:
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


@dataclass(frozen=True)
class ApiSettings:
    """`tokens`: bearer token → grant (empty: open API). `max_body_size`: bytes, 413 above."""
    tokens: Mapping[str, TokenGrant] = field(default_factory=dict)
    max_body_size: int = DEFAULT_MAX_BODY_SIZE
    title: str = "Gangplank"
    replica_id: str = ""  # replicas.md: on every answer as Gangplank-Replica (empty: the header is left out)
    advertise_url: str = ""  # where the other replicas reach this one (GET /v1/replicas)

    @property
    def is_open(self) -> bool:
        return not self.tokens

    @classmethod
    def from_tokens_file(cls, path: str | Path | None, **kwargs: Any) -> ApiSettings:
        return cls(tokens=load_tokens(path) if path else {}, **kwargs)

    def principals(self) -> dict[str, Principal]:
        """sha256(token) → Principal: requests are matched by digest, never by the token itself."""
        return {token_digest(token): Principal(actor=grant.name or f"{grant.role}:{token_digest(token)[:8]}", grant=grant)
                for token, grant in self.tokens.items()}


def is_open(settings: ApiSettings) -> bool:
    """True when no token is configured: the server must then bind to loopback only."""
    return settings.is_open


def _is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def resolve_bind_host(settings: ApiSettings, host: str) -> str:
    """The host `serve` must bind: `host` when tokens are configured; otherwise loopback only
    (a non-loopback `host` is replaced by 127.0.0.1), logged either way."""
    if not settings.is_open:
        log.info("api.access", mode="tokens", tokens=len(settings.tokens), host=host)
        return host
    bind = host if _is_loopback(host) else LOOPBACK_HOST
    log.warning("api.open", host=bind, requested_host=host,
                message="no access tokens configured: the API is open to anyone who can reach it, "
                        "so it listens on loopback only (use --tokens FILE to serve other hosts)")
    return bind


# -- tokens file ---------------------------------------------------------------------------------

TOKEN_PATTERN = r"^[A-Za-z0-9\-._~+/]+=*$"


def _check_token(value: str) -> str:
    if not re.fullmatch(TOKEN_PATTERN, value):
        raise PydanticCustomError("token", "{reason}", {"reason": "a token must be an RFC 6750 bearer token "
                                                                  "(letters, digits, '-._~+/', then optional '=')"})
    return value


def _check_namespace(value: str) -> str:
    if value != "*" and (reason := dns1123_label_error(value)) is not None:
        raise PydanticCustomError("namespace", "{reason}", {"reason": reason})
    return value


class _Grant(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)
    role: Role
    # absent or given, never null: pydantic's idiom (a default that is not a valid value) has no
    # spelling in Python's types (`| None` would let an explicit null through)
    namespaces: list[Annotated[StrictStr, AfterValidator(_check_namespace)]] = None  # type: ignore[assignment]
    name: StrictStr = Field(None, min_length=1, max_length=253)  # type: ignore[assignment]

    @model_validator(mode="after")
    def _namespaces(self) -> _Grant:
        if self.role == "submitter" and not self.namespaces:
            raise ValueError("a submitter needs a non-empty `namespaces` list (\"*\" for all)")
        if self.role != "submitter" and self.namespaces is not None:
            raise ValueError(f"`namespaces` is only for submitters ({self.role} covers every namespace)")
        return self


class _TokenFile(RootModel[dict[Annotated[StrictStr, AfterValidator(_check_token)], _Grant]]):
    pass


class TokenFileError(ValueError):
    """A tokens file that cannot be read or does not follow the format."""


def _where(loc: list[Any]) -> str:
    return ".".join(["<token>", *map(str, loc[1:])]) if loc else "(root)"  # never echo a token


def _normalised(document: Any) -> Any:
    """The other shapes a tokens file is accepted in, as the main one (token → grant object):
    a role alone (`{"<token>": "auditor"}`), and a list of grants that carry their token
    (`[{"token": "<token>", "role": ...}]`, also under a top-level `"tokens"` key)."""
    if isinstance(document, dict) and set(document) == {"tokens"} and isinstance(document["tokens"], list):
        document = document["tokens"]
    if isinstance(document, list) and document and all(
            isinstance(item, dict) and isinstance(item.get("token"), str) for item in document):
        as_map: dict[Any, Any] = {}
        for item in document:
            as_map[item["token"]] = {k: v for k, v in item.items() if k != "token"}
        document = as_map
    if isinstance(document, dict):
        document = {token: {"role": grant} if isinstance(grant, str) else grant for token, grant in document.items()}
    return document


def parse_tokens(document: Any, source: str = "tokens") -> dict[str, TokenGrant]:
    document = _normalised(document)
    try:
        parsed = _TokenFile.model_validate(document, strict=True).root
    except ValidationError as exc:
        problems = "; ".join(f"{_where(e['loc'])}: {e['msg']}" for e in pydantic_errors(exc))
        raise TokenFileError(f"{source}: {problems}") from None
    if not parsed:
        raise TokenFileError(f"{source}: defines no token (omit the file to run open, on loopback only)")
    return {token: TokenGrant(role=g.role, namespaces=frozenset(g.namespaces or ()), name=g.name)
            for token, g in parsed.items()}


def load_tokens(path: str | Path) -> dict[str, TokenGrant]:
    """Read a tokens file (format in the module docstring); TokenFileError when it is wrong.
    Error messages never include a token. A value that is itself a JSON document (it starts with `{`
    or `[`: `GANGPLANK_TOKENS='{"<token>": {"role": "admin"}}'`, as containers are often configured)
    is read as the tokens, not as a file name."""
    if str(path).lstrip().startswith(("{", "[")):
        try:
            return parse_tokens(json.loads(str(path)), "inline tokens")
        except json.JSONDecodeError as exc:
            raise TokenFileError(f"inline tokens: not JSON: {exc.msg} at line {exc.lineno}") from None
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise TokenFileError(f"{path}: cannot read the tokens file: {exc}") from None
    try:
        document = json.loads(text)
    except json.JSONDecodeError as exc:
        raise TokenFileError(f"{path}: not JSON: {exc.msg} at line {exc.lineno}") from None
    return parse_tokens(document, str(path))
