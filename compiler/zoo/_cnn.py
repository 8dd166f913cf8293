"""Convolutional models: tiny_cnn, ResNet-18/34/50/101 (torchvision v1.5), MobileNetV2, EfficientNet-B0.

Names follow torchvision's module paths (``layer1.0.conv1``, ``features.3.conv.1.0``)
so that schedules written against a torchvision export read the same here.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from functools import partial
from typing import Any

import numpy as np

from compiler.zoo._common import DataSpec, GraphBuilder, IntOption, ModelDef

# The last BatchNorm of every residual branch gets gamma scaled by this over
# sqrt(number of blocks), so the residual stream's scale grows only by a bounded
# factor through deep nets (the same idea as zero-init-residual, but non-zero).
_RESIDUAL_GAMMA = 1.0


def _image_input(b: GraphBuilder, batch: int, size: int) -> str:
    return b.data_input("input", [batch, 3, size, size], np.float32, DataSpec("input", "normal"))


def _conv(
    b: GraphBuilder,
    name: str,
    x: str,
    cin: int,
    cout: int,
    k: int,
    stride: int = 1,
    group: int = 1,
    gain: float = 2.0,
) -> str:
    """Conv2d without bias, padding k // 2, He-normal weights."""
    fan_in = cin // group * k * k
    w = b.weight(f"{name}.weight", [cout, cin // group, k, k], std=math.sqrt(gain / fan_in))
    attrs: dict[str, Any] = {
        "kernel_shape": [k, k],
        "strides": [stride, stride],
        "pads": [k // 2] * 4,
    }
    if group != 1:
        attrs["group"] = group
    return b.op("Conv", name, [x, w], **attrs)


def _bn(b: GraphBuilder, name: str, x: str, c: int, gamma_scale: float = 1.0) -> str:
    """Inference BatchNormalization; random running var is positive, zeros-mode var is 1."""
    scale = b.weight(f"{name}.weight", [c], low=0.8 * gamma_scale, high=1.2 * gamma_scale)
    bias = b.weight(f"{name}.bias", [c], std=0.1)
    mean = b.weight(f"{name}.running_mean", [c], std=0.1)
    var = b.weight(f"{name}.running_var", [c], low=0.8, high=1.2, zero_value=1.0)
    return b.op("BatchNormalization", name, [x, scale, bias, mean, var], epsilon=1e-5)


def _head(b: GraphBuilder, x: str, c: int, num_classes: int, batch: int, fc: str = "fc") -> None:
    """GlobalAveragePool, Flatten, Gemm(num_classes), Softmax -> output ``prob``."""
    x = b.op("GlobalAveragePool", "avgpool", [x])
    x = b.op("Flatten", "flatten", [x], axis=1)
    w = b.weight(f"{fc}.weight", [num_classes, c], std=math.sqrt(1.0 / c))
    bias = b.weight(f"{fc}.bias", [num_classes], std=0.01)
    x = b.op("Gemm", fc, [x, w, bias], transB=1)
    b.op("Softmax", "softmax", [x], output="prob", axis=1)
    b.output("prob", [batch, num_classes])


# ------------------------------------------------------------------ tiny_cnn


def _tiny_cnn(b: GraphBuilder, batch: int, seq: int, opts: Mapping[str, Any]) -> None:
    x = _image_input(b, batch, opts["image_size"])
    a = b.op("Relu", "relu1", [_bn(b, "bn1", _conv(b, "conv1", x, 3, 16, 3), 16)])
    y = _bn(b, "bn2", _conv(b, "conv2", a, 16, 16, 3), 16, gamma_scale=0.5)
    y = b.op("Relu", "relu2", [b.op("Add", "add", [y, a])])
    y = b.op("MaxPool", "maxpool", [y], kernel_shape=[2, 2], strides=[2, 2])
    y = b.op("Relu", "relu3", [_bn(b, "bn3", _conv(b, "conv3", y, 16, 32, 3), 32)])
    _head(b, y, 32, opts["num_classes"], batch)


# -------------------------------------------------------------------- ResNet


def _basic_block(
    b: GraphBuilder, p: str, x: str, cin: int, width: int, stride: int, gamma: float
) -> tuple[str, int]:
    y = b.op("Relu", f"{p}.relu1", [_bn(b, f"{p}.bn1", _conv(b, f"{p}.conv1", x, cin, width, 3,
                                                             stride), width)])
    y = _bn(b, f"{p}.bn2", _conv(b, f"{p}.conv2", y, width, width, 3), width, gamma)
    return _residual(b, p, x, y, cin, width, stride), width


def _bottleneck(
    b: GraphBuilder, p: str, x: str, cin: int, width: int, stride: int, gamma: float
) -> tuple[str, int]:
    cout = width * 4
    y = b.op("Relu", f"{p}.relu1", [_bn(b, f"{p}.bn1", _conv(b, f"{p}.conv1", x, cin, width, 1),
                                        width)])
    # torchvision v1.5: the stride sits on the 3x3 conv, not on the first 1x1.
    y = b.op("Relu", f"{p}.relu2", [_bn(b, f"{p}.bn2", _conv(b, f"{p}.conv2", y, width, width, 3,
                                                             stride), width)])
    y = _bn(b, f"{p}.bn3", _conv(b, f"{p}.conv3", y, width, cout, 1), cout, gamma)
    return _residual(b, p, x, y, cin, cout, stride), cout


def _residual(b: GraphBuilder, p: str, x: str, y: str, cin: int, cout: int, stride: int) -> str:
    if stride != 1 or cin != cout:
        x = _conv(b, f"{p}.downsample.0", x, cin, cout, 1, stride)
        x = _bn(b, f"{p}.downsample.1", x, cout)
    return b.op("Relu", f"{p}.relu", [b.op("Add", f"{p}.add", [y, x])])


def _resnet(
    b: GraphBuilder,
    batch: int,
    seq: int,
    opts: Mapping[str, Any],
    *,
    depths: tuple[int, ...],
    bottleneck: bool,
) -> None:
    base = opts["base_channels"]
    x = _image_input(b, batch, opts["image_size"])
    x = b.op("Relu", "relu", [_bn(b, "bn1", _conv(b, "conv1", x, 3, base, 7, 2), base)])
    x = b.op("MaxPool", "maxpool", [x], kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1])
    block = _bottleneck if bottleneck else _basic_block
    gamma = _RESIDUAL_GAMMA / math.sqrt(sum(depths))
    c = base
    for stage, depth in enumerate(depths):
        width = base * 2**stage
        for i in range(depth):
            stride = 2 if stage > 0 and i == 0 else 1
            x, c = block(b, f"layer{stage + 1}.{i}", x, c, width, stride, gamma)
    _head(b, x, c, opts["num_classes"], batch)


# --------------------------------------------------------------- MobileNetV2

# (expand ratio t, output channels c, repeats n, first stride s), width 1.0.
_MOBILENET_V2 = ((1, 16, 1, 1), (6, 24, 2, 2), (6, 32, 3, 2), (6, 64, 4, 2), (6, 96, 3, 1),
                 (6, 160, 3, 2), (6, 320, 1, 1))


def _conv_bn_relu6(
    b: GraphBuilder, p: str, x: str, cin: int, cout: int, k: int, stride: int = 1, group: int = 1
) -> str:
    y = _bn(b, f"{p}.1", _conv(b, f"{p}.0", x, cin, cout, k, stride, group), cout)
    return b.op("Clip", f"{p}.2", [y, "relu6.min", "relu6.max"])


def _mobilenet_v2(b: GraphBuilder, batch: int, seq: int, opts: Mapping[str, Any]) -> None:
    x = _image_input(b, batch, opts["image_size"])
    b.const("relu6.min", 0.0)
    b.const("relu6.max", 6.0)
    x = _conv_bn_relu6(b, "features.0", x, 3, 32, 3, 2)
    cin, index = 32, 1
    gamma = _RESIDUAL_GAMMA / math.sqrt(10.0)
    for t, c, n, s in _MOBILENET_V2:
        for i in range(n):
            stride = s if i == 0 else 1
            p = f"features.{index}.conv"
            hidden, j, y = cin * t, 0, x
            if t != 1:
                y = _conv_bn_relu6(b, f"{p}.0", y, cin, hidden, 1)
                j = 1
            y = _conv_bn_relu6(b, f"{p}.{j}", y, hidden, hidden, 3, stride, group=hidden)
            y = _conv(b, f"{p}.{j + 1}", y, hidden, c, 1, gain=1.0)
            residual = stride == 1 and cin == c
            y = _bn(b, f"{p}.{j + 2}", y, c, gamma if residual else 1.0)
            if residual:
                y = b.op("Add", f"features.{index}.add", [x, y])
            x, cin, index = y, c, index + 1
    x = _conv_bn_relu6(b, f"features.{index}", x, cin, 1280, 1)
    _head(b, x, 1280, opts["num_classes"], batch, fc="classifier.1")


# ------------------------------------------------------------ EfficientNet-B0

# (expand ratio t, kernel k, first stride s, output channels c, repeats n), width 1.0.
_EFFICIENTNET_B0 = ((1, 3, 1, 16, 1), (6, 3, 2, 24, 2), (6, 5, 2, 40, 2), (6, 3, 2, 80, 3),
                    (6, 5, 1, 112, 3), (6, 5, 2, 192, 4), (6, 3, 1, 320, 1))


def _swish(b: GraphBuilder, p: str, x: str) -> str:
    """SiLU as exported by frameworks without a fused op: ``Mul(x, Sigmoid(x))``."""
    return b.op("Mul", f"{p}.mul", [x, b.op("Sigmoid", f"{p}.sigmoid", [x])])


def _conv_bn_swish(
    b: GraphBuilder, p: str, x: str, cin: int, cout: int, k: int, stride: int = 1, group: int = 1
) -> str:
    y = _bn(b, f"{p}.1", _conv(b, f"{p}.0", x, cin, cout, k, stride, group), cout)
    return _swish(b, f"{p}.2", y)


def _squeeze_excite(b: GraphBuilder, p: str, x: str, c: int, squeezed: int) -> str:
    """SE: GlobalAveragePool, 1x1 conv + Swish, 1x1 conv + Sigmoid, scale ``x``."""
    s = b.op("GlobalAveragePool", f"{p}.avgpool", [x])
    w1 = b.weight(f"{p}.fc1.weight", [squeezed, c, 1, 1], std=math.sqrt(1.0 / c))
    b1 = b.weight(f"{p}.fc1.bias", [squeezed], std=0.01)
    s = _swish(b, f"{p}.act", b.op("Conv", f"{p}.fc1", [s, w1, b1], kernel_shape=[1, 1]))
    w2 = b.weight(f"{p}.fc2.weight", [c, squeezed, 1, 1], std=math.sqrt(1.0 / squeezed))
    b2 = b.weight(f"{p}.fc2.bias", [c], std=0.01)
    s = b.op("Sigmoid", f"{p}.scale", [b.op("Conv", f"{p}.fc2", [s, w2, b2], kernel_shape=[1, 1])])
    return b.op("Mul", f"{p}.mul", [x, s])


def _efficientnet_b0(b: GraphBuilder, batch: int, seq: int, opts: Mapping[str, Any]) -> None:
    x = _image_input(b, batch, opts["image_size"])
    x = _conv_bn_swish(b, "features.0", x, 3, 32, 3, 2)
    cin, index = 32, 1
    gamma = _RESIDUAL_GAMMA / math.sqrt(16.0)
    for t, k, s, c, n in _EFFICIENTNET_B0:
        for i in range(n):
            stride = s if i == 0 else 1
            p = f"features.{index}.block"
            hidden, j, y = cin * t, 0, x
            if t != 1:
                y = _conv_bn_swish(b, f"{p}.{j}", y, cin, hidden, 1)
                j += 1
            y = _conv_bn_swish(b, f"{p}.{j}", y, hidden, hidden, k, stride, group=hidden)
            y = _squeeze_excite(b, f"{p}.{j + 1}", y, hidden, max(1, cin // 4))
            y = _conv(b, f"{p}.{j + 2}.0", y, hidden, c, 1, gain=1.0)
            residual = stride == 1 and cin == c
            y = _bn(b, f"{p}.{j + 2}.1", y, c, gamma if residual else 1.0)
            if residual:
                y = b.op("Add", f"features.{index}.add", [x, y])
            x, cin, index = y, c, index + 1
    x = _conv_bn_swish(b, f"features.{index}", x, cin, 1280, 1)
    _head(b, x, 1280, opts["num_classes"], batch, fc="classifier.1")


# -------------------------------------------------------------------- registry


def _image_options(size: int, classes: int, minimum: int = 32) -> dict[str, IntOption]:
    return {"image_size": IntOption(size, minimum), "num_classes": IntOption(classes)}


def _resnet_def(name: str, depths: tuple[int, ...], bottleneck: bool) -> ModelDef:
    kind = "Bottleneck" if bottleneck else "BasicBlock"
    layers = 2 + sum(depths) * (3 if bottleneck else 2)
    return ModelDef(
        name,
        f"ResNet-{layers} ({kind}, torchvision v1.5), Conv+BN+Relu, Gemm, Softmax; "
        "input 'input' [B,3,H,W], output 'prob'",
        {**_image_options(224, 1000), "base_channels": IntOption(64)},
        partial(_resnet, depths=depths, bottleneck=bottleneck),
    )


MODELS = [
    ModelDef(
        "tiny_cnn",
        "3 conv+BN layers with one residual Add, MaxPool, Gemm(10), Softmax; "
        "input 'input' [B,3,32,32], output 'prob'",
        _image_options(32, 10, minimum=2),
        _tiny_cnn,
    ),
    _resnet_def("resnet18", (2, 2, 2, 2), bottleneck=False),
    _resnet_def("resnet34", (3, 4, 6, 3), bottleneck=False),
    _resnet_def("resnet50", (3, 4, 6, 3), bottleneck=True),
    _resnet_def("resnet101", (3, 4, 23, 3), bottleneck=True),
    ModelDef(
        "mobilenet_v2",
        "MobileNetV2 (width 1.0): depthwise Conv, relu6 as Clip, residual Adds, Gemm, Softmax; "
        "input 'input' [B,3,H,W], output 'prob'",
        _image_options(224, 1000),
        _mobilenet_v2,
    ),
    ModelDef(
        "efficientnet_b0",
        "EfficientNet-B0 (width 1.0): MBConv blocks with squeeze-excite, Swish as "
        "Mul(x, Sigmoid(x)), depthwise Conv, Gemm, Softmax; input 'input' [B,3,H,W], output 'prob'",
        _image_options(224, 1000),
        _efficientnet_b0,
    ),
]
