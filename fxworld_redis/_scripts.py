"""The key layout of one namespace and the Lua scripts that keep the contract.

Keys (``ns`` is the namespace, ``p`` a partition number, ``sid`` a session id;
neither a namespace nor a session id can hold ``{`` or ``}``, so the hash tag is
exactly ``{ns:p}``)::

    fxworld:{ns}:config        HASH  partitions, version: chosen by the first setup()
    fxworld:{ns:p}:epochs      STRING the partition's epoch counter (W1: grows across delete)
    fxworld:{ns:p}:due         ZSET  sid -> when its wake can be taken (µs: due, or lease end),
                                      for the sessions that no agent owns
    fxworld:{ns:p}:due:<agent> ZSET  the same, for the sessions that ``agent`` owns (W19)
    fxworld:{ns:p}:agents      SET   the agents that own a session of the partition
    fxworld:{ns:p}:sessions    ZSET  ids of the partition's sessions with a non-empty log
    fxworld:{ns:p}:m:<sid>     HASH  epoch (the newest fence), last (the last seq),
                                      agent (the owner, set once by ``claim``)
    fxworld:{ns:p}:l:<sid>     STREAM the log: ID <seq>-0, fields k (kind), d (JSON data),
                                      e (epoch, '' when unfenced), t (commit time, µs)
    fxworld:{ns:p}:k:<sid>     HASH  idempotency key -> the last seq of its call (W6)
    fxworld:{ns:p}:w:<sid>     HASH  the pending wake: gen, taken, attempt, token, until, due

A session lives in partition ``crc32(sid) % partitions``, so its keys and its
partition's wake queue share one hash tag: one slot of a Redis Cluster. Every
script below touches the keys of one partition only, so ``append`` with its key,
fence and wake is one atomic script on a Cluster too (W4, W6, W7). Each script
reads the time with ``TIME``: due times and leases follow the server's clock.
``take`` is the exception that may visit several partitions, and only on a
single server; a Cluster world first asks every partition at once (``peek``) and
then takes from those with a ready wake, earliest first.

Agent routing (W19): a session's pending wake sits in exactly one due queue of its
partition: its owner's ``due:<agent>``, or ``due`` while no owner is recorded
(``queue`` below reads the owner in the script that moves it). ``claim`` records
the owner and moves a wake already queued into the owner's queue, in one script.
A take for an agent visits only ``due`` and ``due:<agent>``: it never meets
another agent's wakes, so none of them can hold it up (no starvation), and it
never hands one out. A take for any agent visits every queue of the partition
(the ``agents`` set names them). Namespaces written before owners existed have
only ``due``: every agent takes from it, as before.
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from fxworld import jsondata
from fxworld.types import Entry

__all__ = [
    "Keys",
    "SCRIPTS",
    "partition_of",
    "config_key",
    "namespace_patterns",
    "text",
    "seq_of",
    "time_of",
    "entry_of",
    "FENCED",
    "CONFLICT",
    "LOST",
]

# Status codes in the first element of a script's reply.
OK = 0
FENCED = 1
CONFLICT = 2
LOST = 3
VERSION = 1


def config_key(namespace: str) -> str:
    return f"fxworld:{{{namespace}}}:config"


def namespace_patterns(namespace: str) -> tuple[str, str]:
    """``SCAN MATCH`` patterns of every key of ``namespace``: its config, and its
    partitions' keys. A namespace is ``[A-Za-z0-9_-]``, none of which a pattern
    treats specially, and the ``}`` or ``:`` after it keeps a longer namespace out."""
    return (f"fxworld:{{{namespace}}}:*", f"fxworld:{{{namespace}:*")


def partition_of(session_id: str, partitions: int) -> int:
    return zlib.crc32(session_id.encode("ascii")) % partitions


def text(value: Any) -> str:
    """A reply's bytes as text (str as is: a client made with decode_responses)."""
    if isinstance(value, bytes):
        return value.decode("utf-8", "surrogatepass")
    return str(value)


def seq_of(stream_id: Any) -> int:
    """The seq of a log entry from its stream ID ``<seq>-0``."""
    return int(text(stream_id).split("-", 1)[0])


def time_of(micros: Any) -> datetime:
    """A time from microseconds since the Unix epoch (the server's ``TIME``)."""
    return datetime.fromtimestamp(int(micros) / 1_000_000, UTC)


def entry_of(session_id: str, row: Any) -> Entry:
    """A stream entry ``[b"<seq>-0", [b"k", kind, b"d", data, b"e", epoch, b"t", µs]]``
    (its fields a dict when redis-py parsed an ``XRANGE`` reply); the data parsed
    from the reply's bytes, with no copy as text of a large value."""
    ident, flat = row
    pairs = flat.items() if isinstance(flat, dict) else zip(flat[::2], flat[1::2], strict=True)
    fields = {text(k): v for k, v in pairs}
    epoch = text(fields["e"])
    return Entry(
        session_id,
        seq_of(ident),
        text(fields["k"]),
        jsondata.decode(fields["d"]),
        int(epoch) if epoch else None,
        time_of(text(fields["t"])),
    )


@dataclass(frozen=True)
class Keys:
    """The key names of one partition."""

    prefix: str  # "fxworld:{ns:p}:"

    @classmethod
    def of(cls, namespace: str, partition: int) -> Keys:
        return cls(f"fxworld:{{{namespace}:{partition}}}:")

    @property
    def due(self) -> str:
        return self.prefix + "due"

    @property
    def agents(self) -> str:
        return self.prefix + "agents"

    @property
    def epochs(self) -> str:
        return self.prefix + "epochs"

    @property
    def sessions(self) -> str:
        return self.prefix + "sessions"

    def meta(self, sid: str) -> str:
        return f"{self.prefix}m:{sid}"

    def log(self, sid: str) -> str:
        return f"{self.prefix}l:{sid}"

    def keys(self, sid: str) -> str:
        return f"{self.prefix}k:{sid}"

    def wake(self, sid: str) -> str:
        return f"{self.prefix}w:{sid}"

    def session(self, sid: str) -> list[str]:
        """Every key of a session (W14), then the partition's due queue and list."""
        return [
            self.meta(sid),
            self.log(sid),
            self.keys(sid),
            self.wake(sid),
            self.due,
            self.sessions,
        ]


_COMMON = """
-- '<prefix>due' (or any key of the partition) -> '<prefix>' ('fxworld:{ns:p}:')
local function prefix_of(key)
  return string.match(key, '^(.-}:)')
end
-- W19: the due queue a session's wake sits in: its owner's, else the shared one
local function queue(pfx, sid)
  local owner = redis.call('HGET', pfx .. 'm:' .. sid, 'agent')
  if owner then return pfx .. 'due:' .. owner end
  return pfx .. 'due'
end
local function now_us()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000000 + tonumber(t[2])
end
-- W11: at most one pending wake per session, the earlier due time kept; while the
-- wake is leased its queue score stays the lease's end (taken again only then)
local function enqueue(wk, shared, sid, at)
  local due = queue(prefix_of(shared), sid)  -- W19: the owner's queue
  if redis.call('EXISTS', wk) == 0 then
    redis.call('HSET', wk, 'gen', 1, 'taken', 0, 'attempt', 0, 'due', at)
    redis.call('ZADD', due, at, sid)
    return
  end
  redis.call('HINCRBY', wk, 'gen', 1)
  local w = redis.call('HMGET', wk, 'due', 'token')
  if not w[1] or at < tonumber(w[1]) then
    redis.call('HSET', wk, 'due', at)
    if not w[2] then redis.call('ZADD', due, at, sid) end
  end
end
"""

# KEYS: meta, log, sessions, then keys when the call has a key, then wake and due when
# it has a wake (each call declares exactly the keys it may touch). ARGV[1] is the
# head '<epoch>,<expect>,<wake µs>,<sid>,<key>', each part '' when not given (a
# session id holds no comma, so the key is the rest); then each entry's kind and its
# data, two arguments (the data as sent: a large value is never scanned or copied by
# the script before XADD stores it). Reply: {status, seq}.
APPEND = (
    _COMMON
    + """
local epoch, expect, wake, sid, key = string.match(ARGV[1], '^(%d*),(%d*),(%d*),([^,]*),(.*)$')
local meta, log = KEYS[1], KEYS[2]
if key ~= '' then  -- W6: checked first, even before the fence
  local landed = redis.call('HGET', KEYS[4], key)
  if landed then return {0, tonumber(landed)} end
end
local m = redis.call('HMGET', meta, 'epoch', 'last')
local last = tonumber(m[2] or '0')
if epoch ~= '' and epoch ~= m[1] then return {1, tonumber(m[1] or '0')} end  -- W2
if expect ~= '' and tonumber(expect) ~= last then return {2, last} end          -- W5
local t = now_us()
local at = string.format('%d', t)
if last == 0 then redis.call('ZADD', KEYS[3], 0, sid) end
for i = 2, #ARGV, 2 do  -- W4: the whole batch at consecutive positions, in one script
  last = last + 1
  redis.call('XADD', log, string.format('%d-0', last), 'k', ARGV[i], 'd', ARGV[i + 1],
    'e', epoch, 't', at)
end
redis.call('HSET', meta, 'last', last)
if key ~= '' then redis.call('HSET', KEYS[4], key, last) end
if wake ~= '' then  -- W7
  local w = key ~= '' and 5 or 4
  enqueue(KEYS[w], KEYS[w + 1], sid, t + tonumber(wake))
end
return {0, last}
"""
)

# KEYS: meta, log, epochs, sessions. ARGV: sid. Reply: {epoch, seq}.
ACQUIRE = (
    _COMMON
    + """
local epoch = redis.call('INCR', KEYS[3])  -- W1: the partition's counter never goes back
local last = redis.call('HINCRBY', KEYS[1], 'last', 1)
if last == 1 then redis.call('ZADD', KEYS[4], 0, ARGV[1]) end
redis.call('HSET', KEYS[1], 'epoch', epoch)
redis.call('XADD', KEYS[2], string.format('%d-0', last), 'k', 'fence',
  'd', string.format('{"epoch":%d}', epoch), 'e', epoch, 't', string.format('%d', now_us()))
return {epoch, last}
"""
)

# KEYS: wake, due. ARGV: sid, delay µs.
WAKE = (
    _COMMON
    + """
enqueue(KEYS[1], KEYS[2], ARGV[1], now_us() + tonumber(ARGV[2]))
return 0
"""
)

# The due queues a take visits, from the shared queues of its partitions (W19).
_QUEUES = """
local function queues(shared, agent)
  local qs = {}
  for i = 1, #shared do
    local pfx = prefix_of(shared[i])
    table.insert(qs, shared[i])
    if agent ~= '' then
      table.insert(qs, pfx .. 'due:' .. agent)
    else
      for _, a in ipairs(redis.call('SMEMBERS', pfx .. 'agents')) do
        table.insert(qs, pfx .. 'due:' .. a)
      end
    end
  end
  return qs
end
"""

# KEYS: the shared due queues of the partitions to visit. ARGV: lease µs, limit,
# nonce, agent ('' for any). The queues visited: each partition's shared queue and
# the agent's own (W19: never another agent's), or every queue of the partition
# when no agent is given. Takes the earliest-ready wakes over them (W12); a wake's
# HASH is named from its queue's partition prefix (the same hash tag: the same slot).
# Reply: {sid, token, attempt, until, owner ('' none), ...}.
TAKE = (
    _COMMON
    + _QUEUES
    + """
local lease, limit, nonce, agent = tonumber(ARGV[1]), tonumber(ARGV[2]), ARGV[3], ARGV[4]
local qs = queues(KEYS, agent)
local n = #qs
local now = now_us()
local out = {}
local taken, moved = 0, 0
while taken < limit do
  local best, best_at, sid = nil, nil, nil
  for i = 1, n do
    local head = redis.call('ZRANGE', qs[i], '-inf', now, 'BYSCORE', 'LIMIT', 0, 1, 'WITHSCORES')
    if head[1] and (not best_at or tonumber(head[2]) < best_at) then
      best, best_at, sid = i, tonumber(head[2]), head[1]
    end
  end
  if not best then break end
  local pfx = prefix_of(qs[best])
  local wk = pfx .. 'w:' .. sid
  local owner = redis.call('HGET', pfx .. 'm:' .. sid, 'agent')
  local home = owner and (pfx .. 'due:' .. owner) or (pfx .. 'due')
  if redis.call('EXISTS', wk) == 0 then
    redis.call('ZREM', qs[best], sid)
  elseif home ~= qs[best] then
    -- W19: queued where its owner's runners do not look (a claim raced an older
    -- version's enqueue): move it home, hand it to no one here
    redis.call('ZREM', qs[best], sid)
    redis.call('ZADD', home, best_at, sid)
    moved = moved + 1
    if moved > 100 then break end
  else
    taken = taken + 1
    local attempt = redis.call('HINCRBY', wk, 'attempt', 1)
    local token = nonce .. '.' .. taken
    local gen = redis.call('HGET', wk, 'gen')
    redis.call('HSET', wk, 'token', token, 'until', now + lease, 'taken', gen)
    redis.call('HDEL', wk, 'due')
    redis.call('ZADD', qs[best], now + lease, sid)
    table.insert(out, sid)
    table.insert(out, token)
    table.insert(out, attempt)
    table.insert(out, string.format('%d', now + lease))
    table.insert(out, owner or '')
  end
end
return out
"""
)

# KEYS: one partition's shared due queue. ARGV: agent ('' for any). Reply: the score
# of the earliest ready wake of the queues a take with that agent visits, or -1.
PEEK = (
    _COMMON
    + _QUEUES
    + """
local now, first = now_us(), nil
for _, q in ipairs(queues(KEYS, ARGV[1])) do
  local head = redis.call('ZRANGE', q, 0, 0, 'WITHSCORES')
  if head[1] and tonumber(head[2]) <= now and (not first or tonumber(head[2]) < first) then
    first = tonumber(head[2])
  end
end
if first then return string.format('%d', first) end
return -1
"""
)

# A lease is held while its token is the wake's and it has not run out (W12).
_HELD = """
local function held(wk, token, now)
  local w = redis.call('HMGET', wk, 'token', 'until')
  return w[1] == token and tonumber(w[2]) > now
end
"""

# KEYS: wake, due. ARGV: sid, token, lease µs. Reply: {status, until}.
RENEW = (
    _COMMON
    + _HELD
    + """
local now = now_us()
if not held(KEYS[1], ARGV[2], now) then return {3, 0} end
local till = now + tonumber(ARGV[3])
redis.call('HSET', KEYS[1], 'until', till)
redis.call('ZADD', queue(prefix_of(KEYS[2]), ARGV[1]), till, ARGV[1])
return {0, string.format('%d', till)}
"""
)

# KEYS: wake, due. ARGV: sid, token. W13: removed only if no wake() came since the take.
FINISH = (
    _COMMON
    + _HELD
    + """
if not held(KEYS[1], ARGV[2], now_us()) then return 3 end
local w = redis.call('HMGET', KEYS[1], 'gen', 'taken', 'due')
local q = queue(prefix_of(KEYS[2]), ARGV[1])  -- W19: the owner's queue
if w[1] == w[2] then
  redis.call('DEL', KEYS[1])
  redis.call('ZREM', q, ARGV[1])
else
  redis.call('HDEL', KEYS[1], 'token', 'until')
  redis.call('HSET', KEYS[1], 'attempt', 0)
  redis.call('ZADD', q, w[3] or now_us(), ARGV[1])
end
return 0
"""
)

# KEYS: meta, log, keys, wake, due, sessions. ARGV: sid. W14: every key of the session goes,
# its owner (in meta, W19) and its wake in the owner's queue too; old fences are refused
# because the session has no epoch any more and the next acquire draws a greater one
# from the partition's counter.
DELETE = (
    _COMMON
    + """
redis.call('ZREM', queue(prefix_of(KEYS[5]), ARGV[1]), ARGV[1])
redis.call('DEL', KEYS[1], KEYS[2], KEYS[3], KEYS[4])
redis.call('ZREM', KEYS[5], ARGV[1])
redis.call('ZREM', KEYS[6], ARGV[1])
return 0
"""
)

# KEYS as DELETE. ARGV: sid, last. Deletes as DELETE only if the log still ends at
# ``last`` and no wake is pending (fxworld.protocol.IdleDeleter): one script, so no
# append nor wake() lands in between; the owner goes with meta (W14, W19). Reply: 1
# if it deleted, else 0.
DELETE_IF_IDLE = """
local last = redis.call('HGET', KEYS[1], 'last')
if last ~= ARGV[2] or redis.call('EXISTS', KEYS[4]) == 1 then return 0 end
redis.call('DEL', KEYS[1], KEYS[2], KEYS[3])
redis.call('ZREM', KEYS[6], ARGV[1])
return 1
"""

# KEYS: the partitions' session lists. ARGV: after ('' = from the start), limit.
# Reply: up to ``limit`` ids greater than ``after`` from each list (the caller merges).
SESSIONS = """
local low = ARGV[1] == '' and '-' or '(' .. ARGV[1]
local out = {}
for i = 1, #KEYS do
  for _, sid in ipairs(redis.call('ZRANGE', KEYS[i], low, '+', 'BYLEX', 'LIMIT', 0, ARGV[2])) do
    table.insert(out, sid)
  end
end
return out
"""

# KEYS: shared due queues (a session's wake HASH is named from its queue's prefix).
# ARGV: none. Reply: {now µs, sid, due, until, attempt, ...} for every pending wake of
# the queues and of the partitions' agents' queues (W19)
# ('' for a field not set): read only, so W11-W13 are untouched. The caller sorts
# and pages: Lua's string order follows the server's locale, Python's does not.
WAKES = (
    _COMMON
    + _QUEUES
    + """
local t = redis.call('TIME')
local out = {string.format('%d', tonumber(t[1]) * 1000000 + tonumber(t[2]))}
for _, q in ipairs(queues(KEYS, '')) do
  local prefix = prefix_of(q)
  for _, sid in ipairs(redis.call('ZRANGE', q, 0, -1)) do
    local w = redis.call('HMGET', prefix .. 'w:' .. sid, 'due', 'until', 'attempt')
    if w[3] then
      table.insert(out, sid)
      table.insert(out, w[1] or '')
      table.insert(out, w[2] or '')
      table.insert(out, w[3])
    end
  end
end
return out
"""
)

# KEYS: meta, shared due queue, the partition's agents set. ARGV: sid, agent. W19: the
# owner is set once (set-if-absent: of two racing claims one wins, both answer it);
# a wake already queued moves into the owner's queue, lease and due time unchanged.
# Reply: the owner now recorded.
CLAIM = (
    _COMMON
    + """
local owner = redis.call('HGET', KEYS[1], 'agent')
if owner then return owner end
redis.call('HSET', KEYS[1], 'agent', ARGV[2])
redis.call('SADD', KEYS[3], ARGV[2])
local at = redis.call('ZSCORE', KEYS[2], ARGV[1])
if at then
  redis.call('ZREM', KEYS[2], ARGV[1])
  redis.call('ZADD', prefix_of(KEYS[2]) .. 'due:' .. ARGV[2], at, ARGV[1])
end
return ARGV[2]
"""
)

# KEYS: meta, shared due queue, agents set. ARGV: sid, old, new. A rename the
# application asks for (docs/engine.md): the owner ``old`` becomes ``new``, and the
# session's wake moves to the new owner's queue, its score kept (W19). Reply: 1 if moved.
RENAME = (
    _COMMON
    + """
if redis.call('HGET', KEYS[1], 'agent') ~= ARGV[2] then return 0 end
redis.call('HSET', KEYS[1], 'agent', ARGV[3])
redis.call('SADD', KEYS[3], ARGV[3])
local pfx = prefix_of(KEYS[2])
local at = redis.call('ZSCORE', pfx .. 'due:' .. ARGV[2], ARGV[1])
if at then
  redis.call('ZREM', pfx .. 'due:' .. ARGV[2], ARGV[1])
  redis.call('ZADD', pfx .. 'due:' .. ARGV[3], at, ARGV[1])
end
return 1
"""
)

# KEYS: meta. Reply: the owner, or nil.
OWNER = """
return redis.call('HGET', KEYS[1], 'agent')
"""

SCRIPTS: dict[str, str] = {
    "append": APPEND,
    "acquire": ACQUIRE,
    "wake": WAKE,
    "take": TAKE,
    "peek": PEEK,
    "renew": RENEW,
    "finish": FINISH,
    "delete": DELETE,
    "delete_if_idle": DELETE_IF_IDLE,
    "sessions": SESSIONS,
    "wakes": WAKES,
    "claim": CLAIM,
    "owner": OWNER,
    "rename": RENAME,
}
"""Every script by name; ``setup()`` loads them all, and a call whose script the
server lost (NOSCRIPT) loads it again and runs once more."""
