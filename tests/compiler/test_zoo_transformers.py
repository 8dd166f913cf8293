"""The zoo's ViT and GPT: structure, MACs against closed forms, the batch on axis 0,
onnxruntime against graphtune's import, causality, and every level fitting the simulator.

The generic zoo checks (every weights mode, determinism, materialized weights, output
shapes in onnxruntime) run on both models through ``test_zoo.py``'s ``REDUCED`` table.
"""

from __future__ import annotations

import warnings
from collections import Counter
from typing import Any

import numpy as np
import onnx
import pytest
from onnx import numpy_helper

from compiler import zoo
from compiler.auto import graph_schedule_level
from compiler.errors import ModelError
from compiler.footprint import batched_tensors
from compiler.graph import Graph
from compiler.model import Model
from compiler.target import Target
from sim import SimError, simulate

ort = pytest.importorskip("onnxruntime")

VIT_SMALL: dict[str, Any] = dict(image_size=32, num_layers=2, hidden=64, heads=4, mlp_dim=128,
                                 num_classes=10)
GPT_SMALL: dict[str, Any] = dict(num_layers=2, hidden=64, heads=4, inner=128, vocab=100)
SMALL = {"vit": VIT_SMALL, "gpt": GPT_SMALL}
SEQ = 16


def _dims(value_info: onnx.ValueInfoProto) -> list[int]:
    return [d.dim_value for d in value_info.type.tensor_type.shape.dim]


def _graph(name: str, batch: int, seq: int = SEQ, **options: Any) -> Graph:
    proto = zoo.build(name, batch=batch, seq=seq, weights="inputs", **options)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return Model(proto, name=name).graph


# ---- closed forms (multiply-accumulates per sample) ----------------------------------------
def _blocks(layers: int, tokens: int, hidden: int, mlp: int) -> int:
    """q, k, v and output projections, q @ k^T, probs @ v, and the two MLP matmuls."""
    return layers * (4 * tokens * hidden * hidden + 2 * tokens * tokens * hidden
                     + 2 * tokens * hidden * mlp)


def vit_macs(image_size: int = 224, patch_size: int = 16, num_layers: int = 12, hidden: int = 768,
             heads: int = 12, mlp_dim: int = 3072, num_classes: int = 1000) -> int:
    patches = (image_size // patch_size) ** 2
    embed = patches * hidden * 3 * patch_size * patch_size
    return embed + _blocks(num_layers, patches + 1, hidden, mlp_dim) + hidden * num_classes


def gpt_macs(seq: int, num_layers: int = 12, hidden: int = 768, heads: int = 12,
             inner: int = 3072, vocab: int = 50257) -> int:
    # The causal mask does not skip work: every score is computed, then replaced.
    return _blocks(num_layers, seq, hidden, inner) + seq * hidden * vocab


# ---- structure ----------------------------------------------------------------------------
def test_listed_with_defaults() -> None:
    entries = {e.name: e for e in zoo.list_models()}
    assert entries["vit"].options == {"image_size": 224, "patch_size": 16, "num_layers": 12,
                                      "hidden": 768, "heads": 12, "mlp_dim": 3072,
                                      "num_classes": 1000}
    assert entries["gpt"].options == {"num_layers": 12, "hidden": 768, "heads": 12,
                                      "inner": 3072, "vocab": 50257, "max_positions": 1024,
                                      "tie_embeddings": 0}


def test_vit_b16_structure() -> None:
    model = zoo.build("vit", batch=2, weights="inputs")
    ops = Counter(n.op_type for n in model.graph.node)
    assert ops["Conv"] == 1 and ops["Softmax"] == 13 and ops["Erf"] == 12
    assert ops["LayerNormalization"] == 2 * 12 + 1
    assert ops["MatMul"] == 12 * 8 + 1  # q, k, v, scores, context, out_proj, 2 MLP; head
    assert ops["Concat"] == 1 and ops["Gather"] == 1
    conv = next(n for n in model.graph.node if n.op_type == "Conv")
    attrs = {a.name: list(a.ints) for a in conv.attribute}
    assert attrs == {"kernel_shape": [16, 16], "strides": [16, 16]}
    shapes = {i.name: _dims(i) for i in model.graph.input}
    assert shapes["input"] == [2, 3, 224, 224]
    assert shapes["encoder.pos_embedding"] == [1, 197, 768]
    assert shapes["encoder.layers.encoder_layer_0.mlp.0.weight"] == [768, 3072]
    assert shapes["heads.head.weight"] == [768, 1000]
    # pre-norm: each block's first LayerNorm reads the residual stream, the Adds close it
    by_name = {n.name: n for n in model.graph.node}
    ln1 = by_name["encoder.layers.encoder_layer_3.ln_1"]
    assert ln1.input[0] == "encoder.layers.encoder_layer_2.add_2"
    add1 = by_name["encoder.layers.encoder_layer_3.add_1"]
    assert add1.input == ["encoder.layers.encoder_layer_2.add_2",
                          "encoder.layers.encoder_layer_3.self_attention.out_proj.add"]
    assert _dims(model.graph.output[0]) == [2, 1000]


def test_gpt_structure() -> None:
    model = zoo.build("gpt", batch=2, seq=128, weights="inputs")
    ops = Counter(n.op_type for n in model.graph.node)
    assert ops["Softmax"] == 12 and ops["Where"] == 12 and ops["Erf"] == 12
    assert ops["LayerNormalization"] == 2 * 12 + 1 and ops["MatMul"] == 12 * 8 + 1
    assert ops["Greater"] == 1  # one causal mask, shared by every layer
    shapes = {i.name: _dims(i) for i in model.graph.input}
    assert shapes["input_ids"] == [2, 128]
    assert shapes["wte.weight"] == [50257, 768] and shapes["lm_head.weight"] == [768, 50257]
    assert shapes["wpe.weight"] == [1, 128, 768]
    assert model.graph.input[0].type.tensor_type.elem_type == onnx.TensorProto.INT64
    assert _dims(model.graph.output[0]) == [2, 128, 50257]
    for n in model.graph.node:
        if n.op_type == "Where":
            assert n.input[0] == "causal.future" and n.input[1] == "causal.fill"
            assert n.output[0].endswith("attn.mask")


@pytest.mark.parametrize(("name", "options"), [("vit", {}), ("gpt", {})])
def test_batch_stays_on_axis0(name: str, options: dict[str, Any]) -> None:
    model = zoo.build(name, batch=3, seq=64, weights="inputs", **options)
    consts = {t.name: numpy_helper.to_array(t) for t in model.graph.initializer}
    for node in model.graph.node:
        if node.op_type == "Reshape":
            assert consts[node.input[1]][0] == -1, node.name
        if node.op_type == "Transpose":
            perm = next(a.ints for a in node.attribute if a.name == "perm")
            assert perm[0] == 0, node.name
    inferred = onnx.shape_inference.infer_shapes(model, strict_mode=True)
    mask = {"causal.keys", "causal.queries", "causal.future"}  # built from constants only
    for vi in inferred.graph.value_info:
        if vi.name not in mask:
            assert _dims(vi)[0] == 3, vi.name


@pytest.mark.parametrize("name", ["vit", "gpt"])
def test_every_activation_is_batched_and_rebatching_works(name: str) -> None:
    # graphtune follows the batch on axis 0 only; every op output must carry it, and a
    # file built at batch 1 must re-import at another batch (no batch-sized constants).
    proto = zoo.build(name, batch=1, seq=SEQ, weights="inputs", **SMALL[name])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = Model(proto, name=name)
        model.set_batch(5)
        graph = model.graph
    batched = batched_tensors(graph)
    assert [op.name for op in graph.ops if op.output not in batched] == []
    assert graph.batch == 5 and all(op.on_npu for op in graph.ops)
    assert graph.npu_subfunctions() == [tuple(range(len(graph.ops)))]


@pytest.mark.parametrize("batch", [1, 2])
def test_macs_match_closed_forms_small(batch: int) -> None:
    assert _graph("vit", batch, **VIT_SMALL).macs == batch * vit_macs(**VIT_SMALL)
    assert _graph("gpt", batch, **GPT_SMALL).macs == batch * gpt_macs(SEQ, **GPT_SMALL)
    wide = dict(VIT_SMALL, image_size=48, patch_size=8)  # 36 patches of 8x8
    assert _graph("vit", batch, **wide).macs == batch * vit_macs(**wide)


@pytest.mark.slow
def test_macs_full_size() -> None:
    # ViT-B/16: the published 17.6 G multiply-adds per image.
    vit = _graph("vit", 1)
    assert vit.macs == vit_macs() == 17_563_828_224
    gpt = _graph("gpt", 2, seq=128)
    assert gpt.macs == 2 * gpt_macs(128)
    assert 324e6 < gpt.weight_bytes < 326e6  # 162.4 M parameters in FP16
    # GPT-2 ties the LM head to the token embedding: the 50257 x 768 table counts once.
    tied = _graph("gpt", 2, seq=128, tie_embeddings=1)
    assert gpt.weight_bytes - tied.weight_bytes == 50257 * 768 * 2


@pytest.mark.parametrize(
    ("name", "kwargs", "fragment"),
    [
        ("vit", {"image_size": 100}, "'image_size' (100) must be a multiple of 'patch_size' (16)"),
        ("vit", {"hidden": 100}, "multiple of 'heads'"),
        ("vit", {"image_size": 1}, "an integer >= 2"),
        ("gpt", {"seq": 1025}, "seq 1025 exceeds max_positions 1024"),
        ("gpt", {"hidden": 100}, "multiple of 'heads'"),
        ("gpt", {"vocab": 0}, "'vocab' of model 'gpt' must be an integer >= 1"),
    ],
)
def test_bad_options(name: str, kwargs: dict[str, Any], fragment: str) -> None:
    with pytest.raises(ModelError) as info:
        zoo.build(name, weights="inputs", **kwargs)
    assert fragment in str(info.value) and "\n" not in str(info.value)


# ---- values -------------------------------------------------------------------------------
def _run(model: onnx.ModelProto, feeds: dict[str, np.ndarray]) -> np.ndarray:
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return session.run(None, feeds)[0]  # type: ignore[no-any-return]


def test_gpt_is_causal() -> None:
    model = zoo.build("gpt", batch=2, seq=SEQ, **GPT_SMALL)
    ids = zoo.random_inputs(model, seed=3)["input_ids"]
    changed = ids.copy()
    changed[:, 9:] = (changed[:, 9:] + 1) % GPT_SMALL["vocab"]
    a, b = _run(model, {"input_ids": ids}), _run(model, {"input_ids": changed})
    np.testing.assert_array_equal(a[:, :9], b[:, :9])  # earlier positions never see later ones
    assert np.abs(a[:, 9:] - b[:, 9:]).min(axis=-1).max() > 0


def test_vit_class_token_is_batch_independent() -> None:
    # The class token is broadcast as x[:, :1] * 0 + token: one sample's prediction must
    # not depend on the other samples of the batch.
    model = zoo.build("vit", batch=3, **VIT_SMALL)
    image = zoo.random_inputs(model, seed=2)["input"]
    alone = zoo.build("vit", batch=1, **VIT_SMALL)
    together = _run(model, {"input": image})
    for i in range(3):
        np.testing.assert_allclose(_run(alone, {"input": image[i : i + 1]})[0], together[i],
                                   rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("name", ["vit", "gpt"])
def test_graphtune_import_matches_onnxruntime(name: str) -> None:
    tvm = pytest.importorskip("tvm")
    from tvm import relax

    proto = zoo.build(name, batch=2, seq=SEQ, weights="inputs", **SMALL[name])
    feeds = zoo.random_inputs(proto, seed=4)
    expected = _run(proto, {**feeds, **zoo.materialize_weights(proto)})
    model = Model(proto, name=name)
    vm = relax.VirtualMachine(tvm.compile(model.mod, target="llvm"), tvm.cpu())
    out = vm["main"](*(tvm.runtime.tensor(feeds[n]) for n in model.data_inputs))
    assert np.ptp(expected) > 0
    np.testing.assert_allclose(out.numpy(), expected, rtol=1e-4, atol=1e-5)


# ---- levels fit the simulator -------------------------------------------------------------
def _levels(graph: Graph) -> list[float]:
    target = Target.default()
    throughput = []
    for level in range(4):
        schedule = graph_schedule_level(graph, target, level)
        schedule.validate(graph, target)
        r = simulate(graph, schedule, target, timeline=False)
        assert not isinstance(r, SimError), f"O{level}: {r.status}: {r.message}"
        assert r.latency_over_bound >= 1.0
        throughput.append(r.chip_throughput_per_s)
    return throughput


@pytest.mark.parametrize("batch", [1, 16])
@pytest.mark.parametrize("name", ["vit", "gpt"])
def test_levels_fit_small(name: str, batch: int) -> None:
    options = dict(SMALL[name], image_size=64) if name == "vit" else SMALL[name]  # 17 tokens
    throughput = _levels(_graph(name, batch, seq=64, **options))
    assert throughput == sorted(throughput), throughput  # O0 <= O1 <= O2 <= O3


@pytest.mark.slow
@pytest.mark.parametrize("batch", [1, 16])
@pytest.mark.parametrize("name", ["vit", "gpt"])
def test_levels_fit_full_size(name: str, batch: int) -> None:
    throughput = _levels(_graph(name, batch, seq=128))
    assert throughput == sorted(throughput), throughput  # O0 <= O1 <= O2 <= O3
