"""S3World: the S3 backend of fxworld (``pip install 'fxworld[s3]'``), on AWS S3 or any
S3-compatible server that honours conditional writes (MinIO, SeaweedFS, R2, ...).

URL: ``s3://bucket/prefix?endpoint_url=http://host:port&region=r&namespace=ns``
(optional ``max_entry_bytes=``). Credentials come from the standard AWS chain
(``AWS_ACCESS_KEY_ID``/``AWS_SECRET_ACCESS_KEY``, a profile, an instance role),
never from the URL. Or build it with the application's own aiobotocore client or
session, which ``close()`` leaves open::

    from fxworld import world
    from fxworld_s3 import S3World

    w = world(S3World("my-bucket", prefix="agents/", namespace="prod"))
    await w.setup()       # creates the bucket if absent, checks conditional writes

Capabilities: ``durable`` (whatever the server makes durable: AWS S3 and MinIO
acknowledge a PUT once it is stored; SeaweedFS keeps its data dir), ``shared``.
No ``push_follow``: followers poll the position after the tail (see below).

How it keeps the contract with conditional writes alone (details in docs/s3.md):

* Each append is ONE object at the key of its first seq, created with
  ``If-None-Match: *``: exactly one writer wins each position (W4). A writer only
  creates the position right after a batch it read, so there are no holes (W9).
* The log is the fence: ``acquire`` lands a ``fence`` batch at the next position
  with an epoch one above the newest in the log (W1); every batch carries the
  newest epoch, so a writer that loses a position reads the winner and a newer
  epoch there means ``Fenced`` (W2, W8). ``expect`` is "the next position is
  expect + 1" (W5).
* The idempotency key and the wake request are stored in the batch itself, so
  they hold when the writer dies between two requests. A key is found in the
  key maps that segments and batches carry: a fresh world's keyed append reads
  the newest segment and the tail batch, at most 8 requests at any log length;
  the world caches the keys, for its ``cache_size`` most recently used sessions
  (W6). An
  append with ``wake=`` first writes a wake *intent* into the session's wake
  state, then the batch, and returns; the intent is turned into the wake in the
  background. Until then a ``take_wake`` finds the batch by its token right after
  the intent's tail (or, after 1 s, anywhere in the log) and applies the wake (W7).
* Every 16 batches the writer copies the batches after the last segment, from its
  memory, into a segment object; segments merge in levels (four small ones into
  one of about 64 entries, four of those into one of 256), so reading a
  1,000-entry session costs a handful of requests and each entry is copied about
  three times.
* Followers wait for the batch at the position after the tail (a GET, 404 until it
  lands): writers write nothing for them (W10).
* ``list_sessions``: one LIST of markers ``m/{sid}``, each created before its
  generation's first batch and removed when ``delete`` ends it.
* ``drop_namespace``: LIST and DELETE every object under ``{prefix}{namespace}/``
  (the optional ``NamespaceDropper``; the conformance kit removes its namespaces
  with it); the bucket stays.
* ``delete`` ends the generation with a batch marked deleted at the next
  position, then points ``s/{sid}/g`` at a new, empty generation (W14).
* Wakes: one state object per session, changed with ``If-Match``, the authority;
  a due index (``wd/{p}/{due}/{sid}/{nonce}`` over 4 prefixes, each key written
  before the state that names it) tells ``take_wake`` where to look: it LISTs the
  first keys of each prefix, not every state, and takes a due one
  (``take_wakes``: up to ``limit``; ``wake_state``/``list_wakes`` read the states,
  changing nothing);
  leases and due times are on the client clocks (keep them in sync, as with NTP)
  (W11-W13).
* Agent routing (``AgentRouter``, W19): the owner in ``o/{sid}`` (created once with
  ``If-None-Match: *``), written into the wake state, whose due index keys then go
  under ``wd/@{agent}/``: a take for an agent lists only its own and the shared
  prefixes.
* Errors are translated in ``_errors``: lost races are re-read, SlowDown and 5xx
  are retried with backoff and jitter, missing credentials are a
  ``ConfigurationError`` naming the variables.
"""

from __future__ import annotations

from fxworld_s3._world import S3World

__all__ = ["S3World"]
