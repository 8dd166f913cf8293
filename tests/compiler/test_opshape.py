"""compiler.opshape: the per-op work description shared by the simulator and the cost model."""

from __future__ import annotations

import pickle

from compiler.graph import Graph
from compiler.opshape import OpKind, matrix_tiles, op_shapes
from compiler.target import Target
from tests.sim.conftest import zoo_graph


def test_tiny_cnn_shapes_match_the_graph() -> None:
    g: Graph = zoo_graph("tiny_cnn", 4)
    shapes = op_shapes(g)
    assert len(shapes) == len(g.ops)
    assert op_shapes(g) is shapes  # memoised per graph object
    mat = Target.default().matrix
    for op, s in zip(g.ops, shapes, strict=True):
        if s.kind.is_matrix:
            # rows x columns x groups x reduction = the op's MACs (per sample when batched)
            per = g.batch if s.batched else 1
            full = matrix_tiles(s, s.amount * per, mat)
            assert full.useful_cycles * mat.macs_per_cycle == op.macs
            assert full.padded_cycles >= full.useful_cycles
    kinds = {s.kind for s in shapes}
    assert OpKind.MATRIX in kinds and OpKind.VECTOR in kinds
    assert pickle.loads(pickle.dumps(shapes)) == shapes


def test_padding_to_the_granule() -> None:
    from compiler.opshape import OpShape

    mat = Target.default().matrix  # 64 x 32
    s = OpShape(OpKind.MATRIX, True, 49.0, groups=1, n=33, k=10)
    t = matrix_tiles(s, 49, mat)
    assert t.tiles == 1 * 2  # 49 rows -> one 64-row block; 33 columns -> two 32-column blocks
    assert t.padded_cycles == 2 * 64 * 32 * 10 / mat.macs_per_cycle
    assert t.useful_cycles == 49 * 33 * 10 / mat.macs_per_cycle
    b = OpShape(OpKind.BATCHED_MATMUL, True, 12.0, gemm_rows=128, n=128, k=64)
    assert matrix_tiles(b, 12, mat).tiles == 12 * 2 * 4  # each GEMM padded alone
