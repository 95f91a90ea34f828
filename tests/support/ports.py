"""Free TCP ports on 127.0.0.1 for the servers tests start (see
:mod:`fxworld.localqueues.ports`, which the local queue servers share)."""

from fxworld.localqueues.ports import free_port

__all__ = ["free_port"]
