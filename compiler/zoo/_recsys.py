"""Recommendation models: DeepFM (as in the vendor's schedule guide), Wide & Deep and DLRM."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from compiler.zoo._common import (
    DataSpec,
    GraphBuilder,
    IntListOption,
    IntOption,
    ModelDef,
    model_error,
)


def _mlp(b: GraphBuilder, p: str, x: str, cin: int, widths: Sequence[int]) -> tuple[str, int]:
    """Gemm + Relu per width, weights [out, in] (transB=1), He-normal."""
    for i, width in enumerate(widths):
        w = b.weight(f"{p}.{i}.weight", [width, cin], std=math.sqrt(2.0 / cin))
        bias = b.weight(f"{p}.{i}.bias", [width], std=0.01)
        x = b.op("Relu", f"{p}.{i}.relu", [b.op("Gemm", f"{p}.{i}.gemm", [x, w, bias], transB=1)])
        cin = width
    return x, cin


def _logit(b: GraphBuilder, p: str, x: str, cin: int) -> str:
    w = b.weight(f"{p}.weight", [1, cin], std=math.sqrt(1.0 / cin))
    bias = b.weight(f"{p}.bias", [1], std=0.01)
    return b.op("Gemm", f"{p}.gemm", [x, w, bias], transB=1)


def _deepfm(b: GraphBuilder, batch: int, seq: int, opts: Mapping[str, Any]) -> None:
    fields, features, k = opts["field_size"], opts["feature_size"], opts["embedding_size"]
    index = b.data_input("feat_index", [batch, fields], np.int64,
                         DataSpec("feat_index", "index", features))
    value = b.data_input("feat_value", [batch, fields], np.float32,
                         DataSpec("feat_value", "uniform"))
    b.const("axes.1", [1])
    b.const("axes.2", [2])
    b.const("half", 0.5)
    b.const("shape.deep", [-1, fields * k])
    value3 = b.op("Unsqueeze", "feat_value.unsqueeze", [value, "axes.2"])  # [B, F, 1]

    bias_table = b.weight("feature_bias", [features, 1], std=0.5)
    first = b.op("Gather", "first_order.gather", [bias_table, index], axis=0)  # [B, F, 1]
    first = b.op("Mul", "first_order.mul", [first, value3])
    first = b.op("ReduceSum", "first_order.sum", [first, "axes.2"], keepdims=0)  # [B, F]

    table = b.weight("feature_embeddings", [features, k], std=0.5)
    emb = b.op("Gather", "embeddings.gather", [table, index], axis=0)  # [B, F, K]
    emb = b.op("Mul", "embeddings.mul", [emb, value3])
    summed = b.op("ReduceSum", "second_order.sum", [emb, "axes.1"], keepdims=0)  # [B, K]
    sum_square = b.op("Mul", "second_order.sum_square", [summed, summed])
    squared = b.op("Mul", "second_order.square", [emb, emb])
    square_sum = b.op("ReduceSum", "second_order.square_sum", [squared, "axes.1"], keepdims=0)
    second = b.op("Sub", "second_order.sub", [sum_square, square_sum])
    second = b.op("Mul", "second_order.half", [second, "half"])  # [B, K]

    deep = b.op("Reshape", "deep.reshape", [emb, "shape.deep"])  # [B, F*K]
    deep, width = _mlp(b, "deep", deep, fields * k, opts["deep_layers"])

    x = b.op("Concat", "concat", [first, second, deep], axis=1)
    x = _logit(b, "out", x, fields + k + width)
    b.op("Sigmoid", "out.sigmoid", [x], output="prob")
    b.output("prob", [batch, 1])


def _wide_and_deep(b: GraphBuilder, batch: int, seq: int, opts: Mapping[str, Any]) -> None:
    dense_n, fields = opts["dense_features"], opts["sparse_fields"]
    buckets, k = opts["bucket_size"], opts["embedding_size"]
    dense = b.data_input("dense", [batch, dense_n], np.float32, DataSpec("dense", "normal"))
    sparse = b.data_input("sparse", [batch, fields], np.int64,
                          DataSpec("sparse", "index", buckets))
    # One table for all fields: field f's ids live in rows [f * buckets, (f + 1) * buckets).
    offsets = b.const("sparse.offsets", np.arange(fields, dtype=np.int64) * buckets)
    b.const("axes.1", [1])
    b.const("shape.deep", [-1, fields * k])
    ids = b.op("Add", "sparse.add_offsets", [sparse, offsets])  # [B, F]

    wide_table = b.weight("wide.weight", [fields * buckets, 1], std=0.1)
    wide = b.op("Gather", "wide.gather", [wide_table, ids], axis=0)  # [B, F, 1]
    wide = b.op("ReduceSum", "wide.sum", [wide, "axes.1"], keepdims=0)  # [B, 1]

    table = b.weight("deep.embeddings", [fields * buckets, k], std=1.0)
    emb = b.op("Gather", "deep.gather", [table, ids], axis=0)  # [B, F, K]
    emb = b.op("Reshape", "deep.reshape", [emb, "shape.deep"])  # [B, F*K]
    x = b.op("Concat", "deep.concat", [dense, emb], axis=1)
    x, width = _mlp(b, "deep.mlp", x, dense_n + fields * k, opts["deep_layers"])
    deep = _logit(b, "deep.out", x, width)

    x = b.op("Add", "add", [wide, deep])
    b.op("Sigmoid", "sigmoid", [x], output="prob")
    b.output("prob", [batch, 1])


def _dlrm(b: GraphBuilder, batch: int, seq: int, opts: Mapping[str, Any]) -> None:
    """DLRM (facebookresearch/dlrm, ``dlrm_s_pytorch.py``, the "dot" interaction).

    Bottom MLP on the dense features (ReLU after every layer; the last width is the
    embedding size); one table per sparse field, ``table_rows`` rows each, pooled as
    ``nn.EmbeddingBag(mode="sum")`` does (``Gather`` of the field's ``bag_size`` ids,
    ``ReduceSum`` over them); the pairwise dot products of the bottom output and the
    pooled embeddings, the strict lower triangle of ``T @ T^T`` (``F + 1`` vectors:
    ``(F + 1) F / 2`` values, as ``torch.tril_indices(offset=-1)``); the top MLP on the
    bottom output and those, then a sigmoid.
    """
    dense_n, fields = opts["dense_features"], opts["sparse_fields"]
    rows, k, bag = opts["table_rows"], opts["embedding_size"], opts["bag_size"]
    bottom, top = opts["bottom_mlp"], opts["top_mlp"]
    if not bottom or bottom[-1] != k:
        raise model_error(f"the bottom MLP of dlrm must end at embedding_size ({k}), "
                          f"got {list(bottom)}")
    dense = b.data_input("dense_x", [batch, dense_n], np.float32, DataSpec("dense_x", "uniform"))
    sparse = b.data_input("sparse_ids", [batch, fields, bag], np.int64,
                          DataSpec("sparse_ids", "index", rows))
    b.const("axes.1", [1])
    n = fields + 1
    b.const("shape.t", [-1, n, k])
    b.const("shape.z", [-1, n * n])
    pairs = [i * n + j for i in range(n) for j in range(i)]  # torch.tril_indices(n, n, -1)
    b.const("interaction.pairs", np.array(pairs, dtype=np.int64))

    x, _ = _mlp(b, "bot", dense, dense_n, bottom)  # [B, K]
    pooled = []
    for f in range(fields):
        field = b.const(f"sparse.{f}", np.array(f, dtype=np.int64))
        ids = b.op("Gather", f"emb.{f}.ids", [sparse, field], axis=1)  # [B, bag]
        table = b.weight(f"emb.{f}.weight", [rows, k], std=math.sqrt(1.0 / rows))
        rows_f = b.op("Gather", f"emb.{f}.gather", [table, ids], axis=0)  # [B, bag, K]
        pooled.append(b.op("ReduceSum", f"emb.{f}.bag_sum", [rows_f, "axes.1"], keepdims=0))
    t = b.op("Concat", "interaction.concat", [x, *pooled], axis=1)  # [B, (F+1) K]
    t = b.op("Reshape", "interaction.stack", [t, "shape.t"])  # [B, F+1, K]
    tt = b.op("Transpose", "interaction.transpose", [t], perm=[0, 2, 1])
    z = b.op("MatMul", "interaction.bmm", [t, tt])  # [B, F+1, F+1]
    z = b.op("Reshape", "interaction.flat", [z, "shape.z"])
    zflat = b.op("Gather", "interaction.tril", [z, "interaction.pairs"], axis=1)
    x = b.op("Concat", "top.concat", [x, zflat], axis=1)
    x, width = _mlp(b, "top", x, k + len(pairs), top)
    x = _logit(b, "top.out", x, width)
    b.op("Sigmoid", "top.sigmoid", [x], output="prob")
    b.output("prob", [batch, 1])


MODELS = [
    ModelDef(
        "deepfm",
        "DeepFM (field_size 39, feature_size 259, embedding_size 8, deep [32, 32]); inputs "
        "'feat_index' [B,F] int64 and 'feat_value' [B,F], output 'prob' [B,1]",
        {
            "field_size": IntOption(39),
            "feature_size": IntOption(259),
            "embedding_size": IntOption(8),
            "deep_layers": IntListOption((32, 32)),
        },
        _deepfm,
    ),
    ModelDef(
        "wide_and_deep",
        "Wide & Deep: 13 dense + 26 categorical fields (1000 ids each, one shared table; "
        "bucket_size=1000000 is Criteo scale: 26 M rows, 832 MB FP16, only DDR holds it, "
        "build it with --weights inputs), MLP 1024-512-256; inputs 'dense' [B,13], "
        "'sparse' [B,26] int64, output 'prob' [B,1]",
        {
            "dense_features": IntOption(13),
            "sparse_fields": IntOption(26),
            "bucket_size": IntOption(1000),
            "embedding_size": IntOption(16),
            "deep_layers": IntListOption((1024, 512, 256)),
        },
        _wide_and_deep,
    ),
    ModelDef(
        "dlrm",
        "DLRM, the Criteo Kaggle configuration (13 dense features, bottom MLP 512-256-64-16, "
        "26 embedding bags of dim 16 (one table of table_rows rows per field, bag_size ids "
        "summed per field), dot interaction, top MLP 512-256-1); inputs 'dense_x' [B,13], "
        "'sparse_ids' [B,26,bag] int64, output 'prob' [B,1]",
        {
            "dense_features": IntOption(13),
            "sparse_fields": IntOption(26),
            "table_rows": IntOption(1000),
            "embedding_size": IntOption(16),
            "bag_size": IntOption(1),
            "bottom_mlp": IntListOption((512, 256, 64, 16)),
            "top_mlp": IntListOption((512, 256)),
        },
        _dlrm,
    ),
]
