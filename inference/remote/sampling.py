"""How a request asks a remote server to sample: its temperature, and the repetition
penalties set (``inference.backend.Penalties``) under each API's names. A penalty left unset
is not sent, so the server keeps its own default."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from inference.backend import Penalties


@dataclass(frozen=True)
class Sampling:
    """One request's sampling, as ``stream()`` was given it."""

    temperature: float
    penalties: Penalties

    def sglang_params(self) -> dict[str, Any]:
        """For SGLang's ``sampling_params`` (``sampling/sampling_params.py``:
        ``repetition_penalty``, ``frequency_penalty``, ``presence_penalty``)."""
        params: dict[str, Any] = {"temperature": self.temperature}
        penalties = self.penalties
        for key, value in (
            ("repetition_penalty", penalties.repeat),
            ("frequency_penalty", penalties.frequency),
            ("presence_penalty", penalties.presence),
        ):
            if value is not None:
                params[key] = value
        return params

    def openai_params(self) -> dict[str, Any]:
        """For OpenAI's completions body, which has ``frequency_penalty`` and
        ``presence_penalty`` but no repetition penalty: ``repeat`` is not sent (some servers,
        vLLM among them, would take it; others refuse a field they do not know)."""
        params: dict[str, Any] = {"temperature": self.temperature}
        penalties = self.penalties
        if penalties.frequency is not None:
            params["frequency_penalty"] = penalties.frequency
        if penalties.presence is not None:
            params["presence_penalty"] = penalties.presence
        return params
