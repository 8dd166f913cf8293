"""A decoded schedule is built when read (``search_space._lazy``): laziness is invisible.

Sampled, mutated and crossed-over schedules of several zoo models are identified
(``candidate_id``), pre-checked and featurised without building their groups,
transfers and order; then every reader's view is compared with a plain
``GraphSchedule`` of the same JSON: each field, ``==`` both ways, ``hash``, ``repr``,
pickling and copying (which give the plain type), JSON, the structural key, the id
of the plain repr (what logs hold) and the codes (naming exactly the built values); and
that the built values are the ones the decoder walked (a fresh capacity walk of a plain
copy gives the memory plan remembered at decoding, and the same pre-check verdict).
"""

from __future__ import annotations

import copy
import dataclasses
import gc
import hashlib
import operator
import pickle
import weakref

import numpy as np
import pytest

from autotune.sampling._studies import candidate_id
from compiler.capacity import plan_memory
from compiler.codes import LazySchedule, codes_of
from compiler.key_text import _from_codes, key_text
from compiler.schedule import GraphSchedule
from compiler.target import Target
from cost_model._features import features
from search_space import build_space
from tests.search_space.conftest import small_graph


def plain_id(s: GraphSchedule) -> str:
    """``candidate_id`` from the plain repr of the structural key (what logs hold)."""
    return hashlib.sha256(repr(s.structural_key()).encode()).hexdigest()[:20]


def _candidates(model: str, count: int, target: Target, seed: int) -> tuple[object, list[GraphSchedule]]:
    space = build_space(small_graph(model), target)
    rng = np.random.default_rng(seed)
    samples = [space.sample(rng) for _ in range(count)]
    children = [space.mutate(samples[int(rng.integers(count))], rng) for _ in range(count)]
    crossed = [space.crossover(samples[int(rng.integers(count))],
                               children[int(rng.integers(count))], rng) for _ in range(count // 2)]
    return space, samples + children + crossed


@pytest.mark.parametrize("model,count", [("tiny_cnn", 240), ("bert2", 80), ("deepfm", 160),
                                         ("wide_and_deep", 240)])
def test_laziness_is_invisible(model: str, count: int, target: Target) -> None:
    space, schedules = _candidates(model, count, target, 64)
    ids = [candidate_id(s) for s in schedules]
    checks = [space.precheck(s) for s in schedules]  # type: ignore[attr-defined]
    x = features(small_graph(model), schedules, target)
    built = sum(isinstance(s, LazySchedule) and s.is_built() for s in schedules)
    # mutate built none either: its parents' and children's texts come from their codes
    assert built == 0
    lazy = sum(isinstance(s, LazySchedule) for s in schedules)
    assert lazy == len(schedules)
    for k, (s, cid, check) in enumerate(zip(schedules, ids, checks)):
        text = key_text(s)
        plain = GraphSchedule.loads(s.dumps())  # builds s
        assert isinstance(s, LazySchedule) and s.is_built()
        assert type(plain) is GraphSchedule
        for f in dataclasses.fields(GraphSchedule):
            assert getattr(s, f.name) == getattr(plain, f.name), f.name
        assert s == plain and plain == s and hash(s) == hash(plain)
        assert not operator.ne(s, plain) and not operator.ne(plain, s)
        assert repr(s) == repr(plain)
        assert text == repr(plain.structural_key()) == repr(s.structural_key())
        assert cid == plain_id(plain) == candidate_id(s)
        # the codes name exactly the values built (the path the old eager schedule took)
        codes = codes_of(s)
        assert codes is not None and _from_codes(s, codes) == text
        for c, g in zip(codes.groups.tolist(), s.groups):
            assert codes.table.groups[c] is g
        for c, st in zip(codes.order.tolist(), s.order):
            assert codes.table.steps[c] is st
        for c, t in zip(codes.transfers.tolist(), s.transfers):
            item = codes.table.transfers[c]
            assert (item.tensor, item.dst_factor, item.dst_chunks) == \
                (t.tensor, t.dst_factor, t.dst_chunks) and item.placement is t.placement
        if k % 8:
            continue  # the slower views on every eighth
        # copies are plain schedules, equal
        for other in (pickle.loads(pickle.dumps(s)), copy.copy(s), copy.deepcopy(s)):
            assert type(other) is GraphSchedule and other == s and hash(other) == hash(s)
        # the verdict does not depend on whether the schedule was built, and the built
        # objects are the schedule the decoder walked: a fresh walk of the plain copy's
        # scopes gives the plan the decoder remembered
        again = space.precheck(plain)  # type: ignore[attr-defined]
        assert (again.ok, again.kind, again.reason) == (check.ok, check.kind, check.reason)
        graph = space.graph_for(s.batch)  # type: ignore[attr-defined]
        assert plan_memory(graph, plain, target) == plan_memory(graph, s, target)
    # features of plain copies (walked, not gathered by code): the same rows
    copies = [GraphSchedule.loads(s.dumps()) for s in schedules[::4]]
    assert np.array_equal(features(small_graph(model), copies, target), x[::4])
    assert len(set(ids)) == len({s.structural_key() for s in schedules})


def test_a_copy_by_replace_is_built_and_plain(target: Target) -> None:
    space = build_space(small_graph("tiny_cnn"), target)
    s = space.sample(np.random.default_rng(2))
    assert isinstance(s, LazySchedule) and not s.is_built()
    other = dataclasses.replace(s, source="elsewhere")
    assert s.is_built()  # replace read the fields
    assert other.source == "elsewhere" and other.groups == s.groups and other != s
    assert codes_of(other) is None and key_text(other) == key_text(s)
    assert dataclasses.replace(other, source=s.source) == s
    with pytest.raises(AttributeError):
        _ = s.no_such_field  # type: ignore[attr-defined]
    with pytest.raises(dataclasses.FrozenInstanceError):
        s.batch = 3  # type: ignore[misc]


def test_an_unread_schedule_does_not_keep_its_space_alive(target: Target) -> None:
    space = build_space(small_graph("tiny_cnn"), target)
    rng = np.random.default_rng(4)
    kept = [space.sample(rng) for _ in range(5)]
    candidate_id(kept[0])  # codes and text made, objects not
    ref = weakref.ref(space)
    del space
    gc.collect()
    assert ref() is None
    # the schedules still build from what they hold
    for s in kept:
        assert GraphSchedule.loads(s.dumps()) == s
        assert key_text(s) == repr(s.structural_key())
