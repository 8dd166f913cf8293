"""Rough edges a new user hit (issue 21): each test failed before its fix."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import onnx
from click.testing import CliRunner

from autotune.cli import main
from autotune.report._placements import bind_shape, chunk_summary
from compiler import zoo
from compiler.schedule import Placement
from logs import RecordWriter
from tests.logs.helpers import make_record

REPO = Path(__file__).resolve().parents[2]
VIT_B1 = REPO / "tests" / "data" / "torch" / "vit_b1.onnx"


def test_core_bind_shows_the_cores() -> None:
    two = Placement("LLB", ((4, 5, 6, 7), (0, 1, 2, 3)))
    assert bind_shape(two) == "[[4-7], [0-3]]"  # was "[2, 4]"
    assert bind_shape(Placement("L1", tuple((c,) for c in range(8)))) == "[0-7]"
    assert bind_shape(Placement("L1", ((0,), (2,), (4,), (5,), (6,)))) == "[0, 2, 4-6]"
    assert chunk_summary([two, two]) == "LLB [[4-7], [0-3]] x2"


def test_another_models_schedule_names_its_workload(tmp_path: Path) -> None:
    """ViT's class token is concatenated at the file's batch 1: at batch 8 TVM's import
    failed with a shape message; the schedule's workload comes first now."""
    t8 = tmp_path / "t8.onnx"
    onnx.save(zoo.build("tiny_cnn", batch=8, weights="inputs"), str(t8))
    sched = tmp_path / "t8.json"
    r = CliRunner().invoke(main, ["schedule", "make", str(t8), "--level", "3", "-o", str(sched)])
    assert r.exit_code == 0, r.output
    r = CliRunner().invoke(main, ["simulate", str(VIT_B1), "--schedule", str(sched)])
    assert r.exit_code == 2
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and "this schedule is for workload " in lines[0], r.stderr
    assert "made for batch 8" in lines[0] and "not broadcastable" not in lines[0]


def test_schedule_make_on_a_torn_log_warns_in_one_graphtune_line(tmp_path: Path) -> None:
    """A LogWarning used to print as Python's `path.py:123: LogWarning: ...` two-liner."""
    model = tmp_path / "tiny.onnx"
    onnx.save(zoo.build("tiny_cnn", batch=2, weights="inputs", image_size=16), str(model))
    log = tmp_path / "t.jsonl"
    with RecordWriter(log) as w:
        w.write(make_record())
    with open(log, "a") as f:
        f.write(make_record().to_line()[:70])
    r = subprocess.run([sys.executable, "-m", "autotune.cli", "schedule", "make", str(model),
                        "--log", str(log), "-o", str(tmp_path / "s.json")],
                       capture_output=True, text=True, cwd=REPO, timeout=600)
    lines = [ln for ln in r.stderr.splitlines() if "(" not in ln or "torn" in ln]
    assert any(ln.startswith("graphtune: warning: ") and "torn" in ln for ln in lines), r.stderr
    assert "LogWarning" not in r.stderr and ".py:" not in r.stderr, r.stderr


def test_compile_strict_says_the_log_holds_another_batch(tiny_onnx: Path, tmp_path: Path) -> None:
    log = tmp_path / "t.jsonl"
    r = CliRunner().invoke(main, ["tune", str(tiny_onnx), "--trials", "4", "--workers", "0",
                                  "--log", str(log), "--seed", "0"])
    assert r.exit_code == 0, r.output
    r = CliRunner().invoke(main, ["compile", str(tiny_onnx), "--batch", "2", "--log", str(log),
                                  "--strict", "-o", str(tmp_path / "t.stcobj")])
    assert r.exit_code == 2
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and "no tuned schedule" in lines[0], r.stderr
    assert "the log holds tiny at batch 4: compile with --batch 4" in lines[0]


def test_report_with_two_models_warns_about_neither(tiny_onnx: Path, tmp_path: Path) -> None:
    """ViT (batch 1, its class token concatenated at that batch) and tiny_cnn (batch 4) in
    one log: every model used to be tried at every batch, and ViT "cannot be imported at
    batch 4" was printed although both models matched their tasks."""
    log = tmp_path / "two.jsonl"
    for model in (VIT_B1, tiny_onnx):
        r = CliRunner().invoke(main, ["tune", str(model), "--trials", "5", "--workers", "0",
                                      "--log", str(log), "--seed", "0"])
        assert r.exit_code == 0, r.output
    r = CliRunner().invoke(main, ["report", str(log), "-o", str(tmp_path / "r.html"),
                                  "--model", str(VIT_B1), "--model", str(tiny_onnx)])
    assert r.exit_code == 0, r.output
    assert "warning" not in r.stderr, r.stderr
    assert " simulated" in r.stdout and " 0 simulated" not in r.stdout, r.stdout
