"""Vision Transformer (ViT-B/16 by default), laid out like torchvision's ``vit_b_16``.

16x16 stride-16 patch-embedding conv, a class token, learned position embeddings,
pre-norm encoder blocks (LayerNorm, self-attention, residual; LayerNorm, GELU MLP,
residual), a final LayerNorm and a linear classifier on the class token, with the
zoo's image classifiers' Softmax on top (output ``prob``).

Unlike an export of ``nn.MultiheadAttention``, the batch stays on axis 0 of every
tensor: graphtune splits groups along axis 0 only.
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

_EPS = 1e-6  # torchvision's ViT LayerNorm epsilon


def _class_token(b: GraphBuilder, patches: str, hidden: int) -> str:
    """The class token broadcast to [B, 1, hidden] and prepended to the patches.

    ``x[:, :1] * 0 + class_token`` gives the batch dimension from the data, not from
    a shape constant: an ``Expand`` to ``[B, 1, hidden]`` would bake the batch into
    the file (so :meth:`~compiler.model.Model.set_batch` could not change it) and
    would fold at import into a batch-sized constant that a split group cannot slice.
    """
    first = b.op("Slice", "class_token.slice", [patches, "slice.zero", "slice.one", "slice.one"])
    zero = b.op("Mul", "class_token.zero", [first, "class_token.scale"])
    token = b.weight("class_token", [1, 1, hidden], std=0.02)
    cls = b.op("Add", "class_token.expand", [zero, token])
    return b.op("Concat", "class_token.concat", [cls, patches], axis=1)


def _block(b: GraphBuilder, p: str, x: str, hidden: int, mlp: int) -> str:
    h = layer_norm(b, f"{p}.ln_1", x, hidden, _EPS)
    h = attention(b, f"{p}.self_attention", h, hidden, out_name="out_proj")
    x = b.op("Add", f"{p}.add_1", [x, h])
    h = layer_norm(b, f"{p}.ln_2", x, hidden, _EPS)
    h = linear(b, f"{p}.mlp.0", h, hidden, mlp, gain=2.0)
    h = gelu(b, f"{p}.mlp.1", h)
    h = linear(b, f"{p}.mlp.3", h, mlp, hidden)
    return b.op("Add", f"{p}.add_2", [x, h])


def _vit(b: GraphBuilder, batch: int, seq: int, opts: Mapping[str, Any]) -> None:
    size, patch = opts["image_size"], opts["patch_size"]
    hidden, heads, mlp = opts["hidden"], opts["heads"], opts["mlp_dim"]
    if size % patch:
        raise model_error(f"option 'image_size' ({size}) must be a multiple of "
                          f"'patch_size' ({patch})")
    if hidden % heads:
        raise model_error(f"option 'hidden' ({hidden}) must be a multiple of 'heads' ({heads})")
    grid = size // patch
    tokens = grid * grid + 1

    image = b.data_input("input", [batch, 3, size, size], np.float32, DataSpec("input", "normal"))
    attention_consts(b, tokens, heads, hidden)
    gelu_consts(b)
    b.const("shape.patches", [-1, hidden, grid * grid])
    b.const("slice.zero", [0])
    b.const("slice.one", [1])
    b.const("class_token.scale", 0.0)
    b.const("class_token.index", np.array(0, dtype=np.int64))

    fan_in = 3 * patch * patch
    w = b.weight("conv_proj.weight", [hidden, 3, patch, patch], std=math.sqrt(1.0 / fan_in))
    bias = b.weight("conv_proj.bias", [hidden], std=0.02)
    x = b.op("Conv", "conv_proj", [image, w, bias], kernel_shape=[patch, patch],
             strides=[patch, patch])  # [B, hidden, grid, grid]
    x = b.op("Reshape", "conv_proj.flatten", [x, "shape.patches"])  # [B, hidden, N]
    x = b.op("Transpose", "conv_proj.transpose", [x], perm=[0, 2, 1])  # [B, N, hidden]
    x = _class_token(b, x, hidden)  # [B, N + 1, hidden]
    positions = b.weight("encoder.pos_embedding", [1, tokens, hidden], std=0.02)
    x = b.op("Add", "encoder.add_pos_embedding", [x, positions])

    for layer in range(opts["num_layers"]):
        x = _block(b, f"encoder.layers.encoder_layer_{layer}", x, hidden, mlp)

    x = layer_norm(b, "encoder.ln", x, hidden, _EPS)
    cls = b.op("Gather", "encoder.class_token", [x, "class_token.index"], axis=1)  # [B, hidden]
    logits = linear(b, "heads.head", cls, hidden, opts["num_classes"])
    b.op("Softmax", "softmax", [logits], output="prob", axis=1)
    b.output("prob", [batch, opts["num_classes"]])


MODELS = [
    ModelDef(
        "vit",
        "Vision Transformer (ViT-B/16 by default): 16x16 patch-embed Conv, class token, "
        "learned positions, pre-norm blocks (self-attention, erf-GELU MLP), Softmax; "
        "input 'input' [B,3,H,W], output 'prob'",
        {
            "image_size": IntOption(224, 2),
            "patch_size": IntOption(16),
            "num_layers": IntOption(12),
            "hidden": IntOption(768),
            "heads": IntOption(12),
            "mlp_dim": IntOption(3072),
            "num_classes": IntOption(1000),
        },
        _vit,
    ),
]
