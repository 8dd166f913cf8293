"""Issue 25 item 2, the rule: an op off the NPU is never grouped with NPU ops.

A host (CPU) op is a host segment: its inputs cross PCIe, the host computes it,
its result crosses back. In a group with NPU ops its step's cores would be both
computing and waiting for the host, and the group's working set would count a
tensor the NPU never holds. Schedule validation refuses such a group, the
automatic levels O0-O3 never make one, and the search space never decodes one.
Each test failed before the rule (O3 merged the Conv and the ConvTranspose of
:func:`conv_then` into one group, and validation accepted it).
"""

from __future__ import annotations

import numpy as np
import pytest
from onnx import helper as h

from compiler.auto import graph_schedule_level
from compiler.errors import ScheduleError
from compiler.graph import Graph
from compiler.schedule import make_schedule
from compiler.target import Target
from search_space import build_space
from sim import SimError, simulate
from tests.sim.conftest import group, onnx_graph, w
from tests.sim.test_undercharges import conv_then


def conv_transpose_conv() -> Graph:
    """Conv -> ConvTranspose -> Relu -> Conv: host op in the middle of an NPU chain."""
    nodes = [h.make_node("Conv", ["x", "W1"], ["y"], pads=[1, 1, 1, 1]),
             h.make_node("ConvTranspose", ["y", "W2"], ["t"], pads=[1, 1, 1, 1]),
             h.make_node("Relu", ["t"], ["r"]),
             h.make_node("Conv", ["r", "W3"], ["out"], pads=[1, 1, 1, 1])]
    return onnx_graph(nodes, {"x": [4, 16, 16, 16]}, {"out": [4, 16, 16, 16]},
                      {"W1": w(16, 16, 3, 3), "W2": w(16, 16, 3, 3), "W3": w(16, 16, 3, 3)})


def mixed(graph: Graph, ops: tuple[int, ...]) -> bool:
    on = {graph.ops[i].on_npu for i in ops}
    return len(on) == 2


def test_validation_refuses_a_group_mixing_host_and_npu_ops(target: Target) -> None:
    g = conv_then(True)
    assert not g.ops[1].on_npu
    s = make_schedule(g, [group("both", range(2), "DDR", [list(range(8))])])
    with pytest.raises(ScheduleError, match="host CPU"):
        s.validate(g, target)
    r = simulate(g, s, target)
    assert isinstance(r, SimError) and r.status == "invalid" and "host" in r.message
    # apart, the same ops are a valid schedule
    apart = make_schedule(g, [group("conv", [0], "DDR", [list(range(8))]),
                              group("host", [1], "DDR", [list(range(8))])])
    apart.validate(g, target)


@pytest.mark.parametrize("level", [0, 1, 2, 3])
@pytest.mark.parametrize("make", [lambda: conv_then(True), conv_transpose_conv])
def test_levels_never_group_host_ops_with_npu_ops(make: object, level: int,
                                                   target: Target) -> None:
    g = make()  # type: ignore[operator]
    s = graph_schedule_level(g, target, level)
    s.validate(g, target)
    assert not any(mixed(g, grp.ops) for grp in s.groups)
    r = simulate(g, s, target)
    assert not isinstance(r, SimError), r
    assert r.host_segments


def test_the_space_never_decodes_a_group_mixing_host_and_npu_ops(target: Target) -> None:
    g = conv_transpose_conv()
    space = build_space(g, target, 4)
    rng = np.random.default_rng(0)
    for _ in range(40):
        s = space.sample(rng)
        assert not any(mixed(g, grp.ops) for grp in s.groups)
        s.validate(g, target)
