"""The bookkeeping of kept prompt states: what is kept, what is restored, what is dropped."""

from __future__ import annotations

from typing import Any

import pytest

from inference import common_prefix
from inference.local.llamacpp_prefix import PrefixStates


class FakeContext:
    """Stands in for llama-cpp-python's context: records the KV cells removed."""

    def __init__(self) -> None:
        self.ctx = object()
        self.removed: list[int] = []

    def kv_cache_seq_rm(self, seq_id: int, p0: int, p1: int) -> bool:
        self.removed.append(p0)
        return True


class FakeLlama:
    def __init__(self, ids: list[int]) -> None:
        self.input_ids = list(ids) + [0] * 64
        self.n_tokens = len(ids)
        self._ctx = FakeContext()

    @property
    def _input_ids(self) -> list[int]:
        return self.input_ids[: self.n_tokens]


@pytest.fixture
def fake_llama_cpp(monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    """llama_cpp's state copy functions over a dict standing for the KV cache."""
    import llama_cpp

    calls: dict[str, Any] = {"get": 0, "set": 0}

    def get_size(ctx: object, seq: int) -> int:
        return 8

    def get_data(ctx: object, buf: Any, size: int, seq: int) -> int:
        calls["get"] += 1
        return size

    def set_data(ctx: object, buf: Any, size: int, seq: int) -> int:
        calls["set"] += 1
        return size

    monkeypatch.setattr(llama_cpp, "llama_state_seq_get_size", get_size)
    monkeypatch.setattr(llama_cpp, "llama_state_seq_get_data", get_data)
    monkeypatch.setattr(llama_cpp, "llama_state_seq_set_data", set_data)
    return calls


def test_common_prefix() -> None:
    assert common_prefix([1, 2, 3], [1, 2, 4]) == 2
    assert common_prefix([], [1]) == 0


def test_a_diverging_prompt_keeps_the_live_state_and_a_later_one_restores_it(
    fake_llama_cpp: dict[str, Any],
) -> None:
    states = PrefixStates(2, min_tokens=3)
    system, stack, queue = [1, 2], [10, 11, 12, 13, 14], [20, 21, 22, 23]
    llm = FakeLlama(system + stack + [99])  # a stack question was answered last
    states.prepare(llm, system + queue)  # a queue question: the stack tail would be lost
    assert len(states) == 1 and fake_llama_cpp["get"] == 1
    assert states.restored == 0  # nothing kept shares more than the live cache
    llm.input_ids[:7], llm.n_tokens = system + queue + [98], 7  # the queue one ran
    prompt = [*system, *stack, 50, 51]
    states.prepare(llm, prompt)  # the stack passage again
    assert states.restored == 1 and fake_llama_cpp["set"] == 1
    assert llm.n_tokens == len(system + stack)  # the shared part; the rest is evaluated anew
    assert llm._input_ids == system + stack
    assert llm._ctx.removed[-1] == len(system + stack)
    assert len(states) == 2  # the queue state was kept on the way


def test_a_small_gain_is_not_worth_a_copy(fake_llama_cpp: dict[str, Any]) -> None:
    states = PrefixStates(2, min_tokens=64)
    llm = FakeLlama([1, 2, 3, 4])
    states.prepare(llm, [1, 2, 9])
    assert len(states) == 0 and fake_llama_cpp["get"] == 0


def test_the_least_recently_used_state_goes_first(fake_llama_cpp: dict[str, Any]) -> None:
    states = PrefixStates(1, min_tokens=1)
    llm = FakeLlama([1, 2, 3])
    states.prepare(llm, [7])
    llm.input_ids[:2], llm.n_tokens = [7, 8], 2
    states.prepare(llm, [5])
    assert len(states) == 1 and states.saved == 2


def test_capacity_zero_keeps_nothing(fake_llama_cpp: dict[str, Any]) -> None:
    states = PrefixStates(0)
    states.prepare(FakeLlama([1] * 100), [2])
    assert len(states) == 0 and fake_llama_cpp["get"] == 0
    with pytest.raises(ValueError):
        PrefixStates(-1)


def test_saving_the_live_state_may_evict_the_best_kept_one_without_failing(
    fake_llama_cpp: dict[str, Any],
) -> None:
    """The bench found a KeyError: the kept state chosen for a prompt was evicted by saving the
    live one before it was restored. The state to restore is kept; with one slot, the live state
    is not saved at all."""
    states = PrefixStates(1, min_tokens=3)
    system, stack, queue = [1, 2], [10, 11, 12, 13, 14], [20, 21, 22, 23]
    llm = FakeLlama(system + stack + [99])
    states.prepare(llm, system + queue)  # keeps the stack state
    llm.input_ids[:7], llm.n_tokens = system + queue + [98], 7  # the queue one ran
    states.prepare(llm, [*system, *stack, 50])  # saving the queue state would evict the stack one
    assert len(states) == 1 and states.restored == 1
    assert fake_llama_cpp["get"] == 1  # the queue state was not copied out
    assert llm._input_ids == system + stack


def test_saving_evicts_the_oldest_state_but_not_the_one_to_restore(
    fake_llama_cpp: dict[str, Any],
) -> None:
    states = PrefixStates(2, min_tokens=3)
    system = [1, 2]
    a, b, c = [10, 11, 12, 13], [20, 21, 22, 23], [30, 31, 32, 33]
    llm = FakeLlama(system + a + [99])
    states.prepare(llm, system + b)  # keeps a
    llm.input_ids[:7], llm.n_tokens = system + b + [98], 7
    states.prepare(llm, system + c)  # keeps b; a is the oldest
    llm.input_ids[:7], llm.n_tokens = system + c + [97], 7
    states.prepare(llm, [*system, *a, 50])  # keeping c must evict b, not a
    assert states.restored == 1 and llm._input_ids == system + a
    kept = [s.token_ids for s in states._states.values()]
    assert tuple(system + c + [97]) in kept and tuple(system + b + [98]) not in kept
