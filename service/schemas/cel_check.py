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
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Annotated

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


def _compile(expression: str) -> str | None:
    try:
        cel.compile(expression)
    except ValueError as exc:  # includes UnicodeEncodeError (lone surrogates)
        return str(exc)
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
