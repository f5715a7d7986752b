"""The one validation error of the schemas package."""
from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from pydantic import ValidationError
from pydantic_core import InitErrorDetails, PydanticCustomError

from service.schemas.problems import validation_problem

Loc = Sequence[str | int]


class InputValidationError(ValueError):
    """A body, path segment, header or Kafka message that fails validation.

    `errors` is a list of {"loc": [...], "msg": "..."} (loc from the root of the input, e.g.
    ["body", "podGroups", 0, "name"]); str(error) is a one-line summary, fit for a log line
    or the `error` header of a dead letter.
    """

    def __init__(self, errors: list[dict[str, Any]]):
        self.errors = errors
        super().__init__(self.summary())

    def summary(self) -> str:
        return "; ".join(f"{_loc_text(e['loc'])}: {e['msg']}" for e in self.errors) or "validation failed"

    def problem(self) -> dict[str, Any]:
        return validation_problem(self.errors)

    @classmethod
    def single(cls, loc: Loc, msg: str) -> InputValidationError:
        return cls([{"loc": list(loc), "msg": msg}])

    @classmethod
    def from_pydantic(cls, exc: ValidationError, prefix: Loc = ()) -> InputValidationError:
        return cls(pydantic_errors(exc, prefix))


def _loc_text(loc: Loc) -> str:
    return ".".join(str(part) for part in loc) or "(root)"


def pydantic_errors(exc: ValidationError, prefix: Loc = ()) -> list[dict[str, Any]]:
    return [{"loc": [*prefix, *error["loc"]], "msg": error["msg"]}
            for error in exc.errors(include_url=False, include_context=False, include_input=False)]


def raise_errors(title: str, errors: Iterable[tuple[Loc, str]]) -> None:
    """Inside a pydantic validator: fail with errors at locations relative to the validated value."""
    details = [InitErrorDetails(type=PydanticCustomError("invalid", "{reason}", {"reason": msg}), loc=tuple(loc), input=None)
               for loc, msg in errors]
    if details:
        raise ValidationError.from_exception_data(title, details)


def duplicate_names(errors: list[tuple[tuple[Any, ...], str]], loc: Loc, names: list[str], field: str = "name") -> None:
    """Append an error at `loc + [index, field]` for every name already seen earlier in `names`."""
    seen: set[str] = set()
    for index, name in enumerate(names):
        if name in seen:
            errors.append(((*loc, index, field), f"duplicate name {name!r}"))
        seen.add(name)
