"""Transformer pieces shared by BERT, ViT and GPT, spelled as plain opset-17 ONNX ops.

Batch stays on axis 0 of every tensor and every Reshape target uses -1 for the
batch, so a schedule may split any group along the batch without rewriting
shapes, and :meth:`compiler.model.Model.set_batch` can re-import a model at
another batch (see shared/notes/tvm-0.27-relax-facts.md, section 4b).
"""

from __future__ import annotations

import math

from compiler.zoo._common import GraphBuilder

# Names of the constants the functions below read; a model declares them once with
# attention_consts() and gelu_consts().
HEADS_SHAPE = "shape.heads"
HIDDEN_SHAPE = "shape.hidden"
SQRT_HEAD_DIM = "attn.sqrt_head_dim"


def linear(
    b: GraphBuilder, p: str, x: str, cin: int, cout: int, gain: float = 1.0, bias: bool = True
) -> str:
    """MatMul([..., cin] x [cin, cout]) (+ Add(bias)), weights named like HuggingFace's."""
    w = b.weight(f"{p}.weight", [cin, cout], std=math.sqrt(gain / cin))
    y = b.op("MatMul", f"{p}.matmul", [x, w])
    if not bias:
        return y
    return b.op("Add", f"{p}.add", [y, b.weight(f"{p}.bias", [cout], std=0.02)])


def layer_norm(b: GraphBuilder, p: str, x: str, hidden: int, epsilon: float) -> str:
    """LayerNormalization over the last axis with random gamma near 1 and small beta."""
    gamma = b.weight(f"{p}.weight", [hidden], low=0.8, high=1.2)
    beta = b.weight(f"{p}.bias", [hidden], std=0.02)
    return b.op("LayerNormalization", p, [x, gamma, beta], axis=-1, epsilon=epsilon)


def attention_consts(b: GraphBuilder, seq: int, heads: int, hidden: int) -> None:
    """Declare the reshape targets and the score scale :func:`attention` reads."""
    head_dim = hidden // heads
    b.const(HEADS_SHAPE, [-1, seq, heads, head_dim])
    b.const(HIDDEN_SHAPE, [-1, seq, hidden])
    b.const(SQRT_HEAD_DIM, float(math.sqrt(head_dim)))


def gelu_consts(b: GraphBuilder) -> None:
    """Declare the constants :func:`gelu` reads."""
    b.const("gelu.sqrt2", float(math.sqrt(2.0)))
    b.const("gelu.one", 1.0)
    b.const("gelu.half", 0.5)


def gelu(b: GraphBuilder, p: str, h: str) -> str:
    """erf-GELU: 0.5 * x * (1 + erf(x / sqrt(2))), the spelling BERT exporters emit.

    Opset 17 has no Gelu op (it arrives in opset 20).
    """
    g = b.op("Div", f"{p}.div", [h, "gelu.sqrt2"])
    g = b.op("Erf", f"{p}.erf", [g])
    g = b.op("Add", f"{p}.add", [g, "gelu.one"])
    g = b.op("Mul", f"{p}.mul", [g, h])
    return b.op("Mul", f"{p}.mul_half", [g, "gelu.half"])


def attention(
    b: GraphBuilder,
    p: str,
    x: str,
    hidden: int,
    *,
    out_name: str = "output",
    mask: tuple[str, str] | None = None,
) -> str:
    """Multi-head self-attention of ``x`` [B, S, hidden], up to its output projection.

    Heads are split with Reshape to ``[-1, S, heads, head_dim]`` and Transposes that
    keep axis 0 in place, so the batch never leaves axis 0 (unlike
    ``nn.MultiheadAttention``'s export, which moves it to axis 1).

    Args:
        b: The builder (with :func:`attention_consts` declared).
        p: Name prefix.
        x: Input [B, S, hidden].
        hidden: Model width.
        out_name: Name of the output projection under ``p``.
        mask: ``(condition, fill)``: scores where the boolean ``condition`` [S, S]
            is true are replaced by the scalar ``fill`` before the softmax.

    Returns:
        The output projection [B, S, hidden] (no residual, no norm).
    """

    def split_heads(name: str, perm: list[int]) -> str:
        y = linear(b, f"{p}.{name}", x, hidden, hidden)
        y = b.op("Reshape", f"{p}.{name}.reshape", [y, HEADS_SHAPE])
        return b.op("Transpose", f"{p}.{name}.transpose", [y], perm=perm)

    q = split_heads("query", [0, 2, 1, 3])  # [B, heads, S, hd]
    k = split_heads("key", [0, 2, 3, 1])  # [B, heads, hd, S]
    v = split_heads("value", [0, 2, 1, 3])
    scores = b.op("MatMul", f"{p}.scores", [q, k])  # [B, heads, S, S]
    scores = b.op("Div", f"{p}.scale", [scores, SQRT_HEAD_DIM])
    if mask is not None:
        condition, fill = mask
        scores = b.op("Where", f"{p}.mask", [condition, fill, scores])
    probs = b.op("Softmax", f"{p}.softmax", [scores], axis=-1)
    ctx = b.op("MatMul", f"{p}.context", [probs, v])  # [B, heads, S, hd]
    ctx = b.op("Transpose", f"{p}.context.transpose", [ctx], perm=[0, 2, 1, 3])
    ctx = b.op("Reshape", f"{p}.context.reshape", [ctx, HIDDEN_SHAPE])
    return linear(b, f"{p}.{out_name}", ctx, hidden, hidden)

