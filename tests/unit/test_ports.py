"""The test servers' port picker stays out of the ephemeral range and never repeats."""

from __future__ import annotations

import socket

from tests.support.ports import free_port


def test_free_ports_are_distinct_bindable_and_below_the_ephemeral_range() -> None:
    low = int(open("/proc/sys/net/ipv4/ip_local_port_range").read().split()[0])
    ports = [free_port() for _ in range(200)]
    assert len(set(ports)) == 200
    assert all(1024 <= p < low for p in ports)
    with socket.socket() as s:
        s.bind(("127.0.0.1", ports[-1]))
