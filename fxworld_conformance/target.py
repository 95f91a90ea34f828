"""What the kit tests: how to open fresh worlds of the backend under test."""

from __future__ import annotations

import asyncio
import importlib
import inspect
import os
import sys
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import TypeVar
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from fxworld import World, open_world
from fxworld.errors import ConfigurationError, WorldError
from fxworld_conformance.model import Violation

__all__ = ["Target", "Factory", "with_namespace", "load_factory", "call_world", "CALL_TIMEOUT"]

T = TypeVar("T")

CALL_TIMEOUT = 60.0
"""How long one world call may take before the kit reports it stuck (liveness)."""


async def call_world(aw: Awaitable[T], what: str, guarantee: str) -> T:
    """Await one call of the world under test within :data:`CALL_TIMEOUT`.

    A call that never returns breaks ``guarantee``; an exception that is not an
    fxworld error breaks W16 (driver errors must be translated).
    """
    try:
        return await asyncio.wait_for(aw, CALL_TIMEOUT)
    except TimeoutError:
        raise Violation(guarantee, f"{what} did not return within {CALL_TIMEOUT:g} s") from None
    except WorldError:
        raise
    except Exception as e:
        raise Violation(
            "W16", f"{what} raised {type(e).__name__}: {e}, not an fxworld error"
        ) from e


Factory = Callable[[], "World | Awaitable[World]"]
"""A zero-argument callable returning a fresh, empty World (or an awaitable of one)."""


@dataclass
class Target:
    """The backend under test.

    Either ``url`` (the kit adds a fresh ``namespace`` per test, and racing OS
    processes open the same URL and namespace) or ``factory`` (a fresh world per
    call; ``factory_spec`` is its ``"pkg.module:name"`` when known). A world that
    lacks the ``shared`` capability, or is given only by a factory without a
    spec, runs the process tier as concurrent tasks in one process.

    ``restart`` crash-restarts the server (enables the ``restartable`` checks);
    ``extra_capabilities`` adds fixture-level capabilities such as ``restartable``;
    ``secrets`` are strings (passwords given outside the URL) that no repr or error
    message of the world may show (W16), beside the URL's own password.
    """

    url: str | None = None
    factory: Factory | None = None
    factory_spec: str | None = None
    restart: Callable[[], Awaitable[None]] | None = None
    extra_capabilities: frozenset[str] = field(default_factory=frozenset)
    secrets: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if self.url is None and self.factory is None:
            if self.factory_spec is None:
                raise ConfigurationError("a Target needs a url, a factory or a factory_spec")
            self.factory = load_factory(self.factory_spec)

    @classmethod
    def parse(cls, spec: str) -> Target:
        """``"scheme://..."`` is a URL; ``"pkg.module:factory"`` is a factory."""
        if "://" in spec:
            return cls(url=spec)
        return cls(factory_spec=spec)

    def fresh_namespace(self) -> str:
        return "fxk_" + uuid.uuid4().hex[:16]

    async def open(self, namespace: str | None = None) -> World:
        """A fresh, empty, set-up world. With a URL, ``namespace`` (or a new one)."""
        if self.url is not None:
            made = open_world(with_namespace(self.url, namespace or self.fresh_namespace()))
        else:
            assert self.factory is not None
            result = self.factory()
            made = await result if inspect.isawaitable(result) else result
            if not isinstance(made, World):
                name = self.factory_spec or getattr(self.factory, "__name__", "the factory")
                raise ConfigurationError(
                    f"factory {name} returned {type(made).__name__}, not a World"
                )
        await made.setup()
        return made


def with_namespace(url: str, namespace: str) -> str:
    """``url`` with its ``namespace`` query parameter set to ``namespace``."""
    parts = urlsplit(url)
    query = [(k, v) for k, v in parse_qsl(parts.query, keep_blank_values=True) if k != "namespace"]
    query.append(("namespace", namespace))
    if not parts.netloc and "://" in url:
        # urlunsplit drops the "//" of an empty authority ("memory://", "sqlite:///p")
        fragment = f"#{parts.fragment}" if parts.fragment else ""
        return f"{parts.scheme}://{parts.path}?{urlencode(query)}{fragment}"
    return urlunsplit(parts._replace(query=urlencode(query)))


def load_factory(spec: str) -> Factory:
    """Import ``"pkg.module:name"`` (the current directory is importable) and return
    the callable it names."""
    module_name, _, attr = spec.partition(":")
    if not module_name or not attr:
        raise ConfigurationError(f"factory {spec!r} is not of the form pkg.module:factory")
    # The current directory is importable, as it is for `python -m pytest` (the
    # `fxworld` console script's sys.path[0] is its own bin directory).
    if os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    try:
        obj = getattr(importlib.import_module(module_name), attr)
    except (ImportError, AttributeError) as e:
        raise ConfigurationError(f"cannot load factory {spec!r}: {e}") from None
    if not callable(obj):
        raise ConfigurationError(f"factory {spec!r} is not callable")
    return obj  # type: ignore[no-any-return]
