"""``graphtune compile`` and ``graphtune run`` through the installed console script.

Each command runs in its own process, as a user runs it, so "exactly one line on
stderr" also covers what TVM's C++ code prints straight to file descriptor 2.
Numerical checks use onnxruntime with FP32 tolerances ``rtol=1e-4, atol=1e-5``.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import onnx
import pytest

from autotune.commands._npz import NpzError, compare
from compiler import GraphSchedule, zoo
from compiler.model import Model
from compiler.schedule import GroupSpec, Placement, make_schedule
from compiler.target import Target

SCRIPT = Path(sys.executable).parent / "graphtune"
ROOT = Path(__file__).resolve().parents[2]
RTOL, ATOL = 1e-4, 1e-5
BATCH = 2


# Off a terminal, a command that runs for a few seconds prints progress lines on
# stderr ("graphtune: exporting the library ... (6 s)"); how many depends on the
# machine's load, so they are dropped before stderr is compared.
PROGRESS = re.compile(r"^graphtune: (?!error: |warning: ).* \(\d+ s\)\n", re.MULTILINE)


def graphtune(*args: object, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run(
        [str(SCRIPT), *(str(a) for a in args)],
        capture_output=True, text=True, timeout=600, cwd=cwd or ROOT,
    )
    proc.stderr = PROGRESS.sub("", proc.stderr)
    return proc


def one_line_error(proc: subprocess.CompletedProcess[str]) -> str:
    assert proc.returncode == 2, (proc.returncode, proc.stdout, proc.stderr)
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    assert lines[0].startswith("graphtune: error: ") and "Traceback" not in proc.stderr
    return lines[0]


@pytest.fixture(scope="module")
def tiny(tmp_path_factory: pytest.TempPathFactory) -> dict[str, object]:
    """tiny_cnn at batch 2, 16x16: the ONNX file, a split schedule file, inputs, ORT outputs."""
    import onnxruntime as ort

    d = tmp_path_factory.mktemp("cli")
    proto = zoo.build("tiny_cnn", batch=BATCH, weights="inputs", image_size=16)
    onnx_path = d / "tiny.onnx"
    onnx.save(proto, str(onnx_path))
    graph = Model(proto, "tiny").graph
    n = len(graph.ops)
    place = Placement("L1", ((0, 1, 2, 3),))
    schedule = make_schedule(
        graph,
        [GroupSpec("a", tuple(range(7)), 2, (place, place)),
         GroupSpec("b", tuple(range(7, n)), 1, (place,))],
        source="cli_test",
    )
    sched_path = d / "split.json"
    schedule.save(str(sched_path))
    inputs = zoo.random_inputs(proto, seed=5)
    np.save(d / "input.npy", inputs["input"])
    sess = ort.InferenceSession(proto.SerializeToString(), providers=["CPUExecutionProvider"])
    expected = sess.run(None, {**inputs, **zoo.materialize_weights(proto)})[0]
    return {"dir": d, "onnx": onnx_path, "schedule": schedule, "schedule_path": sched_path,
            "expected": expected, "graph": graph}


@pytest.fixture(scope="module")
def artifact(tiny: dict[str, object]) -> Path:
    d = tiny["dir"]
    assert isinstance(d, Path)
    out = d / "tiny.stcobj"
    proc = graphtune("compile", tiny["onnx"], "--schedule", tiny["schedule_path"], "-o", out)
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr == ""
    assert f"wrote {out}" in proc.stdout and "schedule cli_test (2 groups, 3 chunks)" in proc.stdout
    return out


# ---- compile and run ---------------------------------------------------------------------
def test_compile_then_run_matches_onnxruntime(
    tiny: dict[str, object], artifact: Path, tmp_path: Path
) -> None:
    d = tiny["dir"]
    assert isinstance(d, Path)
    out = tmp_path / "out.npz"
    proc = graphtune("run", artifact, "--input", f"input={d / 'input.npy'}", "-o", out)
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr == ""
    assert "prob: shape [2, 10] float32" in proc.stdout
    with np.load(out) as f:
        assert f.files == ["prob"]
        np.testing.assert_allclose(f["prob"], tiny["expected"], rtol=RTOL, atol=ATOL)
    from compiler.executor import Executor

    assert Executor.load(artifact).schedule == tiny["schedule"]


def test_run_fills_missing_inputs_with_seeded_data(artifact: Path, tmp_path: Path) -> None:
    first = graphtune("run", artifact, "-o", tmp_path / "a.npz", "--seed", "7")
    second = graphtune("run", artifact, "-o", tmp_path / "b.npz", "--seed", "7")
    assert first.returncode == 0 and second.returncode == 0, first.stderr
    assert first.stderr.strip() == (
        "note: input 'input' not given: random N(0, 1) float32 (seed 7)"
    )
    with np.load(tmp_path / "a.npz") as a, np.load(tmp_path / "b.npz") as b:
        np.testing.assert_array_equal(a["prob"], b["prob"])


def test_index_inputs_get_values_in_range(tmp_path: Path) -> None:
    """DeepFM's feature indices are drawn below the table size (out of range would crash)."""
    path = tmp_path / "deepfm.onnx"
    onnx.save(zoo.build("deepfm", batch=2, weights="inputs"), str(path))
    out = tmp_path / "d.stcobj"
    proc = graphtune("compile", path, "-o", out, "--level", "0")
    assert proc.returncode == 0 and proc.stderr == "", proc.stderr
    assert "schedule O0" in proc.stdout
    proc = graphtune("run", out)
    assert proc.returncode == 0, proc.stderr
    assert "note: input 'feat_index' not given: random integers in [0, 259)" in proc.stderr
    assert "prob: shape [2, 1] float32" in proc.stdout


def test_compile_default_output_name_and_batch(tiny: dict[str, object], tmp_path: Path) -> None:
    proc = graphtune("compile", tiny["onnx"], "--batch", "3", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "tiny batch 3, schedule O3" in proc.stdout
    from compiler.artifact import read_meta

    assert read_meta(tmp_path / "tiny.stcobj").inputs[0].shape == (3, 3, 16, 16)


def test_compile_with_a_tuning_log(tiny: dict[str, object], tmp_path: Path) -> None:
    from logs import Provenance, Record, Result, Status, TargetKey, WorkloadInfo

    schedule = tiny["schedule"]
    assert isinstance(schedule, GraphSchedule)
    target = Target.default()
    record = Record(
        workload=WorkloadInfo(schedule.workload_key or "", "tiny", {"input": (2, 3, 16, 16)},
                              BATCH),
        target=TargetKey(target.name, target.hash),
        schedule=schedule.to_json(),
        result=Result(Status.OK, latency_us=10.0, throughput_per_s=2e5),
        prov=Provenance.now(tuner="test"),
    )
    log = tmp_path / "best.jsonl"
    log.write_text(record.to_line())
    out = tmp_path / "tuned.stcobj"
    proc = graphtune("compile", tiny["onnx"], "--log", log, "-o", out)
    assert proc.returncode == 0, proc.stderr
    assert "schedule cli_test" in proc.stdout
    # a miss (another batch = another workload) warns and falls back to the level
    proc = graphtune("compile", tiny["onnx"], "--log", log, "--batch", "4", "-o", out)
    assert proc.returncode == 0, proc.stderr
    assert "schedule O3" in proc.stdout and "falling back" in proc.stderr


# ---- user errors: one line, exit 2 ----------------------------------------------------------
def _edit(schedule: GraphSchedule, **changes: object) -> str:
    d = schedule.to_json()
    for key, value in changes.items():
        if key == "op_range":
            d["groups"][0]["ops"] = value
        else:
            d[key] = value
    return json.dumps(d)


@pytest.mark.parametrize(
    ("kind", "expected"),
    [
        ("bad_json", "schedule is not valid JSON"),
        ("unknown_op", "op index 16 does not exist (16 ops)"),
        ("wrong_batch", "schedule is for batch 8 and workload"),
        ("other_model", "schedule was made for workload"),
        ("not_a_schedule", "not a graph schedule"),
        ("missing_file", "cannot read schedule file"),
    ],
)
def test_malformed_schedule_file(
    tiny: dict[str, object], tmp_path: Path, kind: str, expected: str
) -> None:
    schedule = tiny["schedule"]
    assert isinstance(schedule, GraphSchedule)
    path = tmp_path / f"{kind}.json"
    if kind == "bad_json":
        path.write_text('{"kind": "graphtune.GraphSchedule", "groups": [')
    elif kind == "unknown_op":
        path.write_text(_edit(schedule, op_range=[[0, 40]]))
    elif kind == "wrong_batch":
        path.write_text(_edit(schedule, batch=8))
    elif kind == "other_model":
        other = Model(zoo.build("deepfm", batch=BATCH, weights="inputs"), "deepfm").graph
        path.write_text(_edit(schedule, workload_key=other.workload_key))
    elif kind == "not_a_schedule":
        path.write_text('{"kind": "graphtune.record"}')
    out = tmp_path / "x.stcobj"
    line = one_line_error(graphtune("compile", tiny["onnx"], "--schedule", path, "-o", out))
    assert str(path) in line and expected in line
    assert not out.exists()


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["--schedule", "s.json", "--level", "1"], "--schedule and --level cannot be combined"),
        (["--level", "1", "--log", "x.jsonl"], "--level and --log cannot be combined"),
        (["--level", "7"], "--level must be 0, 1, 2 or 3, got 7"),
        (["--batch", "0"], "--batch must be >= 1"),
        (["--target", "nope.toml"], "cannot read hardware file nope.toml"),
    ],
)
def test_bad_compile_options(tiny: dict[str, object], args: list[str], expected: str) -> None:
    line = one_line_error(graphtune("compile", tiny["onnx"], *args))
    assert expected in line


def test_compile_of_a_non_onnx_file(tmp_path: Path) -> None:
    bad = tmp_path / "bad.onnx"
    bad.write_bytes(b"\x00garbage")
    assert "bad.onnx" in one_line_error(graphtune("compile", bad, "-o", tmp_path / "x.stcobj"))


def test_run_with_a_wrong_shaped_input(artifact: Path, tmp_path: Path) -> None:
    npy = tmp_path / "wrong.npy"
    np.save(npy, np.zeros((3, 3, 16, 16), np.float32))
    line = one_line_error(graphtune("run", artifact, "--input", f"input={npy}"))
    assert "has shape [3, 3, 16, 16], the model expects [2, 3, 16, 16]" in line
    assert str(npy) in line


@pytest.mark.parametrize(
    ("make", "expected"),
    [
        (lambda d: [f"--input=nope={d / 'x.npy'}"], "the model has no such input (inputs: input)"),
        (lambda d: ["--input", "input"], "use NAME=FILE.npy"),
        (lambda d: ["--input", f"input={d / 'missing.npy'}"], "No such file"),
        (lambda d: ["--input", f"input={d / 'text.npy'}"], "is not a .npy array"),
        (lambda d: ["--input", f"input={d / 'arrays.npz'}"], "is an .npz archive"),
    ],
)
def test_bad_run_inputs(artifact: Path, tmp_path: Path, make: object, expected: str) -> None:
    (tmp_path / "text.npy").write_text("1 2 3")
    np.savez(tmp_path / "arrays.npz", input=np.zeros(2))
    line = one_line_error(graphtune("run", artifact, *make(tmp_path)))  # type: ignore[operator]
    assert expected in line


def test_run_of_a_non_artifact(tiny: dict[str, object]) -> None:
    line = one_line_error(graphtune("run", tiny["onnx"]))
    assert "is not a .stcobj artifact" in line


# ---- run --inputs IN.npz --expect REF.npz -------------------------------------------------

@pytest.fixture(scope="module")
def npz(tiny: dict[str, object]) -> dict[str, Path]:
    d = tiny["dir"]
    assert isinstance(d, Path)
    inputs = d / "in.npz"
    np.savez(inputs, input=np.load(d / "input.npy"))
    ref = d / "ref.npz"
    np.savez(ref, prob=tiny["expected"])
    bad = d / "bad.npz"
    perturbed = np.array(tiny["expected"], copy=True)
    perturbed[1, 3] += 0.25
    np.savez(bad, prob=perturbed)
    return {"inputs": inputs, "ref": ref, "bad": bad}


def test_expect_passes_on_the_true_reference(artifact: Path, npz: dict[str, Path],
                                             tmp_path: Path) -> None:
    out = tmp_path / "out.npz"
    proc = graphtune("run", artifact, "--inputs", npz["inputs"], "-o", out,
                     "--expect", npz["ref"], "--rtol", "1e-4", "--atol", "1e-5")
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr == ""  # every input given: no note about random data
    assert f"matches {npz['ref']}" in proc.stdout and "20 elements" in proc.stdout
    with np.load(out) as f:
        assert f.files == ["prob"]


def test_expect_fails_on_a_perturbed_reference_naming_the_worst_element(
        artifact: Path, npz: dict[str, Path]) -> None:
    proc = graphtune("run", artifact, "--inputs", npz["inputs"], "--expect", npz["bad"])
    assert proc.returncode == 1, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("graphtune: error: prob[1, 3] is "), proc.stderr
    assert "1 of 20 elements differ" in lines[0] and "max |diff| 0.25" in lines[0]


@pytest.mark.parametrize("make,expected", [
    (lambda d: np.savez(d / "x.npz", nope=np.zeros(3)), "has no input 'nope'"),
    (lambda d: (d / "x.npz").write_text("not a zip"), "not an .npz archive"),
    (lambda d: np.savez(d / "x.npz", input=np.zeros((5, 3, 16, 16), np.float32)), "shape"),
])
def test_bad_inputs_npz(artifact: Path, tmp_path: Path, make, expected: str) -> None:
    make(tmp_path)
    assert expected in one_line_error(graphtune("run", artifact, "--inputs", tmp_path / "x.npz"))


def test_compare_rule_and_errors(tmp_path: Path) -> None:
    ref = tmp_path / "r.npz"
    np.savez(ref, a=np.array([1.0, 100.0, np.nan]), b=np.zeros((2, 2)))
    ok = compare({"a": np.array([1.0, 100.05, np.nan]), "b": np.zeros((2, 2))}, ref,
                 rtol=1e-3, atol=0.0)
    assert ok.ok and ok.mismatched == 0 and ok.total == 7
    # 0.5 off 1.0 is worse relative to its tolerance than 0.2 off 100
    c = compare({"a": np.array([1.5, 100.2, np.nan]), "b": np.zeros((2, 2))}, ref,
                rtol=1e-3, atol=0.0)
    assert not c.ok and c.where() == "a[0]" and c.mismatched == 2 and c.max_abs_diff == 0.5
    nan = compare({"a": np.array([1.0, 100.0, 0.0]), "b": np.zeros((2, 2))}, ref, 1e-3, 1e-3)
    assert not nan.ok and nan.where() == "a[2]"  # a number where the reference has NaN
    with pytest.raises(NpzError, match="no array 'c'"):
        compare({"a": np.zeros(3), "c": np.zeros(1)}, ref, 1e-3, 1e-3)
    with pytest.raises(NpzError, match="has shape"):
        compare({"a": np.zeros(4), "b": np.zeros((2, 2))}, ref, 1e-3, 1e-3)


def test_compile_without_a_c_compiler_is_one_line_before_any_build(
        tiny: dict[str, object], tmp_path: Path) -> None:
    """TVM links the artifact with the system compiler: none on PATH (and no $CC/$CXX)
    is one line naming what to install, said before the build, and nothing is written."""
    env = {k: v for k, v in os.environ.items() if k not in ("CC", "CXX")}
    env["PATH"] = str(tmp_path)  # an empty directory: no g++, gcc, clang or cc
    out = tmp_path / "x.stcobj"
    proc = subprocess.run(
        [str(SCRIPT), "compile", str(tiny["onnx"]), "--schedule", str(tiny["schedule_path"]),
         "-o", str(out)], capture_output=True, text=True, timeout=600, cwd=ROOT, env=env)
    proc.stderr = PROGRESS.sub("", proc.stderr)
    line = one_line_error(proc)
    assert "no C compiler to link the artifact" in line and "apt install gcc" in line
    assert "building" not in proc.stderr and not out.exists()
