"""A new op set's compute cost made in C (``sim/_cpack.c``'s ``op_cost``, through
``sim._model._cost_c``) is :func:`sim._model._cost`'s, bit for bit (``repr`` of every
field): random op sets (contiguous runs, scattered subsets) of zoo models with matmuls,
grouped and dilated convolutions, attention (batched matmuls: head and row splits),
gathers and views, and of an INT8 (QDQ) model, at random samples per part, cores per part,
step cores and re-read placements, on targets with a small weight buffer (re-reads), no
LLB broadcast (the weight path per step core), INT8 rates of 1, and fewer cores."""

from __future__ import annotations

import random

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from compiler.opshape import op_shapes
from compiler.target import Target
from sim import _ctime
from sim._model import _cost, _cost_c, group_work
from tests.sim.conftest import random_op_set
from tests.sim.test_int8 import _model
from tests.sim.test_properties import graph_of

pytestmark = pytest.mark.skipif(_ctime.load_pack() is None,
                                reason="sim._cpack not built: costs are made in Python")

MODELS = ("tiny_cnn", "resnet18", "mobilenet_v2", "bert", "deepfm", "wide_and_deep", "int8")
_T = Target.default()
TARGETS = {"default": _T, "small_wb": _T.replace(l1={"weight_bytes": 16 * 1024}),
           "no_broadcast": _T.replace(llb={"broadcast": False}),
           "rate1": _T.replace(matrix={"int8_rate": 1.0}, vector={"int8_rate": 1.0}),
           "four_cores": _T.replace(chip={"cores_per_cluster": 4},
                                    noc={"mesh_rows": 4, "mesh_cols": 2})}
_GRAPHS: dict = {}


def _graph(model: str):  # type: ignore[no-untyped-def]
    if model == "int8":
        if "int8" not in _GRAPHS:
            _GRAPHS["int8"] = _model(True)
        return _GRAPHS["int8"]
    return graph_of(model)


@settings(max_examples=40, deadline=None, suppress_health_check=list(HealthCheck))
@given(model=st.sampled_from(MODELS), tname=st.sampled_from(sorted(TARGETS)),
       seed=st.integers(0, 2**31 - 1))
def test_costs_made_in_c_are_pythons(model: str, tname: str, seed: int) -> None:
    graph, target, rng, cpack = _graph(model), TARGETS[tname], random.Random(seed), \
        _ctime.load_pack()
    n, shapes = len(graph.ops), op_shapes(graph)
    made = 0
    for _ in range(8):
        ops = random_op_set(rng, n)
        s, k = rng.choice([1, 2, 3, 4, 8, 16]), rng.choice([1, 2, 3, 4, 8])
        step = k * rng.randint(1, 4)
        rereads = [i for i, _, _ in group_work(graph, ops, target).rereads]
        remote = frozenset(rng.sample(rereads, rng.randint(0, len(rereads))))
        got = _cost_c(cpack, graph, ops, s, k, target, step, remote)
        want = _cost(shapes, ops, s, k, target, step, remote)
        assert got is not None
        assert repr(tuple(got)) == repr((want.mme_cycles, want.vme_cycles, want.move_cycles,
                                         want.fill_cycles, want.mme_useful_cycles,
                                         want.weight_bound_cycles))
        made += 1
    assert made


def test_a_product_past_two_to_the_53_is_priced_in_python() -> None:
    """``op_cost`` gives None where a double would round an exact integer product."""
    import struct

    cpack = _ctime.load_pack()
    row = [0, 0, 2.0**40, 1, 1, 2.0**20, 64, 0, 0, 0, 0, 0, 0, 0]  # a MATRIX op: huge rows x n
    params = struct.pack("12d", 64, 32, 2048, 4096, 2, 32.0, 64.0, 8.0, 64, 1e6, 32, 4096)
    assert cpack.op_cost(struct.pack("14d", *row), (0,), 1, 1, params, frozenset()) is None
    row[2] = 4096.0
    assert cpack.op_cost(struct.pack("14d", *row), (0,), 1, 1, params, frozenset()) is not None
