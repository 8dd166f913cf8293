"""Recommendation models: DeepFM (as in the vendor's schedule guide) and Wide & Deep."""

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
]
