"""``logs._cjson.text``: the log line's compact JSON text of a schedule's pieces, written in C.

The reference is ``json.dumps(obj, separators=(",", ":"), ensure_ascii=False)``: on any value
the writer gives that text or None (a value it leaves to the json encoder), and on the values
a schedule's JSON is made of (zoo schedules: groups, transfers, order) it gives the text.
"""

from __future__ import annotations

import json
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

_cjson = pytest.importorskip("logs._cjson")


def _dumps(obj: Any) -> str:
    return json.dumps(obj, separators=(",", ":"), ensure_ascii=False)


_PLAIN = st.text(st.characters(min_codepoint=0x20, max_codepoint=0x7e,
                               blacklist_characters='"\\'), max_size=12)
_ANY_TEXT = st.text(max_size=8)
_INT = st.integers(min_value=-(2**63), max_value=2**63 - 1)
_TAKEN = st.recursive(
    st.one_of(st.none(), st.booleans(), _INT, _PLAIN),
    lambda inner: st.one_of(st.lists(inner, max_size=5), st.tuples(inner, inner),
                            st.dictionaries(_PLAIN, inner, max_size=5)),
    max_leaves=40)
_ANY = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(), st.floats(allow_nan=False), _ANY_TEXT),
    lambda inner: st.one_of(st.lists(inner, max_size=5), st.tuples(inner),
                            st.dictionaries(_ANY_TEXT, inner, max_size=5)),
    max_leaves=40)


@settings(max_examples=300, deadline=None)
@given(_TAKEN)
def test_the_values_it_takes_are_written_as_json_dumps(value: Any) -> None:
    assert _cjson.text(value) == _dumps(value)


@settings(max_examples=300, deadline=None)
@given(_ANY)
def test_any_value_is_json_dumps_or_left(value: Any) -> None:
    got = _cjson.text(value)
    assert got is None or got == _dumps(value)


@pytest.mark.parametrize("value", [
    1.5, float("inf"), "é", 'a"b', "a\\b", "a\nb", "\x7f", 2**63, -(2**63) - 1,
    {1: 2}, {"a": {2: 3}}, [1, [2, 1.0]], {"a": set()}, type("I", (int,), {})(3),
    type("S", (str,), {})("x"), type("D", (dict,), {})(a=1),
])
def test_it_leaves_what_it_does_not_write(value: Any) -> None:
    assert _cjson.text(value) is None


def test_edges() -> None:
    for v in (0, -1, 2**63 - 1, -(2**63), True, False, None, "", [], {}, (), [True, None],
              {"": ""}, {"a": (1, [2, {"b": -3}])}):
        assert _cjson.text(v) == _dumps(v), v
    deep: Any = 1
    for _ in range(40):
        deep = [deep]
    assert _cjson.text(deep) is None  # deeper than the writer goes: the encoder's


@pytest.mark.parametrize("name,batch", [("resnet50", 16), ("bert_base", 8), ("mobilenet_v2", 16),
                                        ("deepfm", 64), ("gpt", 4)])
def test_zoo_schedules_text(name: str, batch: int) -> None:
    """Sampled schedules' pieces and whole JSON: written, byte for byte; the worker's
    ``_texts._text`` gives the same with and without the writer."""
    from autotune.running import _texts
    from compiler.target import Target
    from search_space import build_space
    from tests.sim.conftest import zoo_graph

    graph = zoo_graph(name, batch)
    space = build_space(graph, Target.default(), graph.batch)
    rng = np.random.default_rng(7)
    for _ in range(6):
        obj = space.sample(rng).to_json()
        for key in ("groups", "transfers", "order"):
            assert _cjson.text(obj[key]) == _dumps(obj[key]), key
        whole = {k: v for k, v in obj.items() if type(v) is not float}
        assert _cjson.text(whole) == _dumps(whole)
        assert _texts._text(obj["transfers"]) == _dumps(obj["transfers"])


def test_the_worker_text_without_the_writer(monkeypatch: pytest.MonkeyPatch) -> None:
    from autotune.running import _texts

    value = [{"a": 1.5, "b": [1, 2]}, {"c": "é"}]
    assert _texts._text(value) == _dumps(value)  # left by the writer: the encoder
    monkeypatch.setattr(_texts, "_ctext", None)
    assert _texts._text([{"a": [1, 2]}]) == _dumps([{"a": [1, 2]}])
