"""Structured logging (structlog) for the service process."""
from __future__ import annotations

import logging
import sys

import structlog


class _Stderr:
    """Whatever sys.stderr is when a line is written: a stream captured at configure time may be
    closed later (a test runner's, say), and logging must never fail on it."""

    def write(self, text: str) -> int:
        return sys.stderr.write(text)

    def flush(self) -> None:
        sys.stderr.flush()


def configure_logging(level: int = logging.INFO) -> None:
    logging.basicConfig(format="%(message)s", stream=_Stderr(), level=level)
    structlog.configure(
        processors=[structlog.processors.add_log_level, structlog.processors.TimeStamper(fmt="iso", utc=True),
                    structlog.processors.JSONRenderer(sort_keys=True)],
        logger_factory=structlog.PrintLoggerFactory(_Stderr()),  # type: ignore[arg-type]
        wrapper_class=structlog.make_filtering_bound_logger(level),
    )
