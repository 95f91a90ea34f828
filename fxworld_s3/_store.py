"""The S3 requests the world makes, each retried and translated in one place.

Every method is one S3 request (a LIST may page), retried on transient errors
with backoff and jitter within ``budget`` seconds, and answers a lost condition
with ``None``/``False`` rather than an exception (see ``_errors``). ``counts``
counts the requests by operation, for tests and benchmarks.

The client the store makes is closed by :meth:`Store.close`, and otherwise when
its event loop shuts down (``asyncio.run`` ends: a program that never closed its
world, a worker stopped by SIGTERM), so aiohttp never finds it unclosed.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import json
import time
from collections.abc import AsyncGenerator, Awaitable, Callable
from typing import Any, Final, TypeVar

from aiobotocore.config import AioConfig
from aiobotocore.parsers import AioResponseParserFactory
from aiobotocore.session import AioSession, get_session

from fxworld import jsondata
from fxworld.errors import BackendUnavailable, ConfigurationError
from fxworld.urls import mask
from fxworld_s3 import _errors

__all__ = ["Store", "UNCHANGED", "dumps", "loads"]

T = TypeVar("T")


class _Unchanged:
    def __repr__(self) -> str:
        return "UNCHANGED"


UNCHANGED: Final = _Unchanged()
"""What :meth:`Store.get` returns when ``If-None-Match`` held (HTTP 304)."""


_ENCODER = json.JSONEncoder(separators=(",", ":"), ensure_ascii=True)


def dumps(value: object) -> bytes:
    """Compact JSON, ASCII (a lone surrogate in a kind or key survives) but for the
    entry data of a large value, which is copied in as UTF-8, at the cost of its bytes
    (``fxworld.jsondata``; entry data is valid Unicode)."""
    return jsondata.encode_bytes(value, _ENCODER)


def loads(body: bytes) -> Any:
    return jsondata.decode(body)


_SESSION: AioSession | None = None


def _shared_session() -> AioSession:
    """One botocore session per process: it caches the service model, which costs
    about a second of CPU to load for each new session."""
    global _SESSION
    if _SESSION is None:
        _SESSION = get_session()
        _SESSION.register_component("response_parser_factory", _ParserPerProtocol())
    return _SESSION


class _ParserPerProtocol(AioResponseParserFactory):  # type: ignore[misc]
    """One response parser per protocol, for every response. botocore makes a new
    parser for each response, and a parser holds a reference to itself (a bound
    method), so each request left garbage behind. Made mid-request, it often reaches
    the oldest generation, and only full collections free that: pauses of the whole
    event loop that walk every object, botocore's loaded models included (about
    100 ms here, after every 800 or so requests). A parser keeps no state between
    responses."""

    def __init__(self) -> None:
        super().__init__()
        self._made: dict[str, Any] = {}

    def set_parser_defaults(self, **kwargs: Any) -> None:
        super().set_parser_defaults(**kwargs)
        self._made.clear()

    def create_parser(self, protocol_name: str) -> Any:
        parser = self._made.get(protocol_name)
        if parser is None:
            parser = self._made[protocol_name] = super().create_parser(protocol_name)
        return parser


class Store:
    """One bucket through one aiobotocore client (the application's, or our own)."""

    def __init__(
        self,
        bucket: str,
        *,
        endpoint_url: str | None,
        region: str | None,
        client: Any = None,
        session: AioSession | None = None,
        budget: float = 25.0,
        read_timeout: float = 10.0,
    ) -> None:
        self.bucket = bucket
        self.endpoint_url = endpoint_url
        self.region = region
        self.endpoint = mask(endpoint_url) if endpoint_url else "AWS S3"  # for messages (W16)
        self.budget = budget
        self.read_timeout = read_timeout
        self.counts: collections.Counter[str] = collections.Counter()
        self.given = client  # the application's client, if any
        self._session = session
        self._client: Any = client
        self._context: Any = None
        self._closer: AsyncGenerator[None, None] | None = None
        self._loop: asyncio.AbstractEventLoop | None = None

    @property
    def requests(self) -> int:
        """Requests made so far (all operations)."""
        return sum(self.counts.values())

    async def _get_client(self) -> Any:
        if self.given is not None:
            return self.given
        loop = asyncio.get_running_loop()
        if self._client is not None and self._loop is loop:
            return self._client
        if self._client is not None:  # made on another event loop: its sockets are dead
            self._client = self._context = self._closer = None
        session = self._session or _shared_session()
        config = AioConfig(
            retries={"total_max_attempts": 1},  # retried here, with our budget
            connect_timeout=3,
            read_timeout=self.read_timeout,
            max_pool_connections=64,
            s3={"addressing_style": "path"} if self.endpoint_url else None,
        )
        region = self.region or ("us-east-1" if self.endpoint_url else None)
        try:
            self._context = session.create_client(
                "s3", region_name=region, endpoint_url=self.endpoint_url, config=config
            )
            self._client = await self._context.__aenter__()
        except Exception as e:
            raise _errors.translate(e, what="connect", endpoint=self.endpoint) from None
        self._loop = loop
        self._closer = self._close_at_loop_end(self._context)
        await anext(self._closer)  # started: the loop now finalises it when it shuts down
        return self._client

    async def _close_at_loop_end(self, context: Any) -> AsyncGenerator[None, None]:
        """Suspended until :meth:`close` or the event loop's shutdown
        (``loop.shutdown_asyncgens()``, which ``asyncio.run`` calls) closes it;
        then closes the client ``context`` made."""
        try:
            yield
        finally:
            if self._context is context:
                self._context = self._client = None
            with contextlib.suppress(Exception):
                await context.__aexit__(None, None, None)

    async def close(self) -> None:
        """Close our own client (an application's client stays open). Made on
        another event loop, it is left to that loop's shutdown."""
        closer = self._closer
        if closer is not None and self._loop is asyncio.get_running_loop():
            self._closer = None
            await closer.aclose()

    async def _call(
        self, op: str, what: str, fn: Callable[[Any], Awaitable[T]], *, if_match: bool = False
    ) -> tuple[T | None, _errors.Kind | None, bool]:
        """Run ``fn(client)``; returns ``(result, None, retried)`` or, for a lost,
        missing or unchanged answer, ``(None, kind, retried)``. ``retried``: an
        earlier attempt failed after it may have reached the server."""
        client = await self._get_client()
        deadline = time.monotonic() + self.budget
        attempt = 0
        while True:
            self.counts[op] += 1
            try:
                return await fn(client), None, attempt > 0
            except Exception as e:
                kind = _errors.classify(e, if_match=if_match)
                if kind in ("lost", "missing", "unchanged"):
                    return None, kind, attempt > 0
                wait = _errors.backoff(attempt)
                if kind == "transient" and time.monotonic() + wait < deadline:
                    attempt += 1
                    await asyncio.sleep(wait)
                    continue
                raise _errors.translate(e, what=what, endpoint=self.endpoint) from None

    # -- objects ------------------------------------------------------------------------

    async def get(self, key: str, *, etag: str | None = None) -> tuple[bytes, str] | Any | None:
        """``(body, etag)``, ``None`` if absent, or :data:`UNCHANGED` if ``etag`` is
        still current."""

        async def fn(c: Any) -> tuple[bytes, str]:
            extra = {"IfNoneMatch": etag} if etag else {}
            resp = await c.get_object(Bucket=self.bucket, Key=key, **extra)
            async with resp["Body"] as stream:
                body = await stream.read()
            return bytes(body), str(resp["ETag"])

        got, kind, _ = await self._call("GET", "read", fn)
        return UNCHANGED if kind == "unchanged" else got

    async def put_new(self, key: str, body: bytes) -> str | None:
        """Create ``key`` only if absent (``If-None-Match: *``); its etag, or
        ``None`` if it exists (possibly our own write, landed by an attempt that
        failed: the caller tells by the body's token)."""

        async def fn(c: Any) -> str:
            resp = await c.put_object(Bucket=self.bucket, Key=key, Body=body, IfNoneMatch="*")
            return str(resp["ETag"])

        etag, _, _ = await self._call("PUT", "write", fn)
        return etag

    async def put_if(self, key: str, body: bytes, etag: str) -> str | None:
        """Replace ``key`` only if its etag is ``etag``; the new etag, or ``None``."""

        async def fn(c: Any) -> str:
            resp = await c.put_object(Bucket=self.bucket, Key=key, Body=body, IfMatch=etag)
            return str(resp["ETag"])

        new, _, _ = await self._call("PUT", "write", fn, if_match=True)
        return new

    async def put(self, key: str, body: bytes) -> str:
        """Write ``key`` unconditionally (stubs only)."""

        async def fn(c: Any) -> str:
            resp = await c.put_object(Bucket=self.bucket, Key=key, Body=body)
            return str(resp["ETag"])

        etag, _, _ = await self._call("PUT", "write", fn)
        return etag or ""

    async def delete(self, key: str, *, etag: str | None = None) -> bool:
        """Delete ``key`` (only if its etag is ``etag``, when given). False if the
        condition did not hold; True if deleted, or if a retry found it gone after
        an attempt that may have deleted it."""

        async def fn(c: Any) -> None:
            extra = {"IfMatch": etag} if etag else {}
            await c.delete_object(Bucket=self.bucket, Key=key, **extra)

        _, kind, retried = await self._call("DELETE", "delete", fn, if_match=etag is not None)
        return kind is None or kind == "missing" or retried

    async def delete_many(self, keys: list[str]) -> None:
        """Delete up to 1,000 ``keys`` in one request, unconditionally (a key
        already gone counts as deleted); raises if the server kept any."""

        async def fn(c: Any) -> list[Any]:
            objects = [{"Key": key} for key in keys]
            resp = await c.delete_objects(
                Bucket=self.bucket, Delete={"Objects": objects, "Quiet": True}
            )
            return list(resp.get("Errors", []))

        errors, _, _ = await self._call("DELETE", "delete", fn)
        if errors:
            first = errors[0]
            raise BackendUnavailable(
                f"delete: {len(errors)} of {len(keys)} keys kept, the first "
                f"{first.get('Key')!r}: {first.get('Code')} ({self.endpoint})"
            )

    async def list(
        self,
        prefix: str,
        *,
        start_after: str = "",
        limit: int | None = None,
        missing_ok: bool = False,
    ) -> list[tuple[str, str]]:
        """``(key, etag)`` of the keys under ``prefix`` after ``start_after``, in
        order; all pages, or the first ``limit`` keys. A missing bucket is a
        ``ConfigurationError``, or holds no key with ``missing_ok``."""
        out: list[tuple[str, str]] = []
        token: str | None = None
        while True:

            async def fn(c: Any, token: str | None = token, have: int = len(out)) -> dict[str, Any]:
                args: dict[str, Any] = {"Bucket": self.bucket, "Prefix": prefix}
                if token:
                    args["ContinuationToken"] = token
                elif start_after:
                    args["StartAfter"] = start_after
                if limit is not None:
                    args["MaxKeys"] = min(1000, limit - have)
                result: dict[str, Any] = await c.list_objects_v2(**args)
                return result

            page, kind, _ = await self._call("LIST", "list", fn)
            if page is None and missing_ok:
                return out
            if page is None:
                raise ConfigurationError(f"list: bucket {self.bucket!r} not found ({kind})")
            out += [(o["Key"], str(o.get("ETag", ""))) for o in page.get("Contents", [])]
            token = page.get("NextContinuationToken")
            if not page.get("IsTruncated") or not token or (limit and len(out) >= limit):
                return out

    # -- the bucket ---------------------------------------------------------------------

    async def ensure_bucket(self) -> None:
        """Create the bucket if it does not exist; ``ConfigurationError`` if it
        cannot be found or created."""

        async def head(c: Any) -> None:
            await c.head_bucket(Bucket=self.bucket)

        _, kind, _ = await self._call("HEAD", f"setup: bucket {self.bucket!r}", head)
        if kind is None:
            return

        async def create(c: Any) -> None:
            args: dict[str, Any] = {"Bucket": self.bucket}
            if self.region and self.region != "us-east-1":
                args["CreateBucketConfiguration"] = {"LocationConstraint": self.region}
            try:
                await c.create_bucket(**args)
            except Exception as e:
                code = getattr(e, "response", {}).get("Error", {}).get("Code")
                if code not in ("BucketAlreadyOwnedByYou", "BucketAlreadyExists"):
                    raise

        try:
            await self._call("PUT", f"setup: create bucket {self.bucket!r}", create)
        except ConfigurationError as e:
            raise ConfigurationError(
                f"bucket {self.bucket!r} does not exist at {self.endpoint} and could not be "
                f"created: {e}"
            ) from None
