"""A GPT-style decoder stack (GPT-2 small by default), named like HuggingFace's GPT-2.

Token and learned position embeddings, pre-norm decoder blocks (LayerNorm, causal
self-attention, residual; LayerNorm, erf-GELU MLP, residual), a final LayerNorm and
an LM head over the whole sequence (output ``logits`` [B, seq, vocab]). By default the
LM head has its own weight; ``tie_embeddings=1`` ties it to the token embedding as
GPT-2 does (the head multiplies by ``Transpose(wte.weight)``, the way an exporter that
does not fold constants writes it). On the NPU the two uses are separate reads either
way (a row gather and a full matmul operand), but the table is stored once.

The causal mask is computed from a position vector (``positions[j] > positions[i]``),
so the file holds no seq x seq constant; the import folds it to one.
"""

from __future__ import annotations

import math
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

_EPS = 1e-5  # GPT-2's layer_norm_epsilon
_MASK = ("causal.future", "causal.fill")


def _causal_mask(b: GraphBuilder, seq: int) -> None:
    """``causal.future`` [seq, seq] bool: true where a key comes after the query."""
    b.const("causal.positions", np.arange(seq, dtype=np.int64))
    b.const("causal.axis0", [0])
    b.const("causal.axis1", [1])
    b.const("causal.fill", float("-inf"))
    keys = b.op("Unsqueeze", "causal.keys", ["causal.positions", "causal.axis0"])  # [1, S]
    queries = b.op("Unsqueeze", "causal.queries", ["causal.positions", "causal.axis1"])  # [S, 1]
    b.op("Greater", "causal.mask", [keys, queries], output=_MASK[0])


def _block(b: GraphBuilder, p: str, x: str, hidden: int, inner: int) -> str:
    h = layer_norm(b, f"{p}.ln_1", x, hidden, _EPS)
    h = attention(b, f"{p}.attn", h, hidden, out_name="c_proj", mask=_MASK)
    x = b.op("Add", f"{p}.add_1", [x, h])
    h = layer_norm(b, f"{p}.ln_2", x, hidden, _EPS)
    h = linear(b, f"{p}.mlp.c_fc", h, hidden, inner, gain=2.0)
    h = gelu(b, f"{p}.mlp.act", h)
    h = linear(b, f"{p}.mlp.c_proj", h, inner, hidden)
    return b.op("Add", f"{p}.add_2", [x, h])


def _gpt(b: GraphBuilder, batch: int, seq: int, opts: Mapping[str, Any]) -> None:
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
    _causal_mask(b, seq)

    wte = b.weight("wte.weight", [vocab, hidden], std=0.02)
    wpe = b.weight("wpe.weight", [1, seq, hidden], std=0.01, source_shape=[max_positions, hidden])
    x = b.op("Gather", "wte", [wte, ids], axis=0)  # [B, S, hidden]
    x = b.op("Add", "wpe", [x, wpe])

    for layer in range(opts["num_layers"]):
        x = _block(b, f"h.{layer}", x, hidden, opts["inner"])

    x = layer_norm(b, "ln_f", x, hidden, _EPS)
    if opts["tie_embeddings"] > 1:
        raise model_error(f"option 'tie_embeddings' must be 0 or 1, got {opts['tie_embeddings']}")
    if opts["tie_embeddings"]:
        w = b.op("Transpose", "lm_head.weight_t", [wte], perm=[1, 0])  # [hidden, vocab]
    else:
        w = b.weight("lm_head.weight", [hidden, vocab], std=math.sqrt(1.0 / hidden))
    b.op("MatMul", "lm_head", [x, w], output="logits")
    b.output("logits", [batch, seq, vocab])


MODELS = [
    ModelDef(
        "gpt",
        "GPT-style decoder (GPT-2 small by default): token + position embeddings, pre-norm "
        "blocks (causal self-attention, erf-GELU MLP), final LayerNorm, LM head "
        "(tie_embeddings=1: the token embedding's transpose, as GPT-2); "
        "input 'input_ids' [B,seq] int64, output 'logits' [B,seq,vocab]",
        {
            "num_layers": IntOption(12),
            "hidden": IntOption(768),
            "heads": IntOption(12),
            "inner": IntOption(3072),
            "vocab": IntOption(50257),
            "max_positions": IntOption(1024),
            "tie_embeddings": IntOption(0, minimum=0),
        },
        _gpt,
    ),
]
