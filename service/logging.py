"""Structured logging (structlog) for the service process: one JSON object per line on stderr,
for Gangplank's own events and for every library that logs through the standard `logging`
module (Alembic's migration lines, uvicorn's errors)."""
from __future__ import annotations

import logging
import sys
from typing import Any

import structlog


class _Stderr:
    """Whatever sys.stderr is when a line is written: a stream captured at configure time may be
    closed later (a test runner's, say), and logging must never fail on it."""

    def write(self, text: str) -> int:
        return sys.stderr.write(text)

    def flush(self) -> None:
        sys.stderr.flush()


def _stamps() -> list[Any]:
    return [structlog.processors.add_log_level, structlog.processors.TimeStamper(fmt="iso", utc=True)]


def configure_logging(level: int = logging.INFO) -> None:
    render = structlog.processors.JSONRenderer(sort_keys=True)
    # standard-library records ("Running upgrade  -> 0001 ...") become {"event": <message>,
    # "logger": <name>, "level", "timestamp"}, as structlog's own lines
    handler = logging.StreamHandler(_Stderr())
    handler.setFormatter(structlog.stdlib.ProcessorFormatter(
        processors=[structlog.stdlib.ProcessorFormatter.remove_processors_meta, render],
        foreign_pre_chain=[structlog.stdlib.add_logger_name, *_stamps(), structlog.processors.format_exc_info]))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level)
    for chatty in ("httpx", "httpcore"):  # a line per request at INFO: the client commands' output is not a log
        logging.getLogger(chatty).setLevel(max(level, logging.WARNING))
    structlog.configure(
        # format_exc_info: a line logged with exc_info (log.exception, every 500) carries its traceback
        # as "exception"; without it the renderer would write "exc_info": true and drop the traceback
        processors=[*_stamps(), structlog.processors.format_exc_info, render],
        logger_factory=structlog.PrintLoggerFactory(_Stderr()),  # type: ignore[arg-type]
        wrapper_class=structlog.make_filtering_bound_logger(level),
    )
