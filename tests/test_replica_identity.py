"""A replica's identity (replicas.md, *Replicas*): the default id and advertised URL, a given id checked."""
from __future__ import annotations

import re
import socket

import pytest

from service.replica import ReplicaIdError, advertise_url, host_part, replica_id


def test_the_default_id_is_host_port_and_six_random_hex_digits() -> None:
    first, second = replica_id(None, "GP_Node.Example.COM", 8000), replica_id(None, "GP_Node.Example.COM", 8000)
    assert re.fullmatch(r"gp-node-example-com-8000-[0-9a-f]{6}", first)
    assert first != second  # new at every start
    assert host_part("x" * 50 + ".local") == "x" * 40


def test_a_given_id_must_match_the_cluster_name_pattern() -> None:
    assert replica_id("gp-1", "ignored", 1) == "gp-1"
    for bad in ("GP-1", "-gp", "gp_1", "a" * 64):
        with pytest.raises(ReplicaIdError):
            replica_id(bad, "h", 1)


def test_the_advertised_url() -> None:
    assert advertise_url(None, "10.0.0.5", 8000) == "http://10.0.0.5:8000"
    assert advertise_url(None, "0.0.0.0", 8080) == f"http://{socket.gethostname()}:8080"
    assert advertise_url(None, "::1", 9) == "http://[::1]:9"
    assert advertise_url("http://gp-1.internal:8000/", "127.0.0.1", 1) == "http://gp-1.internal:8000"
