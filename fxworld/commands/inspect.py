"""`fxworld inspect --world URL`: a web page of the world's sessions, live.

Pages: ``/`` every session, what needs a person first (waiting for approval,
stuck, failed, a tool error, something interrupted, stopped: each with its count),
then newest activity, with its agent, state, last activity, turns and tokens, child
sessions under their parent; filters by attention, agent, context (``tenant=acme``),
state and time, and a search within ids and first prompts, all kept in the URL;
``--stuck-after S`` (15) says how long a due wake no worker took makes a session
stuck. ``/sessions/{id}`` its newest ten turns (a link loads the ones before),
numbered from the session's first and updated as the log grows: each tool call one
card with its input, its durable steps in order (finished, interrupted, never
reached) and its result, saying what ran and what may have partly run; the calls
waiting for a decision, with the input to approve, a child session's among them
(decided in place), with Approve and Deny (a note or a reason; Deny asks to
confirm); Stop (with a reason, confirmed) on a running turn and Retry on a failed
one; a value over 4 KiB as its size and first 4 KiB, with a link that downloads it
whole. ``/wakes`` the pending wakes, where the world can say (see
fxworld.web.create_inspector).

On a loopback address (the default, 127.0.0.1) it runs without ``--authorize``:
the machine is the user's own, and requests must name a loopback host (a web
page elsewhere cannot reach it through DNS rebinding). Any other address needs
``--authorize module:function`` (``authorize(request, session_id, action)`` ->
bool, or the caller's name, recorded as the actor of Approve, Deny, Stop and Retry;
action ``list``, ``view``, ``approve``, ``stop``, ``retry`` or ``clear``), or it refuses to
start. Without it, decisions record the actor ``local``. Once it listens it prints
one line on stderr: the address and the world (credentials masked). SIGTERM or Ctrl-C stops it.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import signal
import sys
from typing import Any

from fxworld.cli import add_world_option, open_world_for, plain
from fxworld.commands.serve import LOOPBACK_HOSTS, is_loopback, refuse_other_hosts

__all__ = ["register", "is_loopback", "LOOPBACK_HOSTS"]


def register(sub: Any) -> None:
    parser: argparse.ArgumentParser = sub.add_parser(
        "inspect",
        help="a web page of the world's sessions, live (approve, deny, stop)",
        description=plain(__doc__),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_world_option(parser)
    parser.add_argument("--host", default="127.0.0.1", help="address to bind (127.0.0.1)")
    parser.add_argument("--port", type=int, default=8765, help="port to bind (8765)")
    parser.add_argument(
        "--authorize",
        metavar="module:function",
        default=None,
        help="authorize(request, session_id, action) -> bool or the caller's name "
        "(may be async); needed on any address but loopback",
    )
    parser.add_argument(
        "--stuck-after",
        type=float,
        default=15.0,
        metavar="S",
        help="seconds a due wake no worker takes makes its session stuck (15: the lease)",
    )
    parser.set_defaults(func=_run)


def build_app(args: argparse.Namespace, world: Any) -> Any:
    """The inspector ``fxworld inspect`` serves, from its arguments."""
    from fxworld.commands.serve import load_object
    from fxworld.web import create_inspector

    stuck_after = getattr(args, "stuck_after", 15.0)  # (an app built from older args)
    if args.authorize:
        return create_inspector(
            world, authorize=load_object(args.authorize), stuck_after=stuck_after
        )
    app = create_inspector(world, allow_anyone=True, stuck_after=stuck_after)
    refuse_other_hosts(app)  # the one check, as `fxworld serve` on loopback
    return app


async def _run(args: argparse.Namespace) -> int:
    import uvicorn  # the 'web' extra: a missing one is a one-line error (fxworld.cli)

    from fxworld.commands.serve import describe_world, server_class

    if not args.authorize and not is_loopback(args.host):
        print(
            f"fxworld inspect: refusing to serve {args.host} without --authorize "
            "module:function (only a loopback address such as 127.0.0.1 may go without)",
            file=sys.stderr,
        )
        return 2
    world = open_world_for(args, "write")
    try:
        app = build_app(args, world)
        # fail now on a bad world, not at the first page; only reads, as
        # `fxworld sessions` does (a read-only database role is enough to look)
        await world.read("fxworld-inspect", 0, limit=1)
        config = uvicorn.Config(
            app, host=args.host, port=args.port, log_level="warning", lifespan="off"
        )
        server = server_class()(config)
        server.ready_line = (
            f"fxworld inspect: ready: http://{args.host}:{args.port} ({describe_world(world)})"
        )
        await _serve(server, app)
    finally:
        await world.close()
    return 0


async def _serve(server: Any, app: Any) -> None:
    loop = asyncio.get_running_loop()

    def on_signal() -> None:
        if server.should_exit:  # a second signal: stop waiting for connections
            server.force_exit = True
        server.should_exit = True
        app.state.end_streams()  # open pages reconnect (elsewhere) by themselves

    installed = []
    for sig in (signal.SIGTERM, signal.SIGINT):
        with contextlib.suppress(NotImplementedError, RuntimeError):
            loop.add_signal_handler(sig, on_signal)
            installed.append(sig)
    try:
        await server.serve()
    finally:
        for sig in installed:
            loop.remove_signal_handler(sig)
        await app.state.close()
