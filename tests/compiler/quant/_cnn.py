"""A small CNN trained on a synthetic, separable image set (no downloads).

Four classes, each a fixed colour (one value per channel) plus a weaker random
3x16x16 pattern, with Gaussian noise on every pixel. Two
convolutions with fixed random weights (ReLU, max-pool, global pooling) make
the features; the classifier (Gemm) is trained by softmax regression in numpy.
"""

from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

CLASSES = 4
SHAPE = (3, 16, 16)


def dataset(n: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """``n`` images (float32, NCHW) and their labels."""
    fixed = np.random.default_rng(1234)
    colours = fixed.normal(0.0, 1.0, (CLASSES, SHAPE[0], 1, 1))
    patterns = colours + 0.5 * fixed.normal(0.0, 1.0, (CLASSES, *SHAPE))
    rng = np.random.default_rng(seed)
    labels = rng.integers(0, CLASSES, n)
    x = patterns[labels] + rng.normal(0.0, 0.5, (n, *SHAPE))
    return x.astype(np.float32), labels


def _model(batch: int, head: tuple[np.ndarray, np.ndarray] | None) -> onnx.ModelProto:
    rng = np.random.default_rng(7)
    w1 = (rng.normal(0, 1, (8, 3, 3, 3)) / np.sqrt(27)).astype(np.float32)
    b1 = rng.normal(0, 0.1, 8).astype(np.float32)
    w2 = (rng.normal(0, 1, (16, 8, 3, 3)) / np.sqrt(72)).astype(np.float32)
    b2 = rng.normal(0, 0.1, 16).astype(np.float32)
    inits = [numpy_helper.from_array(a, n) for a, n in ((w1, "w1"), (b1, "b1"), (w2, "w2"), (b2, "b2"))]
    nodes = [
        helper.make_node("Conv", ["input", "w1", "b1"], ["c1"], name="conv1", pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c1"], ["r1"], name="relu1"),
        helper.make_node("MaxPool", ["r1"], ["p1"], name="pool1", kernel_shape=[2, 2], strides=[2, 2]),
        helper.make_node("Conv", ["p1", "w2", "b2"], ["c2"], name="conv2", pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c2"], ["r2"], name="relu2"),
        helper.make_node("GlobalAveragePool", ["r2"], ["g"], name="gap"),
        helper.make_node("Flatten", ["g"], ["features"], name="flatten"),
    ]
    out = "features"
    width = 16
    if head is not None:
        w, b = head
        inits += [numpy_helper.from_array(w, "fc.w"), numpy_helper.from_array(b, "fc.b")]
        nodes.append(helper.make_node("Gemm", ["features", "fc.w", "fc.b"], ["logits"], name="fc",
                                      transB=1))
        out, width = "logits", CLASSES
    graph = helper.make_graph(
        nodes, "small_cnn",
        [helper.make_tensor_value_info("input", TensorProto.FLOAT, [batch, *SHAPE])],
        [helper.make_tensor_value_info(out, TensorProto.FLOAT, [batch, width])], inits)
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    return m


def trained_cnn(batch: int = 16, samples: int = 512) -> onnx.ModelProto:
    """The CNN with its classifier trained on ``samples`` images (deterministic)."""
    import onnxruntime as ort

    x, y = dataset(samples, seed=1)
    feat = ort.InferenceSession(_model(samples, None).SerializeToString(),
                                providers=["CPUExecutionProvider"]).run(None, {"input": x})[0]
    mu, sd = feat.mean(0), feat.std(0) + 1e-6
    f = (feat - mu) / sd
    w = np.zeros((CLASSES, f.shape[1]))
    b = np.zeros(CLASSES)
    onehot = np.eye(CLASSES)[y]
    for _ in range(300):
        logits = f @ w.T + b
        p = np.exp(logits - logits.max(1, keepdims=True))
        p /= p.sum(1, keepdims=True)
        g = (p - onehot) / len(y)
        w -= 0.5 * g.T @ f
        b -= 0.5 * g.sum(0)
    # fold the feature normalisation into the classifier
    wf = (w / sd).astype(np.float32)
    bf = (b - (w / sd) @ mu).astype(np.float32)
    return _model(batch, (wf, bf))
