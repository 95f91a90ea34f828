"""`fxworld serve module:agent`: serve an agent's sessions over HTTP, with workers.

Routes (see fxworld.web): ``POST /sessions``, ``POST /sessions/{id}/prompts``
and ``GET /sessions/{id}/stream`` (Server-Sent Events, resumable). With
``--workers N`` (default 1) the same process also runs N workers that take wakes
and run turns; ``--workers 0`` serves only, for a deployment whose workers run
elsewhere (``fxworld worker``). The routes refuse to start without
``--authorize module:callable`` or an explicit ``--allow-anyone``.

On a loopback address (the default, 127.0.0.1) a request must name a loopback
host (``127.0.0.1``, ``localhost``, ``::1``) or one given with ``--allowed-host``,
else it is refused (400): a web page elsewhere whose name resolves to 127.0.0.1
(DNS rebinding) would otherwise be same-origin with it. Behind a proxy on the same
machine that passes on its own ``Host``, name it with ``--allowed-host``.

``--static DIR`` serves a directory at ``/`` (e.g. ``examples/chat/static``; never
a dotfile, and never a directory that holds a SQLite world's files), and
``--wake-path PATH`` mounts the signed wake handler there (its secret is read from
``$FXWORLD_WAKE_SECRET``). Once it listens it prints one line on stderr: the
address, the world (credentials masked), its namespace, the workers and their
lease. SIGTERM or Ctrl-C stops serving, running sessions are handed back at the
next step boundary, and the world is closed.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import importlib
import importlib.util
import ipaddress
import logging
import os
import signal
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from fxworld.cli import add_world_option, plain
from fxworld.errors import ConfigurationError

__all__ = [
    "register", "build_app", "load_object", "load_agent", "agent_from_args", "describe_world",
    "server_class", "is_loopback", "refuse_other_hosts", "LOOPBACK_HOSTS",
]  # fmt: skip

logger = logging.getLogger("fxworld.serve")

LOOPBACK_HOSTS = ("127.0.0.1", "localhost", "::1", "[::1]")
"""The ``Host`` names a server on a loopback address answers (any other: 400)."""


def register(sub: Any) -> None:
    parser: argparse.ArgumentParser = sub.add_parser(
        "serve",
        help="serve an agent's sessions over HTTP (and run workers)",
        description=plain(__doc__),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "agent",
        metavar="module:agent",
        help="where the Agent is: app:agent, pkg.mod:agent or path/to/file.py:agent",
    )
    add_world_option(parser)
    parser.add_argument("--host", default="127.0.0.1", help="address to bind (127.0.0.1)")
    parser.add_argument("--port", type=int, default=8000, help="port to bind (8000)")
    parser.add_argument(
        "--workers",
        type=int,
        default=1,
        metavar="N",
        help="in-process workers running turns (1); 0 serves only",
    )
    parser.add_argument(
        "--lease", type=float, default=15.0, metavar="S", help="workers' wake lease in seconds"
    )
    parser.add_argument(
        "--allow-anyone",
        action="store_true",
        help="serve every session to anyone who asks (demos, or behind your own gateway)",
    )
    parser.add_argument(
        "--authorize",
        metavar="module:callable",
        default=None,
        help="authorize(request, session_id, action) -> bool or the caller's name (may be async)",
    )
    parser.add_argument(
        "--static", metavar="DIR", default=None, help="serve DIR at / (no dotfiles)"
    )
    parser.add_argument(
        "--wake-path",
        metavar="PATH",
        default=None,
        help="mount the signed wake handler at PATH (secret from $FXWORLD_WAKE_SECRET)",
    )
    parser.add_argument(
        "--heartbeat",
        type=float,
        default=15.0,
        metavar="S",
        help="seconds between keep-alive comments on idle streams (15)",
    )
    parser.add_argument(
        "--allowed-origin",
        action="append",
        default=None,
        metavar="ORIGIN",
        help="refuse browser requests from other origins (repeatable), e.g. https://app.example",
    )
    parser.add_argument(
        "--stream-lifetime",
        type=float,
        default=300.0,
        metavar="S",
        help="seconds after which a stream ends and its client reconnects (300)",
    )
    parser.add_argument(
        "--allowed-host",
        action="append",
        default=None,
        metavar="NAME",
        help="on a loopback address, answer this Host too (repeatable); others are 400",
    )
    parser.add_argument("-v", "--verbose", action="store_true", help="log each request")
    parser.set_defaults(func=_run)


def is_loopback(host: str) -> bool:
    """Whether ``host`` (an address to bind) is a loopback address or ``localhost``."""
    if host.strip("[]").lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def refuse_other_hosts(app: Any, also: list[str] | None = None) -> None:
    """Make ``app`` (served on a loopback address) answer 400 to a request whose
    ``Host`` is not a loopback name (:data:`LOOPBACK_HOSTS`) nor in ``also``: a page
    of another site whose name was made to resolve to 127.0.0.1 (DNS rebinding)
    sends its own name, and cannot drive the server. ``fxworld serve`` and
    ``fxworld inspect`` both use it."""
    from starlette.middleware.trustedhost import TrustedHostMiddleware

    app.add_middleware(TrustedHostMiddleware, allowed_hosts=[*LOOPBACK_HOSTS, *(also or [])])


def load_object(target: str) -> Any:
    """The object ``module:attribute`` names; the module may be a ``.py`` file path.
    The current directory is importable. Any failure while the module is imported
    is a ``ConfigurationError`` naming the module and the cause (one line, no
    traceback)."""
    module_name, sep, attr = target.rpartition(":")
    if not sep or not module_name or not attr:
        raise ConfigurationError(f"expected module:name, e.g. app:agent, not {target!r}")
    if os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    try:
        if module_name.endswith(".py"):
            path = Path(module_name).resolve()
            spec = importlib.util.spec_from_file_location(path.stem, path)
            if spec is None or spec.loader is None or not path.is_file():
                raise ConfigurationError(f"no Python file at {module_name!r}")
            module = importlib.util.module_from_spec(spec)
            sys.modules[path.stem] = module
            spec.loader.exec_module(module)
        else:
            module = importlib.import_module(module_name)
    except ImportError as e:
        raise ConfigurationError(f"cannot import {module_name!r}: {e}") from None
    except (Exception, SystemExit) as e:  # the user's module failed while it ran: one line
        raise ConfigurationError(
            f"importing {module_name!r} failed: {type(e).__name__}: {e}{_hint(e)}"
        ) from None
    obj: Any = module
    for part in attr.split("."):
        if not hasattr(obj, part):
            raise ConfigurationError(f"{module_name!r} has no attribute {attr!r}")
        obj = getattr(obj, part)
    return obj


def _hint(error: BaseException) -> str:
    """What to do about an import-time failure we can name."""
    if isinstance(error, RuntimeError) and "asyncio.run()" in str(error):
        return ' (guard the module\'s asyncio.run(...) with: if __name__ == "__main__":)'
    return ""


def load_agent(target: str) -> Any:
    """The Agent ``target`` names (a zero-argument factory is called)."""
    from fxworld.engine import Agent

    obj = load_object(target)
    if callable(obj) and not isinstance(obj, Agent):
        obj = obj()
    if not isinstance(obj, Agent):
        raise ConfigurationError(f"{target} is a {type(obj).__name__}, not an fxworld Agent")
    return obj


def agent_from_args(args: argparse.Namespace) -> Any:
    """What ``fxworld serve`` and ``fxworld worker`` do first: log at the level
    ``--verbose`` asks for, make ``--world`` the default world, load the agent."""
    import fxworld

    logging.basicConfig(
        level=logging.INFO if args.verbose else logging.WARNING,
        format="%(asctime)s %(name)s[%(process)d] %(message)s",
    )
    if args.world:
        fxworld.world(args.world)
    return load_agent(args.agent)


def describe_world(world: Any) -> str:
    """The world and its namespace, for a ready line: the world's repr, which never
    shows a credential (W16; the kit checks it)."""
    return f"world {world!r}, namespace {getattr(world, 'namespace', '-')}"


def server_class() -> Any:
    import uvicorn

    class Server(uvicorn.Server):
        """uvicorn's server, leaving signals to ``fxworld serve`` (which also stops
        the workers) instead of re-raising them once the server has stopped, and
        printing ``ready_line`` once it listens."""

        ready_line = ""

        @contextlib.contextmanager
        def capture_signals(self) -> Iterator[None]:
            yield

        async def startup(self, sockets: Any = None) -> None:
            await super().startup(sockets=sockets)
            if self.started and self.ready_line:
                print(self.ready_line, file=sys.stderr, flush=True)

    return Server


def build_app(args: argparse.Namespace, agent: Any) -> Any:
    """The ASGI app ``fxworld serve`` runs, from its parsed arguments."""
    from starlette.routing import BaseRoute, Mount, Route

    from fxworld.web import create_app, static_files, wake_handler

    authorize = load_object(args.authorize) if args.authorize else None
    if authorize is None and not args.allow_anyone:
        raise ConfigurationError(
            "refusing to serve sessions to anyone: pass --authorize module:callable, "
            "or --allow-anyone to serve every session to whoever asks"
        )
    extra: list[BaseRoute] = []
    if args.wake_path:
        path = "/" + args.wake_path.strip("/")
        extra.append(Route(path, endpoint=wake_handler(agent)))
    if args.static:
        extra.append(Mount("/", app=static_files(args.static, agent.world)))
    app = create_app(
        agent,
        authorize=authorize,
        allow_anyone=args.allow_anyone,
        heartbeat=args.heartbeat,
        allowed_origins=args.allowed_origin,
        stream_lifetime=args.stream_lifetime,
        extra_routes=extra,
    )
    if is_loopback(args.host):
        refuse_other_hosts(app, args.allowed_host)
    return app


async def _run(args: argparse.Namespace) -> int:
    import uvicorn  # the 'web' extra: a missing one is a one-line error (fxworld.cli)

    if args.workers < 0:
        raise ConfigurationError("--workers must be 0 or more")
    agent = agent_from_args(args)
    app = build_app(args, agent)
    world = await agent.ready()  # fail now on a bad world, not at the first request
    config = uvicorn.Config(
        app,
        host=args.host,
        port=args.port,
        log_level="info" if args.verbose else "warning",
        access_log=args.verbose,
        lifespan="off",
        timeout_graceful_shutdown=3,
    )
    server = server_class()(config)
    loop = asyncio.get_running_loop()

    def on_signal() -> None:
        if server.should_exit:  # a second signal: stop waiting for connections
            server.force_exit = True
        server.should_exit = True
        app.state.close_streams()  # clients reconnect (elsewhere) from their cursors
        agent.stop()  # running sessions are handed back at their next step boundary

    installed = []
    for sig in (signal.SIGTERM, signal.SIGINT):
        with contextlib.suppress(NotImplementedError, RuntimeError):
            loop.add_signal_handler(sig, on_signal)
            installed.append(sig)
    workers = [
        asyncio.create_task(agent.work(lease=args.lease), name=f"fxworld-worker-{i}")
        for i in range(args.workers)
    ]
    workers_text = f"{args.workers} worker{'s' if args.workers != 1 else ''}"
    server.ready_line = (
        f"fxworld serve: ready: http://{args.host}:{args.port} "
        f"({describe_world(world)}, {workers_text}, lease {args.lease:g} s)"
    )
    try:
        await server.serve()
    finally:
        for sig in installed:
            loop.remove_signal_handler(sig)
        agent.stop()
        if workers:
            done, pending = await asyncio.wait(workers, timeout=10)
            for task in pending:
                task.cancel()
            for task in done | pending:
                with contextlib.suppress(BaseException):
                    await task
        await world.close()  # no client is left for the interpreter to find unclosed
    return 0
