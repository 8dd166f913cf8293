"""A ``reorder`` child whose chunk order is its parent's is its parent (issue 20,
:mod:`search_space._reorder`): the short cut's verdict equals the full decode's on every
order and look-ahead value of random parents of several zoo models, compiled and pure
Python; ``mutate`` makes the same children with the same randomness with and without it,
and spares decodes."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from compiler.key_text import key_text
from compiler.target import Target
from search_space import _reorder, _space
from tests.search_space.conftest import small_space

_MODELS = ["tiny_cnn", "bert2", "deepfm", "wide_and_deep"]


def _parents(space: Any, seed: int, n: int) -> list[Any]:
    """Sampled schedules and children of them (more splits, breadth and look-ahead mixed)."""
    rng = np.random.default_rng(seed)
    out = [space.sample(rng, uniform=bool(k % 2)) for k in range(n)]
    out += [space.mutate(s, rng) for s in out]
    return [space.decode(space.encode(s)) for s in out]


def _order_children(space: Any, vec: np.ndarray) -> list[np.ndarray]:
    """Every value of the order and look-ahead parameters, one or both changed."""
    fo, fl = int(space.rep[space.d_order]), int(space.rep[space.d_lookahead])
    out = []
    for o in range(int(space.n_choices[fo])):
        for la in range(int(space.n_choices[fl])):
            child = vec.copy()
            child[fo], child[fl] = o, la
            if (child != vec).any():
                out.append(child)
    return out


@pytest.mark.parametrize("pure", [False, True])
def test_the_short_cut_s_verdict_is_the_full_decode_s(target: Target, pure: bool,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    if pure:
        monkeypatch.setenv("GRAPHTUNE_PURE_PYTHON", "1")
    seen = {True: 0, False: 0}
    for k, key in enumerate(_MODELS):
        space = small_space(target, key)
        for parent in _parents(space, 11 + k, 6):
            vec = space.encode(parent)
            text = key_text(parent)
            for child in _order_children(space, vec):
                verdict = _reorder.decodes_to_parent(space, parent, child)
                assert verdict == (key_text(space.decode(child)) == text), (key, child)
                seen[verdict] += 1
    assert seen[True] > 10 and seen[False] > 10, seen  # both verdicts were put to the test


def test_only_order_changes_of_this_space_s_own_decodes_take_it(target: Target) -> None:
    space = small_space(target, "bert2")
    parent = _parents(space, 3, 1)[0]
    vec = space.encode(parent)
    other = vec.copy()
    f = next(f for f in range(len(vec)) if f not in (int(space.rep[space.d_order]),
                                                      int(space.rep[space.d_lookahead]))
             and space.n_choices[f] > 1)
    other[f] = (int(other[f]) + 1) % int(space.n_choices[f])
    assert not _reorder.order_only(space, vec, vec)  # no change at all
    assert not _reorder.order_only(space, vec, other)
    assert not _reorder.decodes_to_parent(space, parent, other)
    copy = space.decode(vec)
    object.__setattr__(copy, "_space_known", None)  # not marked: not known here
    child = _order_children(space, vec)[0]
    assert not _reorder.decodes_to_parent(space, copy, child)


@pytest.mark.parametrize(("key", "seed"), [("bert2", 3), ("bert2", 2), ("tiny_cnn", 0)])
def test_mutate_makes_the_same_children_and_spares_decodes(target: Target, key: str, seed: int,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    """Two decodes of one parent mutated 40 times by ``reorder`` (and by any move), one
    with the short cut and one without: the same children, the randomness in the same
    state; with it, fewer full decodes (parents whose reorder moves give them back, some or
    all)."""
    space = small_space(target, key)
    real = _reorder.decodes_to_parent
    for move in ("reorder", None):
        v = space.encode(space.sample(np.random.default_rng(seed)))
        texts: dict[bool, list[str]] = {}
        decodes: dict[bool, int] = {}
        states = {}
        for use in (True, False):
            monkeypatch.setattr(_space, "decodes_to_parent",
                                real if use else (lambda *a: False))
            calls = [0]
            orig = space._decode_marked

            def counted(vec: np.ndarray, orig: Any = orig, calls: list[int] = calls) -> Any:
                calls[0] += 1
                return orig(vec)

            monkeypatch.setattr(space, "_decode_marked", counted)
            parent = space.decode(v)
            rng = np.random.default_rng(9)
            texts[use] = []
            for _ in range(40):
                s = space.mutate(parent, rng, move)
                texts[use].append(key_text(s))
                parent._space_known.noops = None  # every draw decided again
            decodes[use] = calls[0]
            states[use] = rng.bit_generator.state
            monkeypatch.undo()
        assert texts[True] == texts[False]
        assert states[True] == states[False]
        if move == "reorder":
            assert decodes[True] < decodes[False], decodes
