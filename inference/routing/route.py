"""Where the router sends one request (``Route``): the pool, the endpoint, the model and why,
as the stream tells it (a ``RouteDecision``) and as the span current at ``stream()`` records it."""

from __future__ import annotations

from dataclasses import dataclass

from opentelemetry.trace import Span

from inference.backend import RouteDecision


@dataclass(frozen=True)
class Route:
    pool: str
    endpoint: str
    model: str
    reason: str
    """``classifier``, ``budget`` or ``failover``."""
    detail: str

    def decision(self, degradation: tuple[str, str] | None = None) -> RouteDecision:
        return RouteDecision(
            target=self.endpoint,
            model=self.model,
            pool=self.pool,
            reason=self.reason,
            detail=self.detail,
            degradation=degradation,
        )

    def record(self, span: Span) -> None:
        """The choice on ``span``: ``ragtime.route.*`` and ``gen_ai.request.model``."""
        if span.is_recording():
            span.set_attributes(
                {
                    "ragtime.route.pool": self.pool,
                    "ragtime.route.endpoint": self.endpoint,
                    "ragtime.route.reason": self.reason,
                    "ragtime.route.detail": self.detail,
                    "gen_ai.request.model": self.model,
                }
            )
