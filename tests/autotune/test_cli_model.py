"""``graphtune zoo``, ``info`` and ``schedule make|show|export`` through click and the console script."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import onnx
import pytest
from click.testing import CliRunner, Result

from autotune.cli import main
from compiler import GraphSchedule, zoo

SCRIPT = Path(sys.executable).parent / "graphtune"


def run(*args: object) -> Result:
    return CliRunner().invoke(main, [str(a) for a in args])


def one_line_error(r: Result) -> str:
    assert r.exit_code == 2, (r.exit_code, r.output, r.stderr)
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in r.stderr, r.stderr
    return lines[0]


@pytest.fixture(scope="module")
def tiny(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("m") / "tiny.onnx"
    onnx.save(zoo.build("tiny_cnn", batch=2, weights="inputs", image_size=16), str(path))
    return path


def test_zoo_list() -> None:
    r = run("zoo", "--list")
    assert r.exit_code == 0
    for e in zoo.list_models():
        assert e.name in r.output


def test_zoo_build(tmp_path: Path) -> None:
    out = tmp_path / "wd.onnx"
    r = run("zoo", "wide_and_deep", "-o", out, "--batch", "3", "--option", "deep_layers=64,32",
            "--option", "bucket_size=100", "--weights", "inputs")
    assert r.exit_code == 0, r.output
    assert r.output.count("\n") == 1 and str(out) in r.output and "nodes" in r.output
    m = onnx.load(str(out))
    assert m.graph.input[0].type.tensor_type.shape.dim[0].dim_value == 3
    assert list(tmp_path.iterdir()) == [out]  # no temp file left behind
    assert "unknown model" in one_line_error(run("zoo", "nope", "-o", tmp_path / "x.onnx"))


def test_info_human_and_json(tiny: Path) -> None:
    r = run("info", tiny)
    assert r.exit_code == 0, r.output
    for word in ("FLOPs", "nn.conv2d", "NPU sub-functions", "workload key"):
        assert word in r.output
    r2 = run("info", tiny, "--batch", "4", "--json")
    d = json.loads(r2.output)
    for key in ("inputs", "outputs", "op_counts", "flops", "flops_per_sample", "weight_bytes",
                "npu_subfunctions", "workload_key"):
        assert key in d
    assert d["batch"] == 4 and d["flops"] == pytest.approx(4 * d["flops_per_sample"])
    # the JSON names inputs and outputs as the ONNX file (and the table) does
    proto = onnx.load(str(tiny))
    assert list(d["outputs"]) == [o.name for o in proto.graph.output]
    assert set(d["inputs"]) <= {i.name for i in proto.graph.input}
    for name in d["outputs"]:
        assert name in r.output


def test_schedule_make_show_export(tiny: Path, tmp_path: Path) -> None:
    s_json, g_onnx = tmp_path / "s.json", tmp_path / "g.onnx"
    r = run("schedule", "make", tiny, "--level", "3", "-o", s_json)
    assert r.exit_code == 0, (r.output, r.stderr)
    s = GraphSchedule.load(str(s_json))
    r = run("schedule", "show", s_json, "--model", tiny)
    assert r.exit_code == 0, r.stderr
    assert s.groups[0].name in r.output and "execution order" in r.output
    assert "conv2d_0.." in r.output
    r = run("schedule", "export", s_json, "--model", tiny, "--onnx", g_onnx)
    assert r.exit_code == 0, r.stderr
    m = onnx.load(str(g_onnx))
    onnx.checker.check_model(m)
    names = {g.name for g in s.groups}
    for node in m.graph.node:
        props = {p.key: p.value for p in node.metadata_props}
        assert props["graphtune.group"] in names and "graphtune group" in node.doc_string


@pytest.mark.parametrize("level", ["0", "3"])
def test_schedule_export_as_functions(tiny: Path, tmp_path: Path, level: str) -> None:
    """Each group becomes one ONNX local function; the model computes the same."""
    import numpy as np
    import onnxruntime as ort

    s_json, g_onnx = tmp_path / "s.json", tmp_path / "g.onnx"
    assert run("schedule", "make", tiny, "--level", level, "-o", s_json).exit_code == 0
    r = run("schedule", "export", s_json, "--model", tiny, "--onnx", g_onnx, "--functions")
    assert r.exit_code == 0, r.stderr
    s = GraphSchedule.load(str(s_json))
    m, original = onnx.load(str(g_onnx)), onnx.load(str(tiny))
    onnx.checker.check_model(m)
    called = {n.op_type for n in m.graph.node if n.domain == "graphtune"}
    assert called == {f.name for f in m.functions} <= {g.name for g in s.groups}
    assert sum(len(f.node) for f in m.functions) == len(original.graph.node)
    inputs = {**zoo.random_inputs(original, seed=0), **zoo.materialize_weights(original)}
    want = ort.InferenceSession(original.SerializeToString()).run(None, inputs)[0]
    got = ort.InferenceSession(m.SerializeToString()).run(None, inputs)[0]
    np.testing.assert_array_equal(got, want)


def test_schedule_short_form_and_plan(tiny: Path, tmp_path: Path) -> None:
    s_json, g_onnx = tmp_path / "s.json", tmp_path / "g.onnx"
    r = run("schedule", tiny, "--level", "1", "-o", s_json, "--onnx", g_onnx)
    assert r.exit_code == 0, (r.output, r.stderr)
    assert s_json.exists() and g_onnx.exists()
    assert "ResNet-50" in one_line_error(run("schedule", "make", tiny, "--plan", "resnet50",
                                             "-o", s_json))
    assert "batch 16" in one_line_error(run("schedule", tiny, "--plan", "resnet50", "--batch",
                                            "8", "-o", s_json))
    assert "exactly one" in one_line_error(run("schedule", tiny, "-o", s_json))


@pytest.mark.parametrize(
    "text", ["not json", "[1, 2]", '{"v": 1, "batch": 2}', '{"v": 7, "batch": 2, "groups": []}']
)
def test_show_malformed(tmp_path: Path, text: str) -> None:
    p = tmp_path / "bad.json"
    p.write_text(text)
    one_line_error(run("schedule", "show", p))


def test_console_script(tiny: Path) -> None:
    r = subprocess.run([str(SCRIPT), "info", str(tiny), "--json"], capture_output=True,
                       text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["batch"] == 2
    bad = subprocess.run([str(SCRIPT), "schedule", "show", str(tiny)], capture_output=True,
                         text=True, timeout=120)
    assert bad.returncode == 2 and len(bad.stderr.strip().splitlines()) == 1
