"""Per-key rate limits: the token bucket in process, the same in a real Redis (shared by
replicas), 429 with ``Retry-After`` at the HTTP boundary, and Redis failing open."""

from __future__ import annotations

import logging
import socket
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import redis

from app.keys.ratelimit import (
    REDIS_PREFIX,
    LocalLimiter,
    RateLimited,
    RedisLimiter,
    Unlimited,
    build_limiter,
)
from tests.fakes.backends import ScriptedBackend
from tests.helpers.app import create_key, make_settings, running_app
from tests.helpers.ports import free_port
from tests.helpers.redis_server import redis_server_path, redis_serving


@pytest.fixture(scope="module")
def redis_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A real redis-server for this module."""
    if redis_server_path() is None:
        pytest.skip("redis-server is not installed (`make test` installs Debian's redis-server)")
    with redis_serving(tmp_path_factory.mktemp("redis")) as url:
        yield url


def test_the_local_bucket_allows_a_burst_then_the_rate() -> None:
    limiter = LocalLimiter(rate=2.0, burst=3)
    assert [limiter.wait_s(1, now=10.0) for _ in range(3)] == [0.0, 0.0, 0.0]
    assert limiter.wait_s(1, now=10.0) == pytest.approx(0.5)
    assert limiter.wait_s(2, now=10.0) == 0.0  # per key
    assert limiter.wait_s(1, now=10.5) == 0.0  # one token back after 1/rate s
    assert limiter.wait_s(1, now=10.6) == pytest.approx(0.4)
    assert [limiter.wait_s(1, now=100.0) for _ in range(4)][-1] > 0  # refills to burst only


@pytest.mark.parametrize(("rate", "burst"), [(0.0, 1), (-1.0, 5), (1.0, 0)])
def test_a_limiter_needs_a_rate_and_a_burst(rate: float, burst: int) -> None:
    with pytest.raises(ValueError, match="rate > 0 and burst >= 1"):
        LocalLimiter(rate, burst)


def test_the_configured_limiter(tmp_path: Path) -> None:
    assert isinstance(build_limiter(make_settings(tmp_path)), Unlimited)
    local = build_limiter(make_settings(tmp_path, rate_limit_per_s=5))
    assert isinstance(local, LocalLimiter) and local.burst == 20
    shared = build_limiter(
        make_settings(tmp_path, rate_limit_per_s=5, redis_url="redis://127.0.0.1:1/0")
    )
    assert isinstance(shared, RedisLimiter)


def test_a_key_over_its_rate_gets_429_with_retry_after(seeded_data_dir: Path) -> None:
    first = {"Authorization": f"Bearer {create_key(seeded_data_dir, 'first')}"}
    second = {"Authorization": f"Bearer {create_key(seeded_data_dir, 'second')}"}
    with running_app(
        seeded_data_dir, backend=ScriptedBackend(), rate_limit_per_s=0.25, rate_limit_burst=2
    ) as client:
        search = {"query": "lists"}
        served = [client.post("/v1/search", json=search, headers=first) for _ in range(2)]
        refused = client.post("/v1/search", json=search, headers=first)
        other_key = client.post("/v1/search", json=search, headers=second)
        wrong_key = client.post("/v1/search", json=search, headers={"Authorization": "Bearer x"})
    assert [r.status_code for r in served] == [200, 200]
    assert refused.status_code == 429
    assert refused.headers["retry-after"] == "4"  # 1 token at 0.25/s
    error = refused.json()["error"]
    assert error["type"] == "rate_limited"
    assert error["message"] == (
        "this API key made more than 0.25 requests/s (burst 2); retry after 4 s"
    )
    assert other_key.status_code == 200
    assert wrong_key.status_code == 401  # the key is checked first


def test_a_rate_limited_chat_completion_is_openais_429(seeded_data_dir: Path) -> None:
    auth = {"Authorization": f"Bearer {create_key(seeded_data_dir, 'chat')}"}
    body = {"model": "ragtime", "messages": [{"role": "user", "content": "lists?"}]}
    with running_app(
        seeded_data_dir, backend=ScriptedBackend(), rate_limit_per_s=0.5, rate_limit_burst=1
    ) as client:
        assert client.post("/v1/chat/completions", json=body, headers=auth).status_code == 200
        refused = client.post("/v1/chat/completions", json=body, headers=auth)
    assert refused.status_code == 429 and refused.headers["retry-after"] == "2"
    assert refused.json()["error"]["code"] == "rate_limited"


@pytest.mark.process
async def test_redis_buckets_are_shared_by_replicas(redis_url: str) -> None:
    replicas = [RedisLimiter(redis_url, 0.5, 3, timeout_s=1.0) for _ in range(2)]
    try:
        await replicas[0].acquire(41)
        await replicas[1].acquire(41)
        await replicas[0].acquire(41)
        with pytest.raises(RateLimited) as refused:
            await replicas[1].acquire(41)
        assert refused.value.retry_after_s == 2
        await replicas[1].acquire(42)  # per key
    finally:
        for limiter in replicas:
            await limiter.close()
    client = redis.Redis.from_url(redis_url)
    bucket = f"{REDIS_PREFIX}41"
    assert 0 < client.pttl(bucket) <= 3 / 0.5 * 1000 + 1000  # idle buckets expire
    assert float(client.hget(bucket, "tokens") or -1) < 1
    client.close()


@pytest.mark.process
def test_the_app_keeps_its_limits_in_redis(seeded_data_dir: Path, redis_url: str) -> None:
    """Two app instances (replicas) on one Redis: the burst is the key's, not each replica's."""
    auth = {"Authorization": f"Bearer {create_key(seeded_data_dir, 'redis')}"}
    settings: dict[str, Any] = {
        "rate_limit_per_s": 0.2,
        "rate_limit_burst": 2,
        "redis_url": redis_url,
    }
    with (
        running_app(seeded_data_dir, backend=ScriptedBackend(), **settings) as one,
        running_app(seeded_data_dir, backend=ScriptedBackend(), **settings) as two,
    ):
        assert one.get("/v1/collections", headers=auth).status_code == 200
        assert two.get("/v1/collections", headers=auth).status_code == 200
        refused = one.get("/v1/collections", headers=auth)
    assert refused.status_code == 429
    assert refused.headers["retry-after"] == "5"
    assert refused.json()["error"]["type"] == "rate_limited"


async def test_an_unreachable_redis_fails_open_and_warns_once(
    caplog: pytest.LogCaptureFixture,
) -> None:
    limiter = RedisLimiter(f"redis://127.0.0.1:{free_port()}/0", 1.0, 1, timeout_s=0.2)
    with caplog.at_level(logging.WARNING, logger="app.keys.ratelimit"):
        for _ in range(3):
            await limiter.acquire(7)  # no RateLimited, though the burst is 1
    await limiter.close()
    warnings = [r.getMessage() for r in caplog.records if r.name == "app.keys.ratelimit"]
    assert warnings == ["rate limits not enforced: Redis failed (ConnectionError)"]


def test_the_app_serves_when_redis_is_down(seeded_data_dir: Path) -> None:
    auth = {"Authorization": f"Bearer {create_key(seeded_data_dir, 'no-redis')}"}
    down = f"redis://127.0.0.1:{free_port()}/0"
    with running_app(
        seeded_data_dir,
        backend=ScriptedBackend(),
        rate_limit_per_s=1,
        rate_limit_burst=1,
        redis_url=down,
        redis_timeout_s=0.2,
    ) as client:
        statuses = [client.get("/v1/collections", headers=auth).status_code for _ in range(3)]
    assert statuses == [200, 200, 200]


async def test_a_redis_that_does_not_answer_in_time_fails_open(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A server that accepts the connection and never answers: the request waits
    ``redis_timeout_s``, not forever, then goes through."""
    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen()
        port = silent.getsockname()[1]
        limiter = RedisLimiter(f"redis://127.0.0.1:{port}/0", 1.0, 1, timeout_s=0.2)
        started = time.monotonic()
        with caplog.at_level(logging.WARNING, logger="app.keys.ratelimit"):
            await limiter.acquire(9)
        waited = time.monotonic() - started
        await limiter.close()
    assert waited < 5.0
    assert [r.getMessage() for r in caplog.records if r.name == "app.keys.ratelimit"] == [
        "rate limits not enforced: Redis failed (TimeoutError)"
    ]


def test_empty_urls_and_secret_mean_unset(tmp_path: Path) -> None:
    """As an env file (``RAGTIME_REDIS_URL=``) gives them."""
    settings = make_settings(tmp_path, redis_url="", database_url=" ", key_secret="")
    assert settings.redis_url is None and settings.database_url is None
    assert settings.key_secret is None
