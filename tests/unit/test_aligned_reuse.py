"""The arithmetic of exact prefix reuse (:mod:`memprobe_engine.llm.backends.aligned_reuse`); the
equality with whole-prompt answers on the real model is tests/functional/test_embedded_determinism.py's."""

from __future__ import annotations

from memprobe_engine.llm.backends.aligned_reuse import odd_token, shared_steps


def test_a_slot_keeps_the_common_prefix_cut_down_to_whole_steps() -> None:
    known = list(range(1300))
    assert shared_steps(known, known[:1100] + [-1] * 50, 512) == 1024
    assert shared_steps(known, known[:1023] + [-1] * 50, 512) == 512  # one short of a second step
    assert shared_steps(known, known[:500] + [-1] * 50, 512) == 0


def test_it_leaves_a_token_to_evaluate_and_knows_nothing_of_an_unknown_slot() -> None:
    known = list(range(1024))
    assert shared_steps(known, known, 512) == 512  # the same prompt again: its last step is evaluated
    assert shared_steps(known, known + [7], 512) == 1024
    assert shared_steps(None, known, 512) == 0 and shared_steps([], known, 512) == 0


def test_the_odd_token_differs_from_both_neighbours() -> None:
    assert odd_token(5, 6) == 0
    assert odd_token(0, 1) == 2
    assert odd_token(0, None) == 1
