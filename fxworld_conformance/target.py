"""What the kit tests: how to open fresh worlds of the backend under test."""

from __future__ import annotations

import asyncio
import contextlib
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
from fxworld.protocol import NamespaceDropper
from fxworld.urls import mask
from fxworld_conformance.model import Violation

__all__ = [
    "Target",
    "Leftover",
    "Factory",
    "NAMESPACE_PREFIX",
    "keeps_data",
    "with_namespace",
    "load_factory",
    "call_world",
    "CALL_TIMEOUT",
]

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


@dataclass(frozen=True)
class Leftover:
    """A namespace the kit made and did not drop."""

    where: str
    """Its world's URL with the namespace (password masked), or the world's repr."""
    why: str
    lacking: str = ""
    """The world's class, when it has no ``drop_namespace()``."""

    def __str__(self) -> str:
        return f"{self.where} ({self.why})"


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

    ``check_timeout`` is the seconds any one check may take (``--check-timeout``):
    a check that runs past it fails, saying what it waited for, and the kit goes on
    (:mod:`fxworld_conformance.bounds`). ``None``: the profile's bound for the
    check's tier (:data:`fxworld_conformance.profiles.PROFILES`).

    What the kit makes, it removes (see :mod:`fxworld_conformance.cleanup`): every
    namespace it hands out (:meth:`fresh_namespace`) and every world a factory made
    is dropped (:class:`fxworld.protocol.NamespaceDropper`) when its check ends,
    also after a failure or Ctrl-C. ``keep=True`` leaves them for debugging;
    :attr:`kept` then says where they are, and :attr:`left` names what the kit
    could not drop.
    """

    url: str | None = None
    factory: Factory | None = None
    factory_spec: str | None = None
    restart: Callable[[], Awaitable[None]] | None = None
    extra_capabilities: frozenset[str] = field(default_factory=frozenset)
    secrets: tuple[str, ...] = ()
    keep: bool = False
    check_timeout: float | None = None
    kept: list[str] = field(default_factory=list, init=False, repr=False, compare=False)
    """Where the namespaces kept (``keep``) are: a URL with its ``namespace``
    (password masked), or a factory world's repr."""
    left: list[Leftover] = field(default_factory=list, init=False, repr=False, compare=False)
    """What the kit made and did not drop, each with the reason."""
    dropped: int = field(default=0, init=False, repr=False, compare=False)
    """How many namespaces the kit made and dropped."""
    _namespaces: list[str] = field(default_factory=list, init=False, repr=False, compare=False)
    _worlds: list[World] = field(default_factory=list, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        bound = self.check_timeout
        if bound is not None and (
            isinstance(bound, bool) or not isinstance(bound, int | float) or not 0 < bound < 1e9
        ):
            raise ConfigurationError(f"check_timeout must be a number of seconds > 0: {bound!r}")
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
        """A new namespace, ``fxk_`` and 16 hex digits; with a URL, one that
        :meth:`drop_made` drops (every check of the kit ends with it)."""
        namespace = NAMESPACE_PREFIX + uuid.uuid4().hex[:16]
        if self.url is not None:
            self._namespaces.append(namespace)
        return namespace

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
            self._worlds.append(made)  # its namespace is the factory's: dropped at close
        try:
            await made.setup()
        except BaseException:  # a Ctrl-C too: nothing of it may stay open (its locks)
            with contextlib.suppress(Exception):
                await asyncio.wait_for(made.close(), CALL_TIMEOUT)
            raise
        return made

    async def close(self, world: World) -> None:
        """Close a world the kit is done with. One a factory made is dropped first
        (its namespace is its own); a URL's namespaces wait for :meth:`drop_made`,
        since other worlds of the check (child processes) share them."""
        if any(w is world for w in self._worlds):
            self._worlds = [w for w in self._worlds if w is not world]
            await self._drop(world, repr(world))
        with contextlib.suppress(Exception):
            await asyncio.wait_for(world.close(), CALL_TIMEOUT)

    async def drop_made(self) -> None:
        """Drop every namespace handed out, and every factory world not closed yet,
        since the last call (with ``keep``, name them in :attr:`kept` instead).
        What is not dropped when this returns or is cancelled (a world without
        ``drop_namespace``, an error, an interruption) is named in :attr:`left`."""
        namespaces, self._namespaces = self._namespaces, []
        worlds, self._worlds = self._worlds, []
        try:
            while namespaces:
                assert self.url is not None
                url = with_namespace(self.url, namespaces[0])
                try:
                    world = open_world(url)
                except Exception as e:  # its scheme gone, say: it stays
                    self.left.append(Leftover(mask(url), f"{type(e).__name__}: {e}"))
                else:
                    await self._drop(world, mask(url))
                    with contextlib.suppress(Exception):
                        await asyncio.wait_for(world.close(), CALL_TIMEOUT)
                namespaces.pop(0)
            while worlds:
                await self._drop(worlds[0], repr(worlds[0]))
                with contextlib.suppress(Exception):
                    await asyncio.wait_for(worlds[0].close(), CALL_TIMEOUT)
                worlds.pop(0)
        finally:
            where = [mask(with_namespace(self.url or "", ns)) for ns in namespaces]
            self.left += [Leftover(w, "interrupted") for w in [*where, *map(repr, worlds)]]

    async def _drop(self, world: World, where: str) -> None:
        if not keeps_data(world):
            return  # gone with the object (the memory world): nothing to keep or leave
        if self.keep:
            self.kept.append(where)
        elif isinstance(world, NamespaceDropper):
            try:
                await asyncio.wait_for(world.drop_namespace(), CALL_TIMEOUT)
                self.dropped += 1
            except Exception as e:
                self.left.append(Leftover(where, f"{type(e).__name__}: {e}"))
        else:
            name = type(world).__name__
            self.left.append(Leftover(where, f"{name} has no drop_namespace()", name))


NAMESPACE_PREFIX = "fxk_"
"""How every namespace the kit makes begins."""


def keeps_data(world: object) -> bool:
    """Whether ``world`` may hold data beyond this process: ``durable`` or ``shared``
    (a world with neither, such as the memory world, is gone with its object)."""
    caps: object = getattr(world, "capabilities", frozenset())
    return not isinstance(caps, (set, frozenset)) or bool({"durable", "shared"} & caps)


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
