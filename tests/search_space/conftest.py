"""Graphs for the search-space tests (imported once per session, weights as inputs)."""

from __future__ import annotations

import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

from compiler.graph import Graph
from compiler.key_text import key_text
from compiler.model import Model
from compiler.target import Target
from search_space import build_space
from tests.sim.conftest import zoo_graph

SMALL = {
    "tiny_cnn": (8, {}),
    "bert2": (8, {"seq": 128, "num_layers": 2}),
    "deepfm": (2560, {}),
    "wide_and_deep": (2048, {}),
}


@pytest.fixture(scope="session")
def target() -> Target:
    return Target.default()


_graphs: dict[str, Graph] = {}


def small_graph(key: str) -> Graph:
    """A small or reduced zoo model (BERT with 2 layers), cached for the session."""
    if key not in _graphs:
        batch, kw = SMALL[key]
        _graphs[key] = zoo_graph("bert_base" if key == "bert2" else key, batch, **kw)
    return _graphs[key]


_spaces: dict[tuple[str, str], Any] = {}


def small_space(target: Target, key: str) -> Any:
    """The search space of :func:`small_graph` ``key`` on ``target``, cached for the session."""
    k = (key, target.hash)
    if k not in _spaces:
        g = small_graph(key)
        _spaces[k] = build_space(g, target, g.batch)
    return _spaces[k]


def mutate_twins(target: Target, key: str, seed: int, n: int, forget: str,
                 move: str | None = None) -> Any:
    """Two decodes of one vector of :func:`small_space` ``key`` mutated ``n`` times alike, the
    second made to forget its mark's memo ``forget`` before every move: the same children
    and the randomness in the same state each time (asserted). Returns the first parent."""
    space = small_space(target, key)
    v = space.encode(space.sample(np.random.default_rng(seed)))
    kept, fresh = space.decode(v), space.decode(v)
    a, b = np.random.default_rng(seed + 1), np.random.default_rng(seed + 1)
    for _ in range(n):
        setattr(fresh._space_known, forget, None)
        assert key_text(space.mutate(kept, a, move)) == key_text(space.mutate(fresh, b, move))
        assert a.bit_generator.state == b.bit_generator.state
    return kept


def onnx_model(nodes: list, inputs: dict[str, list[int]], outputs: dict[str, list[int]],
               consts: dict[str, float], name: str) -> Graph:
    """A float32 ONNX model from onnx.helper nodes, imported."""
    g = helper.make_graph(
        nodes, name,
        [helper.make_tensor_value_info(n, TensorProto.FLOAT, s) for n, s in inputs.items()],
        [helper.make_tensor_value_info(n, TensorProto.FLOAT, s) for n, s in outputs.items()],
        [numpy_helper.from_array(np.array(v, np.float32), n) for n, v in consts.items()],
    )
    proto = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return Model(proto, name=name).graph


def cpu_split_graph() -> Graph:
    """x -> Relu -> Add -> Log (CPU) -> Relu -> Mul -> y: two NPU functions."""
    nodes = [
        helper.make_node("Relu", ["x"], ["r0"]),
        helper.make_node("Add", ["r0", "one"], ["a0"]),
        helper.make_node("Log", ["a0"], ["l0"]),
        helper.make_node("Relu", ["l0"], ["r1"]),
        helper.make_node("Mul", ["r1", "two"], ["y"]),
    ]
    return onnx_model(nodes, {"x": [4, 8]}, {"y": [4, 8]}, {"one": 1.0, "two": 2.0}, "cpu_split")


def single_op_graph() -> Graph:
    """One Relu."""
    return onnx_model([helper.make_node("Relu", ["x"], ["y"])], {"x": [4, 64]}, {"y": [4, 64]}, {},
                      "one_op")


@contextmanager
def recorded() -> Iterator[list[Any]]:
    """Every ``search_space._space._Recorder`` made inside the block, in order: what each
    decode read (``rec.read()``)."""
    from search_space import _space

    seen: list[Any] = []

    class Rec(_space._Recorder):
        __slots__ = ()

        def __init__(self, *a: Any) -> None:
            super().__init__(*a)
            seen.append(self)

    with pytest.MonkeyPatch.context() as m:
        m.setattr(_space, "_Recorder", Rec)
        yield seen


def group_decodes(space: Any, seed: int, n: int) -> Iterator[tuple[Any, Any]]:
    """(recorder, decoding) of ``n`` vectors drawn with ``seed``: each one's groups decoded
    (``_build.decode_groups``), nothing walked yet."""
    from search_space import _build
    from search_space._space import _Recorder

    for vec in space.sample_vectors(np.random.default_rng(seed), n):
        rec = _Recorder(vec[space.rep].tolist(), space._rep_list)
        yield rec, _build.decode_groups(space, rec)
