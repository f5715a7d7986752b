"""The one validation error of the schemas package."""
from __future__ import annotations

import re
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
        self.errors = [{**e, "msg": message_style(str(e["msg"]))} for e in errors]
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


# -- one style of messages ------------------------------------------------------------------------
# pydantic's (body fields: "Field required", "Input should be a valid integer"); msgspec's, which
# Litestar gives for path and query parameters ("Expected `int`, got `str`"), are translated to it,
# and our own messages start with a capital as pydantic's do.

_MSGSPEC_TYPES = {"int": "a valid integer", "float": "a valid number", "bool": "a valid boolean",
                  "str": "a valid string", "object": "a valid dictionary", "array": "a valid list"}
_MSGSPEC_BOUNDS = {">=": "greater than or equal to", "<=": "less than or equal to",
                   ">": "greater than", "<": "less than"}
_EXPECTED_TYPE = re.compile(r"Expected `([^`]+)`, got `[^`]+`")
_EXPECTED_BOUND = re.compile(r"Expected `[^`]+` (>=|<=|>|<) (\S+)")
_INVALID_ENUM = re.compile(r"Invalid enum value (.+)")
_PLAIN_WORD = re.compile(r"[a-z]+(?=[ ,]|$)")  # "must be…", not an identifier such as "minCount"


def from_msgspec(msg: str, allowed: Sequence[Any] = ()) -> str:
    """A msgspec validation message in pydantic's words (unknown ones keep their text)."""
    if match := _EXPECTED_TYPE.fullmatch(msg):
        types = [t.strip() for t in match.group(1).split("|") if t.strip() != "null"]
        return "Input should be " + (_MSGSPEC_TYPES.get(types[0], f"a valid {types[0]}") if types else "null")
    if match := _EXPECTED_BOUND.fullmatch(msg):
        return f"Input should be {_MSGSPEC_BOUNDS[match.group(1)]} {match.group(2)}"
    if _INVALID_ENUM.fullmatch(msg):
        if allowed:
            quoted = [repr(a) for a in allowed]
            listed = quoted[0] if len(quoted) == 1 else ", ".join(quoted[:-1]) + " or " + quoted[-1]
            return f"Input should be {listed}"
        return "Input should be one of the allowed values"
    return message_style(msg)


def message_style(msg: str) -> str:
    """Capitalise a message that starts with a plain lower-case word, as pydantic's do."""
    if _PLAIN_WORD.match(msg):
        return msg[0].upper() + msg[1:]
    return msg
