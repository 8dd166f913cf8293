"""``python -m bench``: the suite's outputs have the promised shape and its ratios hold."""

from __future__ import annotations

import csv
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PNGS = ("curves.png", "speedup.png", "roofline.png")


def _bench(*args: str) -> subprocess.CompletedProcess[str]:
    """``python -m bench ARGS`` as a user runs it, from the repository's root."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run([sys.executable, "-m", "bench", *args], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=900)


def _main(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    """The same in this process (no second start-up of TVM and Optuna)."""
    from bench.__main__ import main

    try:
        rc = main(list(args))
    except SystemExit as e:
        rc = int(e.code or 0)
    out, err = capsys.readouterr()
    return rc, out, err


def _check_png(path: Path) -> None:
    from PIL import Image

    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n", path
    with Image.open(path) as im:
        im.verify()
    with Image.open(path) as im:
        assert im.size[0] > 200 and im.size[1] > 200


def _check_outputs(out: Path, models: list[str], methods: list[str], budget: int) -> list[dict]:
    from bench._suite_report import COLUMNS

    with (out / "suite.csv").open() as f:
        reader = csv.DictReader(f)
        assert tuple(reader.fieldnames or ()) == COLUMNS
        rows = list(reader)
    assert sorted({r["model"] for r in rows}) == sorted(models)
    for model in models:
        mine = [r for r in rows if r["model"] == model]
        assert [r["method"] for r in mine][-len(methods):] == methods
        assert {"O0", "O1", "O2", "O3"} <= {r["method"] for r in mine}
        best_base = min(float(r["latency_us"]) for r in mine
                        if r["method"] not in methods and r["latency_us"])
        for r in mine:
            if r["method"] not in methods:
                assert r["measurements"] == "" and r["meas_to_95pct"] == ""
                continue
            # A search stops early only for a reason it records (space exhausted, at the bound).
            assert int(r["measurements"]) == budget or (0 < int(r["measurements"]) < budget
                                                        and r["stopped"])
            # Seeded searches measure O0-O3 and the plans first: never worse than them.
            assert float(r["speedup_over_best_baseline"]) >= 1.0 - 1e-9
            assert float(r["speedup_over_best_baseline"]) == pytest.approx(
                best_base / float(r["latency_us"]))
            # "" when the budget ran out first; the method that found the best reaches it.
            assert r["meas_to_95pct"] == "" or 1 <= int(r["meas_to_95pct"]) <= budget
            assert float(r["latency_over_bound"]) >= 1.0
            assert float(r["chip_throughput_per_s"]) > 0 and float(r["ddr_mb"]) > 0
            assert float(r["tuning_wall_s_this_machine"]) > 0
        assert any(r["meas_to_95pct"] for r in mine if r["method"] in methods)
    md = (out / "suite.md").read_text()
    summary = md.split("## Summary", 1)[1].split("## All rows", 1)[0].strip().splitlines()
    assert len(summary) == 2 + len(models)
    widths = {line.count("|") for line in summary}
    assert widths == {len(methods) * 2 + 5}, summary
    full = [ln for ln in md.split("## All rows", 1)[1].splitlines() if ln.startswith("| ")]
    assert len(full) == 1 + len(rows)
    meta = json.loads((out / "suite.json").read_text())
    assert meta["budget"] == budget and meta["models"] == models
    assert meta["summary_markdown"].strip() == "\n".join(summary)
    for png in PNGS:
        _check_png(out / png)
    return rows


def test_tiny_suite_outputs_and_resume(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "suite"
    args = ["--models", "tiny_cnn", "--budget", "6", "--jobs", "1", "--out", str(out),
            "--logs", str(tmp_path / "logs")]
    proc = _bench(*args)
    assert proc.returncode == 0, proc.stderr[-2000:]
    methods = ["guided", "tpe", "nsga2", "random"]
    rows = _check_outputs(out, ["tiny_cnn"], methods, 6)
    assert "| tiny CNN b4 |" in proc.stdout
    before = (out / "suite.csv").read_text()
    # --resume reuses every finished run: the same table without measuring again.
    rc, stdout, _ = _main(capsys, *args, "--resume")
    assert rc == 0
    assert stdout.count("reusing ") == 1 + len(methods)
    assert (out / "suite.csv").read_text() == before
    assert len(rows) == 4 + len(methods)
    # An interrupted suite: --report-only shows the missing search as not run, runs nothing.
    (out / "runs" / "tiny_cnn_tpe.json").unlink()
    rc, stdout, _ = _main(capsys, *args, "--report-only")
    assert rc == 0
    assert "0 run(s)" in stdout and "not run" in stdout
    meta = json.loads((out / "suite.json").read_text())
    assert meta["not_run"] == ["tiny_cnn_tpe"] and meta["reused"] == 4
    assert not (out / "runs" / "tiny_cnn_tpe.json").exists()


def test_search_runs_are_reproducible(tmp_path: Path) -> None:
    from bench._suite import run_search

    a = run_search("tiny_cnn", "random", 6, 3, True, tmp_path / "a")
    b = run_search("tiny_cnn", "random", 6, 3, True, tmp_path / "b")
    assert a["curve"] == b["curve"] and a["best"] == b["best"]
    assert len(a["curve"]) == 6


@pytest.mark.parametrize("flag", ["--budget", "--jobs"])
def test_bad_numbers_are_a_usage_error(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                       flag: str) -> None:
    rc, _, err = _main(capsys, "--models", "tiny_cnn", flag, "0", "--out", str(tmp_path))
    assert rc == 2
    assert err.strip().splitlines()[-1].endswith("--budget and --jobs must be >= 1")
    assert "Traceback" not in err and not list(tmp_path.iterdir())


@pytest.mark.slow
def test_quick_suite(tmp_path: Path) -> None:
    out = tmp_path / "suite"
    proc = _bench("--quick", "--models", "deepfm", "--jobs", "1", "--out", str(out),
                  "--logs", str(tmp_path / "logs"))
    assert proc.returncode == 0, proc.stderr[-2000:]
    from bench._suite import QUICK_BUDGET

    rows = _check_outputs(out, ["deepfm"], ["guided", "tpe", "nsga2", "random"], QUICK_BUDGET)
    # DeepFM has the guide's plan: its row and the plan ratio are there.
    assert any(r["method"] == "plan:deepfm" for r in rows)
    assert all(r["speedup_over_plan"] for r in rows)


def test_readme_shows_the_committed_suite() -> None:
    """The README's suite block is the one the committed results produce (no hand edits)."""
    from bench._suite_report import readme_block

    results = ROOT / "bench" / "results" / "suite"
    meta = json.loads((results / "suite.json").read_text())
    assert readme_block(meta) in (ROOT / "bench" / "README.md").read_text()  # moved there (issue 21)
    md = (results / "suite.md").read_text()
    assert meta["summary_markdown"] in md
    with (results / "suite.csv").open() as f:
        assert {r["model"] for r in csv.DictReader(f)} == set(meta["models"])
    for png in PNGS:
        _check_png(results / png)


def _children(pid: int) -> set[int]:
    """Live processes whose parent is ``pid`` (from /proc)."""
    out = set()
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                stat = (d / "stat").read_text()
            except OSError:
                continue
            fields = stat.rsplit(")", 1)[1].split()
            if int(fields[1]) == pid and fields[0] != "Z":
                out.add(int(d.name))
    return out


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_sigterm_ends_the_suite_and_its_workers(tmp_path: Path) -> None:
    """SIGTERM to ``python -m bench --jobs 2`` ends its pool workers too: no run outlives it."""
    import contextlib
    import signal
    import time

    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    workers: set[int] = set()
    proc = subprocess.Popen(
        [sys.executable, "-m", "bench", "--models", "tiny_cnn", "--budget", "100000",
         "--jobs", "2", "--out", str(tmp_path / "suite"), "--logs", str(tmp_path / "logs")],
        cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 300
        while len(workers) < 2 and time.monotonic() < deadline and proc.poll() is None:
            time.sleep(0.5)
            workers = {c for c in _children(proc.pid)
                       if "spawn_main" in Path(f"/proc/{c}/cmdline").read_text(errors="replace")}
        assert len(workers) == 2, "the suite did not start its two workers"
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=120)
        assert proc.returncode == 130
        assert "stopped" in err and "Traceback" not in err
        deadline = time.monotonic() + 60
        while any(Path(f"/proc/{w}").exists() and
                  "Z" not in (Path(f"/proc/{w}/stat").read_text().rsplit(")", 1)[1].split()[:1])
                  for w in workers) and time.monotonic() < deadline:
            time.sleep(0.5)
        alive = [w for w in workers if Path(f"/proc/{w}").exists()]
        assert not alive, f"pool workers {alive} outlived the suite"
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        for w in workers:  # a failed run of this test leaves no orphan behind
            with contextlib.suppress(OSError):
                os.kill(w, signal.SIGKILL)
