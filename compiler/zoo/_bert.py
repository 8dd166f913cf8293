"""BERT encoders (base and large) with a pooler, spelled as plain ONNX ops.

Batch stays on axis 0 of every tensor and every Reshape target uses -1 for the
batch, so a schedule may split any group along the batch without rewriting
shapes (see shared/notes/tvm-0.27-relax-facts.md, section 4b).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import numpy as np

from compiler.zoo._common import DataSpec, GraphBuilder, IntOption, ModelDef, model_error


def _linear(b: GraphBuilder, p: str, x: str, cin: int, cout: int, gain: float = 1.0) -> str:
    """MatMul([B,S,cin] x [cin,cout]) + Add(bias), weights named like HuggingFace's."""
    w = b.weight(f"{p}.weight", [cin, cout], std=math.sqrt(gain / cin))
    bias = b.weight(f"{p}.bias", [cout], std=0.02)
    return b.op("Add", f"{p}.add", [b.op("MatMul", f"{p}.matmul", [x, w]), bias])


def _layer_norm(b: GraphBuilder, p: str, x: str, hidden: int) -> str:
    gamma = b.weight(f"{p}.weight", [hidden], low=0.8, high=1.2)
    beta = b.weight(f"{p}.bias", [hidden], std=0.02)
    return b.op("LayerNormalization", p, [x, gamma, beta], axis=-1, epsilon=1e-12)


def _attention(b: GraphBuilder, p: str, x: str, hidden: int) -> str:
    def split_heads(name: str, perm: list[int]) -> str:
        y = _linear(b, f"{p}.{name}", x, hidden, hidden)
        y = b.op("Reshape", f"{p}.{name}.reshape", [y, "shape.heads"])
        return b.op("Transpose", f"{p}.{name}.transpose", [y], perm=perm)

    q = split_heads("query", [0, 2, 1, 3])  # [B, heads, S, hd]
    k = split_heads("key", [0, 2, 3, 1])  # [B, heads, hd, S]
    v = split_heads("value", [0, 2, 1, 3])
    scores = b.op("MatMul", f"{p}.scores", [q, k])  # [B, heads, S, S]
    scores = b.op("Div", f"{p}.scale", [scores, "attn.sqrt_head_dim"])
    probs = b.op("Softmax", f"{p}.softmax", [scores], axis=-1)
    ctx = b.op("MatMul", f"{p}.context", [probs, v])  # [B, heads, S, hd]
    ctx = b.op("Transpose", f"{p}.context.transpose", [ctx], perm=[0, 2, 1, 3])
    ctx = b.op("Reshape", f"{p}.context.reshape", [ctx, "shape.hidden"])
    out = _linear(b, f"{p}.output", ctx, hidden, hidden)
    out = b.op("Add", f"{p}.residual", [out, x])
    return _layer_norm(b, f"{p}.layernorm", out, hidden)


def _ffn(b: GraphBuilder, p: str, x: str, hidden: int, intermediate: int) -> str:
    h = _linear(b, f"{p}.intermediate", x, hidden, intermediate, gain=2.0)
    # erf-GELU: 0.5 * x * (1 + erf(x / sqrt(2))), the spelling BERT exporters emit.
    g = b.op("Div", f"{p}.gelu.div", [h, "gelu.sqrt2"])
    g = b.op("Erf", f"{p}.gelu.erf", [g])
    g = b.op("Add", f"{p}.gelu.add", [g, "gelu.one"])
    g = b.op("Mul", f"{p}.gelu.mul", [g, h])
    g = b.op("Mul", f"{p}.gelu.mul_half", [g, "gelu.half"])
    out = _linear(b, f"{p}.output", g, intermediate, hidden)
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
    head_dim = hidden // heads

    ids = b.data_input("input_ids", [batch, seq], np.int64, DataSpec("input_ids", "index", vocab))
    b.const("shape.heads", [-1, seq, heads, head_dim])
    b.const("shape.hidden", [-1, seq, hidden])
    b.const("attn.sqrt_head_dim", float(math.sqrt(head_dim)))
    b.const("gelu.sqrt2", float(math.sqrt(2.0)))
    b.const("gelu.one", 1.0)
    b.const("gelu.half", 0.5)
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
    pooled = _linear(b, "pooler.dense", cls, hidden, hidden)
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
