"""Per-key rate limits: a token bucket per API key, in process or in Redis.

Each key may make ``rate_limit_burst`` requests at once, and then ``rate_limit_per_s`` a second:
its bucket holds up to ``burst`` tokens, refills at ``rate`` tokens a second, and each request
takes one. A request that finds less than one token is refused with 429 and ``Retry-After`` (the
seconds until a token is back), before its body is read.

``LocalLimiter`` keeps the buckets in this process (one per key; the event loop serialises the
updates). With several replicas or workers each has its own buckets, so a key gets the rate once
per process: set ``RAGTIME_REDIS_URL`` to share them. ``RedisLimiter`` keeps each key's bucket in
one Redis hash, updated by one Lua script (atomic: Redis runs a script alone), with Redis's own
clock, so that replicas whose clocks differ agree.

When Redis cannot be reached or answers late (``redis_timeout_s``), the request is let through
(fail open) and a warning is logged at most once a minute: the limit is about fairness between
tenants, while keys are still checked; a Redis outage must not take the API down with it.
Buckets are named by key id, never by the key.
"""

from __future__ import annotations

import logging
import math
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from app.settings import Settings

log = logging.getLogger(__name__)

#: KEYS[1]: the bucket; ARGV: rate (tokens/s), burst. Returns {allowed (0/1), wait_s (string)}.
#: Floats leave a script as strings: Redis would truncate a Lua number to an integer.
TOKEN_BUCKET_LUA = """
local rate = tonumber(ARGV[1])
local burst = tonumber(ARGV[2])
local clock = redis.call('TIME')
local now = tonumber(clock[1]) + tonumber(clock[2]) / 1000000
local state = redis.call('HMGET', KEYS[1], 'tokens', 'at')
local tokens = tonumber(state[1]) or burst
local at = tonumber(state[2]) or now
tokens = math.min(burst, tokens + math.max(0, now - at) * rate)
local allowed = 0
local wait = 0
if tokens >= 1 then
  tokens = tokens - 1
  allowed = 1
else
  wait = (1 - tokens) / rate
end
redis.call('HSET', KEYS[1], 'tokens', tostring(tokens), 'at', tostring(now))
redis.call('PEXPIRE', KEYS[1], math.ceil(burst / rate * 1000) + 1000)
return {allowed, tostring(wait)}
"""
REDIS_PREFIX = "ragtime:ratelimit:"


class RateLimited(Exception):
    """A key over its rate limit: the HTTP boundary answers 429 with ``Retry-After``."""

    status_code = 429
    error_type = "rate_limited"

    def __init__(self, rate: float, burst: int, wait_s: float) -> None:
        self.retry_after_s = max(1, math.ceil(wait_s))
        super().__init__(
            f"this API key made more than {rate:g} requests/s (burst {burst}); "
            f"retry after {self.retry_after_s} s"
        )


class RateLimiter(Protocol):
    async def acquire(self, key_id: int) -> None:
        """Take one token of ``key_id``'s bucket, or raise ``RateLimited``."""

    async def close(self) -> None: ...


class Unlimited:
    """No limit (``rate_limit_per_s`` 0)."""

    async def acquire(self, key_id: int) -> None:
        return None

    async def close(self) -> None:
        return None


@dataclass
class _Bucket:
    tokens: float
    at: float


class LocalLimiter:
    """Token buckets in this process."""

    def __init__(self, rate: float, burst: int) -> None:
        if rate <= 0 or burst < 1:
            raise ValueError(f"a rate limit needs rate > 0 and burst >= 1, got {rate}, {burst}")
        self.rate = rate
        self.burst = burst
        self._buckets: dict[int, _Bucket] = {}

    def wait_s(self, key_id: int, now: float | None = None) -> float:
        """Take a token of ``key_id``'s bucket: 0 when there was one, else the seconds until
        there is."""
        now = time.monotonic() if now is None else now
        bucket = self._buckets.setdefault(key_id, _Bucket(float(self.burst), now))
        bucket.tokens = min(self.burst, bucket.tokens + max(0.0, now - bucket.at) * self.rate)
        bucket.at = now
        if bucket.tokens >= 1:
            bucket.tokens -= 1
            return 0.0
        return (1 - bucket.tokens) / self.rate

    async def acquire(self, key_id: int) -> None:
        wait = self.wait_s(key_id)
        if wait > 0:
            raise RateLimited(self.rate, self.burst, wait)

    async def close(self) -> None:
        return None


class RedisLimiter:
    """Token buckets in Redis, shared by every process that uses the same Redis."""

    def __init__(self, url: str, rate: float, burst: int, *, timeout_s: float) -> None:
        import redis.asyncio as redis

        if rate <= 0 or burst < 1:
            raise ValueError(f"a rate limit needs rate > 0 and burst >= 1, got {rate}, {burst}")
        self.rate = rate
        self.burst = burst
        self._client: Any = redis.from_url(
            url, socket_timeout=timeout_s, socket_connect_timeout=timeout_s
        )
        self._script = self._client.register_script(TOKEN_BUCKET_LUA)
        self._warned_at = -math.inf

    async def acquire(self, key_id: int) -> None:
        from redis.exceptions import RedisError

        try:
            allowed, wait = await self._script(
                keys=[f"{REDIS_PREFIX}{key_id}"], args=[self.rate, self.burst]
            )
        except (RedisError, OSError, TimeoutError) as exc:
            self._warn(exc)
            return  # fail open: see the module docstring
        if not int(allowed):
            raise RateLimited(self.rate, self.burst, float(wait))

    def _warn(self, exc: BaseException) -> None:
        now = time.monotonic()
        if now - self._warned_at >= 60:
            self._warned_at = now
            log.warning("rate limits not enforced: Redis failed (%s)", type(exc).__name__)

    async def close(self) -> None:
        await self._client.aclose()


def build_limiter(settings: Settings) -> RateLimiter:
    """The configured limiter: none, in process, or in Redis."""
    if settings.rate_limit_per_s <= 0:
        return Unlimited()
    if settings.redis_url:
        return RedisLimiter(
            settings.redis_url,
            settings.rate_limit_per_s,
            settings.rate_limit_burst,
            timeout_s=settings.redis_timeout_s,
        )
    return LocalLimiter(settings.rate_limit_per_s, settings.rate_limit_burst)
