"""The service's ASGI app for another server (granian), to compare servers in bench/http_load.py.

    GANGPLANK_DATABASE_URL=... python -m granian --interface asgi --factory bench.granian_app:app

Built as `gangplank serve` builds it (logging, the collector's thresholds, build_app with the
settings from the environment); only the server around it differs. A benchmark's tool, not a
way to deploy: `gangplank serve` (uvicorn) is the service's server.
"""
from __future__ import annotations

from typing import Any


def app() -> Any:
    from service.bootstrap import build_app
    from service.config import Settings
    from service.gcpause import configure_for_serving
    from service.logging import configure_logging

    configure_logging()
    configure_for_serving()
    return build_app(Settings.from_env())
