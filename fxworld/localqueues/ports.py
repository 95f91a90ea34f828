"""Free TCP ports on 127.0.0.1 for the servers that tests and the local queues start.

A port the kernel hands out for ``bind(("127.0.0.1", 0))`` comes from the
ephemeral range, the same range every outgoing connection takes its local port
from. Between our releasing it and the server binding it, any client on the
machine (the other Python version's suite runs beside this one in CI) may take it.
So :func:`free_port` picks below the ephemeral range, where only listeners go, and
never hands out the same port twice in one process. A collision with another
process's listener is still possible: servers that start several listeners retry
with fresh ports (``WeedMini``).
"""

from __future__ import annotations

import random
import socket
from pathlib import Path

__all__ = ["free_port"]

_given: set[int] = set()


def _ephemeral_low() -> int:
    try:
        return int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768


def _bindable(port: int) -> bool:
    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def free_port() -> int:
    """A port no one listens on now, below the ephemeral range, new to this process."""
    high = _ephemeral_low() - 1
    low = 10_000 if high > 20_000 else 1024
    for _ in range(1000):
        port = random.randint(low, high)
        if port not in _given and _bindable(port):
            _given.add(port)
            return port
    raise RuntimeError(f"no free port in {low}-{high} after 1000 tries")
