"""compiler.footprint: lifetimes, fusion, in-place, rolling buffers, streaming, FP16 bytes."""

from __future__ import annotations

import pytest
from onnx import helper as h

from compiler.footprint import (
    batched_tensors,
    group_footprint,
    group_profile,
    peak_of,
    sample_bytes,
    streamable_inputs,
)
from compiler.graph import Graph
from tests.sim.conftest import onnx_graph, w

KIB = 1024
ROWS = 64  # rows per sample; x is [B, 64, 128] float32 in ONNX, FP16 on the NPU (16 KiB)


@pytest.fixture(scope="module")
def chain() -> Graph:
    """y = relu(x @ W + b): a matmul with a fused epilogue."""
    nodes = [h.make_node("MatMul", ["x", "W"], ["m"]), h.make_node("Add", ["m", "b"], ["a"]),
             h.make_node("Relu", ["a"], ["y"])]
    return onnx_graph(nodes, {"x": [4, ROWS, 128]}, {"y": [4, ROWS, 256]},
                      {"W": w(128, 256), "b": w(256)})


@pytest.fixture(scope="module")
def residual() -> Graph:
    """y = relu(x @ W) + x, then a transpose of y."""
    nodes = [h.make_node("MatMul", ["x", "W"], ["m"]), h.make_node("Relu", ["m"], ["r"]),
             h.make_node("Add", ["r", "x"], ["y"]),
             h.make_node("Transpose", ["y"], ["t"], perm=[0, 2, 1])]
    return onnx_graph(nodes, {"x": [4, ROWS, 128]}, {"t": [4, 128, ROWS]}, {"W": w(128, 128)})


def all_ops(g: Graph) -> tuple[int, ...]:
    return tuple(range(len(g.ops)))


def test_bytes_are_fp16_per_sample_whatever_the_onnx_dtype(chain: Graph) -> None:
    x = chain.tensors["x"]
    assert x.dtype == "float32"
    assert sample_bytes(chain, "x") == (ROWS * 128 * 2, 0)
    assert "x" in batched_tensors(chain)


def test_fused_epilogue_and_rolling_buffer(chain: Graph) -> None:
    fp = group_footprint(chain, all_ops(chain))
    x_b, y_b = ROWS * 128 * 2, ROWS * 256 * 2
    # the matmul output and the bias add never exist in full; x is released as y is written
    assert fp.peak_sample_bytes == max(x_b, y_b) == 32 * KIB
    assert fp.input_sample_bytes == x_b and fp.output_sample_bytes == y_b
    assert fp.weight_bytes == (128 * 256 + 256) * 2
    assert fp.max_op_weight_bytes == 128 * 256 * 2
    # an input another step still reads is held and cannot be overwritten
    assert fp.peak_bytes(1, 1, held=True) == x_b + y_b
    # samples add up, cores share them
    assert fp.peak_bytes(samples=4, cores=2) == 2 * y_b


def test_streaming_input_and_output(chain: Graph) -> None:
    ops = all_ops(chain)
    assert streamable_inputs(chain, ops) == frozenset({"x"})
    y_b = ROWS * 256 * 2
    assert peak_of(group_profile(chain, ops, frozenset({"x"}))) == y_b
    assert peak_of(group_profile(chain, ops, frozenset({"x"}), stream_output=True)) == 0
    assert peak_of(group_profile(chain, ops, frozenset(), stream_output=True)) == ROWS * 128 * 2


def test_residual_add_in_place_and_transpose_needs_both(residual: Graph) -> None:
    x_b = ROWS * 128 * 2
    add = next(op.index for op in residual.ops if op.op_type == "add")
    block = tuple(range(add + 1))
    # matmul, relu and the residual add are one chain writing over x
    assert group_footprint(residual, block).peak_sample_bytes == x_b
    # a transpose cannot stream: input and output at once
    assert group_footprint(residual, all_ops(residual)).peak_sample_bytes == 2 * x_b
    # x is read twice inside the block: it cannot stream in
    assert "x" not in streamable_inputs(residual, block)


def test_results_are_cached_per_op_set(chain: Graph) -> None:
    ops = all_ops(chain)
    assert group_footprint(chain, ops) is group_footprint(chain, list(reversed(ops)))
    assert group_profile(chain, ops, frozenset({"x"})) is group_profile(chain, ops,
                                                                        frozenset({"x"}))
