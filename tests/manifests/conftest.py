"""The client tests' real server, shared: one `gangplank serve` per session (tests/client/conftest.py)."""
from tests.client.conftest import cluster, database_url, server  # noqa: F401
