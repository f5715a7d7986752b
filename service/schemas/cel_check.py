"""Compile checks for CEL selector expressions (model.md, *Devices*).

`cel.compile` (the common-expression-language package, a Rust parser) recurses once
per nesting level and segfaults when the native stack runs out: on an 8 MiB stack,
`a.a.a…` about 19,000 levels deep kills the process, on a 2 MiB thread stack about
5,000. No input may do that, so expressions are limited to 10 KiB (Kubernetes'
`CELSelectorExpressionMaxLength`) and compiled on one dedicated thread with a 64 MiB
stack (virtual memory: only what is touched is committed), far above what 10 KiB of
source can use. Results are cached: the same selectors come back with every slice and
workload.
"""
from __future__ import annotations

import functools
import os
import re
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Annotated, Any

import cel
from pydantic import AfterValidator, StrictStr, WithJsonSchema
from pydantic_core import PydanticCustomError

MAX_EXPRESSION_LENGTH = 10 * 1024
_COMPILER_STACK_SIZE = 64 * 1024 * 1024
_MAX_MESSAGE = 1000

_lock = threading.Lock()
_executor: ThreadPoolExecutor | None = None


def _compiler() -> ThreadPoolExecutor:
    global _executor
    with _lock:
        if _executor is None:
            previous = threading.stack_size(_COMPILER_STACK_SIZE)
            try:
                executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="cel-compile")
                executor.submit(int).result()  # starts the one worker now, with the large stack
            finally:
                threading.stack_size(previous)
            _executor = executor
        return _executor


def _reset_after_fork() -> None:  # the worker thread does not survive a fork
    global _executor, _lock
    _executor = None
    _lock = threading.Lock()


os.register_at_fork(after_in_child=_reset_after_fork)


# What Kubernetes' DRA CEL environment declares (k8s.io/dynamic-resource-allocation/cel): one
# variable, `device`, with these fields. The parser used here does not type-check, so the checks
# of Kubernetes' compiler that matter to users are made below: an undeclared variable, an unknown
# field of `device`, and (when it can be told without running a loop) a result that is not a bool
# are compile errors there, and so 422s here.
DEVICE_FIELDS = frozenset({"driver", "attributes", "capacity", "allowMultipleAllocations"})
_STRING = re.compile(r'[rRbB]{0,2}(?:"""[\s\S]*?"""' r"|'''[\s\S]*?'''" r'|"(?:\\.|[^"\\\n])*"' r"|'(?:\\.|[^'\\\n])*')")
_MACRO = re.compile(r"\.\s*(?:all|exists|exists_one|existsOne|map|filter|transformList|transformMap"
                    r"|transformMapEntry|sortBy)\s*\(\s*([A-Za-z_][A-Za-z0-9_]*)(?:\s*,\s*([A-Za-z_][A-Za-z0-9_]*))?")
_BIND = re.compile(r"\bcel\s*\.\s*bind\s*\(\s*([A-Za-z_][A-Za-z0-9_]*)")
_DEVICE_FIELD = re.compile(r"(?<![A-Za-z0-9_.])device\s*\.\s*([A-Za-z_][A-Za-z0-9_]*)")
# a probe device: an expression without loops is run once on it to learn its result's type
_PROBE = {"device": {"driver": "", "attributes": {}, "capacity": {}, "allowMultipleAllocations": False}}


def _semantic_error(program: Any, expression: str) -> str | None:
    code = _STRING.sub('""', expression)  # names inside string literals are not references
    bound: set[str] = set()
    loops = False
    for match in _MACRO.finditer(code):
        loops = True
        bound.update(name for name in match.groups() if name)
    for match in _BIND.finditer(code):
        bound.update((match.group(1), "cel"))
    undeclared = sorted(set(program.variables()) - {"device"} - bound)
    if undeclared:
        return f"undeclared reference to '{undeclared[0]}' (only 'device' is declared)"
    unknown = sorted({m.group(1) for m in _DEVICE_FIELD.finditer(code)} - DEVICE_FIELDS)
    if unknown and "device" not in bound:
        return f"undefined field '{unknown[0]}' of device (it has {', '.join(sorted(DEVICE_FIELDS))})"
    if not loops and not bound:
        try:
            result = program.execute(_PROBE)
        except Exception:  # it needs attributes the probe lacks: its type is not known here
            return None
        if not isinstance(result, bool):
            return f"must evaluate to bool, not {type(result).__name__}"
    return None


def _compile(expression: str) -> str | None:
    try:
        program = cel.compile(expression)
    except ValueError as exc:  # includes UnicodeEncodeError (lone surrogates)
        return str(exc)
    try:
        return _semantic_error(program, expression)
    except Exception:  # a check this parser cannot make is not the caller's error
        return None


@functools.lru_cache(maxsize=2048)
def cel_error(expression: str) -> str | None:
    """None when `expression` compiles, else a readable reason."""
    if not expression.strip():
        return "must be a non-empty CEL expression"
    if len(expression.encode("utf-8", "surrogatepass")) > MAX_EXPRESSION_LENGTH:
        return f"must be no more than {MAX_EXPRESSION_LENGTH} bytes"
    error = _compiler().submit(_compile, expression).result()
    if error is None:
        return None
    if len(error) > _MAX_MESSAGE:
        error = error[:_MAX_MESSAGE] + "…"
    return f"invalid CEL expression: {error}"


def _check(value: str) -> str:
    error = cel_error(value)
    if error is not None:
        raise PydanticCustomError("cel", "{reason}", {"reason": error})
    return value


CELExpression = Annotated[
    StrictStr,
    AfterValidator(_check),
    WithJsonSchema({"type": "string", "minLength": 1, "maxLength": MAX_EXPRESSION_LENGTH,
                    "description": "A CEL expression over `device` (driver, attributes, capacity) that compiles."}),
]
