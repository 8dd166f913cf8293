"""``tune --time-budget``, the first line, a finished job, ETA, warnings as one-liners (issue 21)."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from autotune import RunOptions, SearchOptions, tune
from autotune.cli import main
from autotune.commands._tune_front import log_state, parse_duration, workers_warning
from autotune.report._progress import ProgressTable
from compiler.errors import GraphtuneError
from compiler.graph import Graph
from logs import read_records

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("text,seconds", [("20s", 20), ("10m", 600), ("1h30m", 5400), ("90", 90),
                                          ("2.5m", 150), ("1m30s", 90), ("500ms", 0.5)])
def test_parse_duration(text: str, seconds: float) -> None:
    assert parse_duration(text) == pytest.approx(seconds)


@pytest.mark.parametrize("text", ["", "0s", "ten", "10x", "-5m", "10m-3"])
def test_parse_duration_refuses(text: str) -> None:
    with pytest.raises(GraphtuneError, match="positive duration"):
        parse_duration(text)


def test_workers_above_cpus_warn() -> None:
    import os

    cpus = len(os.sched_getaffinity(0))
    assert workers_warning(cpus) is None and workers_warning(None) is None
    assert f"--workers {cpus + 6} on {cpus} CPU(s)" in (workers_warning(cpus + 6) or "")


def test_time_budget_stops_cleanly_and_a_finished_job_measures_nothing(
        tiny_graph: Graph, tmp_path: Path) -> None:
    log = tmp_path / "b.jsonl"
    seen: list[str] = []
    rounds: list[int] = []

    def watch(job) -> None:  # type: ignore[no-untyped-def]
        seen.append(ProgressTable.line(job))
        rounds.append(job.total)
        if len(rounds) == 3:
            job.deadline = time.monotonic()  # the budget runs out now (no timing in tests)

    res = tune([tiny_graph], trials=100_000, log=log, search=SearchOptions(seed=0),
               run=RunOptions(workers=0, curve=False, time_budget_s=3600.0, callbacks=[watch]))
    # Nothing new starts after the deadline; what was measured is all in the log.
    assert len(rounds) == 3 and res.total == rounds[-1] == res.measured
    assert len(list(read_records(log))) == res.total
    # An hour's budget is sooner than 100,000 measurements: the ETA is the budget's.
    assert all(", ETA " in line and "(time budget)" in line for line in seen[:2]), seen
    # The same job re-run with --trials at the log's count: nothing measured, no workers.
    again = tune([tiny_graph], trials=res.total, workers=2, log=log, seed=0, curve=False)
    assert again.measured == 0 and again.total == res.total
    import ray

    assert not ray.is_initialized()  # workers=2 asked for, but nothing to measure: no Ray
    assert again.tasks[0].best_latency_us == res.tasks[0].best_latency_us


def test_live_table_says_done_at_the_end(tiny_graph: Graph, tmp_path: Path) -> None:
    tables: list[str] = []

    def grab(job) -> None:  # type: ignore[no-untyped-def]
        from rich.console import Console

        con = Console(width=200, record=True, file=open("/dev/null", "w"))  # noqa: SIM115
        con.print(ProgressTable.table(job))
        tables.append(con.export_text())

    tune([tiny_graph], trials=8, workers=0, log=tmp_path / "d.jsonl", seed=0, curve=False,
         callbacks=[grab])
    assert "8/8" in tables[-1] and "done" in tables[-1] and "tuning" not in \
        tables[-1].split("\n", 1)[1]


def test_cli_first_line_finished_rerun_and_torn_log(tiny_onnx: Path, tmp_path: Path,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    from autotune.commands import _common

    log = tmp_path / "c.jsonl"
    assert log_state(str(log)) == "a new log"
    with monkeypatch.context() as m:  # the first lines are a terminal's (as other progress)
        m.setattr(_common, "_stderr_is_terminal", lambda: True)
        first = CliRunner().invoke(main, ["tune", str(tiny_onnx), "--trials", "8",
                                          "--workers", "0", "--log", str(log), "--seed", "0"])
    assert first.exit_code == 0, first.output
    lines = first.stderr.splitlines()
    assert lines[0] == f"graphtune: tune {tiny_onnx} -> {log} (a new log); --trials 8", lines
    assert lines[1] == "graphtune: tiny: batch 4, 16 ops, 1 task", lines
    state = log_state(str(log))
    assert state.startswith("resuming: 8 records, best ") and "(tiny@b4)" in state
    # A writer died mid-line: the next tune warns once as a graphtune line, then repairs it.
    with open(log, "a") as f:
        f.write('{"v": "1.1", "workload": {"key": "torn')
    again = subprocess.run(
        [sys.executable, "-m", "autotune.cli", "tune", str(tiny_onnx), "--trials", "10",
         "--workers", "0", "--log", str(log), "--json"],
        capture_output=True, text=True, cwd=REPO, timeout=600)
    assert again.returncode == 0, again.stderr
    err = again.stderr
    assert "WARNING" not in err and "Warning:" not in err and ".py:" not in err, err
    assert "graphtune: warning: " in err and "torn" in err
    assert json.loads(again.stdout)["measured"] == 2
    assert log.read_bytes().endswith(b"\n") and (tmp_path / "c.jsonl.torn").exists()
    assert len(list(read_records(log))) == 10  # and the log reads clean now
    assert "raylet" not in err.lower() and "core_worker" not in err
    # That run finished: its summary was saved; the same job with --trials at or below the
    # log's count answers from it without importing the model (no TVM, no Ray).
    assert (tmp_path / "c.summary.json").exists()
    code = ("import sys; from autotune.cli import main; sys.argv = ['graphtune', 'tune', "
            f"{str(tiny_onnx)!r}, '--trials', '6', '--log', {str(log)!r}]; "
            "import atexit; atexit.register(lambda: print('tvm' in sys.modules, "
            "'ray' in sys.modules, file=sys.stderr)); main()")
    fast = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          cwd=REPO, timeout=300)
    assert fast.returncode == 0, fast.stderr
    assert ("the log already holds 10 records of these tasks (--trials 6): the job is "
            "finished, nothing was measured and Ray was not started") in fast.stderr
    assert fast.stderr.strip().splitlines()[-1] == "False False"  # neither TVM nor Ray loaded
    assert "tiny" in fast.stdout and "best µs" in fast.stdout


def test_summary_table_folds_long_task_names_at_80_columns(tiny_graph: Graph,
                                                           tmp_path: Path) -> None:
    import dataclasses
    import io

    from rich.console import Console

    from autotune.report._progress import summary_table

    res = tune([tiny_graph], trials=4, workers=0, log=tmp_path / "s.jsonl", seed=0, curve=False)
    long = "h_vit_encoder_layer_11_mlp_fc2_gelu"
    res = dataclasses.replace(res, tasks=tuple(dataclasses.replace(t, name=long)
                                               for t in res.tasks))
    buf = io.StringIO()
    Console(file=buf, width=80).print(summary_table(res))
    text = buf.getvalue()
    assert "…" not in text, text  # was cut to "h_vit_…"
    first_column = "".join(ln.split("│")[1].strip() for ln in text.splitlines()
                           if ln.startswith("│") and ln.split("│")[1].strip())
    assert long in first_column


# ---- the budget counts what comes before measuring: the CLI's start, Ray's start ----------------
def test_the_budget_counts_from_the_process_start() -> None:
    """`graphtune tune` counted from its function's entry: the interpreter's start and the
    CLI's imports (2.5 s on a loaded machine) came on top of --time-budget."""
    code = ("import time; time.sleep(1.0); from autotune.commands._tune_front import "
            "process_started; e = time.monotonic(); print(e - process_started(e))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         cwd=REPO, timeout=300, check=True)
    assert float(out.stdout) >= 1.0  # the sleep before the command is counted
    from autotune.commands._tune_front import process_started

    long_ago = time.monotonic() - 1e5  # entered in a process far younger: its own entry
    assert process_started(long_ago) == long_ago


def test_a_short_budget_measures_without_ray(tiny_graph: Graph, tmp_path: Path) -> None:
    """Under a minute left and no --workers: Ray's start (16 s on a loaded machine) used
    to eat a 20 s budget, and the job ended late with nothing measured."""
    import ray

    lines: list[str] = []
    res = tune([tiny_graph], trials=6, log=tmp_path / "s.jsonl",
               search=SearchOptions(seed=0),
               run=RunOptions(curve=False, time_budget_s=50.0, notify=lines.append))
    assert res.total == 6 and not ray.is_initialized()
    assert any("measuring in this process, without Ray workers" in ln for ln in lines), lines


def test_workers_that_start_after_the_deadline_get_nothing(tiny_graph: Graph) -> None:
    """--workers given: Ray starts, but the wait for its workers ends at the deadline (it
    waited up to 180 s for them, then the job sent nothing)."""
    import ray

    from autotune.measure._measurer import SimMeasurer
    from autotune.running._ray_pool import RayPool
    from compiler.target import Target

    pool = RayPool({"t": tiny_graph}, Target.default(), SimMeasurer(), 1,
                   deadline=time.monotonic())
    try:
        assert pool.started_late
    finally:
        pool.close()
    assert not ray.is_initialized()


def test_a_time_budget_alone_bounds_the_job(tiny_onnx: Path, tmp_path: Path,
                                           monkeypatch: pytest.MonkeyPatch) -> None:
    """As Optuna's optimize(timeout=...) without n_trials: `tune --time-budget 1h` tunes
    until the budget is used up (it asked for --trials), and a re-run goes on."""
    calls: list[int] = []

    def spend(self: ProgressTable, job) -> None:  # type: ignore[no-untyped-def]
        calls.append(job.total)
        if len(calls) % 3 == 0:
            job.deadline = time.monotonic()  # the hour is up now (no timing in tests)

    monkeypatch.setattr(ProgressTable, "__call__", spend)
    log = tmp_path / "t.jsonl"
    args = ["tune", str(tiny_onnx), "--time-budget", "1h", "--workers", "0", "--log", str(log),
            "--seed", "0"]
    r = CliRunner().invoke(main, args)
    assert r.exit_code == 0, r.output
    n = len(list(read_records(log)))
    assert n > 0 and f"is used up: {n} measurements in the log; re-run" in r.stderr, r.stderr
    again = CliRunner().invoke(main, args)
    assert again.exit_code == 0 and len(list(read_records(log))) > n  # never "finished"
    line = ProgressTable.line(_job_of(n)).split(";")[0]
    assert line.startswith(f"tune: {n} measured,"), line  # not "/1000000000000"
    r = CliRunner().invoke(main, ["tune", str(tiny_onnx), "--log", str(log)])
    assert r.exit_code == 2 and r.stderr.startswith("graphtune: error: give --trials N")


def _job_of(total: int):  # type: ignore[no-untyped-def]
    from autotune.job._state import NO_TRIAL_LIMIT, JobState

    class _Task:
        records = total
        best_latency_us = None

    return JobState([_Task()], NO_TRIAL_LIMIT, 0)  # type: ignore[list-item]
