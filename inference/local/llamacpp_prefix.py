"""Prefix states for llama.cpp: the KV caches of recent prompts, kept to be restored.

llama.cpp reuses the KV cache of the prefix a prompt shares with what it evaluated last. Two
users whose questions take turns on the one worker therefore wipe each other's passages from the
cache, though each would find its own again. ``PrefixStates`` keeps a few such states: before a
prompt that would throw away a long evaluated tail, that state is copied out (sequence 0 of the
context, with its token ids); before a prompt that shares more with a kept state than with the
live one, that state is copied back. A state costs about 23 KB per token for SmolLM2-135M (a
600-token prompt: 14 MB, copied out in ~50 ms and back in ~3 ms on our 2 cores), so only
``capacity`` are kept, and only a gain of ``min_tokens`` is worth a copy.

Restoring sets the KV cells and llama-cpp-python's ``input_ids``/``n_tokens`` (0.3.36's
``Llama.generate`` then reuses the longest common prefix, ``llama.py`` lines 917-950). The
logits are not restored: the restored prefix stops at least one token short of the prompt, so
``generate`` evaluates that token again and samples from fresh logits.
"""

from __future__ import annotations

import ctypes
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from inference.prompt import common_prefix


@dataclass(frozen=True)
class _State:
    token_ids: tuple[int, ...]
    data: Any  # a ctypes byte array of llama_state_seq_get_data
    size: int


class PrefixStates:
    """Up to ``capacity`` KV states of recent prompts (least recently used dropped first)."""

    SEQUENCE = 0

    def __init__(self, capacity: int = 4, *, min_tokens: int = 64) -> None:
        if capacity < 0:
            raise ValueError(f"capacity must be >= 0, got {capacity}")
        self.capacity = capacity
        self.min_tokens = min_tokens
        self._states: OrderedDict[tuple[int, ...], _State] = OrderedDict()
        self.saved = 0
        self.restored = 0

    def __len__(self) -> int:
        return len(self._states)

    def prepare(self, llm: Any, prompt: Sequence[int]) -> None:
        """Before ``prompt`` is evaluated on ``llm``: keep the live state if the prompt would
        throw away at least ``min_tokens`` of it, and bring back the kept state that shares
        the most with the prompt if that beats the live one by ``min_tokens``."""
        if not self.capacity:
            return
        live = [int(t) for t in llm._input_ids]
        shared_live = common_prefix(live, prompt)
        best, shared_best = self._best(prompt)
        restore = best is not None and shared_best - shared_live >= self.min_tokens
        if len(live) - shared_live >= self.min_tokens:
            # Saving must not evict the state about to be restored (a KeyError once did).
            self._save(llm, live, protect=best.token_ids if best is not None and restore else None)
        if restore:
            assert best is not None
            self._restore(llm, best, min(shared_best, len(prompt) - 1))

    def _best(self, prompt: Sequence[int]) -> tuple[_State | None, int]:
        best, shared = None, 0
        for state in self._states.values():
            n = common_prefix(state.token_ids, prompt)
            if n > shared:
                best, shared = state, n
        return best, shared

    def _save(self, llm: Any, live: list[int], *, protect: tuple[int, ...] | None = None) -> None:
        """Keep the live state, evicting the least recently used but never ``protect``; not at
        all when ``protect`` holds the only slot."""
        import llama_cpp

        key = tuple(live)
        if key in self._states:
            self._states.move_to_end(key)
            return
        if protect is not None and protect in self._states and self.capacity <= 1:
            return
        ctx = llm._ctx.ctx
        size = llama_cpp.llama_state_seq_get_size(ctx, self.SEQUENCE)
        data = (ctypes.c_uint8 * size)()
        written = llama_cpp.llama_state_seq_get_data(ctx, data, size, self.SEQUENCE)
        if not written:
            return
        # A kept state that is a prefix of this one adds nothing.
        for other in [k for k in self._states if key[: len(k)] == k]:
            del self._states[other]
        self._states[key] = _State(key, data, int(written))
        self.saved += 1
        while len(self._states) > self.capacity:
            victim = next(k for k in self._states if k != protect)
            del self._states[victim]

    def _restore(self, llm: Any, state: _State, keep: int) -> None:
        import llama_cpp

        ctx = llm._ctx.ctx
        llm._ctx.kv_cache_seq_rm(-1, 0, -1)
        if not llama_cpp.llama_state_seq_set_data(ctx, state.data, state.size, self.SEQUENCE):
            llm.reset()  # could not restore: start from nothing rather than from a stale cache
            return
        n = len(state.token_ids)
        llm.input_ids[:n] = state.token_ids
        llm.n_tokens = keep
        llm._ctx.kv_cache_seq_rm(-1, keep, -1)
        self._states.move_to_end(state.token_ids)
        self.restored += 1
