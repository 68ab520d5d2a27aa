"""A remote backend's endpoints, kept by polls: one ``EndpointState`` each, the long-lived
``httpx.AsyncClient`` with explicit timeouts, ``start()`` and ``close()``, the background poll,
and what the service reads of them (served or not and why, loads, context length). Streaming
from them, with failover, is ``http_stream.HTTPStreamBackend``'s; one endpoint as a backend of
its own, ``endpoint_view``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from abc import abstractmethod
from collections.abc import AsyncGenerator, Mapping, Sequence

import httpx

from inference.backend import (
    SERVER_PENALTIES,
    GenerationBackend,
    GenerationEvent,
    Penalties,
    TargetLoad,
    Urgency,
)
from inference.prompt import AssembledPrompt
from inference.remote.endpoint_view import EndpointBackend
from inference.remote.endpoints import EndpointState
from inference.remote.faults import describe
from inference.remote.options import RemoteOptions
from inference.tokenizer import PromptTokenizer, load_tokenizer

log = logging.getLogger(__name__)


class PolledBackend(GenerationBackend):
    """A remote backend over one pooled ``httpx.AsyncClient`` and its endpoints' states.

    ``start()`` loads the tokenizer (if it has a ``load()``), builds the client and polls every
    endpoint once (``poll_once``): one not ready leaves it down without raising, and the
    background poll every ``options.poll_interval_s`` (or a request served by it) brings it
    back. ``endpoint(url)`` is a single-endpoint view sharing the client, the options and the
    endpoint's state (what ``probe_backends()`` and the router use).
    """

    def __init__(
        self,
        endpoints: Sequence[str],
        *,
        model: str,
        tokenizer: PromptTokenizer,
        options: RemoteOptions | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> None:
        if not endpoints:
            raise ValueError("at least one endpoint is needed")
        self.model = model
        self.options = options = options or RemoteOptions()
        self._states: dict[str, EndpointState] = {}
        for url in endpoints:
            state = EndpointState(
                url, context_length=options.context_length, max_running=options.max_running
            )
            if state.url in self._states:
                raise ValueError(f"endpoint {url} is listed twice")
            self._states[state.url] = state
        self.max_attempts = options.max_attempts or len(self._states)
        self.timeout = httpx.Timeout(
            connect=options.connect_timeout_s,
            read=options.stall_timeout_s,
            write=options.stall_timeout_s,
            pool=None,
        )
        self.poll_timeout = httpx.Timeout(
            options.health_timeout_s, connect=options.connect_timeout_s
        )
        self.abort_timeout = httpx.Timeout(options.connect_timeout_s)
        self._headers = dict(headers or {})
        self._tokenizer = tokenizer
        self._client: httpx.AsyncClient | None = None
        self._poller: asyncio.Task[None] | None = None
        self._turn = 0
        self._views: dict[str, EndpointBackend] = {}
        self._started_at = 0.0

    # -- state -------------------------------------------------------------------------------

    @property
    def endpoints(self) -> list[str]:
        return list(self._states)

    @property
    def states(self) -> dict[str, EndpointState]:
        """Every endpoint's state, by URL; read-only use."""
        return dict(self._states)

    @property
    def tokenizer(self) -> PromptTokenizer:
        return self._tokenizer

    @property
    def loaded(self) -> bool:
        return self._client is not None and any(s.serving for s in self._states.values())

    def not_ready(self) -> str | None:
        """What is known of the endpoints when none serves: each one's state and reason, and
        how long since the backend started."""
        if self.loaded:
            return None
        if self._client is None:
            return f"{self.name}: not started"
        age = time.monotonic() - self._started_at
        states = "; ".join(f"{s.url} {s.health.value} ({s.reason})" for s in self._states.values())
        return f"{self.name}: no endpoint is serving {age:.0f} s after start: {states}"

    @property
    def pending(self) -> int:
        return sum(s.in_flight for s in self._states.values())

    @property
    def remote_slots(self) -> int:
        return sum(s.load.max_running or 0 for s in self._states.values() if s.serving)

    @property
    def context_length(self) -> int | None:
        """The smallest context length the endpoints reported (None: none reported yet):
        prompt plus output tokens must stay within it."""
        known = [s.context_length for s in self._states.values() if s.context_length]
        return min(known) if known else None

    def cost_target(self, question: str = "") -> str:
        serving = [s for s in self._states.values() if s.serving]
        return (serving or list(self._states.values()))[0].url

    def probe_backends(self) -> Mapping[str, GenerationBackend]:
        return {url: self.endpoint(url) for url, s in self._states.items() if s.up}

    def target_load(self, target: str) -> TargetLoad | None:
        state = self._states.get(target.rstrip("/"))
        return state.load if state is not None else None

    def endpoint(self, url: str) -> EndpointBackend:
        """The single-endpoint backend for ``url`` (one of ``endpoints``)."""
        url = url.rstrip("/")
        if url not in self._states:
            raise KeyError(url)
        view = self._views.get(url)
        if view is None:
            view = self._views[url] = EndpointBackend(self, url)
        return view

    # -- lifecycle and polling -----------------------------------------------------------------

    async def start(self) -> None:
        if self._client is not None:
            return
        await load_tokenizer(self._tokenizer, self.name)
        self._started_at = time.monotonic()
        self._client = httpx.AsyncClient(
            timeout=self.timeout,
            headers=self._headers,
            limits=httpx.Limits(max_keepalive_connections=64),
        )
        await self.poll_once()
        if not self.loaded:
            log.warning("%s: no endpoint is ready yet: %s", self.name, list(self._states.values()))
        if self.options.poll_interval_s:
            self._poller = asyncio.create_task(self._poll_loop(self.options.poll_interval_s))

    async def close(self) -> None:
        poller, self._poller = self._poller, None
        if poller is not None:
            poller.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await poller
        client, self._client = self._client, None
        if client is not None:
            await client.aclose()

    async def poll_once(self) -> None:
        """Poll every endpoint once: readiness, its facts when it joins, its load."""
        client = self._client
        if client is None:
            return
        await asyncio.gather(*(self._poll(client, s) for s in self._states.values()))

    async def check_health(self) -> bool:
        """Poll now; True when at least one endpoint can serve."""
        await self.poll_once()
        return self.loaded

    async def _poll(self, client: httpx.AsyncClient, state: EndpointState) -> None:
        try:
            await self._poll_endpoint(client, state)
        except (httpx.HTTPError, ValueError) as exc:
            state.mark_down(f"poll failed: {describe(exc, self.poll_timeout)}")

    async def _poll_endpoint(self, client: httpx.AsyncClient, state: EndpointState) -> None:
        """One poll of ``state``; raises ``httpx.HTTPError`` or ``ValueError`` when it is down.

        By default: ``GET /models`` (OpenAI-compatible servers), whose cards may carry the
        context length (vLLM's ``max_model_len``)."""
        response = await client.get(state.url + "/models", timeout=self.poll_timeout)
        if response.status_code != 200:
            state.mark_not_ready(f"/models answered {response.status_code}")
            return
        if not state.joined:
            state.read_info(response.json())
        state.mark_up()

    async def _poll_loop(self, interval_s: float) -> None:
        while self._client is not None:  # ends when close() cancels it
            await asyncio.sleep(interval_s)
            try:
                await self.poll_once()
            except Exception:  # a bug in polling must not stop it for good
                log.exception("%s: poll failed", self.name)

    @abstractmethod
    def open_stream(
        self,
        prompt: AssembledPrompt,
        max_tokens: int,
        temperature: float,
        only: str | None,
        urgency: Urgency | None = None,
        penalties: Penalties = SERVER_PENALTIES,
    ) -> AsyncGenerator[GenerationEvent, None]:
        """A request's events from the endpoints, tried in order (``only``: that one alone);
        not sent once ``urgency``'s deadline has passed."""
