"""A parameter read by several ops, or read through a view (GPT's tied LM head), is stored once.

Issue 8, item 7: GPT's LM head multiplies by ``Transpose(wte)``; constant folding makes
that a second constant, and ``Graph.weight_bytes`` counted the table twice. The zoo
builds with zero weights (and the Graph of a weights-as-inputs model is read with
zeros), so equal bytes prove nothing: the import records where a folded view came from.
"""

from __future__ import annotations

import pickle
from typing import Any

import numpy as np
import onnx
import pytest
from onnx import helper, numpy_helper

from compiler import load_onnx, zoo
from compiler.auto import graph_schedule_level
from compiler.bound import compulsory_ddr_bytes
from compiler.graph import Graph
from compiler.model import Model
from compiler.target import Target
from sim import SimResult, simulate

GPT = dict(num_layers=1, hidden=64, heads=4, inner=128, vocab=1000)
TABLE = 1000 * 64 * 2  # the token embedding in FP16


def _gpt(tie: int, weights: str, batch: int = 2) -> Graph:
    proto = zoo.build("gpt", batch=batch, seq=16, weights=weights, tie_embeddings=tie, **GPT)
    return Model(proto, "gpt").graph


def _table_users(g: Graph, vocab: int = 1000, hidden: int = 64) -> tuple[str, str]:
    """(the gather's ``vocab x hidden`` table, the LM head's weight)."""
    gather = next(op for op in g.ops if op.op_type == "take" and op.weights
                  and g.tensors[op.weights[0]].shape == (vocab, hidden))
    head = next(op for op in g.ops if op.op_type == "matmul" and op.weights
                and g.tensors[op.weights[-1]].shape == (hidden, vocab))
    return gather.weights[0], head.weights[-1]


@pytest.mark.parametrize("weights", ["random", "zeros", "inputs"])
def test_tied_embedding_counts_once(weights: str) -> None:
    tied, untied = _gpt(1, weights), _gpt(0, weights)
    assert tied.weight_bytes == untied.weight_bytes - TABLE
    table, head = _table_users(tied)
    assert tied.tensors[head].storage == table and tied.tensors[table].storage is None
    assert untied.tensors[_table_users(untied)[1]].storage is None
    # Every op still reads its own operand: the per-op weights and the workload are those
    # of the untied model (what the simulator costs does not change with the tie).
    assert tied.weight_bytes_of(tied.op_by_name[head.rsplit(".", 1)[0]]) == TABLE
    assert tied.workload_key == untied.workload_key


def test_summary_and_pickle_keep_the_storage() -> None:
    g = _gpt(1, "inputs")
    again = pickle.loads(pickle.dumps(g))
    assert again.weight_bytes == g.weight_bytes == g.summary()["weight_bytes"]


def test_subgraph_without_the_owner_counts_the_parameter() -> None:
    g = _gpt(1, "inputs")
    table, head = _table_users(g)
    head_op = g.op_by_name[head.rsplit(".", 1)[0]]
    sub = g.subgraph([head_op.index])
    assert sub.tensors[head].storage is None and sub.weight_bytes == TABLE
    both = g.subgraph([g.op_by_name[table.rsplit(".", 1)[0]].index, head_op.index])
    assert both.weight_bytes == TABLE


def _shared_model(view: str) -> onnx.ModelProto:
    """x [2, 8] -> MatMul(x, W) and MatMul(x, view(W)): one 8x8 parameter read twice."""
    w = numpy_helper.from_array(np.zeros((8, 8), np.float32), "W")
    nodes: list[Any] = [helper.make_node("MatMul", ["x", "W"], ["a"])]
    if view == "same":
        nodes.append(helper.make_node("MatMul", ["x", "W"], ["b"]))
    else:
        nodes += [helper.make_node("Transpose", ["W"], ["Wt"], perm=[1, 0]),
                  helper.make_node("MatMul", ["x", "Wt"], ["b"])]
    nodes.append(helper.make_node("Add", ["a", "b"], ["y"]))
    graph = helper.make_graph(nodes, "shared", [helper.make_tensor_value_info(
        "x", onnx.TensorProto.FLOAT, [2, 8])], [helper.make_tensor_value_info(
            "y", onnx.TensorProto.FLOAT, [2, 8])], [w])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


@pytest.mark.parametrize("view", ["same", "transpose"])
def test_zero_weights_are_not_merged_by_value_but_shared_ones_are(view: str) -> None:
    # Two distinct zero weights of one shape stay two (BERT's Q/K/V in "zeros" mode) ...
    bert = Model(zoo.build("bert_base", weights="zeros", num_layers=1, hidden=64, heads=2,
                           intermediate=128, vocab=100, seq=16), "bert").graph
    weights = [t for t in bert.tensors.values() if t.kind == "weight"]
    assert all(t.storage is None for t in weights if t.shape == (64, 64))
    # ... while one zero parameter read twice, directly or transposed, counts once.
    g = Model(_shared_model(view), "shared").graph
    assert g.weight_bytes == 8 * 8 * 2
    assert sum(1 for t in g.tensors.values() if t.kind == "weight") == 2


def test_tied_weight_imported_as_bound_input_computes_the_same() -> None:
    # "random" mode: the tied table is an initializer, imported as an input and bound.
    ort = pytest.importorskip("onnxruntime")
    import tvm
    from tvm import relax

    proto = zoo.build("gpt", batch=2, seq=16, weights="random", tie_embeddings=1, **GPT)
    feeds = zoo.random_inputs(proto, seed=4)
    session = ort.InferenceSession(proto.SerializeToString(), providers=["CPUExecutionProvider"])
    expected = session.run(None, feeds)[0]
    model = Model(proto, name="gpt")
    vm = relax.VirtualMachine(tvm.compile(model.mod, target="llvm"), tvm.cpu())
    out = vm["main"](*(tvm.runtime.tensor(feeds[n]) for n in model.data_inputs))
    assert np.ptp(expected) > 0
    np.testing.assert_allclose(out.numpy(), expected, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("level", [0, 1, 2, 3])
def test_simulator_crosses_ddr_with_every_weight_at_least_once(level: int) -> None:
    g = _gpt(1, "inputs", batch=4)
    target = Target.default()
    r = simulate(g, graph_schedule_level(g, target, level), target)
    assert isinstance(r, SimResult), r
    # Tied, every parameter is read in full by a non-gather op (the table by the LM head),
    # so the weights loaded cover Graph.weight_bytes; untied they need not (a gather reads
    # rows, not its table). The simulator's own invariant: DDR >= compulsory bytes.
    assert r.weight_bytes_loaded >= g.weight_bytes
    assert r.ddr_bytes >= compulsory_ddr_bytes(g, g.batch, target)


def test_torch_gpt_fixture_keeps_its_tie() -> None:
    from tests.compiler.test_import import TORCH_FIXTURES

    g = load_onnx(TORCH_FIXTURES / "gpt_b1.onnx").graph
    table, head = _table_users(g, vocab=4096, hidden=256)
    assert g.tensors[head].storage == table
