"""The compiled codes and identity text (``search_space/_ccodes.c``) against the Python code.

``search_space._lazy.Decoded`` codes a decoded schedule in one C call when the compiled
decoder packed its state; ``Decoded._code`` (Python) is the reference. Each candidate is
decoded twice from its vector, one copy coded by each path: the texts (and each equal to
``repr(structural_key())``, what ``candidate_id`` hashes), the codes (the same value table,
the same codes), the placements and the built objects must be equal; the C path must have
run (its cache counts what it looked up); with its tables bounded to a few entries (they
start again) the results stay the same; ``GRAPHTUNE_PURE_PYTHON=1`` turns it off; a state it
does not take (a malformed table) gives None and the Python code answers.
"""

from __future__ import annotations

import os

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from compiler.codes import codes_of
from compiler.key_text import key_text
from compiler.target import Target
from search_space import _lazy, build_space
from search_space._ccore import load_extension
from tests.search_space.conftest import small_graph

pytestmark = pytest.mark.skipif(
    load_extension("_ccodes") is None,
    reason="search_space._ccodes is not built (no C compiler) or GRAPHTUNE_PURE_PYTHON is set")


def _vectors(space: object, count: int, seed: int) -> list[np.ndarray]:
    """Sampled, mutated and crossed-over candidates' vectors (a small evolving population)."""
    rng = np.random.default_rng(seed)
    pop = [space.sample(rng) for _ in range(6)]  # type: ignore[attr-defined]
    out = []
    for _ in range(count):
        r = rng.random()
        a = pop[int(rng.integers(len(pop)))]
        if r < 0.2:
            s = space.sample(rng)  # type: ignore[attr-defined]
        elif r < 0.4:
            s = space.crossover(a, pop[int(rng.integers(len(pop)))], rng)  # type: ignore[attr-defined]
        else:
            s = space.mutate(a, rng)  # type: ignore[attr-defined]
        pop[int(rng.integers(len(pop)))] = s
        out.append(space.encode(s))  # type: ignore[attr-defined]
    return out


def _python_only(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_lazy.Decoded, "_code_compiled", lambda self: False)


def _compare(space: object, vectors: list[np.ndarray], monkeypatch: pytest.MonkeyPatch) -> int:
    """Decode each vector twice, code one copy in C and one in Python, compare; the count
    coded in C."""
    in_c = 0
    for k, v in enumerate(vectors):
        a = space.decode(v)  # type: ignore[attr-defined]
        b = space.decode(v)  # type: ignore[attr-defined]
        # alternate which path meets a candidate's new values first
        first, second = (a, b) if k % 2 else (b, a)
        for s in (first, second):
            if s is b:
                with monkeypatch.context() as m:
                    _python_only(m)
                    key_text(s)
            else:
                key_text(s)
        src_a = a.built_by()
        in_c += src_a._made is not None
        ta, tb = key_text(a), key_text(b)
        assert ta == tb == repr(b.structural_key())
        ca, cb = codes_of(a), codes_of(b)
        assert ca is not None and cb is not None and ca.table is cb.table
        for f in ("groups", "transfers", "order"):
            x, y = getattr(ca, f), getattr(cb, f)
            assert x.dtype == y.dtype == np.int32 and x.tolist() == y.tolist()
        assert a.groups == b.groups and a.transfers == b.transfers and a.order == b.order
        assert [t.placement for t in a.transfers] == [t.placement for t in b.transfers]
        table = ca.table
        assert all(table.groups[c] is g for c, g in zip(ca.groups.tolist(), a.groups))
        assert all(table.steps[c] is s for c, s in zip(ca.order.tolist(), a.order))
    return in_c


@pytest.mark.parametrize("model,count", [("tiny_cnn", 160), ("bert2", 60), ("deepfm", 100),
                                         ("wide_and_deep", 160)])
def test_compiled_codes_are_the_python_codes(model: str, count: int, target: Target,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    space = build_space(small_graph(model), target)
    in_c = _compare(space, _vectors(space, count, 7), monkeypatch)
    assert in_c == count  # every candidate took the C path
    stats = space._interned.ccache.stats()  # type: ignore[attr-defined]
    assert stats["hits"] > 0 and stats["misses"] > 0


def test_bounded_tables_start_again(target: Target, monkeypatch: pytest.MonkeyPatch) -> None:
    real = _lazy._compiled_cache
    monkeypatch.setattr(_lazy, "_compiled_cache",
                        lambda mod, it, table: real(mod, it, table, limit=8))
    space = build_space(small_graph("tiny_cnn"), target)
    assert _compare(space, _vectors(space, 80, 3), monkeypatch) == 80
    stats = space._interned.ccache.stats()  # type: ignore[attr-defined]
    assert stats["groups"] <= 8 + 64 and stats["hits"] > 0


@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 2**31 - 1), uniform=st.booleans())
def test_any_sample_codes_alike(seed: int, uniform: bool) -> None:
    target = Target.default()
    space = _SPACES.setdefault("deepfm", build_space(small_graph("deepfm"), target))
    v = space.sample_vectors(np.random.default_rng(seed), 1, uniform)[0]
    a, b = space.decode(v), space.decode(v)
    real = _lazy.Decoded._code_compiled
    _lazy.Decoded._code_compiled = lambda self: False  # type: ignore[method-assign]
    try:
        tb = key_text(b)
    finally:
        _lazy.Decoded._code_compiled = real  # type: ignore[method-assign]
    assert key_text(a) == tb == repr(a.structural_key())
    assert codes_of(a).groups.tolist() == codes_of(b).groups.tolist()  # type: ignore[union-attr]
    assert codes_of(a).order.tolist() == codes_of(b).order.tolist()  # type: ignore[union-attr]


_SPACES: dict[str, object] = {}


def test_pure_python_turns_it_off(target: Target, monkeypatch: pytest.MonkeyPatch) -> None:
    space = build_space(small_graph("tiny_cnn"), target)
    monkeypatch.setitem(os.environ, "GRAPHTUNE_PURE_PYTHON", "1")
    s = space.sample(np.random.default_rng(0))
    assert key_text(s) == repr(s.structural_key())
    assert s.built_by()._made is None and space._interned.ccache is None  # type: ignore[attr-defined]


def test_a_state_it_does_not_take_is_the_python_codes(target: Target) -> None:
    space = build_space(small_graph("tiny_cnn"), target)
    s = space.sample(np.random.default_rng(1))
    src = s.built_by()
    groups, transfers, nodes, scopes, at = src._state
    it = space._interned  # type: ignore[attr-defined]
    cache = it.compiled(src.table)
    gidx, chunk_b, _, step_b = at._parts
    rows, binds, tnames, _ = transfers._packed
    args = [src.batch, groups, gidx, chunk_b, scopes, nodes, rows, binds, transfers.names, tnames,
            step_b]
    assert cache.encode(*args) is not None
    bad_chunks = bytearray(chunk_b)
    bad_chunks[-4:] = (10**6).to_bytes(4, "little")  # a position past the order
    assert cache.encode(*args[:3], bytes(bad_chunks), *args[4:]) is None
    assert cache.encode(*args[:4], scopes[:-1], *args[5:]) is None  # a scope short
    huge = dict(gidx)
    huge[next(iter(huge))] = 2**70  # an index that is no C long: declined, no error left set
    assert cache.encode(*args[:2], huge, *args[3:]) is None
    if transfers.names:  # a row _cdag.make_transfers refuses (a run past INT_MAX): declined
        bad_rows = bytearray(rows)
        bad_rows[16:24] = (2**31 - 10).to_bytes(4, "little") + (100).to_bytes(4, "little")
        assert cache.encode(*args[:6], bytes(bad_rows), *args[7:]) is None
    if len(transfers.names) > 1:  # two transfers of one name: the Python code sorts them
        names = [transfers.names[0]] * len(transfers.names)
        assert cache.encode(*args[:8], names, *args[9:]) is None
    # the schedule itself: the C path declines, the Python code answers
    s2 = space.decode(space.encode(s))
    src2 = s2.built_by()
    src2._state = (*src2._state[:3], tuple(src2._state[3]), src2._state[4])  # scopes not a list
    assert key_text(s2) == repr(s2.structural_key()) == key_text(s)
    assert src2._made is None


def _table_state(space: object) -> tuple[object, ...]:
    """What the value table and the space's shared placements hold, by value and by code."""
    t = space._interned.table  # type: ignore[attr-defined]
    made = [*t.groups, *t.placements, *t.transfers, *space._places.values()]  # type: ignore[attr-defined]
    return ([list(vars(x).items()) for x in made],  # the instance dicts, keys in order
            t.groups, t.group_ops, t.group_first, t.group_places, t.ops, t.placements,
            t.transfers, t.steps, list(t._group_codes.values()), list(t._transfer_codes.values()),
            list(t._ops_codes.values()), list(t._place_codes.values()),
            list(space._places.items()))  # type: ignore[attr-defined]


@pytest.mark.parametrize("model,count", [("tiny_cnn", 120), ("bert2", 40), ("wide_and_deep", 80)])
def test_first_time_values_interned_in_c_as_by_the_callbacks(model: str, count: int, target: Target,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    """A group spec or placed transfer met the first time, interned by the C code, makes the
    same table (values, codes, order), the same shared placements and the same text as the
    Python callbacks make it (two spaces of one graph, the same candidates)."""
    by_callbacks, in_c = (build_space(small_graph(model), target) for _ in range(2))
    it_callbacks = _lazy.interned(by_callbacks)
    real = _lazy._compiled_cache
    monkeypatch.setattr(_lazy, "_compiled_cache", lambda mod, it, table, limit=_lazy._CLIMIT:
                        real(mod, it, table, limit, first=it is not it_callbacks))
    vectors = _vectors(build_space(small_graph(model), target), count, 11)  # a third space's
    for v in vectors:
        a, b = by_callbacks.decode(v), in_c.decode(v)
        ta, tb = key_text(a), key_text(b)
        assert a.built_by()._made is not None and b.built_by()._made is not None  # coded in C
        assert ta == tb == repr(b.structural_key())
        ca, cb = codes_of(a), codes_of(b)
        for f in ("groups", "transfers", "order"):
            assert getattr(ca, f).tolist() == getattr(cb, f).tolist()
        assert b.groups == a.groups and b.transfers == a.transfers
    assert _table_state(by_callbacks) == _table_state(in_c)
    sa = it_callbacks.ccache.stats()
    sb = in_c._interned.ccache.stats()  # type: ignore[attr-defined]
    assert sa["firsts"] == 0 and sb["firsts"] > 0 and sb["misses"] == sa["misses"]


def test_plain_fields_only_for_a_generated_init() -> None:
    """The C code makes a value type's instances itself only when its ``__init__`` is the
    generated one that sets the fields in order (else it calls the type)."""
    import dataclasses

    from compiler.schedule import GroupSpec, Placement

    @dataclasses.dataclass(frozen=True)
    class Plain:
        a: int
        b: str

    @dataclasses.dataclass(frozen=True)
    class Post:
        a: int

        def __post_init__(self) -> None:
            pass

    @dataclasses.dataclass
    class Mutable:
        a: int

    @dataclasses.dataclass(frozen=True)
    class Hidden:
        a: int
        b: int = dataclasses.field(init=False, default=0)

    class NotData:
        def __init__(self, a: int) -> None:
            self.a = a

    assert _lazy.plain_fields(Plain) == ("a", "b")
    assert _lazy.plain_fields(Placement) == ("mem_scope", "core_bind")
    assert _lazy.plain_fields(GroupSpec) == ("name", "ops", "split", "chunks")
    for cls in (Post, Mutable, Hidden, NotData, int):
        assert _lazy.plain_fields(cls) is None
