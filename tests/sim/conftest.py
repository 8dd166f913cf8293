"""Shared fixtures: zoo graphs imported once per session, small hand-built graphs, plans."""

from __future__ import annotations

import random
import warnings
from collections.abc import Sequence
from typing import Any

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from compiler import zoo
from compiler.graph import Graph
from compiler.model import Model
from compiler.schedule import GraphSchedule, GroupSpec, Placement, make_schedule
from compiler.target import Target

# The vendor guide's ResNet-50 bindings (resnet50_schedule).
C4 = [[0, 1, 2, 3], [4, 5, 6, 7]]
C2 = [[1, 3], [5, 7], [0, 2], [4, 6]]
C1 = [3, 7, 2, 6, 1, 5, 0, 4]
C0 = [7, 6, 5, 4, 3, 2, 1, 0]
GUIDE_ORDER = [
    "split_0", "group_0[0]", "group_0[1]", "concat_0", "group_1[0]", "group_0[2]", "group_0[3]",
    "concat_1", "group_1[1]", "concat_2", "group_2[0]", "group_0[4]", "group_0[5]", "concat_3",
    "group_1[2]", "group_0[6]", "group_0[7]", "concat_4", "group_1[3]", "concat_5", "group_2[1]",
    "concat_6", "group_3[0]",
]


def zoo_graph(name: str, batch: int, **kw: Any) -> Graph:
    """Import a zoo model (weights as inputs: tiny file) and return its Graph."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return Model(zoo.build(name, batch=batch, weights="inputs", **kw), name=name).graph


@pytest.fixture(scope="session")
def target() -> Target:
    return Target.default()


@pytest.fixture(scope="session")
def resnet50() -> Graph:
    return zoo_graph("resnet50", 16)


@pytest.fixture(scope="session")
def bert128() -> Graph:
    return zoo_graph("bert_base", 8, seq=128)


@pytest.fixture(scope="session")
def deepfm() -> Graph:
    return zoo_graph("deepfm", 320 * 8)


@pytest.fixture(scope="session")
def tiny() -> Graph:
    return zoo_graph("tiny_cnn", 8)


def residual_adds(graph: Graph) -> list[int]:
    """Op indices of ResNet's residual adds (two activation inputs), in order."""
    return [op.index for op in graph.ops if op.op_type == "add" and len(op.inputs) == 2]


def resnet_guide_plan(graph: Graph, ends: Sequence[int] = (4, 8, 14)) -> GraphSchedule:
    """The guide's resnet50_schedule: splits 8/4/2/1, its scopes, bindings and order.

    ``ends``: the residual adds (1-based) that close groups 0-2. (4, 8, 14) puts each
    stage's downsampling block in the group before, as the guide's sizing table does
    ("start to conv3_x downsampling needs 4 cores per image", ...).
    """
    adds = residual_adds(graph)
    bounds = [-1, *(adds[i - 1] for i in ends), len(graph.ops) - 1]
    chunks: list[list[tuple[str, Any]]] = [[("LLB", C4), ("L1", C4)] * 4, [("LLB", C2), ("L1", C2)] * 2,
              [("LLB", C1), ("L1", C1)], [("DDR", C0)]]
    groups = [
        GroupSpec(f"group_{i}", tuple(range(bounds[i] + 1, bounds[i + 1] + 1)), [8, 4, 2, 1][i],
              tuple(Placement.make(s, b) for s, b in chunks[i]))
        for i in range(4)
    ]
    concat_binds = [C2, C2, C1, C2, C2, C1, C0]
    tp = {f"concat_{i}": Placement.make("L1", b) for i, b in enumerate(concat_binds)}
    tp["split_0"] = Placement.make("DDR", C4)
    s = make_schedule(graph, groups, transfer_placements=tp, source="guide resnet50_schedule")
    assert [str(x) for x in s.order] == GUIDE_ORDER
    return s


# ---- small hand-built graphs -------------------------------------------------------------------
def onnx_graph(
    nodes: list[onnx.NodeProto],
    inputs: dict[str, list[int]],
    outputs: dict[str, list[int]],
    weights: dict[str, np.ndarray],
    name: str = "g",
) -> Graph:
    """Import a small float32 ONNX graph built with onnx.helper."""
    g = helper.make_graph(
        nodes, name,
        [helper.make_tensor_value_info(n, TensorProto.FLOAT, s) for n, s in inputs.items()],
        [helper.make_tensor_value_info(n, TensorProto.FLOAT, s) for n, s in outputs.items()],
        [numpy_helper.from_array(v.astype(np.float32), k) for k, v in weights.items()],
    )
    proto = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return Model(proto, name=name).graph


def w(*shape: int) -> np.ndarray:
    """Deterministic small weights."""
    return np.random.default_rng(0).standard_normal(shape).astype(np.float32) * 0.01


def ops_named(graph: Graph, *types: str) -> list[int]:
    """Indices of ops of the given types, in order."""
    return [op.index for op in graph.ops if op.op_type in types]


def group(name: str, ops: Sequence[int], scope: str, bind: object, split: int = 1) -> GroupSpec:
    """A group with the same placement for every chunk."""
    return GroupSpec(name, tuple(ops), split, (Placement.make(scope, bind),) * split)


def random_op_set(rng: random.Random, n: int) -> tuple[int, ...]:
    """An op set of a graph of ``n`` ops for the differential tests: half the time a run of
    consecutive ops, half any ops in ascending order."""
    if rng.random() < 0.5:
        lo = rng.randrange(n)
        return tuple(range(lo, rng.randint(lo + 1, n)))
    return tuple(sorted(rng.sample(range(n), rng.randint(1, n))))
