"""A batch whose worker raised is measured again (a second raise is the candidate's error),
a worker without its graphs is loaded again, and a job whose calls keep failing stops with
one line and its records kept; seeds lost in one run are measured in the next. Fake pools
(measuring in process, scheduled as 2 Ray workers): no Ray start."""

from __future__ import annotations

import json
import math
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

import pytest
import ray.exceptions

import autotune._tune as tune_mod
from autotune import DelayedMeasurer, tune
from autotune.running._pool import Finished, InProcessPool, WorkerNotLoaded, lost
from autotune.running._ray_pool import RayPool, _InFlight
from compiler.errors import GraphtuneError

from .test_worker_errors import _bare_pool, _collect, _task_error

_RAISED = "the worker raised KeyError: 'x'"


class _Two(InProcessPool):
    """Measures in process; scheduled as a 2-worker Ray pool. ``fail(batch)`` returns the
    error text of a batch whose worker "raised" (or "lost" to lose it), "" to measure it."""

    remote = True
    fail: Any = staticmethod(lambda cids: "")

    def __init__(self, *a: Any) -> None:
        super().__init__(*a)
        self.workers, self.slots = 2, 4

    def submit(self, batch_id: int, task_key: str, schedules: Any, cids: Any = None,
               vectors: Any = None) -> None:
        why = type(self).fail(list(cids or []))
        if why == "lost":
            self._done.append(Finished(batch_id, "", lost(len(schedules), "worker died")))
        elif why:
            self._done.append(Finished(batch_id, "", lost(len(schedules), why), error=why))
        else:
            super().submit(batch_id, task_key, schedules, cids, vectors)


def _use(monkeypatch: pytest.MonkeyPatch, fail: Any) -> None:
    cls = type("P", (_Two,), {"fail": staticmethod(fail)})
    monkeypatch.setattr(tune_mod, "_pool", lambda job, target, measurer, *_, **__: cls(
        {t.task.key: t.task.graph for t in job.tasks}, target, measurer, None))


def _run(graph: Any, log: Path, trials: int, sampler: str = "random") -> Any:
    return tune([graph], trials=trials, workers=2, log=str(log), seed=0, sampler=sampler,
                measurer=DelayedMeasurer(delay_s=0.0), batch_size=4, curve=False)


def _statuses(log: Path) -> dict[str, list[str]]:
    from autotune.sampling._studies import candidate_id
    from compiler.schedule import GraphSchedule

    out: dict[str, list[str]] = defaultdict(list)
    for line in log.read_text().splitlines():
        r = json.loads(line)
        out[candidate_id(GraphSchedule.from_json(r["schedule"]))].append(r["result"]["status"])
    return out


def _tuners(log: Path) -> Counter[str]:
    return Counter(json.loads(line)["prov"]["tuner"] for line in log.read_text().splitlines()
                   if json.loads(line)["result"]["status"] == "ok")


def test_a_candidate_whose_worker_raised_once_is_measured_again(
        tiny_graph: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every batch's first try raises (seeds included): each candidate is recorded lost,
    queued again, and measured; none becomes an error."""
    seen: set[str] = set()

    def fail(cids: list[str]) -> str:
        new = [c for c in cids if c not in seen]
        seen.update(cids)
        return _RAISED if new else ""

    _use(monkeypatch, fail)
    log = tmp_path / "t.jsonl"
    _run(tiny_graph, log, 24)
    st = _statuses(log)
    assert st and all(s[0] == "worker_lost" for s in st.values())
    assert not any("sim_error" in s for s in st.values())
    assert sum(s == ["worker_lost", "ok"] for s in st.values()) >= 4  # measured after it
    assert {"O0", "O1", "O2", "O3"} <= set(_tuners(log))  # the seeds too


def test_a_candidate_whose_worker_raises_twice_is_an_error(
        tiny_graph: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The O0 seed's batch always raises, the others never: O0 is lost, then an error."""
    from autotune.sampling._studies import candidate_id, seed_schedules
    from compiler.target import Target

    o0 = candidate_id(dict(seed_schedules(tiny_graph, Target.default()))["O0"])
    _use(monkeypatch, lambda cids: _RAISED if o0 in cids else "")
    log = tmp_path / "t.jsonl"
    _run(tiny_graph, log, 24)
    st = _statuses(log)
    assert st[o0] == ["worker_lost", "sim_error"]  # measured again once, then its error
    recs = [json.loads(line) for line in log.read_text().splitlines()]
    assert any("the second time" in (r["result"].get("error") or "") for r in recs)
    assert Counter(s[-1] for s in st.values())["ok"] >= 10  # the job went on


def test_a_job_whose_calls_keep_failing_stops_and_resumes(
        tiny_graph: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every call raises: the job stops with one line after a few batches (not its whole
    budget), its records kept; the same command with a working pool measures them."""
    _use(monkeypatch, lambda cids: _RAISED)
    log = tmp_path / "t.jsonl"
    with pytest.raises(GraphtuneError, match=r"keep failing.*re-run the same command"):
        _run(tiny_graph, log, 200)
    first = _statuses(log)
    # 8 batches in a row (4 slots + 2 per worker) of 4
    assert sum(map(len, first.values())) == 32
    _use(monkeypatch, lambda cids: "")
    _run(tiny_graph, log, 32 + 40)
    st = _statuses(log)
    assert all("ok" in st[c] for c, s in first.items() if s == ["worker_lost"])
    assert {"O0", "O1", "O2", "O3"} <= set(_tuners(log))


def test_a_job_whose_batches_are_all_lost_stops(
        tiny_graph: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Lost every time (the worker answers its pings, Ray fails every call): it stops too."""
    _use(monkeypatch, lambda cids: "lost")
    with pytest.raises(GraphtuneError, match=r"keep failing.*worker died"):
        _run(tiny_graph, tmp_path / "t.jsonl", 200)


def test_lost_batches_between_measured_ones_do_not_stop_a_job(
        tiny_graph: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    calls = [0]

    def fail(cids: list[str]) -> str:
        calls[0] += 1
        return "lost" if calls[0] % 8 else ""  # 7 lost batches in a row, then one measured

    _use(monkeypatch, fail)
    res = _run(tiny_graph, tmp_path / "t.jsonl", 120)
    assert res.total == 120


def test_seeds_lost_in_one_run_are_measured_in_the_next(
        tiny_graph: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Before: a lost seed's failed trial kept ``enqueue_trial(skip_if_exists=True)`` from
    queueing it again on resume; it was never measured."""
    _use(monkeypatch, lambda cids: "lost")
    log = tmp_path / "t.jsonl"
    _run(tiny_graph, log, 8)  # the seeds' batch (and one more) lost
    assert not _tuners(log)
    _use(monkeypatch, lambda cids: "")
    _run(tiny_graph, log, 24)
    assert {"O0", "O1", "O2", "O3"} <= set(_tuners(log))


def test_a_worker_without_its_graphs_is_loaded_again(monkeypatch: pytest.MonkeyPatch) -> None:
    """A restarted worker that was not loaded (KeyError on its graphs before): reloaded
    (marked down: its ping is a load()), and the batch is lost, not the candidates' error."""
    pool = _bare_pool()
    monkeypatch.setattr(RayPool, "_mark_down", lambda self, k: self._down.setdefault(k, 0.0))
    fin = _collect(pool, monkeypatch, _InFlight(7, 3, 1, math.inf, unit=1),
                   _task_error(WorkerNotLoaded("the worker holds no graph 'tiny'")))
    assert fin is not None and [m.status for m in fin.measurements] == ["worker_lost"] * 3
    assert not fin.error and "not loaded" in fin.measurements[0].error
    assert pool._down == {1: 0.0}
    fin = _collect(pool, monkeypatch, _InFlight(8, 0, 0, math.inf, "breed", unit=0),
                   _task_error(WorkerNotLoaded("no graph")))
    assert fin is not None and fin.bred is None and not fin.error  # asked for again
    assert pool._down == {1: 0.0, 0: 0.0}


def test_the_worker_raises_not_loaded_for_a_task_it_does_not_hold() -> None:
    from autotune.running._ray_worker import _Worker
    from compiler.target import Target

    w = object.__new__(_Worker)
    w._graphs, w._breeder, w._turns, w._spent = {}, None, None, {"measure": 0.0}
    w._measurer, w._target = DelayedMeasurer(delay_s=0.0), Target.default()
    with pytest.raises(WorkerNotLoaded):
        w.measure("tiny", [{}], None)
    with pytest.raises(WorkerNotLoaded):
        w.breed("tiny", None, None)  # type: ignore[arg-type]
    assert isinstance(ray.exceptions.RayTaskError, type)


def test_the_cli_says_so_in_one_line_and_exits_non_zero(
        tiny_onnx: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from click.testing import CliRunner

    from autotune.cli import main

    _use(monkeypatch, lambda cids: _RAISED)
    log = tmp_path / "t.jsonl"
    r = CliRunner().invoke(main, ["tune", str(tiny_onnx), "--trials", "200", "--workers", "2",
                                  "--log", str(log)])
    assert r.exit_code != 0, r.output
    lines = r.stderr.strip().splitlines()
    assert "Traceback" not in r.stderr and any("keep failing" in ln for ln in lines), r.stderr
    assert next(ln for ln in lines if "graphtune: error" in ln).endswith("to resume")
    # every record written so far kept: 8 batches (of at most 8, the default on 2 workers)
    st = _statuses(log)
    assert 8 <= sum(map(len, st.values())) <= 64
    assert {s for ss in st.values() for s in ss} == {"worker_lost"}


def test_a_candidate_that_runs_its_worker_out_of_memory_twice_is_an_error(
        tiny_graph: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Before: lost each time, and proposed again (a fresh OOM each time); now the second
    time is its sim_error, with the reason."""
    from autotune.sampling._studies import candidate_id, seed_schedules
    from compiler.target import Target

    oom = "the worker ran out of memory (Ray's memory monitor killed it)"
    o0 = candidate_id(dict(seed_schedules(tiny_graph, Target.default()))["O0"])
    _use(monkeypatch, lambda cids: oom if o0 in cids else "")
    log = tmp_path / "t.jsonl"
    _run(tiny_graph, log, 24)
    assert _statuses(log)[o0] == ["worker_lost", "sim_error"]
    errors = [json.loads(line)["result"].get("error") or "" for line in log.read_text().splitlines()]
    assert any(e.startswith("the worker ran out of memory") and "second time" in e
               for e in errors)


def test_a_close_that_fails_does_not_hide_the_jobs_error(
        tiny_graph: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        caplog: pytest.LogCaptureFixture) -> None:
    """The study storage's close raised from tune's ``finally`` (a failed journal append),
    hiding the error that ended the job; now that one is raised, the other logged. With no
    job error, the close's error is raised."""
    from autotune.running._journal import StorageHandle

    real_close = StorageHandle.close

    def close(self: StorageHandle) -> None:
        real_close(self)
        raise GraphtuneError("cannot append to the study journal: disk full")

    monkeypatch.setattr(StorageHandle, "close", close)
    _use(monkeypatch, lambda cids: _RAISED)
    with caplog.at_level("WARNING", logger="autotune.tune"), \
            pytest.raises(GraphtuneError, match="keep failing"):
        _run(tiny_graph, tmp_path / "a.jsonl", 200)
    assert "disk full" in caplog.text
    _use(monkeypatch, lambda cids: "")
    with pytest.raises(GraphtuneError, match="disk full"):
        _run(tiny_graph, tmp_path / "b.jsonl", 8)
