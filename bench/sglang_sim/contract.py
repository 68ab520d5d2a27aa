"""What a ``/generate`` body must be, as SGLang 0.5.23 checks it: the request contract
(``generate_contract_error``, ``api/v1/api_types.py``: an HTTP 400 before any streaming) and
the validation of ``managers/tokenizer_manager.py::_validate_one_request`` (in the stream)."""

from __future__ import annotations

from collections.abc import Collection
from typing import Any

from bench.sglang_sim.model import text_ids

#: ``sampling/sampling_params.py``: the keys ``SamplingParams`` takes (a few less used omitted).
SAMPLING_KEYS = frozenset(
    {
        "max_new_tokens", "min_new_tokens", "temperature", "top_p", "top_k", "min_p",
        "frequency_penalty", "presence_penalty", "repetition_penalty", "stop", "stop_token_ids",
        "ignore_eos", "skip_special_tokens", "spaces_between_special_tokens", "json_schema",
        "regex", "ebnf", "n", "no_stop_trim", "custom_params", "stream_interval", "logit_bias",
        "sampling_seed",
    }
)  # fmt: skip


def contract_error(body: Any) -> str | None:
    """What ``generate_contract_error`` (the ``GenerateRequest`` schema of
    ``api/v1/api_types.py``) refuses, for the fields a client of ours could get wrong."""
    if not isinstance(body, dict):
        return "invalid type: expected an object"
    params = body.get("sampling_params")
    if params is not None and not isinstance(params, dict):
        return "sampling_params: invalid type: expected an object"
    unknown = sorted(set(params or {}) - SAMPLING_KEYS)
    if unknown:
        return f"sampling_params: unknown field `{unknown[0]}`"
    max_new = (params or {}).get("max_new_tokens")
    if max_new is not None and not _is_int(max_new):
        return f"sampling_params.max_new_tokens: invalid type: expected an integer, got {max_new!r}"
    for key in ("priority",):
        if body.get(key) is not None and not _is_int(body[key]):
            return f"{key}: invalid type: expected an integer, got {body[key]!r}"
    if body.get("rid") is not None and not isinstance(body["rid"], str):
        return f"rid: invalid type: expected a string, got {body['rid']!r}"
    ids = body.get("input_ids")
    if ids is not None and not (isinstance(ids, list) and all(_is_int(t) for t in ids)):
        return "input_ids: invalid type: expected a list of integers"
    return None


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def input_ids(body: dict[str, Any]) -> list[int]:
    ids = body.get("input_ids")
    if ids is None and isinstance(body.get("text"), str):
        ids = text_ids(body["text"])
    if isinstance(ids, list) and ids and all(isinstance(t, int) for t in ids):
        return ids
    return []


def validation_error(
    body: dict[str, Any], *, context_length: int, running: Collection[str]
) -> str | None:
    """The ``ValueError`` of ``managers/tokenizer_manager.py::_validate_one_request`` for a
    body that passed the contract, or None; ``running`` holds the rids of running requests."""
    ids = input_ids(body)
    if not ids:
        return "Either text or input_ids should be provided."
    max_new = (body.get("sampling_params") or {}).get("max_new_tokens", 128)
    if max_new < 0:
        return f"max_new_tokens must be at least 0, got {max_new}."
    context = context_length
    if len(ids) > context:
        return (
            f"The input ({len(ids)} tokens) is longer than the model's context length "
            f"({context} tokens)."
        )
    if len(ids) + max_new > context:
        return (
            f"Requested token count exceeds the model's maximum context length of "
            f"{context} tokens. You requested a total of {len(ids) + max_new} tokens: "
            f"{len(ids)} tokens from the input messages and {max_new} tokens for the "
            "completion. Please reduce the number of tokens in the input messages or the "
            "completion to fit within the limit."
        )
    rid = body.get("rid")
    if isinstance(rid, str) and rid in running:
        return f"Duplicate request ID: {rid}"
    return None
