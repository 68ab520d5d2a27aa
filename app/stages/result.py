"""What every stage's result shares: the attributes it writes on its stage's span."""

from __future__ import annotations

from collections.abc import Mapping

from opentelemetry.trace import Span
from opentelemetry.util.types import AttributeValue


class StageResult:
    """A stage's result; ``record`` writes its ``attributes()`` on the stage's span."""

    def attributes(self) -> Mapping[str, AttributeValue]:
        raise NotImplementedError

    def record(self, span: Span) -> None:
        if span.is_recording():
            span.set_attributes(self.attributes())
