"""``key_text`` (the structural key's text from a schedule's codes) is byte for byte
``repr(structural_key())``, so ``candidate_id`` keeps the ids already in logs (issue 20).

Differential: random samples, mutated children and crossovers of several zoo models,
each decoded schedule's text from its codes against the plain repr; the codes path must
be the one taken (a schedule whose codes do not match falls back to the repr).
"""

from __future__ import annotations

import hashlib
from dataclasses import replace

import numpy as np
import pytest

from autotune.sampling._studies import candidate_id
from compiler.codes import ScheduleCodes, attach_codes, codes_of
from compiler.key_text import _from_codes, key_text
from compiler.schedule import GraphSchedule
from compiler.target import Target
from search_space import build_space
from tests.search_space.conftest import small_graph


def old_id(s: GraphSchedule) -> str:
    """``candidate_id`` as it was before issue 20 (what the logs hold)."""
    return hashlib.sha256(repr(s.structural_key()).encode()).hexdigest()[:20]


@pytest.mark.parametrize("model,count", [("tiny_cnn", 250), ("bert2", 150), ("deepfm", 250),
                                         ("wide_and_deep", 250)])
def test_key_text_is_the_structural_keys_repr(model: str, count: int, target: Target) -> None:
    space = build_space(small_graph(model), target)
    rng = np.random.default_rng(20)
    samples = [space.sample(rng) for _ in range(count)]
    children = [space.mutate(samples[int(rng.integers(count))], rng) for _ in range(count)]
    crossed = [space.crossover(samples[int(rng.integers(count))],
                               children[int(rng.integers(count))], rng)
               for _ in range(count // 4)]
    grandchildren = [space.mutate(c, rng) for c in children[: count // 2]]
    schedules = samples + children + crossed + grandchildren
    from_codes = 0
    for s in schedules:
        want = repr(s.structural_key())
        codes = codes_of(s)
        if codes is not None:
            text = _from_codes(s, codes)
            assert text == want
            from_codes += text is not None
        assert key_text(s) == want
        assert key_text(s) == want  # remembered: the same text again
        assert candidate_id(s) == old_id(s)
    # the codes path is the one taken on decoded schedules (not the fallback)
    assert from_codes == len(schedules)
    # the ids tell the schedules apart exactly as their keys do
    keys = {s.structural_key() for s in schedules}
    assert len({candidate_id(s) for s in schedules}) == len(keys)


def test_key_text_falls_back_without_matching_codes(target: Target) -> None:
    space = build_space(small_graph("tiny_cnn"), target)
    rng = np.random.default_rng(3)
    a, b = space.sample(rng), space.sample(rng)
    while b.structural_key() == a.structural_key():
        b = space.sample(rng)
    # a copy carries no codes: the plain repr
    plain = replace(a, source="elsewhere")
    assert codes_of(plain) is None and key_text(plain) == repr(a.structural_key())
    # a schedule JSON round trip: no codes either
    back = GraphSchedule.from_json(a.to_json())
    assert key_text(back) == repr(a.structural_key()) and candidate_id(back) == old_id(a)
    # codes of another schedule left beside a copy of b: not trusted
    other = replace(b, source="x")
    codes = codes_of(a)
    assert codes is not None
    attach_codes(other, ScheduleCodes(codes.table, codes.groups, codes.transfers, codes.order))
    assert _from_codes(other, codes_of(other)) is None  # type: ignore[arg-type]
    assert key_text(other) == repr(b.structural_key())


def test_mutate_returns_a_different_schedule(target: Target) -> None:
    """``mutate`` decides "is the child its parent?" on the key text: a child it returns
    differs from its parent in the structural key whenever the move allowed it."""
    space = build_space(small_graph("bert2"), target)
    rng = np.random.default_rng(5)
    parent = space.sample(rng)
    same = 0
    for move in ("boundary", "merge", "split_group", "split", "rebind", "scope", "reorder"):
        for _ in range(6):
            child = space.mutate(parent, rng, move=move)
            same += child is parent
            assert (child is parent) or child.structural_key() != parent.structural_key()
    assert same < 42  # most moves found a different schedule
