"""The lower bound's terms, defined once (compiler.bound) for the simulator, the cost model
and the report."""

from __future__ import annotations

import warnings

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from compiler import zoo
from compiler.bound import (
    compulsory_ddr_bytes,
    launch_cycles,
    lower_bound,
    lower_bound_cycles,
    roofline_cycles,
)
from compiler.capacity import in_compute_dtype
from compiler.footprint import GATHER_OPS
from compiler.graph import Graph
from compiler.model import Model
from compiler.target import Target
from cost_model import reference_cycles


def _graph(name: str, batch: int) -> Graph:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return Model(zoo.build(name, batch=batch, weights="inputs"), name=name).graph


@pytest.fixture(scope="module")
def cnn() -> Graph:
    return _graph("tiny_cnn", 4)


@pytest.fixture(scope="module")
def deepfm() -> Graph:
    return _graph("deepfm", 4)


def test_the_bound_is_the_roofline_plus_the_launch(cnn: Graph) -> None:
    t = Target.default()
    for b in (1, 4, 16):
        assert lower_bound_cycles(cnn, b, t) == roofline_cycles(cnn, b, t) + launch_cycles(t)
        assert lower_bound(cnn, b, t) == t.cycles_to_us(lower_bound_cycles(cnn, b, t))
    assert launch_cycles(t) == pytest.approx(t.host.launch_overhead_us * t.clock_hz / 1e6)


@pytest.mark.parametrize("name", ["cnn", "deepfm"])
def test_the_cost_models_reference_is_the_same_roofline(name: str, request: pytest.FixtureRequest
                                                         ) -> None:
    """One definition: the cost model's reference time is the bound without the launch,
    gathers' burst rounding included (the copy the cost model had left it out)."""
    g: Graph = request.getfixturevalue(name)
    for t in (Target.default(), Target.default().replace(ddr={"bytes_per_cycle": 8}),
              Target.default().replace(matrix={"macs_per_cycle": 64})):
        assert reference_cycles(g, t) == max(roofline_cycles(g, g.batch, t), 1.0)


def test_gathered_rows_cross_ddr_in_whole_bursts(deepfm: Graph) -> None:
    t = Target.default()
    g = in_compute_dtype(deepfm, t)
    weights = {g.tensors[w].storage or w for op in g.ops if op.op_type not in GATHER_OPS
               for w in op.weights}
    no_gather = sum(g.nbytes(w) for w in weights) + sum(
        g.nbytes(x) for x in dict.fromkeys((*[i for i in g.inputs if i in g.consumers],
                                             *g.outputs)))
    assert compulsory_ddr_bytes(deepfm, deepfm.batch, t) > no_gather  # rows are read
    wide = t.replace(ddr={"burst_bytes": 4 * t.ddr.burst_bytes})
    assert compulsory_ddr_bytes(deepfm, deepfm.batch, wide) >= \
        compulsory_ddr_bytes(deepfm, deepfm.batch, t)


@settings(max_examples=25, deadline=None)
@given(batch=st.integers(1, 64), factor=st.sampled_from([2, 4]))
def test_property_the_roofline_grows_with_the_batch_and_shrinks_with_the_rates(
        cnn: Graph, batch: int, factor: int) -> None:
    """Invariant: more samples never lower the bound; faster engines and DDR never raise it."""
    t = Target.default()
    assert roofline_cycles(cnn, batch + 1, t) >= roofline_cycles(cnn, batch, t)
    assert compulsory_ddr_bytes(cnn, batch + 1, t) >= compulsory_ddr_bytes(cnn, batch, t)
    fast = t.replace(matrix={"macs_per_cycle": factor * t.matrix.macs_per_cycle},
                     vector={"lanes": factor * t.vector.lanes},
                     ddr={"bytes_per_cycle": factor * t.ddr.bytes_per_cycle})
    assert roofline_cycles(cnn, batch, fast) <= roofline_cycles(cnn, batch, t)
