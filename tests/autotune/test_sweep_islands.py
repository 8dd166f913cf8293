"""Borrowed seeds do not own the population: with them, every other round of the guided
sampler breeds from the task's own line only (``autotune.sampling._guided``, the islands)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import optuna
from optuna.trial import TrialState

from autotune.sampling._breed import RankerScorer, breed
from autotune.sampling._guided import LINE_ATTR, GuidedOptions, GuidedSampler
from autotune.sampling._ranker import CostModelRanker
from autotune.sampling._studies import candidate_id, seed_schedules, vector_of
from compiler.graph import Graph
from compiler.target import Target
from search_space import build_space

OPTIONS = GuidedOptions(population=24, generations=1, proposals=6, parents=4, retrain_every=4)


def _cid(space: Any, params: dict[str, Any]) -> str:
    return candidate_id(space.decode(vector_of(space, params)))


def _measure(study: optuna.Study, space: Any, fast: set[str]) -> None:
    """Tell every waiting or queued trial: a made-up latency, 1 for the ``fast`` candidates
    (the borrowed seed's basin), above 100 for the others."""
    while True:
        sampler = study.sampler
        queued = getattr(sampler, "queued", 0)
        if not study.get_trials(states=(TrialState.WAITING,)) and not queued:
            return
        trial = study.ask()
        s = space.suggest(trial)
        cid = candidate_id(s)
        study.tell(trial, 1.0 if cid in fast else 100.0 + float(np.sum(space.encode(s))))


def _study(space: Any, graph: Graph, target: Target, storage: Any, name: str
           ) -> tuple[optuna.Study, GuidedSampler]:
    sampler = GuidedSampler(space=space, ranker=CostModelRanker(graph, target, seed=0), seed=3,
                            options=OPTIONS)
    return optuna.create_study(study_name=name, storage=storage, sampler=sampler,
                               load_if_exists=True), sampler


def test_with_a_borrowed_seed_every_other_round_breeds_from_the_own_line(
        tiny_graph: Graph, tune_target: Target) -> None:
    """A borrowed seed measured fastest, and every candidate bred from it as fast: the
    rounds alternate between parents from everything (the seed first) and parents from
    the own line (the levels and their children), never the seed or a child of its
    round; a new sampler on the same storage tells the two lines apart from the trials."""
    space = build_space(tiny_graph, tune_target, tiny_graph.batch)
    storage = optuna.storages.InMemoryStorage()
    study, sampler = _study(space, tiny_graph, tune_target, storage, "islands")
    levels = [space.project(s) for _, s in seed_schedules(tiny_graph, tune_target)]
    level_ids = {candidate_id(p.schedule) for p in levels if p.schedule is not None}
    rng = np.random.default_rng(7)
    seed = next(s for s in (space.sample(rng) for _ in range(50))
                if candidate_id(s) not in level_ids and space.precheck(s).ok)
    seed_params = dict(space.project(seed).params)
    seed_id = candidate_id(seed)
    study.enqueue_trial(seed_params)
    for p in levels:
        if p.schedule is not None:
            study.enqueue_trial(dict(p.params), skip_if_exists=True)
    sampler.borrow([seed_id])
    fast = {seed_id}
    _measure(study, space, fast)

    warm_line: set[str] = {seed_id}
    for r in range(1, 5):
        req = sampler.breed_request(study)
        parent_ids = {candidate_id(space.decode(v)) for v in req.parents}
        if r % 2:  # the seeds' island: the best of everything, the seed first
            assert candidate_id(space.decode(req.parents[0])) in warm_line
        else:  # the own line: neither the seed nor anything bred in the seeds' island
            assert req.parents and not parent_ids & warm_line
        bred = breed(space, RankerScorer(sampler.ranker), req)
        sampler.bred(bred)
        picks = {p.cid for p in bred.picks}
        if r % 2:
            warm_line |= picks
            fast |= picks  # the seed's basin: faster than anything the own line finds
        _measure(study, space, fast)

    lined = {_cid(space, t.params) for t in study.get_trials()
             if t.user_attrs.get(LINE_ATTR) == "borrowed"}
    assert lined == warm_line - {seed_id}

    again, resumed = _study(space, tiny_graph, tune_target, storage, "islands")
    resumed.borrow([seed_id])  # as enqueue_warm does on every run of a tune
    resumed.sync(again)
    req = resumed.breed_request(again)
    assert candidate_id(space.decode(req.parents[0])) in warm_line  # round 1: everything
    req = resumed.breed_request(again)
    own = {candidate_id(space.decode(v)) for v in req.parents}
    assert own and not own & warm_line


def test_without_borrowed_seeds_every_round_breeds_from_the_best(
        tiny_graph: Graph, tune_target: Target) -> None:
    """No borrowed seed: no islands, every round's parents are the best measured."""
    space = build_space(tiny_graph, tune_target, tiny_graph.batch)
    study, sampler = _study(space, tiny_graph, tune_target, None, "plain")
    for _, s in seed_schedules(tiny_graph, tune_target):
        p = space.project(s)
        if p.schedule is not None:
            study.enqueue_trial(dict(p.params), skip_if_exists=True)
    _measure(study, space, set())
    for _ in range(3):
        req = sampler.breed_request(study)
        assert [v.tolist() for v in req.parents] == [v.tolist() for v in sampler._best(4)]
        bred = breed(space, RankerScorer(sampler.ranker), req)
        sampler.bred(bred)
        assert not any(p.borrowed for p in sampler._queue)
        _measure(study, space, set())


def _warm_tune(tiny_graph: Graph, tmp_path: Path, trials: int) -> tuple[Any, str, list[Any]]:
    """A tune of ``trials`` on the STCP920 warm from two schedules of another target (no
    levels: the roofline screen keeps the seeds): its journal storage, study name, trials."""
    from autotune._options import RunOptions, SearchOptions
    from autotune._tune import load_tasks, tune
    from autotune.running._journal import journal_path_for

    other = Target.default().replace(l1={"data_bytes": 65536})
    log = tmp_path / "t.jsonl"
    tasks = load_tasks([tiny_graph])
    space = build_space(tiny_graph, other, tiny_graph.batch)
    rng = np.random.default_rng(1)
    warm = [s for s in (space.sample(rng) for _ in range(40)) if space.precheck(s).ok][:2]
    tune(tasks, trials=trials, log=log, target=Target.default(),
         search=SearchOptions(seed=0, warm_schedules={tasks[0].key: warm}, pretrained=False,
                              seeds=False),
         run=RunOptions(workers=0, curve=False))
    storage = optuna.storages.JournalStorage(
        optuna.storages.journal.JournalFileBackend(journal_path_for(str(log))))
    study = storage.get_all_studies()[0]
    return storage, study.study_name, storage.get_all_trials(study._study_id)


def test_a_warm_tune_marks_its_seeds_borrowed(tiny_graph: Graph, tmp_path: Path) -> None:
    """A tune with warm schedules (a sweep's variant) tells the sampler which are borrowed;
    half of its bred rounds write the borrowed line on their trials, the others not
    (without O0-O3, whose roofline estimate would screen random seeds out)."""
    _, _, trials = _warm_tune(tiny_graph, tmp_path, 40)
    lined = [t for t in trials if t.user_attrs.get(LINE_ATTR) == "borrowed"]
    bred = [t for t in trials if "fixed_params" not in t.system_attrs]
    assert lined and len(lined) < len(bred)


def test_a_resumed_tune_given_other_seeds_keeps_the_first_seeds_borrowed(
        tiny_graph: Graph, tmp_path: Path) -> None:
    """A sweep's later chunk resumes a variant's tune with other seeds (the other variants'
    newer bests): the seeds an earlier run enqueued stay borrowed, read from their trials,
    not taken for the own line's (h98: unmarked, they became own-line parents and the own
    line bred in the borrowed basin)."""
    storage, name, trials = _warm_tune(tiny_graph, tmp_path, 12)
    mine = build_space(tiny_graph, Target.default(), tiny_graph.batch)
    seeds = {_cid(mine, t.params) for t in trials if "fixed_params" in t.system_attrs}
    assert seeds  # the warm schedules were enqueued and measured
    # the next run of the tune: other seeds (none here), so nothing calls borrow() for these
    study, resumed = _study(mine, tiny_graph, Target.default(), storage, name)
    resumed.sync(study)
    assert seeds <= resumed._borrowed
    assert not {c for _, _, c in resumed._own_top} & seeds


def test_the_own_lines_rounds_are_ranked_as_a_cold_tune_ranks(tiny_graph: Graph,
                                                              tune_target: Target) -> None:
    """A ranker trained on another target's rows turns the islands on by itself; in the
    own line's rounds it scores as a cold tune's ranker does (the roofline, then trees on
    the own rows alone), in the others with the transferred model (hedged)."""
    from autotune.sampling._warm import PriorData, WarmRanker
    from sim import measure

    other = tune_target.replace(ddr={"bytes_per_cycle": 13})
    space = build_space(tiny_graph, tune_target, tiny_graph.batch)
    rng = np.random.default_rng(4)
    pool = [space.sample(rng, uniform=i % 2 == 0) for i in range(60)]
    ok = [(s, m.throughput_per_s) for s, m in zip(pool, measure(tiny_graph, pool, other))
          if m.status == "ok"]
    import cost_model

    px = np.asarray(cost_model.features(tiny_graph, [s for s, _ in ok], other))
    prior = PriorData(px, np.asarray([v for _, v in ok], dtype=np.float64),
                      np.zeros(len(ok), dtype=np.int64))
    warm = WarmRanker(tiny_graph, tune_target, seed=0, prior=prior)
    assert warm.borrows and warm.hedging
    x = np.asarray(cost_model.features(tiny_graph, pool, tune_target))
    cold = CostModelRanker(tiny_graph, tune_target, seed=0)
    hedged = warm.predict(x)
    warm.cold_round = True
    np.testing.assert_allclose(warm.predict(x), cold.predict(x))  # the roofline
    np.testing.assert_allclose(warm.snapshot().predict(x), cold.predict(x))
    y = np.asarray([m.throughput_per_s or 0.0 for m in measure(tiny_graph, pool[:12], tune_target)])
    warm.fit(x[:12], y)
    cold.fit(x[:12], y)
    if warm.hedging:  # (the rank check may drop the transferred model: then it is cold anyway)
        np.testing.assert_allclose(warm.predict(x), cold.predict(x))
        warm.cold_round = False
        assert not np.allclose(warm.predict(x), cold.predict(x))
    assert not np.allclose(hedged, cold.predict(x))

    sampler = GuidedSampler(space=space, ranker=warm, seed=0, options=OPTIONS)
    flags = []
    for _ in range(4):
        sampler.breed_request()
        flags.append(warm.cold_round)
    assert flags == [False, True, False, True]


def test_the_shipped_model_alone_does_not_turn_the_islands_on(tiny_graph: Graph,
                                                              tune_target: Target) -> None:
    """Only other targets' rows borrow (the islands); the shipped model alone does not."""
    import cost_model
    from autotune.sampling._warm import WarmRanker

    path = cost_model.pretrained_path()
    assert path is not None
    assert not WarmRanker(tiny_graph, tune_target, seed=0, base=str(path)).borrows
