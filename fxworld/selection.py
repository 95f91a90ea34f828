"""Choosing a world: ``world()`` and ``open_world()`` (docs/contract.md section 3)."""

from __future__ import annotations

import difflib
import importlib
import os
import sys
from dataclasses import dataclass
from importlib.metadata import entry_points
from pathlib import Path
from typing import Any

from fxworld.errors import ConfigurationError, WorldError
from fxworld.protocol import World
from fxworld.urls import mask, unparseable

__all__ = [
    "world",
    "open_world",
    "register_scheme",
    "unregister_scheme",
    "registered_schemes",
    "DEFAULT_URL",
    "DEFAULT_DIR",
    "ENV_VAR",
    "default_url",
]

ENV_VAR = "FXWORLD_URL"
DEFAULT_DIR = ".fxworld"
DEFAULT_URL = "sqlite:///.fxworld/world.db"
"""The embedded world where no ``.fxworld/`` is found; :func:`default_url` makes it
absolute."""
ENTRY_POINT_GROUP = "fxworld.worlds"


@dataclass(frozen=True)
class _Backend:
    target: str  # "module:attribute", the attribute has from_url(url)
    extra: str | None  # the pip extra that brings its driver


_SCHEMES: dict[str, _Backend] = {
    "memory": _Backend("fxworld.embedded.memory:MemoryWorld", None),
    "sqlite": _Backend("fxworld.embedded.sqlite:SqliteWorld", None),
    "postgresql": _Backend("fxworld_postgres:PostgresWorld", "postgres"),
    "postgresql+asyncpg": _Backend("fxworld_postgres:PostgresWorld", "postgres"),
    "postgres": _Backend("fxworld_postgres:PostgresWorld", "postgres"),
    "redis": _Backend("fxworld_redis:RedisWorld", "redis"),
    "rediss": _Backend("fxworld_redis:RedisWorld", "redis"),
    "s3": _Backend("fxworld_s3:S3World", "s3"),
}

_ADDED: dict[str, str] = {}  # scheme -> "module:attribute", from register_scheme

_announced: set[str] = set()  # the new default worlds this process said it creates
_current: World | None = None
_current_from: str | None = None  # the URL read from the environment, if it chose _current


def open_world(url: str) -> World:
    """Build a world from ``url`` without making it the process's world.

    ``memory://``, ``sqlite:///path``, ``postgresql://...``, ``redis://...``,
    ``s3://bucket/prefix?endpoint_url=...``, or a scheme a third-party package
    registers in the entry-point group ``fxworld.worlds``. Every URL takes
    ``?namespace=``. Raises ``ConfigurationError`` for an unknown scheme (with a
    suggestion), a missing extra (with the ``pip install`` line) or a URL that does
    not parse (masked, never the driver's own words).
    """
    if not isinstance(url, str) or "://" not in url:
        raise ConfigurationError(
            f"world URL {mask(url) if isinstance(url, str) else url!r} has no scheme; "
            "expected e.g. sqlite:///path/world.db, memory://, postgresql://host/db"
        )
    scheme = url.partition("://")[0].lower()
    factory = _registered(scheme)
    if factory is None:
        backend = _SCHEMES.get(scheme)
        if backend is None:
            raise ConfigurationError(_unknown_scheme(scheme, url))
        factory = _load(backend, url)
    try:
        made = factory.from_url(url) if hasattr(factory, "from_url") else factory(url)
    except WorldError:
        raise
    except ValueError as e:  # a URL its driver could not parse: never the
        raise unparseable(url, e) from None  # driver's text, which may quote the password
    if not isinstance(made, World):
        raise ConfigurationError(f"{scheme}:// backend returned {type(made).__name__}, not a World")
    return made


def world(obj_or_url: World | str | None = None) -> World:
    """Set and return the process's world.

    A ``World`` object is used as is; a string is a URL for :func:`open_world`.
    With no argument: the world set by an earlier ``world(x)``; else the one named
    by ``FXWORLD_URL``, else the embedded SQLite world of :func:`default_url`
    (made once, and made again only if ``FXWORLD_URL`` changed since).
    """
    global _current, _current_from
    if obj_or_url is None:
        if _current is not None and _current_from is None:
            return _current  # set by world(x): no default is looked for, nor announced
        url = os.environ.get(ENV_VAR) or default_url(creating=_current is None)
        if _current is None or (_current_from is not None and _current_from != url):
            _current, _current_from = open_world(url), url
        return _current
    _current_from = None
    if isinstance(obj_or_url, str):
        _current = open_world(obj_or_url)
    elif isinstance(obj_or_url, World):
        _current = obj_or_url
    else:
        raise ConfigurationError(
            f"world() takes a World or a URL string, not {type(obj_or_url).__name__}"
        )
    return _current


def default_url(start: str | os.PathLike[str] | None = None, *, creating: bool = False) -> str:
    """The embedded SQLite world of a project, as an absolute ``sqlite:////path`` URL.

    The ``world.db`` in the nearest ``.fxworld/`` directory of ``start`` (default: the
    working directory) or one of its parents, as git finds ``.git``: so a worker, a
    web app and a client started in different directories of one project share one
    world. Where there is none, ``.fxworld/world.db`` in ``start``; with
    ``creating=True`` (the caller will create it) the process says so once on stderr.

    A ``.fxworld/`` found is used only if it is safe, as git checks a repository's
    owner (``safe.directory``): one owned by another user, or that the group or
    others may write (another local user could plant a world there, whose prompts
    this process would answer with its tools), raises ``ConfigurationError`` with
    what to do (set ``FXWORLD_URL``, or fix the owner or the permissions).
    """
    here = Path(start if start is not None else os.getcwd()).resolve()
    for folder in (here, *here.parents):
        if (folder / DEFAULT_DIR).is_dir():
            _refuse_unsafe(folder / DEFAULT_DIR)
            return f"sqlite:///{folder / DEFAULT_DIR / 'world.db'}"
    path = here / DEFAULT_DIR / "world.db"
    if creating and str(path) not in _announced:
        _announced.add(str(path))
        print(
            f"fxworld: no {DEFAULT_DIR}/ in {here} or its parents; "
            f"creating the default world {path}",
            file=sys.stderr,
            flush=True,
        )
    return f"sqlite:///{path}"


def _refuse_unsafe(folder: Path) -> None:
    """``ConfigurationError`` when ``folder`` (a ``.fxworld/`` found), or the
    ``world.db`` in it, belongs to another user or is writable by group or others."""
    me = os.geteuid()
    for path in (folder, folder / "world.db"):
        try:
            st = path.lstat()
        except FileNotFoundError:
            continue
        if st.st_uid != me:
            why = f"is owned by uid {st.st_uid}, not by you (uid {me})"
            fix = f"chown {me} {path}"
        elif st.st_mode & 0o022:
            why = f"is writable by {'group and others' if st.st_mode & 0o002 else 'group'}"
            fix = f"chmod go-w {path}"
        else:
            continue
        raise ConfigurationError(
            f"refusing the default world {path}: it {why}, so another user "
            f"could plant sessions in it; set {ENV_VAR} to the world to use, or run `{fix}`"
        )


def register_scheme(scheme: str, target: str) -> None:
    """Make ``open_world`` build ``scheme://`` URLs in this process with ``target``,
    ``"module:attribute"`` (a class with ``from_url(url)`` or a function of the URL).

    For tests and tools that need a scheme for a while without installing a
    package (the kit's own broken worlds); a backend for users registers through
    the entry-point group ``fxworld.worlds`` instead. The kit's process tier hands
    these registrations to its child processes (:func:`registered_schemes`).
    """
    if not isinstance(scheme, str) or "://" in scheme or not scheme.strip():
        raise ConfigurationError(f"a URL scheme is a word like 'mydb', not {scheme!r}")
    module, sep, attr = target.partition(":") if isinstance(target, str) else ("", "", "")
    if not (module and sep and attr):
        raise ConfigurationError(f"a scheme's target is 'module:attribute', not {target!r}")
    _ADDED[scheme.lower()] = target


def unregister_scheme(scheme: str) -> None:
    """Forget a scheme given to :func:`register_scheme` (no-op if it was not)."""
    _ADDED.pop(scheme.lower(), None)


def registered_schemes() -> dict[str, str]:
    """The schemes given to :func:`register_scheme` in this process, with their targets."""
    return dict(_ADDED)


def _registered(scheme: str) -> Any:
    added = _ADDED.get(scheme)
    if added is not None:
        return _load(_Backend(added, None), f"{scheme}://")
    for ep in entry_points(group=ENTRY_POINT_GROUP):
        if ep.name.lower() == scheme:
            try:
                return ep.load()
            except ImportError as e:
                raise ConfigurationError(
                    f"the {scheme}:// backend registered by {ep.value} failed to import: {e}"
                ) from None
    return None


def _load(backend: _Backend, url: str) -> Any:
    module_name, attr = backend.target.split(":")
    try:
        module = importlib.import_module(module_name)
        return getattr(module, attr)
    except ImportError as e:
        hint = f"; install it with: pip install 'fxworld[{backend.extra}]'" if backend.extra else ""
        raise ConfigurationError(
            f"the backend for {mask(url)} is not available ({e}){hint}"
        ) from None


def _unknown_scheme(scheme: str, url: str) -> str:
    installed = {ep.name for ep in entry_points(group=ENTRY_POINT_GROUP)}
    known = sorted(set(_SCHEMES) | set(_ADDED) | installed)
    close = difflib.get_close_matches(scheme, known, n=1, cutoff=0.5)
    hint = f"; did you mean {close[0]}://?" if close else ""
    return f"unknown world URL scheme {scheme!r} in {mask(url)}{hint} (known: {', '.join(known)})"
