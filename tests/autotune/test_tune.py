"""Tuning jobs end to end, measured in-process (``--workers 0``): log, studies, resume, CLI."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

import onnx
import optuna
import pytest
from click.testing import CliRunner
from optuna.trial import TrialState

from autotune import ApplyHistoryBest, GuidedOptions, RunOptions, SearchOptions, tune
from autotune.cli import main
from autotune.sampling._studies import candidate_id
from compiler.graph import Graph
from compiler.schedule import GraphSchedule
from compiler.target import Target
from logs import read_records
from tests.autotune.conftest import cpu_split_proto, proto_graph

ROOT = Path(__file__).resolve().parents[2]
SMALL = GuidedOptions(population=32, generations=1, proposals=8, parents=4, retrain_every=8)


def _lines(log: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in log.read_text().splitlines()]


def _cids(log: Path) -> list[str]:
    return [candidate_id(GraphSchedule.from_json(r["schedule"])) for r in _lines(log)
            if r["result"]["status"] != "worker_lost"]


def _without_time(log: Path) -> list[dict[str, Any]]:
    out = []
    for r in _lines(log):
        r["prov"].pop("time_unix_s")
        r.pop("crc32")
        out.append(r)
    return out


def _study(journal: str) -> optuna.Study:
    """The job's study, read the way optuna-dashboard reads a journal file."""
    from optuna.storages import JournalStorage
    from optuna.storages.journal import JournalFileBackend

    storage = JournalStorage(JournalFileBackend(journal))
    (name,) = optuna.get_all_study_names(storage)
    return optuna.load_study(study_name=name, storage=storage)


def test_cli_tune_records_every_measurement_seeds_first(tiny_onnx: Path, tmp_path: Path) -> None:
    log = tmp_path / "tune.jsonl"
    res = CliRunner().invoke(main, ["tune", str(tiny_onnx), "--trials", "24", "--workers", "0",
                                    "--log", str(log), "--seed", "0", "--json"])
    assert res.exit_code == 0, res.output
    out = json.loads(res.stdout.strip().splitlines()[-1])
    recs = _lines(log)
    assert len(recs) == 24 == out["total"] == out["measured"]
    assert [r["prov"]["tuner"] for r in recs[:4]] == ["O0", "O1", "O2", "O3"]
    assert {r["prov"]["tuner"] for r in recs[4:]} == {"graphtune-guided"}
    study = recs[0]["prov"]["study"]
    assert [r["prov"]["trial"] for r in recs] == list(range(24))
    for r in recs:
        assert r["v"] == "1.2" and r["prov"]["study"] == study and r["prov"]["measurer"] == "sim"
        assert r["result"]["lower_bound_us"] > 0  # the task's bound, in every record
        assert r["prov"]["params"] and r["workload"]["batch"] == 4
    (task,) = out["tasks"]
    o3 = recs[3]["result"]["latency_us"]
    assert task["best_latency_us"] == min(r["result"]["latency_us"] for r in recs
                                          if r["result"]["status"] == "ok") <= o3
    assert task["baselines"]["O3"] == o3 and task["speedup_over_O3"] >= 1.0
    assert task["latency_over_bound"] >= 1.0
    assert len(set(_cids(log))) == 24
    assert Path(out["curve"]).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    trials = _study(str(tmp_path / "tune.journal")).trials
    assert len(trials) >= 24 and all(t.state == TrialState.COMPLETE for t in trials)
    best = ApplyHistoryBest(str(log)).query(task["key"], Target.default().key)
    logged_best = next(r["schedule"] for r in recs
                       if r["result"]["latency_us"] == task["best_latency_us"])
    assert best is not None and GraphSchedule.from_json(best).structural_key() == \
        GraphSchedule.from_json(logged_best).structural_key()
    made = CliRunner().invoke(main, ["schedule", "make", str(tiny_onnx), "--log", str(log),
                                     "-o", str(tmp_path / "tuned.json")])
    assert made.exit_code == 0, made.output
    assert GraphSchedule.load(str(tmp_path / "tuned.json")).structural_key() == \
        GraphSchedule.from_json(logged_best).structural_key()
    missing = CliRunner().invoke(main, ["schedule", "make", str(tiny_onnx), "--batch", "2",
                                        "--log", str(log), "-o", str(tmp_path / "x.json")])
    assert missing.exit_code == 2 and "no tuned schedule" in missing.stderr


def test_same_seed_in_process_gives_the_same_log(tiny_graph: Graph, tmp_path: Path) -> None:
    """Same seed, same log; the old keywords (deprecated) give the same job as the options."""
    logs = [tmp_path / "a.jsonl", tmp_path / "b.jsonl"]
    with pytest.warns(DeprecationWarning, match="curve, guided, seed, workers"):
        tune([tiny_graph], trials=16, workers=0, log=logs[0], seed=11, guided=SMALL, curve=False)
    tune([tiny_graph], trials=16, log=logs[1], search=SearchOptions(seed=11, guided=SMALL),
         run=RunOptions(workers=0, curve=False))
    assert _without_time(logs[0]) == _without_time(logs[1])


def test_rerun_resumes_without_measuring_anything_twice(tiny_graph: Graph, tmp_path: Path) -> None:
    log = tmp_path / "r.jsonl"
    first = tune([tiny_graph], trials=12, workers=0, log=log, seed=2, guided=SMALL, curve=False)
    assert first.measured == 12
    again = tune([tiny_graph], trials=12, workers=0, log=log, seed=2, guided=SMALL, curve=False)
    assert again.measured == 0 and again.total == 12
    more = tune([tiny_graph], trials=20, workers=0, log=log, seed=2, guided=SMALL, curve=False)
    assert more.measured == 8 and more.total == 20
    cids = _cids(log)
    assert len(cids) == 20 == len(set(cids))
    assert more.tasks[0].best_latency_us <= first.tasks[0].best_latency_us
    assert more.tasks[0].baselines == first.tasks[0].baselines
    numbers = [r["prov"]["trial"] for r in _lines(log)]
    assert numbers == list(range(20))


def _wait_lines(log: Path, n: int, proc: subprocess.Popen[bytes], limit_s: float = 120) -> None:
    t0 = time.monotonic()
    while time.monotonic() - t0 < limit_s and proc.poll() is None:
        if log.exists() and log.read_bytes().count(b"\n") >= n:
            return
        time.sleep(0.05)
    raise AssertionError(f"the log did not reach {n} lines (exit {proc.poll()})")


def test_sigkill_and_rerun_measures_every_candidate_once(tiny_onnx: Path, tmp_path: Path) -> None:
    log = tmp_path / "k.jsonl"
    cmd = [sys.executable, "-m", "autotune.cli", "tune", str(tiny_onnx), "--trials", "40",
           "--workers", "0", "--log", str(log), "--seed", "5", "--json"]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    for at in (6, 22):
        proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        _wait_lines(log, at, proc)
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout)
    cids = _cids(log)
    assert out["total"] == 40 == len(cids) == len(set(cids))
    per_trial = Counter((r["prov"]["study"], r["prov"]["trial"]) for r in _lines(log))
    assert max(per_trial.values()) == 1
    trials = _study(str(tmp_path / "k.journal")).trials
    done_numbers = {t.number for t in trials if t.state == TrialState.COMPLETE}
    assert {r["prov"]["trial"] for r in _lines(log)} <= done_numbers


@pytest.mark.parametrize("sampler", ["tpe", "random", "nsga2"])
def test_optuna_samplers_propose_through_the_space(tiny_graph: Graph, tmp_path: Path,
                                                   sampler: str) -> None:
    log = tmp_path / f"{sampler}.jsonl"
    res = tune([tiny_graph], trials=10, workers=0, log=log, seed=0, sampler=sampler, curve=False)
    recs = _lines(log)
    assert len(recs) == 10 and res.measured == 10
    assert {r["prov"]["tuner"] for r in recs[4:]} == {f"optuna-{sampler}"}
    assert len(set(_cids(log))) == 10


def test_a_model_with_a_cpu_op_tunes_each_npu_part(tmp_path: Path) -> None:
    g = proto_graph(cpu_split_proto(out=32), "split32")
    res = tune([g], trials=24, workers=0, log=tmp_path / "s.jsonl", seed=0, guided=SMALL,
               curve=False)
    assert len(res.tasks) == 2 and all(t.records >= 4 for t in res.tasks)
    assert sum(t.records for t in res.tasks) == 24
    (model,) = res.models
    assert model.best_us == pytest.approx(sum(t.best_latency_us or 0 for t in res.tasks))
    keys = {r.workload.key for r in read_records(tmp_path / "s.jsonl")}
    assert keys == {t.key for t in res.tasks} and g.workload_key not in keys


def test_throughput_objective_maximises(tiny_graph: Graph, tmp_path: Path) -> None:
    res = tune([tiny_graph], trials=10, workers=0, log=tmp_path / "t.jsonl", seed=0,
               objective="throughput", guided=SMALL, curve=False)
    recs = [r for r in _lines(tmp_path / "t.jsonl") if r["result"]["status"] == "ok"]
    assert res.tasks[0].best_throughput_per_s == max(r["result"]["throughput_per_s"] for r in recs)
    study = _study(str(tmp_path / "t.journal"))
    assert study.direction == optuna.study.StudyDirection.MAXIMIZE


# ---- user errors: one line, exit 2, before any measurer starts ---------------------------------


@pytest.fixture
def no_ray(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(*args: object, **kwargs: object) -> None:
        raise AssertionError("Ray must not start for a user error")

    monkeypatch.setattr("autotune.running._ray_pool.start_ray", refuse)


def _error(args: list[str]) -> str:
    t0 = time.monotonic()
    res = CliRunner().invoke(main, ["tune", *args])
    assert time.monotonic() - t0 < 15
    assert res.exit_code == 2, res.output
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("graphtune: error: "), res.stderr
    return lines[0]


def test_user_errors_are_one_line_before_ray(no_ray: None, tiny_onnx: Path, tmp_path: Path) -> None:
    broken = tmp_path / "broken.onnx"
    broken.write_bytes(tiny_onnx.read_bytes()[:200])
    bad_toml = tmp_path / "chip.toml"
    bad_toml.write_text("[l1]\ndata_bytes = -4\n")
    log = str(tmp_path / "ok.jsonl")
    assert "broken.onnx" in _error([str(broken), "--trials", "5", "--log", log])
    assert "chip.toml" in _error([str(tiny_onnx), "--trials", "5", "--log", log,
                                  "--target", str(bad_toml)])
    assert "does not exist" in _error([str(tiny_onnx), "--trials", "5",
                                       "--log", str(tmp_path / "nodir" / "t.jsonl")])
    assert "is a directory" in _error([str(tiny_onnx), "--trials", "5", "--log", str(tmp_path)])
    assert "--trials" in _error([str(tiny_onnx), "--trials", "0", "--log", log])
    if "torch" not in sys.modules:
        try:
            import torch  # noqa: F401
        except ImportError:
            assert "PyTorch" in _error([str(tiny_onnx), "--trials", "5", "--log", log,
                                        "--sampler", "gp"])
    onnx_as_log = tmp_path / "model_as_log.jsonl"
    onnx.save(onnx.load(str(tiny_onnx)), str(onnx_as_log))
    assert "model_as_log.jsonl" in _error([str(tiny_onnx), "--trials", "5", "--workers", "1",
                                           "--log", str(onnx_as_log)])


def test_two_seeds_that_are_one_schedule_are_measured_once(
        tiny_graph: Graph, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from autotune import _tune
    from autotune.sampling._studies import seed_schedules

    real = seed_schedules(tiny_graph, Target.default())
    o3 = dict(real)["O3"]
    monkeypatch.setattr(_tune, "seed_schedules", lambda g, t: [("plan:same", o3), *real])
    res = tune([tiny_graph], trials=8, workers=0, log=tmp_path / "p.jsonl", seed=0, guided=SMALL,
               curve=False)
    (task,) = res.tasks
    assert task.baselines["plan:same"] == task.baselines["O3"] is not None
    assert task.speedup("plan:") == task.speedup("O3")
    tuners = [r["prov"]["tuner"] for r in _lines(tmp_path / "p.jsonl")]
    assert tuners[:4] == ["plan:same", "O0", "O1", "O2"] and "O3" not in tuners


def test_timeouts_are_records_and_the_job_goes_on(tiny_graph: Graph, tmp_path: Path) -> None:
    res = tune([tiny_graph], trials=6, workers=0, log=tmp_path / "t.jsonl", seed=0, guided=SMALL,
               timeout_per_trial=1e-6, curve=True)
    recs = _lines(tmp_path / "t.jsonl")
    assert len(recs) == 6 and {r["result"]["status"] for r in recs} == {"timeout"}
    (task,) = res.tasks
    assert task.best_latency_us is None and task.errors == {"timeout": 6}
    assert res.curve is None and task.speedup("O3") is None
