"""A new op set's :class:`sim._model.GroupWork` (its ops scanned in C or in Python, the
same value) reads the op set's views and outputs once
(``compiler.views.view_sources`` and ``produced_data``) instead of asking
``reads_from_outside`` per matmul: its re-reads are those of the per-op questions (the
reference, written out below), on random op sets (contiguous runs and scattered subsets,
views inside and outside) of zoo models, on targets whose weight buffer makes many or few
matmuls re-read."""

from __future__ import annotations

import math
import random

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from compiler.graph import Graph
from compiler.memo import memo_of
from compiler.opshape import op_shapes
from compiler.target import Target
from compiler.views import reads_from_outside, view_source
from sim import _ctime
from sim._model import group_work
from tests.sim.conftest import random_op_set
from tests.sim.test_properties import graph_of

MODELS = ("tiny_cnn", "resnet18", "mobilenet_v2", "bert", "deepfm")
TARGETS = {"default": Target.default(),
           "small_wb": Target.default().replace(l1={"weight_bytes": 16 * 1024})}


def _rereads(graph: Graph, ops: tuple[int, ...], target: Target) -> tuple:
    """The re-reads as ``group_work`` asked for them before (per op)."""
    half_wb = target.l1.weight_bytes / 2
    out = []
    for i in ops:
        d, op = op_shapes(graph)[i], graph.ops[i]
        if d.kind.is_matrix and d.weight_bytes > half_wb and op.inputs \
                and reads_from_outside(graph, ops, op.inputs[0]):
            out.append((i, view_source(graph, ops, op.inputs[0]),
                        math.ceil(d.weight_bytes / half_wb) - 1))
    return tuple(out)


@settings(max_examples=25, deadline=None, suppress_health_check=list(HealthCheck))
@given(model=st.sampled_from(MODELS), tname=st.sampled_from(sorted(TARGETS)),
       seed=st.integers(0, 2**31 - 1))
def test_rereads_are_the_per_op_questions(model: str, tname: str, seed: int) -> None:
    graph, target, rng = graph_of(model), TARGETS[tname], random.Random(seed)
    n, cpack = len(graph.ops), _ctime.load_pack()
    for _ in range(6):
        ops = random_op_set(rng, n)
        for key in [k for k in memo_of(graph) if isinstance(k, tuple) and k[0] == "sim.work"]:
            del memo_of(graph)[key]
        assert group_work(graph, ops, target).rereads == _rereads(graph, ops, target)
        if cpack is not None:  # scanned in C: the same value, field by field
            py = group_work(graph, ops, target)
            for key in [k for k in memo_of(graph) if isinstance(k, tuple) and k[0] == "sim.work"]:
                del memo_of(graph)[key]
            assert repr(group_work(graph, ops, target, cpack)) == repr(py)


@pytest.mark.parametrize("model", ["bert", "resnet18"])
def test_matmuls_and_views_reread(model: str) -> None:
    """The model's matmuls and views as one op set, on a small weight buffer: re-reads (of
    views' sources too) found."""
    from compiler.views import VIEW_OPS

    graph, target = graph_of(model), TARGETS["small_wb"]
    shapes = op_shapes(graph)
    ops = tuple(i for i, op in enumerate(graph.ops)
                if shapes[i].kind.is_matrix or op.op_type in VIEW_OPS)
    assert group_work(graph, ops, target).rereads == _rereads(graph, ops, target)
    assert _rereads(graph, ops, target)
