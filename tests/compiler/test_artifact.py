"""The ``.stcobj`` format and the Executor: round trips, bad files, a fresh process."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import subprocess
import sys
import textwrap
import zipfile
from pathlib import Path

import numpy as np
import pytest

from compiler import zoo
from compiler.artifact import (
    FORMAT_VERSION,
    IR,
    LIB,
    META,
    SCHEDULE,
    ArtifactMeta,
    TensorInfo,
    extract_library,
    read_meta,
    read_text,
    write_artifact,
)
from compiler.errors import CompileError
from compiler.executor import Executor, check_input
from compiler.model import Model

ROOT = Path(__file__).resolve().parents[2]


def _meta(**changes: object) -> ArtifactMeta:
    base = {
        "model": "m",
        "workload_key": "abc",
        "target_key": "STCP920:0123",
        "target_hash": "0123",
        "batch": 2,
        "inputs": (TensorInfo("ids", (2, 8), "int64", int_high=100),
                   TensorInfo("x", (2, 3), "float32")),
        "outputs": (TensorInfo("y", (2, 1), "float32"),),
        "schedule_source": "O3",
        "graphtune_version": "0.1.0",
        "tvm_version": "0.27.0.post1",
        "created": "2026-01-01T00:00:00+00:00",
        "timings_s": {"build": 1.5},
    }
    base.update(changes)
    return ArtifactMeta(**base)  # type: ignore[arg-type]


def _fake(tmp_path: Path, meta: ArtifactMeta | None = None, name: str = "a.stcobj") -> Path:
    lib = tmp_path / "fake.so"
    lib.write_bytes(b"\x7fELF not really a library" * 100)
    out = tmp_path / name
    write_artifact(out, lib, '{"kind": "graphtune.GraphSchedule"}', "# ir text", meta or _meta())
    return out


# ---- format ----------------------------------------------------------------------------
def test_meta_json_round_trip() -> None:
    m = _meta()
    again = ArtifactMeta.from_json(json.loads(json.dumps(m.to_json())))
    assert again == m
    assert again.inputs[0].int_high == 100 and again.inputs[1].int_high is None


def test_write_then_read_every_member(tmp_path: Path) -> None:
    path = _fake(tmp_path)
    lib = (tmp_path / "fake.so").read_bytes()
    assert read_meta(path) == dataclasses.replace(
        _meta(), lib_sha256=hashlib.sha256(lib).hexdigest(), lib_bytes=len(lib))
    assert read_text(path, SCHEDULE) == '{"kind": "graphtune.GraphSchedule"}'
    assert read_text(path, IR) == "# ir text"
    dest = tmp_path / "x"
    dest.mkdir()
    lib = extract_library(path, dest)
    assert lib == dest / LIB
    assert lib.read_bytes() == (tmp_path / "fake.so").read_bytes()
    with zipfile.ZipFile(path) as zf:
        assert sorted(zf.namelist()) == sorted([META, SCHEDULE, IR, LIB])
        assert zf.getinfo(LIB).compress_type == zipfile.ZIP_STORED


def test_write_is_atomic_and_replaces(tmp_path: Path) -> None:
    path = _fake(tmp_path)
    _fake(tmp_path, _meta(model="second"))
    assert read_meta(path).model == "second"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.stcobj", "fake.so"]  # no temp left


def test_failed_write_keeps_the_old_file(tmp_path: Path) -> None:
    path = _fake(tmp_path)
    with pytest.raises(CompileError, match="cannot write"):
        write_artifact(path, tmp_path / "missing.so", "{}", "", _meta(model="new"))
    assert read_meta(path).model == "m"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.stcobj", "fake.so"]


def test_unknown_member_is_refused(tmp_path: Path) -> None:
    with pytest.raises(CompileError, match="unknown artifact member"):
        read_text(_fake(tmp_path), "../../etc/passwd")


def _zip(path: Path, members: dict[str, str | bytes]) -> Path:
    with zipfile.ZipFile(path, "w") as zf:
        for name, data in members.items():
            zf.writestr(name, data)
    return path


@pytest.mark.parametrize(
    ("make", "match"),
    [
        (lambda p: p / "none.stcobj", "cannot read artifact .*No such file"),
        (lambda p: p, "is a directory"),
        (lambda p: (p / "t.stcobj").write_text("hello") and p / "t.stcobj", "not a zip archive"),
        (lambda p: _zip(p / "z.stcobj", {META: "{}"}), r"missing schedule\.json, ir\.txt, lib\.so"),
        (lambda p: _zip(p / "z.stcobj", {META: "[1", SCHEDULE: "", IR: "", LIB: b""}),
         r"meta\.json is not JSON"),
        (lambda p: _zip(p / "z.stcobj", {META: '{"kind": "other"}', SCHEDULE: "", IR: "",
                                         LIB: b""}), "not a graphtune .stcobj"),
        (lambda p: _zip(p / "z.stcobj", {META: json.dumps({"kind": "graphtune.stcobj",
                                                           "format_version": 1}),
                                         SCHEDULE: "", IR: "", LIB: b""}),
         "meta.json is malformed"),
    ],
)
def test_non_artifacts_are_one_line_errors(tmp_path: Path, make: object, match: str) -> None:
    path = make(tmp_path)  # type: ignore[operator]
    with pytest.raises(CompileError, match=match) as info:
        read_meta(path)
    assert "\n" not in str(info.value)


def test_newer_format_is_refused(tmp_path: Path) -> None:
    path = _fake(tmp_path, _meta(format_version=FORMAT_VERSION + 1))
    with pytest.raises(CompileError, match=r"newer than this graphtune .*upgrade"):
        read_meta(path)
    with pytest.raises(CompileError, match="newer"):
        Executor.load(path)


def test_fake_library_does_not_load(tmp_path: Path) -> None:
    with pytest.raises(CompileError, match="cannot load the compiled library") as info:
        Executor.load(_fake(tmp_path))
    assert "\n" not in str(info.value)


# ---- input checks (no TVM) -------------------------------------------------------------------
def test_check_input_casts_within_a_kind() -> None:
    info = TensorInfo("x", (2, 3), "float32")
    out = check_input(info, np.ones((2, 3), np.float16))
    assert out.dtype == np.float32
    ids = check_input(TensorInfo("i", (2,), "int64"), np.array([1, 2], np.int32))
    assert ids.dtype == np.int64
    assert check_input(info, [[1, 2, 3], [4, 5, 6]]).dtype == np.float32


@pytest.mark.parametrize(
    ("value", "match"),
    [
        (np.ones((3, 2), np.float32), r"shape \[3, 2\], the model expects \[2, 3\]"),
        (np.ones((2, 3, 1), np.float32), "shape"),
        (np.array(["a"] * 6).reshape(2, 3), "dtype <U1"),
    ],
)
def test_check_input_errors(value: np.ndarray, match: str) -> None:
    with pytest.raises(CompileError, match=match):
        check_input(TensorInfo("x", (2, 3), "float32"), value)


def test_float_data_for_an_index_input_is_refused() -> None:
    with pytest.raises(CompileError, match="dtype float64, the model expects int64"):
        check_input(TensorInfo("ids", (2,), "int64"), np.array([1.0, 2.0]))


# ---- a real artifact ------------------------------------------------------------------------
@pytest.fixture(scope="module")
def compiled(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, np.ndarray]]:
    """DeepFM at batch 4 (two inputs, one of them indices), compiled at O3."""
    proto = zoo.build("deepfm", batch=4, weights="inputs")
    path = tmp_path_factory.mktemp("art") / "deepfm.stcobj"
    Model(proto, "deepfm").compile(path)
    return path, zoo.random_inputs(proto, seed=3)


def test_real_artifact_contents(compiled: tuple[Path, dict[str, np.ndarray]]) -> None:
    path, _ = compiled
    meta = read_meta(path)
    assert meta.model == "deepfm" and meta.batch == 4
    assert [(t.name, t.shape, t.dtype) for t in meta.inputs] == [
        ("feat_index", (4, 39), "int64"), ("feat_value", (4, 39), "float32")]
    assert meta.inputs[0].int_high == 259  # the feature table's rows: valid random ids
    assert [(t.name, t.shape) for t in meta.outputs] == [("prob", (4, 1))]
    assert meta.format_version == FORMAT_VERSION and meta.tvm_version.startswith("0.27")
    assert set(meta.timings_s) >= {"build", "export", "schedule"}
    ir = read_text(path, IR)
    assert "def main(" in ir and "graphtune.group" in ir
    assert json.loads(read_text(path, SCHEDULE))["workload_key"] == meta.workload_key


def test_executor_errors_are_one_line(compiled: tuple[Path, dict[str, np.ndarray]]) -> None:
    path, inputs = compiled
    ex = Executor.load(path)
    assert list(ex.input_info) == ["feat_index", "feat_value"]
    with pytest.raises(CompileError, match="input 'feat_index' was not set"):
        ex()
    ex.set_input({"feat_value": inputs["feat_value"]})
    with pytest.raises(CompileError, match="input 'feat_index' was not set"):
        ex()
    with pytest.raises(CompileError, match="model has no input 'nope'"):
        ex.set_input({"nope": inputs["feat_value"]})
    with pytest.raises(CompileError, match=r"shape \[4, 38\]"):
        ex.set_input({"feat_index": inputs["feat_index"][:, :38]})
    ex.set_input({"feat_index": inputs["feat_index"]})
    first = ex()[0]
    assert first.shape == (4, 1)
    np.testing.assert_array_equal(ex.run(inputs)[0], first)
    assert ex.schedule.workload_key == ex.meta.workload_key


def test_fresh_process_without_the_model(
    compiled: tuple[Path, dict[str, np.ndarray]], tmp_path: Path
) -> None:
    """Load and run in a process that imports only compiler.executor (no ONNX, no zoo)."""
    path, inputs = compiled
    np.savez(tmp_path / "in.npz", **inputs)
    ex = Executor.load(path)
    ex.set_input(inputs)
    expected = ex()[0]
    script = textwrap.dedent(f"""
        import sys
        import numpy as np
        from compiler.executor import Executor
        ex = Executor.load({str(path)!r})
        with np.load({str(tmp_path / "in.npz")!r}) as f:
            ex.set_input({{k: f[k] for k in f.files}})
        np.save({str(tmp_path / "out.npy")!r}, ex()[0])
        banned = [m for m in ("onnx", "onnxruntime", "compiler.zoo", "tvm.relax.frontend.onnx")
                  if m in sys.modules]
        print("banned:", banned)
    """)
    proc = subprocess.run(
        [sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, timeout=300,
    )
    assert proc.returncode == 0, proc.stderr
    assert "banned: []" in proc.stdout
    assert proc.stderr == ""  # TVM's native chatter on load goes to the log, not stderr
    np.testing.assert_array_equal(np.load(tmp_path / "out.npy"), expected)
