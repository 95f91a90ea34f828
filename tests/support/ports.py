"""Free TCP ports on 127.0.0.1 for the servers tests start.

A port the kernel hands out for ``bind(("127.0.0.1", 0))`` comes from the
ephemeral range, the same range every outgoing connection takes its local port
from. Between our releasing it and the server binding it, any client on the
machine (the other Python version's suite runs beside this one in CI) may take it.
So :func:`free_port` picks below the ephemeral range, where only listeners go, and
never hands out the same port twice in one process. A collision with another
process's listener is still possible: servers that start several listeners retry
with fresh ports (``WeedMini``).
"""

from fxworld.localqueues.ports import free_port

__all__ = ["free_port"]
