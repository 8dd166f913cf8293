"""Export small PyTorch models to ONNX test fixtures (run by hand; CI never needs torch).

The models are written with ``torch.nn`` the way their well-known originals are
(torchvision does not install beside the CPU torch build used here):

* ``resnet18``     -- torchvision's ResNet-18: 7x7 stem, BasicBlocks with BatchNorm and
  1x1 downsample convs, 224x224, 1000 classes.
* ``mobilenet_v2`` -- torchvision's MobileNetV2 (width 1.0): inverted residuals with
  depthwise 3x3 convs and ReLU6, 224x224, 1000 classes.
* ``vit``          -- torchvision's VisionTransformer layout, shrunk: 16x16 patch-embed
  conv, class token, learned positions, 4 pre-norm encoder blocks with
  ``nn.MultiheadAttention`` (dim 192, 3 heads) and a GELU MLP, 224x224, 1000 classes.
* ``gpt``          -- nanoGPT's decoder: token + position embeddings, 2 blocks of causal
  self-attention (lower-triangular mask, ``masked_fill``) and GELU MLP, final LayerNorm,
  LM head tied to the token embedding; vocab 4096, dim 256, 4 heads, seq 128. The
  exporter folds the head's ``Transpose(wte)`` into a second initializer;
  :func:`retie_transposes` writes it back as a ``Transpose`` of the table, so the file
  says the two are one parameter.
* ``dlrm``         -- Facebook DLRM: bottom MLP on 13 dense features, 8 embedding tables
  with 4 ids per sample summed (multi-hot), pairwise dot interaction (``bmm`` and the
  strictly-lower-triangle gather) and a top MLP with sigmoid.
* ``dlrm_bag``     -- the same with ``nn.EmbeddingBag`` as in DLRM's code; exported as ONNX
  ``Loop``s, which graphtune reports as unsupported (kept to test that message).

All weights are random (seed 0), BatchNorm statistics non-trivial. Exported at opset 17
with fixed shapes by the TorchScript exporter (``dynamo=False``): torch 2.13's
``torch.export``-based exporter cannot target opset 17 (its version converter fails on
``ReduceMean``'s axes, and the C-API fallback then writes an invalid ReduceMean). Both
exporters fold BatchNorm into the convolutions in eval mode, as users' exports do.
Batch 16 for every model; see ``BATCHES`` for the batch-1 files.

Every float initializer of more than 1024 elements is then turned into a graph input
without a value, and its name listed in ``metadata_props["graphtune.weight_inputs"]``
-- the zoo's ``weights="inputs"`` convention, which :class:`compiler.model.Model` reads
-- so each file holds only the graph (well under 1 MB). Smaller constants (biases,
LayerNorm scales, masks, index lists) stay initializers. Before that, onnxruntime runs
the complete export and must reproduce torch's output (the files are faithful).

Usage (in a separate venv, never graphtune's)::

    python3.11 -m venv /work/torchenv
    /work/torchenv/bin/pip install torch==2.13.0 onnx==1.23.2 onnxscript onnxruntime numpy
    /work/torchenv/bin/python tests/data/torch/make_fixtures.py [--out DIR] [--only NAME ...]

``tests/compiler/test_torch_fixtures.py`` reads the committed files with graphtune's
own venv, which has no torch.
"""

from __future__ import annotations

import argparse
import io
import math
import sys
import warnings
from collections.abc import Callable
from pathlib import Path

import onnx
import torch
from onnx import TensorProto, helper
from torch import nn
from torch.nn import functional as F

OPSET = 17
WEIGHT_INPUTS_KEY = "graphtune.weight_inputs"  # compiler.model.WEIGHT_INPUTS_KEY
INPUT_THRESHOLD = 1024  # compiler.zoo._common.INPUT_THRESHOLD
# Batch 16 for all. The CNNs reshape with Flatten, so graphtune's Model.set_batch(1)
# re-derives them at batch 1; the others pin the batch in Reshape shapes and get a
# batch-1 file of their own. dlrm_bag is kept only to show it does not import.
BATCHES = {"resnet18": (16,), "mobilenet_v2": (16,), "vit": (1, 16), "gpt": (1, 16),
           "dlrm": (1, 16), "dlrm_bag": (16,)}


# ---- ResNet-18 (torchvision.models.resnet) ----------------------------------------------
class BasicBlock(nn.Module):
    expansion = 1

    def __init__(self, inplanes: int, planes: int, stride: int = 1,
                 downsample: nn.Module | None = None) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(inplanes, planes, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(planes)
        self.relu = nn.ReLU(inplace=True)
        self.conv2 = nn.Conv2d(planes, planes, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(planes)
        self.downsample = downsample

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        identity = x
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        if self.downsample is not None:
            identity = self.downsample(x)
        return self.relu(out + identity)


class ResNet(nn.Module):
    def __init__(self, layers: tuple[int, ...] = (2, 2, 2, 2), num_classes: int = 1000) -> None:
        super().__init__()
        self.inplanes = 64
        self.conv1 = nn.Conv2d(3, 64, 7, 2, 3, bias=False)
        self.bn1 = nn.BatchNorm2d(64)
        self.relu = nn.ReLU(inplace=True)
        self.maxpool = nn.MaxPool2d(3, 2, 1)
        self.layer1 = self._make_layer(64, layers[0])
        self.layer2 = self._make_layer(128, layers[1], stride=2)
        self.layer3 = self._make_layer(256, layers[2], stride=2)
        self.layer4 = self._make_layer(512, layers[3], stride=2)
        self.avgpool = nn.AdaptiveAvgPool2d((1, 1))
        self.fc = nn.Linear(512, num_classes)

    def _make_layer(self, planes: int, blocks: int, stride: int = 1) -> nn.Sequential:
        downsample = None
        if stride != 1 or self.inplanes != planes:
            downsample = nn.Sequential(
                nn.Conv2d(self.inplanes, planes, 1, stride, bias=False), nn.BatchNorm2d(planes)
            )
        layers = [BasicBlock(self.inplanes, planes, stride, downsample)]
        self.inplanes = planes
        layers += [BasicBlock(planes, planes) for _ in range(1, blocks)]
        return nn.Sequential(*layers)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.maxpool(self.relu(self.bn1(self.conv1(x))))
        x = self.layer4(self.layer3(self.layer2(self.layer1(x))))
        return self.fc(torch.flatten(self.avgpool(x), 1))


# ---- MobileNetV2 (torchvision.models.mobilenetv2) -----------------------------------------
def _make_divisible(v: float, divisor: int = 8) -> int:
    new_v = max(divisor, int(v + divisor / 2) // divisor * divisor)
    return new_v + divisor if new_v < 0.9 * v else new_v


class ConvBNReLU(nn.Sequential):
    def __init__(self, cin: int, cout: int, kernel: int = 3, stride: int = 1, groups: int = 1):
        super().__init__(
            nn.Conv2d(cin, cout, kernel, stride, (kernel - 1) // 2, groups=groups, bias=False),
            nn.BatchNorm2d(cout),
            nn.ReLU6(inplace=True),
        )


class InvertedResidual(nn.Module):
    def __init__(self, inp: int, oup: int, stride: int, expand_ratio: int) -> None:
        super().__init__()
        hidden = round(inp * expand_ratio)
        self.use_res_connect = stride == 1 and inp == oup
        layers: list[nn.Module] = []
        if expand_ratio != 1:
            layers.append(ConvBNReLU(inp, hidden, kernel=1))
        layers += [
            ConvBNReLU(hidden, hidden, stride=stride, groups=hidden),  # depthwise
            nn.Conv2d(hidden, oup, 1, 1, 0, bias=False),  # pointwise-linear
            nn.BatchNorm2d(oup),
        ]
        self.conv = nn.Sequential(*layers)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.conv(x) if self.use_res_connect else self.conv(x)


class MobileNetV2(nn.Module):
    SETTING = ((1, 16, 1, 1), (6, 24, 2, 2), (6, 32, 3, 2), (6, 64, 4, 2),
               (6, 96, 3, 1), (6, 160, 3, 2), (6, 320, 1, 1))

    def __init__(self, num_classes: int = 1000, width_mult: float = 1.0) -> None:
        super().__init__()
        cin = _make_divisible(32 * width_mult)
        self.last_channel = _make_divisible(1280 * max(1.0, width_mult))
        features: list[nn.Module] = [ConvBNReLU(3, cin, stride=2)]
        for t, c, n, s in self.SETTING:
            cout = _make_divisible(c * width_mult)
            for i in range(n):
                features.append(InvertedResidual(cin, cout, s if i == 0 else 1, t))
                cin = cout
        features.append(ConvBNReLU(cin, self.last_channel, kernel=1))
        self.features = nn.Sequential(*features)
        self.classifier = nn.Sequential(nn.Dropout(0.2), nn.Linear(self.last_channel, num_classes))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = F.adaptive_avg_pool2d(self.features(x), (1, 1))
        return self.classifier(torch.flatten(x, 1))


# ---- ViT (torchvision.models.vision_transformer, shrunk) ---------------------------------
class MLPBlock(nn.Sequential):
    def __init__(self, dim: int, mlp_dim: int) -> None:
        super().__init__(nn.Linear(dim, mlp_dim), nn.GELU(), nn.Dropout(0.0),
                         nn.Linear(mlp_dim, dim), nn.Dropout(0.0))


class EncoderBlock(nn.Module):
    def __init__(self, heads: int, dim: int, mlp_dim: int) -> None:
        super().__init__()
        self.ln_1 = nn.LayerNorm(dim, eps=1e-6)
        self.self_attention = nn.MultiheadAttention(dim, heads, batch_first=True)
        self.ln_2 = nn.LayerNorm(dim, eps=1e-6)
        self.mlp = MLPBlock(dim, mlp_dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.ln_1(x)
        y, _ = self.self_attention(y, y, y, need_weights=False)
        x = x + y
        return x + self.mlp(self.ln_2(x))


class VisionTransformer(nn.Module):
    def __init__(self, image_size: int = 224, patch_size: int = 16, num_layers: int = 4,
                 heads: int = 3, dim: int = 192, mlp_dim: int = 768, num_classes: int = 1000):
        super().__init__()
        self.patch_size = patch_size
        self.dim = dim
        self.conv_proj = nn.Conv2d(3, dim, patch_size, patch_size)
        seq = (image_size // patch_size) ** 2 + 1
        self.class_token = nn.Parameter(torch.zeros(1, 1, dim))
        self.pos_embedding = nn.Parameter(torch.empty(1, seq, dim).normal_(std=0.02))
        self.layers = nn.Sequential(*[EncoderBlock(heads, dim, mlp_dim) for _ in range(num_layers)])
        self.ln = nn.LayerNorm(dim, eps=1e-6)
        self.head = nn.Linear(dim, num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        n = x.shape[0]
        x = self.conv_proj(x).reshape(n, self.dim, -1).permute(0, 2, 1)
        x = torch.cat([self.class_token.expand(n, -1, -1), x], dim=1) + self.pos_embedding
        x = self.ln(self.layers(x))
        return self.head(x[:, 0])


# ---- GPT (nanoGPT model.py) --------------------------------------------------------------
class CausalSelfAttention(nn.Module):
    def __init__(self, dim: int, heads: int, block_size: int) -> None:
        super().__init__()
        self.c_attn = nn.Linear(dim, 3 * dim)
        self.c_proj = nn.Linear(dim, dim)
        self.n_head, self.n_embd = heads, dim
        mask = torch.tril(torch.ones(block_size, block_size)).view(1, 1, block_size, block_size)
        self.register_buffer("bias", mask, persistent=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, t, c = x.size()
        q, k, v = self.c_attn(x).split(self.n_embd, dim=2)
        k = k.view(b, t, self.n_head, c // self.n_head).transpose(1, 2)
        q = q.view(b, t, self.n_head, c // self.n_head).transpose(1, 2)
        v = v.view(b, t, self.n_head, c // self.n_head).transpose(1, 2)
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
        att = att.masked_fill(self.bias[:, :, :t, :t] == 0, float("-inf"))
        y = F.softmax(att, dim=-1) @ v
        return self.c_proj(y.transpose(1, 2).contiguous().view(b, t, c))


class GPTBlock(nn.Module):
    def __init__(self, dim: int, heads: int, block_size: int) -> None:
        super().__init__()
        self.ln_1 = nn.LayerNorm(dim)
        self.attn = CausalSelfAttention(dim, heads, block_size)
        self.ln_2 = nn.LayerNorm(dim)
        self.mlp = nn.Sequential(nn.Linear(dim, 4 * dim), nn.GELU(), nn.Linear(4 * dim, dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp(self.ln_2(x))


class GPT(nn.Module):
    def __init__(self, vocab: int = 4096, block_size: int = 128, num_layers: int = 2,
                 heads: int = 4, dim: int = 256) -> None:
        super().__init__()
        self.wte = nn.Embedding(vocab, dim)
        self.wpe = nn.Embedding(block_size, dim)
        self.h = nn.ModuleList([GPTBlock(dim, heads, block_size) for _ in range(num_layers)])
        self.ln_f = nn.LayerNorm(dim)
        self.lm_head = nn.Linear(dim, vocab, bias=False)
        self.lm_head.weight = self.wte.weight  # weight tying

    def forward(self, idx: torch.Tensor) -> torch.Tensor:
        pos = torch.arange(0, idx.size(1), dtype=torch.long, device=idx.device)
        x = self.wte(idx) + self.wpe(pos)
        for block in self.h:
            x = block(x)
        return self.lm_head(self.ln_f(x))


# ---- DLRM (facebookresearch/dlrm dlrm_s_pytorch.py, "dot" interaction) -------------------
def _mlp(sizes: list[int], sigmoid_last: bool = False) -> nn.Sequential:
    layers: list[nn.Module] = []
    for i in range(len(sizes) - 1):
        layers.append(nn.Linear(sizes[i], sizes[i + 1]))
        last = i == len(sizes) - 2
        layers.append(nn.Sigmoid() if last and sigmoid_last else nn.ReLU())
    return nn.Sequential(*layers)


class DLRM(nn.Module):
    """DLRM with multi-hot features: each table sums the rows of ``bag`` ids per sample.

    ``bags=True`` pools with ``nn.EmbeddingBag(mode="sum")`` as DLRM does; the
    TorchScript exporter turns that into an ONNX ``Loop`` per table, which graphtune
    (TVM's ONNX frontend) does not import. ``bags=False`` computes the same sum as
    ``nn.Embedding`` followed by ``sum`` over the bag axis (``Gather`` + ``ReduceSum``).
    """

    def __init__(self, dense: int = 13, dim: int = 64,
                 rows: tuple[int, ...] = (1000, 2000, 500, 4000, 100, 3000, 800, 1500),
                 bottom: tuple[int, ...] = (512, 256), top: tuple[int, ...] = (512, 256),
                 bags: bool = False) -> None:
        super().__init__()
        self.bags = bags
        self.bot_l = _mlp([dense, *bottom, dim])
        table = (lambda n: nn.EmbeddingBag(n, dim, mode="sum")) if bags else \
            (lambda n: nn.Embedding(n, dim))
        self.emb_l = nn.ModuleList([table(n) for n in rows])
        n_feat = len(rows) + 1
        li, lj = torch.tril_indices(n_feat, n_feat, offset=-1)
        self.register_buffer("li", li, persistent=False)
        self.register_buffer("lj", lj, persistent=False)
        self.top_l = _mlp([dim + n_feat * (n_feat - 1) // 2, *top, 1], sigmoid_last=True)

    def forward(self, dense_x: torch.Tensor, sparse_ids: torch.Tensor) -> torch.Tensor:
        x = self.bot_l(dense_x)
        if self.bags:
            ly = [emb(sparse_ids[:, k]) for k, emb in enumerate(self.emb_l)]
        else:
            ly = [emb(sparse_ids[:, k]).sum(1) for k, emb in enumerate(self.emb_l)]
        # interact_features, arch_interaction_op == "dot"
        b, d = x.shape
        t = torch.cat([x, *ly], dim=1).view(b, -1, d)
        z = torch.bmm(t, torch.transpose(t, 1, 2))
        zflat = z[:, self.li, self.lj]
        return self.top_l(torch.cat([x, zflat], dim=1))


# ---- export ------------------------------------------------------------------------------
Factory = Callable[[int], tuple[nn.Module, tuple[torch.Tensor, ...], list[str]]]


def _gpt(batch: int) -> tuple[nn.Module, tuple[torch.Tensor, ...], list[str]]:
    model = GPT()
    return model, (torch.randint(0, 4096, (batch, 128)),), ["idx"]


def _dlrm(bags: bool) -> Factory:
    def make(batch: int) -> tuple[nn.Module, tuple[torch.Tensor, ...], list[str]]:
        model = DLRM(bags=bags)
        ids = torch.stack([torch.randint(0, int(e.num_embeddings), (batch, 4))
                           for e in model.emb_l], 1)
        return model, (torch.rand(batch, 13), ids), ["dense_x", "sparse_ids"]
    return make


def _trained_norms(module: nn.Module) -> nn.Module:
    """Give BatchNorms non-trivial statistics, as a trained model has."""
    for m in module.modules():
        if isinstance(m, nn.BatchNorm2d):
            nn.init.uniform_(m.weight, 0.5, 1.5)
            nn.init.normal_(m.bias, std=0.1)
            m.running_mean.normal_(std=0.1)  # type: ignore[operator]
            m.running_var.uniform_(0.5, 1.5)  # type: ignore[operator]
    return module


def factories() -> dict[str, Factory]:
    """Model name -> batch -> (module in eval mode, example inputs, input names)."""
    def image(ctor: Callable[[], nn.Module]) -> Factory:
        return lambda batch: (_trained_norms(ctor()), (torch.randn(batch, 3, 224, 224),),
                              ["input"])

    return {
        "resnet18": image(ResNet),
        "mobilenet_v2": image(MobileNetV2),
        "vit": image(VisionTransformer),
        "gpt": _gpt,
        "dlrm": _dlrm(bags=False),
        "dlrm_bag": _dlrm(bags=True),
    }


def weights_to_inputs(model: onnx.ModelProto) -> list[str]:
    """Turn every float initializer of more than 1024 elements into a value-less input.

    The zoo's ``weights="inputs"`` rule. With BatchNorm folded into the convolutions by
    the exporter, the initializers are the (folded) weights, biases and tables; the
    constants that are not weights (masks, index lists, shapes) are bool/int64 or small.

    Args:
        model: The exported model (changed in place).

    Returns:
        The names of the new weight inputs, in initializer order.
    """
    graph = model.graph
    keep, moved, new_inputs = [], [], []
    for init in graph.initializer:
        if init.data_type == TensorProto.FLOAT and math.prod(init.dims) > INPUT_THRESHOLD:
            moved.append(init.name)
            new_inputs.append(helper.make_tensor_value_info(init.name, TensorProto.FLOAT,
                                                            list(init.dims)))
        else:
            keep.append(init)
    del graph.initializer[:]
    graph.initializer.extend(keep)
    graph.input.extend(new_inputs)
    return moved


def retie_transposes(model: onnx.ModelProto) -> list[str]:
    """Write each initializer that is exactly another's transpose as ``Transpose`` of it.

    Both exporters fold ``Transpose(W)`` of a tied weight into a second initializer
    (nanoGPT's LM head shares the token embedding), so the file would hold the table
    twice and nothing would say they are one parameter. Here the values are the
    model's real random weights, so equality is the tie itself; the rewritten file is
    what an exporter that does not fold constants writes.

    Returns:
        The names of the initializers replaced by a ``Transpose`` node.
    """
    import numpy as np
    from onnx import numpy_helper

    graph = model.graph
    arrays = {i.name: numpy_helper.to_array(i) for i in graph.initializer
              if i.data_type == TensorProto.FLOAT and len(i.dims) == 2
              and math.prod(i.dims) > INPUT_THRESHOLD}
    tied: dict[str, str] = {}  # the later initializer -> the earlier one it transposes
    names = list(arrays)
    for j, name in enumerate(names):
        for source in names[:j]:
            a, b = arrays[source], arrays[name]
            if source not in tied and a.shape == b.shape[::-1] and np.array_equal(a.T, b):
                tied[name] = source
                break
    if not tied:
        return []
    keep = [i for i in graph.initializer if i.name not in tied]
    del graph.initializer[:]
    graph.initializer.extend(keep)
    nodes = [helper.make_node("Transpose", [source], [name], name=f"retie/{name}", perm=[1, 0])
             for name, source in tied.items()]
    rest = list(graph.node)
    del graph.node[:]
    graph.node.extend([*nodes, *rest])
    return list(tied)


def _check_with_onnxruntime(proto: onnx.ModelProto, module: nn.Module,
                            args: tuple[torch.Tensor, ...], input_names: list[str]) -> float:
    """Run the complete export with onnxruntime; it must give torch's output."""
    import numpy as np
    import onnxruntime as ort

    session = ort.InferenceSession(proto.SerializeToString(), providers=["CPUExecutionProvider"])
    got = session.run(None, {n: a.numpy() for n, a in zip(input_names, args)})[0]
    with torch.no_grad():
        want = module(*args).numpy()
    np.testing.assert_allclose(got, want, rtol=1e-3, atol=1e-4)
    return float(np.abs(got - want).max())


def export(name: str, factory: Factory, batch: int, out_dir: Path) -> Path:
    """Export one model at one batch to ``out_dir/<name>_b<batch>.onnx``."""
    torch.manual_seed(0)
    module, args, input_names = factory(batch)
    module.eval()
    buffer = io.BytesIO()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # the TorchScript exporter's
        torch.onnx.export(module, args, buffer, input_names=input_names,
                          output_names=["output"], opset_version=OPSET, dynamo=False)
    proto = onnx.load_from_string(buffer.getvalue())
    error = _check_with_onnxruntime(proto, module, args, input_names)
    retied = retie_transposes(proto)
    if retied:
        error = max(error, _check_with_onnxruntime(proto, module, args, input_names))
    moved = weights_to_inputs(proto)
    proto.producer_name = "graphtune tests/data/torch/make_fixtures.py"
    proto.producer_version = f"torch {torch.__version__}"
    del proto.metadata_props[:]
    helper.set_model_props(proto, {WEIGHT_INPUTS_KEY: ",".join(moved)})
    onnx.checker.check_model(proto, full_check=True)
    path = out_dir / f"{name}_b{batch}.onnx"
    path.write_bytes(proto.SerializeToString())
    print(f"{path.name}: {path.stat().st_size / 1024:.1f} KiB, {len(proto.graph.node)} nodes, "
          f"{len(moved)} weight inputs, opset {proto.opset_import[0].version}, "
          f"onnxruntime vs torch max abs error {error:.1e}")
    return path


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path(__file__).resolve().parent)
    parser.add_argument("--only", nargs="*", default=None, help="model names to export")
    args = parser.parse_args(argv)
    table = factories()
    names = args.only or list(table)
    unknown = sorted(set(names) - set(table))
    if unknown:
        print(f"unknown model(s) {', '.join(unknown)}; valid: {', '.join(table)}", file=sys.stderr)
        return 2
    args.out.mkdir(parents=True, exist_ok=True)
    for name in names:
        for batch in BATCHES[name]:
            export(name, table[name], batch, args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
