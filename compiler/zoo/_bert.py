"""BERT encoders (base and large) with a pooler, spelled as plain ONNX ops.

Post-norm blocks (residual, then LayerNorm); the attention, GELU and linear layers
are the shared ones of :mod:`compiler.zoo._transformer`, which keep the batch on axis 0.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from compiler.zoo._common import DataSpec, GraphBuilder, IntOption, ModelDef, model_error
from compiler.zoo._transformer import (
    attention,
    attention_consts,
    gelu,
    gelu_consts,
    layer_norm,
    linear,
)


def _layer_norm(b: GraphBuilder, p: str, x: str, hidden: int) -> str:
    return layer_norm(b, p, x, hidden, epsilon=1e-12)


def _attention(b: GraphBuilder, p: str, x: str, hidden: int) -> str:
    out = attention(b, p, x, hidden)
    out = b.op("Add", f"{p}.residual", [out, x])  # post-norm: residual, then LayerNorm
    return _layer_norm(b, f"{p}.layernorm", out, hidden)


def _ffn(b: GraphBuilder, p: str, x: str, hidden: int, intermediate: int) -> str:
    h = linear(b, f"{p}.intermediate", x, hidden, intermediate, gain=2.0)
    g = gelu(b, f"{p}.gelu", h)
    out = linear(b, f"{p}.output", g, intermediate, hidden)
    out = b.op("Add", f"{p}.residual", [out, x])
    return _layer_norm(b, f"{p}.layernorm", out, hidden)


def _bert(b: GraphBuilder, batch: int, seq: int, opts: Mapping[str, Any]) -> None:
    hidden, heads, vocab = opts["hidden"], opts["heads"], opts["vocab"]
    max_positions = opts["max_positions"]
    if hidden % heads:
        raise model_error(f"option 'hidden' ({hidden}) must be a multiple of 'heads' ({heads})")
    if seq > max_positions:
        raise model_error(f"seq {seq} exceeds max_positions {max_positions}; "
                          f"use a seq in 1..{max_positions}")

    ids = b.data_input("input_ids", [batch, seq], np.int64, DataSpec("input_ids", "index", vocab))
    attention_consts(b, seq, heads, hidden)
    gelu_consts(b)
    b.const("pooler.cls_index", np.array(0, dtype=np.int64))

    words = b.weight("embeddings.word_embeddings.weight", [vocab, hidden], std=1.0)
    positions = b.weight("embeddings.position_embeddings.weight", [1, seq, hidden], std=1.0,
                         source_shape=[max_positions, hidden])
    token_type = b.weight("embeddings.token_type_embeddings.weight", [1, 1, hidden], std=1.0)
    x = b.op("Gather", "embeddings.word_gather", [words, ids], axis=0)  # [B, S, H]
    x = b.op("Add", "embeddings.add_position", [x, positions])
    x = b.op("Add", "embeddings.add_token_type", [x, token_type])
    x = _layer_norm(b, "embeddings.layernorm", x, hidden)

    for layer in range(opts["num_layers"]):
        x = _attention(b, f"encoder.{layer}.attn", x, hidden)
        x = _ffn(b, f"encoder.{layer}.ffn", x, hidden, opts["intermediate"])

    cls = b.op("Gather", "pooler.gather_cls", [x, "pooler.cls_index"], axis=1)  # [B, H]
    pooled = linear(b, "pooler.dense", cls, hidden, hidden)
    b.op("Tanh", "pooler.tanh", [pooled], output="pooled")
    b.output("pooled", [batch, hidden])


def _bert_def(name: str, title: str, layers: int, hidden: int, heads: int, inter: int) -> ModelDef:
    return ModelDef(
        name,
        f"{title} encoder ({layers} layers, hidden {hidden}, {heads} heads) with pooler; "
        "input 'input_ids' [B,seq] int64, output 'pooled' [B,hidden]",
        {
            "num_layers": IntOption(layers),
            "hidden": IntOption(hidden),
            "heads": IntOption(heads),
            "intermediate": IntOption(inter),
            "vocab": IntOption(30522),
            "max_positions": IntOption(512),
        },
        _bert,
    )


MODELS = [
    _bert_def("bert_base", "BERT-base", 12, 768, 12, 3072),
    _bert_def("bert_large", "BERT-large", 24, 1024, 16, 4096),
]
