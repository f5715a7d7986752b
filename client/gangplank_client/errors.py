"""Errors the client raises."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class FieldError:
    """One offending field of a validation problem: where (`loc`) and why (`msg`)."""
    loc: tuple[str | int, ...]
    msg: str

    def __str__(self) -> str:
        return f"{'.'.join(str(p) for p in self.loc)}: {self.msg}"


@dataclass
class ProblemError(Exception):
    """An RFC 9457 problem-details answer (http.md, *Errors*)."""
    status: int
    title: str
    detail: str = ""
    type: str = "about:blank"
    errors: list[FieldError] = field(default_factory=list)
    body: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        super().__init__(str(self))

    def __str__(self) -> str:
        head = f"{self.status} {self.title}"
        if self.detail and self.detail != self.title:
            head += f": {self.detail}"
        return "\n".join([head, *(f"  {e}" for e in self.errors)])

    @classmethod
    def from_body(cls, status: int, body: Any, reason: str = "") -> ProblemError:
        """From a problem document; anything else (a proxy's HTML page) keeps the HTTP reason."""
        if not isinstance(body, dict):
            return cls(status=status, title=reason or f"HTTP {status}", detail=str(body)[:500])
        errors = [FieldError(tuple(e.get("loc") or ()), str(e.get("msg", "")))
                  for e in body.get("errors") or () if isinstance(e, dict)]
        return cls(status=int(body.get("status") or status), title=str(body.get("title") or reason or status),
                   detail=str(body.get("detail") or ""), type=str(body.get("type") or "about:blank"),
                   errors=errors, body=body)
