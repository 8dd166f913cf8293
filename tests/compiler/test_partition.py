"""Ops outside the NPU support table split the graph into NPU sub-functions and CPU parts."""

from __future__ import annotations

import warnings

import numpy as np
from onnx import TensorProto, helper, numpy_helper

from compiler.graph import Graph
from compiler.graph_schedule import GetNPUSubFunctions, GraphModule, ListOps
from compiler.model import Model


def _graph() -> Graph:
    # x -> Relu -> Add(1) -> Log (not in the table: CPU) -> Relu -> Mul(2) -> y
    nodes = [
        helper.make_node("Relu", ["x"], ["r0"]),
        helper.make_node("Add", ["r0", "one"], ["a0"]),
        helper.make_node("Log", ["a0"], ["l0"]),
        helper.make_node("Relu", ["l0"], ["r1"]),
        helper.make_node("Mul", ["r1", "two"], ["y"]),
    ]
    consts = [numpy_helper.from_array(np.array(v, np.float32), n) for n, v in (("one", 1), ("two", 2))]
    g = helper.make_graph(
        nodes, "cpu_split",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 8])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 8])],
        consts,
    )
    proto = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return Model(proto, name="cpu_split").graph


def test_cpu_op_separates_npu_subfunctions() -> None:
    g = _graph()
    assert [op.name for op in g.cpu_ops()] == ["log_0"]
    runs = g.npu_subfunctions()
    assert [[g.ops[i].name for i in run] for run in runs] == [["relu_0", "add_0"],
                                                               ["relu_1", "multiply_0"]]
    summary = g.summary()
    assert len(summary["npu_subfunctions"]) == 2 and summary["cpu_ops"] == ["log_0"]


def test_get_npu_sub_functions_and_list_ops() -> None:
    g = _graph()
    funcs = GetNPUSubFunctions(GraphModule(g))
    assert len(funcs) == 2
    assert [p.name for p in funcs[0].params] == ["x"]  # the model input
    assert [p.name for p in funcs[1].params] == ["log_0"]  # the CPU part's result
    first, second = (ListOps(f) for f in funcs)
    assert set(first) == {"nn.relu", "add"} and set(second) == {"nn.relu", "multiply"}
    assert second["relu"][0].name == "relu_1"  # "relu" finds "nn.relu"


def test_each_npu_subfunction_is_a_graph_with_its_own_workload_key() -> None:
    from compiler.auto import graph_schedule_level
    from compiler.target import Target
    from sim import SimResult, simulate

    g = _graph()
    subs = [g.subgraph(run) for run in g.npu_subfunctions()]
    assert [[op.name for op in s.ops] for s in subs] == [["relu_0", "add_0"],
                                                         ["relu_1", "multiply_0"]]
    assert [op.index for op in subs[1].ops] == [0, 1]
    assert subs[0].inputs == ("x",) and subs[0].outputs == ("add_0",)
    assert subs[1].inputs == ("log_0",) and subs[1].outputs == ("multiply_0",)
    assert subs[1].tensors["log_0"].kind == "input" and subs[1].tensors["log_0"].batched
    keys = {g.workload_key, *(s.workload_key for s in subs)}
    assert len(keys) == 3
    # same structure, same key: the two sub-functions differ only by their constants' roles
    assert g.subgraph(g.npu_subfunctions()[0]).workload_key == subs[0].workload_key
    target = Target.default()
    for s in subs:
        assert isinstance(simulate(s, graph_schedule_level(s, target, 3), target), SimResult)
