"""Tests of the model zoo: structure, determinism, weights modes, ORT and TVM agreement."""

from __future__ import annotations

import dataclasses
import json
import math
from collections import Counter
from typing import Any

import numpy as np
import onnx
import pytest
from onnx import numpy_helper

from compiler import zoo
from compiler.errors import ModelError

ort = pytest.importorskip("onnxruntime")

BERT_SMALL = dict(num_layers=2, hidden=256, heads=4, intermediate=1024, vocab=1000)
VIT_SMALL = dict(image_size=32, num_layers=2, hidden=64, heads=4, mlp_dim=128, num_classes=10)
GPT_SMALL = dict(num_layers=2, hidden=64, heads=4, inner=128, vocab=100)

# Sizes small enough to build random weights and run them in a few ms each.
REDUCED: dict[str, dict[str, Any]] = {
    "tiny_cnn": {"image_size": 16},
    "resnet18": {"image_size": 32, "base_channels": 16},
    "resnet34": {"image_size": 32, "base_channels": 16},
    "resnet50": {"image_size": 32, "base_channels": 16},
    "resnet101": {"image_size": 32, "base_channels": 8},
    "mobilenet_v2": {"image_size": 32, "num_classes": 100},
    "efficientnet_b0": {"image_size": 32, "num_classes": 100},
    "bert_base": BERT_SMALL,
    "bert_large": {**BERT_SMALL, "num_layers": 3, "heads": 8},
    "deepfm": {},
    "wide_and_deep": {"bucket_size": 100, "deep_layers": [64, 32]},
    "dlrm": {"table_rows": 100, "bottom_mlp": [32, 16], "top_mlp": [32, 16]},
    "vit": VIT_SMALL,
    "gpt": GPT_SMALL,
}
# Models whose full-size random weights take seconds to build stay reduced in the fast matrix.
SLOW_TO_BUILD = {"bert_base", "bert_large", "resnet101", "vit", "gpt"}
SEQ = 32
ALL_NAMES = sorted(REDUCED)
MODES = ["random", "zeros", "inputs"]

OUTPUTS = {  # name -> (output name, output shape after the batch)
    "tiny_cnn": ("prob", [10]),
    "resnet18": ("prob", [1000]),
    "resnet34": ("prob", [1000]),
    "resnet50": ("prob", [1000]),
    "resnet101": ("prob", [1000]),
    "mobilenet_v2": ("prob", [100]),
    "efficientnet_b0": ("prob", [100]),
    "bert_base": ("pooled", [256]),
    "bert_large": ("pooled", [256]),
    "deepfm": ("prob", [1]),
    "wide_and_deep": ("prob", [1]),
    "dlrm": ("prob", [1]),
    "vit": ("prob", [10]),
    "gpt": ("logits", [SEQ, 100]),
}


def _small(name: str, **kw: Any) -> onnx.ModelProto:
    return zoo.build(name, seq=SEQ, **{**REDUCED[name], **kw})


def _session(model: onnx.ModelProto, exact: bool = False) -> Any:
    options = ort.SessionOptions()
    if exact:
        # Weights held as initializers are prepacked and constant-folded by ORT, which
        # changes the kernels' rounding; without that, the same weights give the same bits.
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
        options.add_session_config_entry("session.disable_prepacking", "1")
    return ort.InferenceSession(model.SerializeToString(), options,
                                providers=["CPUExecutionProvider"])


def _dims(value_info: onnx.ValueInfoProto) -> list[int]:
    return [d.dim_value for d in value_info.type.tensor_type.shape.dim]


def _check_structure(model: onnx.ModelProto, batch: int, weights: str) -> None:
    onnx.checker.check_model(model, full_check=True)
    graph = model.graph
    assert model.opset_import[0].version == 17
    node_names = [n.name for n in graph.node]
    assert all(node_names) and len(set(node_names)) == len(node_names)
    produced = [o for n in graph.node for o in n.output]
    tensors = produced + [i.name for i in graph.input] + [t.name for t in graph.initializer]
    assert len(set(tensors)) == len(tensors)
    data = zoo.data_input_names(model)
    assert data
    by_name = {i.name: i for i in graph.input}
    for name in data:
        assert _dims(by_name[name])[0] == batch
    for out in graph.output:
        assert _dims(out)[0] == batch
    for t in graph.initializer:
        assert t.data_type in (onnx.TensorProto.FLOAT, onnx.TensorProto.INT64)
    weight_inputs = zoo.weight_input_names(model)
    if weights == "inputs":
        assert weight_inputs
        assert all(math.prod(_dims(by_name[w])) > 1024 for w in weight_inputs)
        assert all(math.prod(t.dims) <= 1024 for t in graph.initializer)
        assert [i.name for i in graph.input] == data + weight_inputs
    else:
        assert weight_inputs == []
    record = json.loads({p.key: p.value for p in model.metadata_props}[zoo.ZOO_KEY])
    assert record["batch"] == batch and record["weights"] == weights


# ------------------------------------------------------------------ listing


def test_list_models_names_and_options() -> None:
    entries = zoo.list_models()
    assert [e.name for e in entries] == ALL_NAMES
    by_name = {e.name: e for e in entries}
    assert by_name["resnet50"].options == {"image_size": 224, "num_classes": 1000,
                                           "base_channels": 64}
    assert by_name["deepfm"].options["deep_layers"] == [32, 32]
    assert by_name["bert_large"].options["hidden"] == 1024
    assert all(e.description for e in entries)
    with pytest.raises(dataclasses.FrozenInstanceError):
        entries[0].name = "x"  # type: ignore[misc]
    for e in entries:  # every listed option is accepted with its default
        zoo.build(e.name, weights="inputs", seq=SEQ, **e.options)


# ---------------------------------------------------------------- structure


@pytest.mark.parametrize("weights", MODES)
@pytest.mark.parametrize("batch", [1, 2])
@pytest.mark.parametrize("name", ALL_NAMES)
def test_builds_in_every_mode(name: str, batch: int, weights: str) -> None:
    if name in SLOW_TO_BUILD:
        model = _small(name, batch=batch, weights=weights)
    else:
        model = zoo.build(name, batch=batch, weights=weights)
    _check_structure(model, batch, weights)


@pytest.mark.parametrize("batch", [1, 2])
@pytest.mark.parametrize("name", ALL_NAMES)
def test_full_size_inputs_mode(name: str, batch: int) -> None:
    model = zoo.build(name, batch=batch, weights="inputs")
    _check_structure(model, batch, "inputs")
    assert model.ByteSize() < 1_200_000


def test_resnet50_full_size_structure() -> None:
    model = zoo.build("resnet50", batch=1, weights="inputs")
    assert model.ByteSize() < 1_000_000
    ops = Counter(n.op_type for n in model.graph.node)
    assert ops["Conv"] == 53 and ops["BatchNormalization"] == 53
    assert ops["Add"] == 16 and ops["Gemm"] == 1 and ops["Softmax"] == 1
    producer = {n.output[0]: n for n in model.graph.node}
    for add in (n for n in model.graph.node if n.op_type == "Add"):
        # a residual Add joins the branch's last BN with the block input or its projection
        kinds = sorted(producer[i].op_type for i in add.input)
        assert kinds in (["BatchNormalization", "BatchNormalization"],
                         ["BatchNormalization", "Relu"])
    last = model.graph.node[-1]
    assert last.op_type == "Softmax" and last.output[0] == "prob"
    assert _dims(model.graph.output[0]) == [1, 1000]
    # v1.5: the stride of a downsampling bottleneck sits on its 3x3 conv
    strides = {n.name: list(n.attribute[2].ints) for n in model.graph.node if n.op_type == "Conv"}
    assert strides["layer2.0.conv1"] == [1, 1] and strides["layer2.0.conv2"] == [2, 2]
    assert strides["layer2.0.downsample.0"] == [2, 2]


def test_resnet_and_mobilenet_block_counts() -> None:
    def count(name: str) -> Counter[str]:
        return Counter(n.op_type for n in zoo.build(name, weights="inputs").graph.node)

    assert count("resnet18")["Conv"] == 20 and count("resnet18")["Add"] == 8
    assert count("resnet34")["Add"] == 16
    assert count("resnet101")["Conv"] == 104 and count("resnet101")["Add"] == 33
    mobilenet = zoo.build("mobilenet_v2", weights="inputs")
    ops = Counter(n.op_type for n in mobilenet.graph.node)
    assert ops["Conv"] == 52 and ops["Add"] == 10 and ops["Clip"] == 35
    depthwise = [n for n in mobilenet.graph.node
                 if any(a.name == "group" and a.i > 1 for a in n.attribute)]
    assert len(depthwise) == 17
    initializers = {t.name for t in mobilenet.graph.initializer}
    for clip in (n for n in mobilenet.graph.node if n.op_type == "Clip"):
        assert clip.input[1] in initializers and clip.input[2] in initializers


def test_tiny_cnn_layout() -> None:
    model = zoo.build("tiny_cnn", batch=3)
    ops = [n.op_type for n in model.graph.node]
    assert ops == ["Conv", "BatchNormalization", "Relu", "Conv", "BatchNormalization", "Add",
                   "Relu", "MaxPool", "Conv", "BatchNormalization", "Relu", "GlobalAveragePool",
                   "Flatten", "Gemm", "Softmax"]
    assert _dims(model.graph.input[0]) == [3, 3, 32, 32]


@pytest.mark.parametrize("seq", [128, 256, 384, 512, 7])
def test_bert_base_shapes_keep_batch_on_axis0(seq: int) -> None:
    model = zoo.build("bert_base", batch=2, seq=seq, weights="inputs")
    ops = Counter(n.op_type for n in model.graph.node)
    assert ops["LayerNormalization"] == 25 and ops["Softmax"] == 12 and ops["Erf"] == 12
    assert ops["MatMul"] == 12 * 8 + 1
    consts = {t.name: numpy_helper.to_array(t) for t in model.graph.initializer}
    reshapes = [n for n in model.graph.node if n.op_type == "Reshape"]
    assert len(reshapes) == 48
    for node in reshapes:
        assert consts[node.input[1]][0] == -1
    inferred = onnx.shape_inference.infer_shapes(model, strict_mode=True)
    for vi in inferred.graph.value_info:
        assert _dims(vi)[0] == 2, vi.name
    scores = [vi for vi in inferred.graph.value_info if vi.name.endswith("attn.scores")]
    assert _dims(scores[0]) == [2, 12, seq, seq]
    assert _dims(model.graph.output[0]) == [2, 768]
    assert _dims(model.graph.input[0]) == [2, seq]
    assert model.graph.input[0].type.tensor_type.elem_type == onnx.TensorProto.INT64


def test_bert_large_dimensions() -> None:
    model = zoo.build("bert_large", seq=128, weights="inputs")
    ops = Counter(n.op_type for n in model.graph.node)
    assert ops["Softmax"] == 24 and ops["LayerNormalization"] == 49
    shapes = {i.name: _dims(i) for i in model.graph.input}
    assert shapes["embeddings.word_embeddings.weight"] == [30522, 1024]
    assert shapes["encoder.0.ffn.intermediate.weight"] == [1024, 4096]


def test_recsys_layout() -> None:
    deepfm = zoo.build("deepfm", batch=4, weights="inputs")
    shapes = {i.name: _dims(i) for i in deepfm.graph.input}
    assert shapes["feat_index"] == [4, 39] and shapes["feat_value"] == [4, 39]
    tables = {t.name: list(t.dims) for t in deepfm.graph.initializer}
    assert tables["feature_bias"] == [259, 1] and shapes["feature_embeddings"] == [259, 8]
    assert shapes["deep.0.weight"] == [32, 312]
    wd = zoo.build("wide_and_deep", batch=4, weights="inputs")
    shapes = {i.name: _dims(i) for i in wd.graph.input}
    assert shapes["dense"] == [4, 13] and shapes["sparse"] == [4, 26]
    assert shapes["wide.weight"] == [26000, 1] and shapes["deep.embeddings"] == [26000, 16]
    offsets = {t.name: numpy_helper.to_array(t) for t in wd.graph.initializer}["sparse.offsets"]
    assert offsets.tolist() == [1000 * i for i in range(26)]


# -------------------------------------------------------------- determinism


@pytest.mark.parametrize("name", ALL_NAMES)
def test_deterministic_and_seeded(name: str) -> None:
    a = _small(name, seed=5).SerializeToString()
    assert a == _small(name, seed=5).SerializeToString()
    assert a != _small(name, seed=6).SerializeToString()
    inputs = _small(name, seed=5, weights="inputs").SerializeToString()
    assert inputs == _small(name, seed=5, weights="inputs").SerializeToString()


def test_zeros_mode_values() -> None:
    model = _small("resnet18", weights="zeros")
    for t in model.graph.initializer:
        values = numpy_helper.to_array(t)
        if t.name.endswith("running_var"):
            assert np.all(values == 1.0)
        else:
            assert not values.any(), t.name


def test_random_mode_batchnorm_var_positive() -> None:
    model = _small("mobilenet_v2")
    for t in model.graph.initializer:
        if t.name.endswith("running_var"):
            assert numpy_helper.to_array(t).min() > 0


# ------------------------------------------------------------- onnxruntime


@pytest.mark.parametrize("name", ALL_NAMES)
def test_onnxruntime_output_shapes(name: str) -> None:
    model = _small(name, batch=3)
    feeds = zoo.random_inputs(model, seed=1)
    assert sorted(feeds) == sorted(zoo.data_input_names(model))
    out_name, out_shape = OUTPUTS[name]
    (out,) = _session(model).run([out_name], feeds)
    assert out.shape == (3, *out_shape) and out.dtype == np.float32
    assert np.all(np.isfinite(out))
    if out_name == "prob" and out_shape != [1]:
        np.testing.assert_allclose(out.sum(axis=1), 1.0, rtol=1e-5)


def test_random_inputs_ranges() -> None:
    bert = zoo.build("bert_base", batch=4, seq=64, weights="inputs", vocab=50)
    ids = zoo.random_inputs(bert)["input_ids"]
    assert ids.dtype == np.int64 and ids.shape == (4, 64) and ids.min() >= 0 and ids.max() < 50
    deepfm = zoo.build("deepfm", batch=64, weights="inputs")
    feeds = zoo.random_inputs(deepfm, seed=2)
    assert feeds["feat_index"].max() < 259 and feeds["feat_index"].min() >= 0
    assert feeds["feat_value"].dtype == np.float32
    wd = zoo.build("wide_and_deep", batch=64, weights="inputs")
    assert zoo.random_inputs(wd)["sparse"].max() < 1000
    image = zoo.random_inputs(zoo.build("resnet50", batch=2, weights="inputs"))["input"]
    assert image.shape == (2, 3, 224, 224) and abs(float(image.std()) - 1.0) < 0.05
    a, b = zoo.random_inputs(deepfm, seed=2), zoo.random_inputs(deepfm, seed=3)
    assert np.array_equal(a["feat_index"], zoo.random_inputs(deepfm, seed=2)["feat_index"])
    assert not np.array_equal(a["feat_index"], b["feat_index"])


@pytest.mark.parametrize("name", ALL_NAMES)
def test_materialized_inputs_reproduce_random_exactly(name: str) -> None:
    random_model = _small(name, batch=2, seed=11)
    inputs_model = _small(name, batch=2, seed=11, weights="inputs")
    weights = zoo.materialize_weights(inputs_model)
    assert sorted(weights) == sorted(zoo.weight_input_names(inputs_model))
    initializers = {t.name: t for t in random_model.graph.initializer}
    for key, array in weights.items():
        assert array.dtype == np.float32
        assert array.tobytes() == initializers[key].raw_data, key
    feeds = zoo.random_inputs(random_model)
    expected = _session(random_model, exact=True).run(None, feeds)
    actual = _session(inputs_model, exact=True).run(None, {**feeds, **weights})
    for e, a in zip(expected, actual, strict=True):
        assert np.array_equal(e, a)


def test_materialize_resnet50() -> None:
    # its speed is bench material (no timed assertions on a shared machine)
    model = zoo.build("resnet50", batch=1, weights="inputs")
    weights = zoo.materialize_weights(model)
    assert sum(a.size for a in weights.values()) > 25_000_000
    assert weights["conv1.weight"].shape == (64, 3, 7, 7)


def test_position_embedding_is_a_prefix_across_seq() -> None:
    short = zoo.materialize_weights(zoo.build("bert_base", seq=128, weights="inputs",
                                              **BERT_SMALL))
    long = zoo.materialize_weights(zoo.build("bert_base", seq=256, weights="inputs",
                                             **BERT_SMALL))
    key = "embeddings.position_embeddings.weight"
    assert short[key].shape == (1, 128, 256) and long[key].shape == (1, 256, 256)
    assert np.array_equal(short[key], long[key][:, :128])


def test_non_inputs_models_have_no_weight_inputs() -> None:
    model = _small("deepfm")
    assert zoo.weight_input_names(model) == []
    assert zoo.materialize_weights(model) == {}
    assert zoo.data_input_names(model) == ["feat_index", "feat_value"]


# ---------------------------------------------------------------------- TVM

TVM_CASES = {
    "tiny_cnn": {"image_size": 16},
    "resnet18": {"image_size": 32},
    "bert_base": BERT_SMALL,
    "deepfm": {},
    "wide_and_deep": {},
    "dlrm": {},
    "mobilenet_v2": {"image_size": 32},
}


@pytest.mark.parametrize("name", sorted(TVM_CASES))
def test_tvm_matches_onnxruntime(name: str) -> None:
    tvm = pytest.importorskip("tvm")
    from tvm import relax
    from tvm.relax.frontend.onnx import from_onnx

    model = zoo.build(name, batch=2, seq=SEQ, **TVM_CASES[name])
    feeds = zoo.random_inputs(model, seed=4)
    (expected,) = _session(model).run(None, feeds)
    mod = from_onnx(model)
    vm = relax.VirtualMachine(tvm.compile(mod, target="llvm"), tvm.cpu())
    out = vm["main"](*(tvm.runtime.tensor(feeds[n]) for n in zoo.data_input_names(model)))
    np.testing.assert_allclose(out.numpy(), expected, rtol=1e-4, atol=1e-5)


# ------------------------------------------------------------------- errors


@pytest.mark.parametrize(
    ("kwargs", "fragment"),
    [
        ({"name": "resnet5"}, "unknown model 'resnet5'; valid models: bert_base"),
        ({"name": "resnet50", "depth": 3}, "valid options: image_size, num_classes"),
        ({"name": "resnet50", "image_size": 16}, "'image_size' of model 'resnet50' must be"),
        ({"name": "resnet50", "image_size": "224"}, "an integer >= 32"),
        ({"name": "tiny_cnn", "num_classes": True}, "'num_classes'"),
        ({"name": "deepfm", "deep_layers": []}, "non-empty list of integers"),
        ({"name": "deepfm", "deep_layers": [32, 0]}, "non-empty list of integers"),
        ({"name": "deepfm", "weights": "ones"}, "weights must be one of 'random', 'zeros'"),
        ({"name": "deepfm", "batch": 0}, "batch must be an integer >= 1"),
        ({"name": "deepfm", "seed": -1}, "seed must be"),
        ({"name": "bert_base", "seq": 513}, "seq 513 exceeds max_positions 512"),
        ({"name": "bert_base", "seq": 0}, "seq must be"),
        ({"name": "bert_base", "hidden": 100}, "multiple of 'heads'"),
    ],
)
def test_bad_arguments_raise_model_error(kwargs: dict[str, Any], fragment: str) -> None:
    kwargs = dict(kwargs)
    name = kwargs.pop("name")
    with pytest.raises(ModelError) as info:
        zoo.build(name, weights=kwargs.pop("weights", "inputs"), **kwargs)
    message = str(info.value)
    assert fragment in message and "\n" not in message


def test_materialize_rejects_foreign_or_edited_models() -> None:
    model = zoo.build("deepfm", weights="inputs")
    del model.metadata_props[:]
    model.metadata_props.add(key=zoo.WEIGHT_INPUTS_KEY, value="deep.0.weight")
    with pytest.raises(ModelError, match=r"no 'graphtune\.zoo' metadata"):
        zoo.materialize_weights(model)
    edited = zoo.build("deepfm", weights="inputs")
    edited.graph.input[2].type.tensor_type.shape.dim[0].dim_value = 7
    with pytest.raises(ModelError, match="does not match"):
        zoo.materialize_weights(edited)


# ------------------------------------------------------------ slow: full size


@pytest.mark.slow
@pytest.mark.parametrize("name", ["tiny_cnn", "resnet18", "resnet34", "resnet50", "resnet101",
                                  "mobilenet_v2", "bert_base", "deepfm", "wide_and_deep", "vit",
                                  "gpt"])
def test_full_size_random_runs_in_onnxruntime(name: str) -> None:
    model = zoo.build(name, batch=1, seq=128)
    onnx.checker.check_model(model, full_check=True)
    inputs_model = zoo.build(name, batch=1, seq=128, weights="inputs")
    weights = zoo.materialize_weights(inputs_model)
    initializers = {t.name: t for t in model.graph.initializer}
    for key, array in weights.items():
        assert array.tobytes() == initializers[key].raw_data, key
    (out,) = _session(model).run(None, zoo.random_inputs(model))
    assert np.all(np.isfinite(out)) and out.shape[0] == 1


@pytest.mark.slow
def test_full_size_bert_large_random_builds() -> None:
    model = zoo.build("bert_large", batch=1, seq=128)
    assert sum(math.prod(t.dims) for t in model.graph.initializer) > 330_000_000
    onnx.checker.check_model(model, full_check=True)
