"""The tuner's parts on their own: tasks, scheduler, journal, reconcile, guided sampler, pool."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import numpy as np
import optuna
import pytest
from optuna.trial import TrialState

from autotune.job._scheduler import GradientScheduler, TaskProgress
from autotune.job._tasks import extract_tasks
from autotune.measure._measurer import SimMeasurer, measure_json
from autotune.running._journal import BufferedJournalFile, open_storage
from autotune.running._pool import InProcessPool
from autotune.running._reconcile import CID_ATTR, reconcile
from autotune.sampling._breed import Breeder, RankerScorer, breed
from autotune.sampling._guided import GuidedOptions, GuidedSampler
from autotune.sampling._ranker import CostModelRanker
from autotune.sampling._studies import candidate_id, distributions, seed_schedules, vector_of
from compiler.auto import graph_schedule_level
from compiler.errors import GraphtuneError
from compiler.graph import Graph
from compiler.target import Target
from logs import Provenance, Record, Result, Status, TargetKey, WorkloadInfo
from search_space import build_space
from tests.autotune.conftest import cpu_split_proto, proto_graph

optuna.logging.set_verbosity(optuna.logging.WARNING)


# ---- tasks -----------------------------------------------------------------------------------


def test_a_model_all_on_the_npu_is_one_task_under_its_own_key(tiny_graph: Graph) -> None:
    (task,) = extract_tasks([("tiny", tiny_graph)])
    assert task.key == tiny_graph.workload_key and task.graph is tiny_graph
    assert task.weight == 1 and task.name == "tiny" and task.count_in("tiny") == 1


def test_identical_sub_functions_share_one_weighted_task() -> None:
    g = proto_graph(cpu_split_proto(), "split")
    assert len(g.npu_subfunctions()) == 2
    (task,) = extract_tasks([("split", g)])
    assert task.weight == 2 and task.uses[0].parts == (0, 1)
    assert task.key != g.workload_key and len(task.graph.ops) == 2


def test_distinct_sub_functions_and_shared_models(tiny_graph: Graph) -> None:
    g = proto_graph(cpu_split_proto(out=32), "split32")
    tasks = extract_tasks([("split32", g), ("a", tiny_graph), ("b", tiny_graph)])
    assert [t.weight for t in tasks] == [1, 1, 2]
    assert [u.model for u in tasks[2].uses] == ["a", "b"]
    with pytest.raises(GraphtuneError, match="two models are named"):
        extract_tasks([("a", tiny_graph), ("a", g)])


# ---- scheduler -------------------------------------------------------------------------------


def _sched(*tasks: TaskProgress, **kw: Any) -> GradientScheduler:
    return GradientScheduler(list(tasks), np.random.default_rng(0), eps=0.0, **kw)


def test_warmup_is_round_robin() -> None:
    s = _sched(TaskProgress(1.0), TaskProgress(1.0), warmup=2)
    picks = []
    for _ in range(4):
        k = s.next_task()
        assert k is not None
        picks.append(k)
        s.record(k, 100.0)
    assert picks == [0, 1, 0, 1]


def test_gradient_prefers_the_heavier_task_further_from_its_floor() -> None:
    s = _sched(TaskProgress(1.0, lower_bound_us=90.0), TaskProgress(3.0, lower_bound_us=50.0),
               warmup=1)
    s.record(0, 100.0)
    s.record(1, 100.0)
    assert s.gradient(1) < s.gradient(0) < 0
    assert s.next_task() == 1


def test_recent_gains_attract_measurements() -> None:
    s = _sched(TaskProgress(1.0), TaskProgress(1.0), warmup=1, alpha=1.0)
    for v in (100.0, 100.0, 100.0):
        s.record(0, v)
    for v in (100.0, 90.0, 80.0):
        s.record(1, v)
    assert s.next_task() == 1


def test_early_stopping_and_the_floor_stop_tasks() -> None:
    s = _sched(TaskProgress(1.0), TaskProgress(1.0, lower_bound_us=10.0), warmup=0,
               early_stopping=3)
    s.record(1, 10.0)
    assert s.tasks[1].stopped == "reached the lower bound"
    s.record(0, 50.0)
    for _ in range(3):
        assert s.next_task() == 0
        s.record(0, 60.0)
    assert "no gain" in s.tasks[0].stopped
    assert s.next_task() is None


# ---- journal ---------------------------------------------------------------------------------


def _lines(path: Path) -> int:
    return path.read_bytes().count(b"\n")


def test_buffered_journal_writes_on_flush_and_reads_back(tmp_path: Path) -> None:
    log = tmp_path / "t.jsonl"
    handle = open_storage(None, str(log))
    assert handle.where == str(tmp_path / "t.journal")
    study = optuna.create_study(study_name="s", storage=handle.storage)
    study.enqueue_trial({"x": 1})
    trial = study.ask()
    trial.suggest_categorical("x", [1, 2])
    study.tell(trial, 3.0)
    journal = Path(handle.where)
    assert _lines(journal) == 0  # nothing written before the flush
    handle.close()
    assert _lines(journal) > 0
    again = open_storage(None, str(log))
    loaded = optuna.load_study(study_name="s", storage=again.storage)
    assert [t.value for t in loaded.trials] == [3.0] and loaded.trials[0].params == {"x": 1}
    again.close()


def test_one_driver_per_journal_and_a_torn_tail_is_cut(tmp_path: Path) -> None:
    path = tmp_path / "j.journal"
    first = BufferedJournalFile(str(path))
    with pytest.raises(GraphtuneError, match="in use by another graphtune tune"):
        BufferedJournalFile(str(path))
    first.append_logs([{"op_code": 0, "worker_id": "w", "study_name": "s", "directions": [1]}])
    first.close()
    with open(path, "ab") as f:
        f.write(b'{"op_code": 4, "worker')  # a writer killed mid-line
    second = BufferedJournalFile(str(path))
    assert path.read_bytes().endswith(b"\n") and _lines(path) == 1
    assert next(iter(second.read_logs(0)))["study_name"] == "s"
    second.close()


# ---- reconcile -------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def tiny_space(tiny_graph: Graph, tune_target: Target) -> Any:
    return build_space(tiny_graph, tune_target, tiny_graph.batch)


def _record(space: Any, study: str, trial: int | None, params: dict[str, Any],
            latency: float | None) -> tuple[Record, str]:
    vec = vector_of(space, params)
    assert vec is not None
    s = space.decode(vec)
    status = Status.OK if latency else Status.CAPACITY
    rec = Record(WorkloadInfo("k", batch=s.batch), TargetKey("STCP920", "h"), s.to_json(),
                 Result(status, latency), Provenance.now(study=study, trial=trial, params=params))
    return rec, candidate_id(s)


def _ask(study: optuna.Study, space: Any) -> tuple[int, dict[str, Any]]:
    trial = study.ask()
    space.suggest(trial)
    return trial.number, dict(trial.params)


def test_reconcile_tells_requeues_and_restores_under_the_same_numbers(tiny_space: Any) -> None:
    study = optuna.create_study(study_name="s", sampler=optuna.samplers.RandomSampler(seed=0))
    asked = [_ask(study, tiny_space) for _ in range(3)]
    study.tell(0, 5.0)
    # Trial 1 ran and was logged; trial 2 was in flight; 3 and 4 were lost from the
    # journal but logged (4 failed); 5 was asked and never logged; 6 was logged.
    other = optuna.create_study(sampler=optuna.samplers.RandomSampler(seed=1))
    extra = [_ask(other, tiny_space)[1] for _ in range(4)]
    records = [
        _record(tiny_space, "s", 0, asked[0][1], 5.0),
        _record(tiny_space, "s", 1, asked[1][1], 4.0),
        _record(tiny_space, "s", 3, extra[0], 3.0),
        _record(tiny_space, "s", 4, extra[1], None),
        _record(tiny_space, "s", 6, extra[2], 2.5),
        _record(tiny_space, "another", 0, extra[3], 7.0),
    ]
    out = reconcile(study, tiny_space, records, "latency")
    assert (out.told, out.requeued, out.restored, out.added) == (1, 1, 4, 1)
    t = {tr.number: tr for tr in study.get_trials(deepcopy=False)}
    assert t[1].state == TrialState.COMPLETE and t[1].value == 4.0
    assert t[1].user_attrs[CID_ATTR] == records[1][1]
    assert t[2].state == TrialState.FAIL
    assert t[3].value == 3.0 and t[3].params == extra[0]
    assert t[4].state == TrialState.FAIL and t[4].params == extra[1]
    assert t[5].state == TrialState.FAIL and not t[5].params
    assert t[6].value == 2.5
    waiting = [tr for tr in t.values() if tr.state == TrialState.WAITING]
    assert len(waiting) == 1 and waiting[0].system_attrs["fixed_params"] == asked[2][1]
    assert t[8].value == 7.0 and t[8].user_attrs[CID_ATTR] == records[5][1]
    again = reconcile(study, tiny_space, records, "latency")
    assert not again.changed


# ---- guided sampler --------------------------------------------------------------------------


class FakeRanker:
    """Predicts speed from the encoding's sum; records fits."""

    name = "fake"

    def __init__(self, space: Any) -> None:
        self.space = space
        self.label = ""
        self.fits: list[int] = []

    def features(self, schedules: Any) -> np.ndarray:
        return self.space.encode_many(list(schedules)).astype(np.float32)

    def fit(self, x: np.ndarray, y: np.ndarray) -> None:
        assert len(x) == len(y)
        self.fits.append(len(y))
        self.label = f"fake/n={len(y)}"

    def predict(self, x: np.ndarray) -> np.ndarray:
        return -x.sum(axis=1)


def _guided_run(space: Any, graph: Graph, target: Target, seed: int, n: int
                ) -> tuple[list[dict[str, Any]], list[str], FakeRanker]:
    ranker = FakeRanker(space)
    sampler = GuidedSampler(space=space, ranker=ranker, seed=seed,
                            options=GuidedOptions(population=24, generations=1, proposals=4,
                                                  parents=4, retrain_every=4))
    study = optuna.create_study(sampler=sampler)
    for _, s in seed_schedules(graph, target):
        proj = space.project(s)
        if proj.schedule is not None:
            study.enqueue_trial(proj.params, skip_if_exists=True)
    params, labels = [], []
    for _ in range(n):
        trial = study.ask()
        s = space.suggest(trial)
        labels.append(sampler.ranked_by(trial.number))
        assert space.precheck(s).ok
        params.append(dict(trial.params))
        study.tell(trial, float(np.sum(space.encode(s))) + 1.0)
    return params, labels, ranker


def test_guided_proposals_are_new_fit_and_ranked_and_reproducible(
        tiny_space: Any, tiny_graph: Graph, tune_target: Target) -> None:
    params, labels, ranker = _guided_run(tiny_space, tiny_graph, tune_target, 3, 20)
    cids = [candidate_id(tiny_space.decode(vector_of(tiny_space, p))) for p in params]
    assert len(set(cids)) >= 19  # the seeds O0-O3 may coincide; proposals never repeat
    assert ranker.fits and ranker.fits == sorted(ranker.fits)
    assert any(lab.startswith("fake/n=") for lab in labels)
    again, labels2, _ = _guided_run(tiny_space, tiny_graph, tune_target, 3, 20)
    assert again == params and labels2 == labels


def _measured_study(space: Any, graph: Graph, target: Target, ranker: Any,
                    options: GuidedOptions) -> tuple[optuna.Study, GuidedSampler]:
    """A study with the seeds measured (by a made-up latency), for rounds to breed from."""
    sampler = GuidedSampler(space=space, ranker=ranker, seed=5, options=options)
    study = optuna.create_study(sampler=sampler)
    for _, s in seed_schedules(graph, target):
        proj = space.project(s)
        if proj.schedule is not None:
            study.enqueue_trial(proj.params, skip_if_exists=True)
    while True:
        waiting = study.get_trials(states=(TrialState.WAITING,))
        if not waiting:
            return study, sampler
        trial = study.ask()
        study.tell(trial, float(np.sum(space.encode(space.suggest(trial)))) + 1.0)


def test_a_round_bred_on_a_worker_is_the_one_bred_here(
        tiny_space: Any, tiny_graph: Graph, tune_target: Target) -> None:
    """What a worker breeds from a pickled request and model snapshot, with its own space,
    is what the driver's process breeds: the same picks, parameters and features."""
    import pickle

    ranker = CostModelRanker(tiny_graph, tune_target, seed=0)
    options = GuidedOptions(population=24, generations=1, proposals=6, parents=4)
    study, sampler = _measured_study(tiny_space, tiny_graph, tune_target, ranker, options)
    req = sampler.breed_request(study)
    assert req.parents and req.seen and sampler.breeding == 1
    here = breed(tiny_space, RankerScorer(ranker), req)
    worker = Breeder({"k": tiny_graph}, tune_target)  # what a Ray actor holds
    there = pickle.loads(pickle.dumps(worker("k", pickle.loads(pickle.dumps(req)),
                                             pickle.loads(pickle.dumps(sampler.snapshot())))))
    assert [p.cid for p in there.picks] == [p.cid for p in here.picks]
    assert len(here.picks) == 6 and not {p.cid for p in here.picks} & req.seen
    for a, b in zip(here.picks, there.picks):
        assert a.params == b.params and np.array_equal(a.vector, b.vector)
        assert np.allclose(a.features, b.features) and a.ranked_by == b.ranked_by
        assert candidate_id(tiny_space.decode(vector_of(tiny_space, a.params))) == a.cid
        assert tiny_space.precheck(b.schedule).ok
    assert np.allclose(np.stack([p.features for p in here.picks]),
                       ranker.features([p.schedule for p in here.picks]))


def test_bred_rounds_feed_trials_without_decoding_on_the_driver(
        tiny_graph: Graph, tune_target: Target, monkeypatch: pytest.MonkeyPatch) -> None:
    space = build_space(tiny_graph, tune_target, tiny_graph.batch)  # patched below: its own
    ranker = CostModelRanker(tiny_graph, tune_target, seed=0)
    options = GuidedOptions(population=24, generations=1, proposals=4, parents=4,
                            retrain_every=4)
    study, sampler = _measured_study(space, tiny_graph, tune_target, ranker, options)
    worker = Breeder({"k": tiny_graph}, tune_target)
    # Two workers each breed a half of a round, and each half is queued as it arrives.
    reqs = [sampler.breed_request(study, share=2) for _ in range(2)]
    assert reqs[0].seed != reqs[1].seed and reqs[0].population == 12
    assert reqs[0].proposals == 2 and sampler.breeding == 2 and sampler.rounds == 2
    parts = [worker("k", r, sampler.snapshot()) for r in reqs]
    first = sampler.bred(parts[0])
    assert first == 2 and sampler.queued == 2 and sampler.breeding == 1
    assert [p.cid for p in sampler._queue] == [p.cid for p in parts[0].picks]
    # Bred at the same time, the second may pick what the first did: queued once.
    again = {p.cid for p in parts[1].picks} & {p.cid for p in parts[0].picks}
    assert sampler.bred(parts[1]) == 2 - len(again) and sampler.breeding == 0
    sampler.breed_request(study)
    assert sampler.bred(None) == 0 and sampler.dry == 0  # a lost request: asked for again
    sampler.breed_request(study)
    assert sampler.bred(parts[0]) == 0 and sampler.dry == 1  # nothing new
    queued = sampler.queued

    def no_decoding(*_: Any) -> Any:
        raise AssertionError("the driver decoded a bred candidate")

    monkeypatch.setattr(space, "decode", no_decoding)
    monkeypatch.setattr(space, "suggest", no_decoding)
    fitted = len(sampler._y)
    dists = distributions(space)
    for _ in range(queued):
        trial = study.ask()
        chosen = sampler.proposal(trial.number)
        assert chosen is not None
        schedule, params = chosen
        for name, value in params.items():
            assert trial.suggest_categorical(name, list(dists[name].choices)) == value
        study.tell(trial, float(np.sum(space.encode(schedule))) + 1.0)
    sampler.sync(study)
    assert len(sampler._y) == fitted + queued and sampler.queued == 0


def test_ask_queued_makes_the_trial_of_a_bred_proposal_and_breeds_once_when_dry(
        tiny_space: Any, tiny_graph: Graph, tune_target: Target,
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A proposal's trial is made with its parameters and id; with nothing queued the
    sampler breeds here, and a round that brings nothing is not bred again by the
    ``study.ask()`` that follows (which then samples at random)."""
    ranker = CostModelRanker(tiny_graph, tune_target, seed=0)
    options = GuidedOptions(population=24, generations=1, proposals=4, parents=4)
    study, sampler = _measured_study(tiny_space, tiny_graph, tune_target, ranker, options)
    dists = distributions(tiny_space)
    trial = sampler.ask_queued(study, dists, {"who": "me"}, cid_attr=CID_ATTR)
    assert trial is not None and sampler.rounds == 1 and sampler.queued == 3
    schedule, params = sampler.proposal(trial.number)
    assert trial.params == params
    assert study.trials[trial.number].state == TrialState.RUNNING
    assert trial.user_attrs == {"who": "me", CID_ATTR: candidate_id(schedule)}
    assert sampler.candidate_of(trial.number) == candidate_id(schedule)
    study.tell(trial, 1.0)
    sampler._queue.clear()
    refills: list[int] = []
    monkeypatch.setattr(sampler, "_refill", lambda: refills.append(1))
    assert sampler.ask_queued(study, dists) is None and refills == [1]
    again = study.ask()
    assert refills == [1] and sampler.proposal(again.number) is None
    study.ask()  # a later ask breeds again
    assert refills == [1, 1]


class _TwoWorkerPool(InProcessPool):
    """Two workers in one process: batches are measured at once; breeding requests are
    held and answered one at a time, the last asked first, when nothing else is done."""

    remote = True

    def __init__(self, *args: Any) -> None:
        super().__init__(*args)
        self.workers, self.slots = 2, 4
        self.held: list[tuple[int, str, Any, Any]] = []
        self.events: list[tuple[str, int, int]] = []
        self.most = 0  # breeding requests out at once, at most
        self.sent: list[tuple[str, list[Any], Any]] = []  # (task, JSON, vectors) per batch

    def submit(self, batch_id: int, task_key: str, schedules: Any,
               cids: Any = None, vectors: Any = None) -> None:
        self.events.append(("measure", len(self.held), len(schedules)))
        self.sent.append((task_key, list(schedules), vectors))
        super().submit(batch_id, task_key, schedules, cids, vectors)

    def submit_breed(self, batch_id: int, task_key: str, request: Any, scorer: Any) -> None:
        self.held.append((batch_id, task_key, request, scorer))
        self.events.append(("breed", request.population, request.proposals))
        self.most = max(self.most, len(self.held))

    def wait(self, timeout_s: float | None = None) -> list[Any]:
        from autotune.running._pool import Finished

        done = super().wait(timeout_s)
        if not done and self.held:
            bid, key, request, scorer = self.held.pop()
            done = [Finished(bid, "", (), "breed", self._breeder(key, request, scorer))]
            self.events.append(("arrived", len(self.held), 0))
        return done

    @property
    def in_flight(self) -> int:  # type: ignore[override]
        return len(self._done) + len(self.held)


def test_each_workers_share_of_a_round_is_measured_as_it_arrives(
        tiny_graph: Graph, tune_target: Target, tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    """With two workers, a round is bred as two half shares, out at once; the picks of the
    one that comes back first are measured while the other is still being bred; and a
    bred pick's trial carries its parameters and candidate id (made in one write)."""
    from autotune import _tune as tune_mod
    from autotune import tune

    pools: list[_TwoWorkerPool] = []

    def two_workers(job: Any, target: Target, measurer: Any, *_: Any) -> _TwoWorkerPool:
        pools.append(_TwoWorkerPool({t.task.key: t.task.graph for t in job.tasks}, target,
                                    measurer))
        return pools[0]

    monkeypatch.setattr(tune_mod, "_pool", two_workers)
    studies: list[Any] = []
    res = tune([tiny_graph], trials=60, workers=2, log=tmp_path / "t.jsonl", seed=0,
               curve=False, callbacks=[lambda job: studies.append(job.tasks[0].study)],
               batch_size=4,  # (the counts below: a 2-worker pool's default batch is 8)
               guided=GuidedOptions(breed_budget=float("inf")))  # the fixed effort
    events = pools[0].events
    shares = [e for e in events if e[0] == "breed"]
    options = GuidedOptions()
    assert len(shares) >= 4
    assert all(pop == -(-options.population // 2) for _, pop, _ in shares[1:])
    assert all(prop == 8 for _, _, prop in shares[1:])  # half of 4 slots x 4 candidates
    assert pools[0].most == 2  # one share per worker
    # A bred pick goes out with its space's batch and vector (a worker that did not breed
    # it decodes that instead of parsing its JSON), the vector of exactly that schedule;
    # a seed without one.
    given = [(key, obj, v) for key, objs, vs in pools[0].sent
             for obj, v in zip(objs, vs or [None] * len(objs))]
    with_vector = [(key, obj, v) for key, obj, v in given if v is not None]
    assert len(with_vector) >= len(given) - 8 and len(given) - len(with_vector) >= 1
    for key, obj, (batch, vector) in with_vector:
        assert pools[0]._breeder.space(key, batch).decode(vector).to_json() == obj
    # A share arrived while the other was out, and its picks went out before that one came.
    early = [i for i, e in enumerate(events) if e[0] == "arrived" and e[1] == 1]
    assert any(events[i + 1][0] == "measure" and events[i + 1][1] == 1 for i in early)
    assert res.measured == 60
    space = build_space(tiny_graph, tune_target, tiny_graph.batch)
    trials = [t for t in studies[-1].get_trials()
              if t.state == TrialState.COMPLETE and "graphtune_seed" not in t.user_attrs]
    assert len(trials) >= 40
    for t in trials:
        vec = vector_of(space, t.params)
        assert vec is not None and t.user_attrs[CID_ATTR] == candidate_id(space.decode(vec))


def test_distributions_cover_every_parameter_the_space_asks(tiny_space: Any) -> None:
    dists = distributions(tiny_space)
    study = optuna.create_study(sampler=optuna.samplers.RandomSampler(seed=0))
    for _ in range(5):
        _, params = _ask(study, tiny_space)
        assert set(params) <= set(dists)
        vec = vector_of(tiny_space, params)
        assert vec is not None and tiny_space.params_of(vec) == params
    assert vector_of(tiny_space, {"no-such-param": 1}) is None


# ---- measuring -------------------------------------------------------------------------------


def test_measure_json_turns_a_broken_schedule_into_a_result(
        tiny_graph: Graph, tune_target: Target) -> None:
    good = graph_schedule_level(tiny_graph, tune_target, 3).to_json()
    host, out = measure_json(SimMeasurer(), tiny_graph, [good, {"kind": "nonsense"}], tune_target,
                             None)
    assert host and out[0]["status"] == "ok" and out[0]["latency_us"] > 0
    assert out[1]["status"] == "invalid_schedule" and out[1]["error"]
    pool = InProcessPool({"k": tiny_graph}, tune_target, SimMeasurer())
    pool.submit(7, "k", [good])
    assert pool.in_flight == 1
    (fin,) = pool.wait()
    assert fin.batch_id == 7 and fin.measurements[0].ok and pool.in_flight == 0
    assert os.uname().nodename == fin.host or fin.host


@pytest.mark.parametrize(("workers", "shares", "out"), [(0, 1, 1), (2, 2, 2), (64, 2, 4)])
def test_a_round_is_bred_in_shares_with_a_few_requests_out_at_once(
        workers: int, shares: int, out: int) -> None:
    """At scale a round is bred in 2 shares (each pays the cost model's fixed costs) and 4
    requests may be out at once (what keeps 64 workers fed); a share's request asks for
    half a round; in-process, whole rounds one at a time."""
    from types import SimpleNamespace

    from autotune.running._driver import Driver

    sampler = SimpleNamespace(demand=0)
    job = SimpleNamespace(tasks=[SimpleNamespace(study=SimpleNamespace(sampler=sampler))])
    pool = SimpleNamespace(workers=max(workers, 1), slots=2 * max(workers, 1),
                           remote=workers > 0)
    d = Driver(job, None, pool, None, None, None, None, "latency", "t", 4)  # type: ignore[arg-type]
    assert (d._shares, d._out) == (shares, out)
    assert sampler.demand == 8 * max(workers, 1)
