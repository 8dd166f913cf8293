"""The guided sampler's end game (``autotune.sampling._polish``): a model-ranked hill climb
through the best's one-move neighbours, deterministic, driven by the log."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import optuna
import pytest

from autotune import GuidedOptions, RunOptions, SearchOptions, tune
from autotune.sampling._breed import BreedRequest, RankerScorer, breed
from autotune.sampling._guided import GuidedSampler
from autotune.sampling._polish import POLISH_ATTR, PolishState
from autotune.sampling._ranker import CostModelRanker
from autotune.sampling._studies import candidate_id, seed_schedules
from compiler.graph import Graph
from compiler.schedule import GraphSchedule
from compiler.target import Target
from search_space import build_space
from search_space._neighbours import neighbour_vectors
from tests.autotune.test_tune import _lines, _without_time

POLISH = GuidedOptions(population=32, generations=1, proposals=8, parents=4, retrain_every=8,
                       polish_after=6, polish_limit=None, polish_window=24)


def _request(vec: np.ndarray, cid: str, window: int, seen: frozenset[str] = frozenset(),
             proposals: int = 10_000) -> BreedRequest:
    return BreedRequest(batch=4, parents=(vec,), seed=1, proposals=proposals, eps=0, seen=seen,
                        population=32, generations=0, random_share=0.25, crossover=0.15,
                        polish=window, polish_of=cid)


@pytest.mark.parametrize("trained", [False, True])
def test_a_polish_round_picks_exactly_the_unseen_neighbours_that_pass_precheck(
        tiny_graph: Graph, tune_target: Target, trained: bool) -> None:
    """With a window over the whole neighbourhood and room for all, the picks are every
    one-move neighbour of the best that passes the pre-check, minus those seen, best
    predicted first (without a model: in the neighbourhood's fixed order)."""
    space = build_space(tiny_graph, tune_target, tiny_graph.batch)
    rng = np.random.default_rng(3)
    parent = space.sample(rng)
    vec = space.encode(parent)
    pid = candidate_id(parent)
    hood: dict[str, GraphSchedule] = {}
    for _, v in neighbour_vectors(space, parent):
        s = space.decode(v)
        hood.setdefault(candidate_id(s), s)
    hood.pop(pid, None)
    ok = {c for c, s in hood.items() if space.precheck(s).ok}
    assert len(ok) > 0
    seen = frozenset(sorted(ok)[:5])
    ranker = CostModelRanker(tiny_graph, tune_target, seed=0)
    if trained:
        xs = np.asarray(ranker.features([space.sample(rng) for _ in range(24)]))
        ranker.fit(xs, rng.random(24) + 0.5)
    got = breed(space, RankerScorer(ranker), _request(vec, pid, 10_000, seen))
    assert {p.cid for p in got.picks} == ok - seen
    assert got.polish_of == pid and got.neighbourhood == len(neighbour_vectors(space, parent))
    keys = [p.key for p in got.picks]
    assert keys == sorted(keys) and not any(p.explore for p in got.picks)
    few = breed(space, RankerScorer(ranker), _request(vec, pid, 10_000, seen, proposals=3))
    assert [p.cid for p in few.picks] == [p.cid for p in got.picks][:3]  # best-first


def test_a_window_ranks_only_the_first_neighbours_of_the_fixed_order(
        tiny_graph: Graph, tune_target: Target) -> None:
    space = build_space(tiny_graph, tune_target, tiny_graph.batch)
    parent = space.sample(np.random.default_rng(4))
    vec, pid = space.encode(parent), candidate_id(parent)
    ranker = RankerScorer(CostModelRanker(tiny_graph, tune_target, seed=0))
    small = {p.cid for p in breed(space, ranker, _request(vec, pid, 6)).picks}
    large = {p.cid for p in breed(space, ranker, _request(vec, pid, 10_000)).picks}
    assert 0 < len(small) <= 6 and small < large


def test_polish_state_climbs_and_stops() -> None:
    st = PolishState(after=3, limit=None, window=10)
    st.measured("a", 1.0)
    assert st.due() == ("", "")  # a new best: not stalled
    for c in "bcd":
        st.measured(c, 0.5)
    assert st.since_best == 3 and st.due() == ("a", "polish")
    assert st.start("a") == 10 and st.due() == ("", "")  # one round out at a time
    st.back("a", 4, size=30, window=10)
    assert st.due() == ("a", "polish") and st.start("a") == 20  # the window grows
    st.back("a", 0, size=30, window=20)  # nothing new, but more to rank: not done
    assert st.due() == ("a", "polish")
    st.start("a")
    st.measured("e", 2.0, polish_of="a")  # the climb found a better one: polish it next
    assert st.due() == ("", "") and st.since_best == 0  # (the round of "a" is still out)
    st.back("a", 3, size=30, window=30)
    assert st.due() == ("e", "polish")
    st.start("e")
    st.back("e", 0, size=12, window=10)
    st.start("e")
    st.back("e", 0, size=12, window=20)  # the whole neighbourhood ranked, nothing new
    assert "e" in st.done and st.due() == ("", "")
    st.measured("f", 3.0)  # evolution found a better one: polish it once stalled again
    assert st.due() == ("", "")
    limited = PolishState(after=0, limit=5, window=10)
    limited.measured("a", 1.0)
    limited.start("a")
    limited.back("a", 5, size=100, window=10)
    assert "a" in limited.done
    assert PolishState(after=-1, limit=None, window=10).due() == ("", "")
    resumed = PolishState(after=0, limit=5, window=10)  # a predecessor proposed 4 of them
    for c in "abcde":
        resumed.measured(c, 1.0 if c == "a" else 0.5, polish_of="a" if c != "a" else "",
                         inherited=True)
    assert resumed.due() == ("a", "polish") and resumed.start("a") == 10
    resumed.back("a", 1, size=100, window=10)  # the 5th: the limit is reached
    assert "a" in resumed.done and resumed.due() == ("", "")


def _polish_trials(journal: Path) -> list[int]:
    from optuna.storages import JournalStorage
    from optuna.storages.journal import JournalFileBackend

    storage = JournalStorage(JournalFileBackend(str(journal)))
    (name,) = optuna.get_all_study_names(storage)
    study = optuna.load_study(study_name=name, storage=storage)
    return [t.number for t in study.trials if t.user_attrs.get(POLISH_ATTR)]


def test_same_seed_same_log_with_polish_and_resume_goes_on_climbing(
        tiny_graph: Graph, tmp_path: Path) -> None:
    """Polishing early (after 6 measurements without a better best), two in-process
    tunes with one seed write the same log; a tune stopped mid-polish and re-run measures
    nothing twice and goes on polishing (the polish trials are marked in the study)."""
    def run(log: Path, trials: int) -> None:
        tune([tiny_graph], trials=trials, log=log, search=SearchOptions(seed=5, guided=POLISH),
             run=RunOptions(workers=0, curve=False))

    a, b = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    run(a, 48)
    run(b, 48)
    assert _without_time(a) == _without_time(b)
    polished = _polish_trials(tmp_path / "a.journal")
    assert len(polished) >= 8  # the climb ran
    mid = polished[len(polished) // 2]  # a trial in the middle of the polishing
    r = tmp_path / "r.jsonl"
    run(r, mid + 1)
    run(r, 48)
    cids = [candidate_id(GraphSchedule.from_json(x["schedule"])) for x in _lines(r)]
    assert len(cids) == 48 == len(set(cids))
    assert any(n > mid for n in _polish_trials(tmp_path / "r.journal"))


def test_a_new_sampler_on_the_study_knows_the_climb(tiny_graph: Graph,
                                                    tune_target: Target) -> None:
    """The polish state is read back from the trials: which were polish proposals and how
    many measurements since the best improved (a resumed tune goes on climbing)."""
    space = build_space(tiny_graph, tune_target, tiny_graph.batch)
    storage = optuna.storages.InMemoryStorage()

    def sampler() -> GuidedSampler:
        return GuidedSampler(space=space, ranker=CostModelRanker(tiny_graph, tune_target, seed=0),
                             seed=3, options=POLISH)

    first = sampler()
    study = optuna.create_study(study_name="p", storage=storage, sampler=first)
    for _, s in seed_schedules(tiny_graph, tune_target):
        p = space.project(s)
        if p.params:
            study.enqueue_trial(p.params, skip_if_exists=True)
    lat: dict[str, float] = {}
    for _ in range(40):
        trial = study.ask()
        cid = candidate_id(space.suggest(trial))
        lat.setdefault(cid, 100.0 - len(lat) if len(lat) < 6 else 200.0 + len(lat))
        study.tell(trial, lat[cid])
    first.sync(study)
    assert first.polish.found  # the climb ran (nothing beats the 6th measured)
    again = sampler()
    again._scanned_at = None
    again.sync(optuna.load_study(study_name="p", storage=storage, sampler=again))
    assert again.polish.found == first.polish.found
    assert (again.polish.best, again.polish.since_best) == (first.polish.best,
                                                           first.polish.since_best)


def _log_marks(log: Path) -> dict[int, str]:
    """Trial number -> the schedule its polish proposal came from, read from the log alone."""
    from autotune.sampling._polish import PROV_POLISH

    return {x["prov"]["trial"]: x["prov"][PROV_POLISH] for x in _lines(log)
            if x["prov"].get(PROV_POLISH)}


def test_the_polish_mark_and_limit_survive_a_resume_from_the_log_alone(
        tiny_graph: Graph, tmp_path: Path) -> None:
    """A polish proposal's record carries the mark (``prov.polish_of``, the same as the
    journal's); a tune resumed with its journal lost rebuilds the marked trials and does
    not polish again a schedule whose ``polish_limit`` was reached before the resume."""
    from dataclasses import replace

    opts = replace(POLISH, polish_limit=4)

    def run(log: Path, trials: int) -> None:
        tune([tiny_graph], trials=trials, log=log, search=SearchOptions(seed=5, guided=opts),
             run=RunOptions(workers=0, curve=False))

    a = tmp_path / "a.jsonl"
    run(a, 48)
    marks = _log_marks(a)
    assert sorted(marks) == _polish_trials(tmp_path / "a.journal") and len(marks) >= 4
    first = marks[min(marks)]  # the first schedule polished: its limit was reached
    done_at = max(n for n, p in marks.items() if p == first)
    assert sum(p == first for p in marks.values()) >= opts.polish_limit

    r = tmp_path / "r.jsonl"
    run(r, done_at + 1)
    (tmp_path / "r.journal").unlink()  # the log alone
    run(r, 48)
    assert {n: p for n, p in _log_marks(r).items() if n <= done_at} == {
        n: p for n, p in marks.items() if n <= done_at}
    rebuilt = _polish_trials(tmp_path / "r.journal")
    assert [n for n in rebuilt if n <= done_at] == [n for n in marks if n <= done_at]
    again = [n for n, p in _log_marks(r).items() if n > done_at and p == first]
    assert again == []  # its limit survived the resume


def test_kicks_move_one_boundary_two_or_more_cut_points(tiny_graph: Graph,
                                                        tune_target: Target) -> None:
    """A kick swaps one boundary's rank with a cut point's 2 to ``span`` cut points away
    that is not a boundary: two cut parameters change, nothing else, and no kick is a
    one-move neighbour."""
    from search_space._dims import CUT_BELOW, GRANULARITIES
    from search_space._neighbours import kick_vectors

    space = build_space(tiny_graph, tune_target, tiny_graph.batch)
    rng = np.random.default_rng(7)
    cut_at = {int(space.rep[d]): k for k, d in enumerate(space.d_cut)}
    total = 0
    for _ in range(12):
        s = space.sample(rng)
        vec = space.encode(s)
        below = CUT_BELOW[GRANULARITIES[int(vec[space.rep[space.d_gran]])]]
        one = {v.tobytes() for _, v in neighbour_vectors(space, s)}
        kicks = kick_vectors(space, s, span=3)
        assert len({v.tobytes() for _, v in kicks}) == len(kicks)
        for _, v in kicks:
            changed = np.flatnonzero(v != vec)
            assert len(changed) == 2 and all(space.free[f].kind == "cut" for f in changed)
            a, b = (int(f) for f in changed)
            assert (vec[a] < below) != (vec[b] < below)  # a boundary and a free cut point
            assert 2 <= abs(cut_at[a] - cut_at[b]) <= 3
            assert v.tobytes() not in one
        total += len(kicks)
    assert total > 0


def test_the_iterated_local_search_kicks_climbs_and_stops() -> None:
    """Once the best is polished and still stalled: a kick, its climb (improving on the
    kicked schedule, each step with ``kick_limit`` proposals at most), the next kick;
    a climb below the best makes a new best, polished as any; kicks run out."""
    st = PolishState(after=2, limit=4, window=10, kick=3, kick_limit=2)
    st.measured("b", 1.0)
    st.measured("x", 0.5)
    st.measured("y", 0.5)
    assert st.due() == ("b", "polish")
    st.start("b")
    st.back("b", 4, size=50, window=10)  # polished (its limit)
    assert st.due() == ("b", "kick")
    assert st.start("b", "kick") > 50 and st.due() == ("", "")
    st.kicked("b", ["k"])
    assert st.due() == ("", "")  # the kick is not measured yet
    st.measured("k", 0.6)  # slower than the best: the climb starts from it
    assert st.head == "k" and st.due() == ("k", "polish")
    st.start("k")
    st.measured("k2", 0.8, polish_of="k")  # better than the kick: the climb goes on
    st.back("k", 2, size=40, window=10)
    assert "k" in st.done and st.due() == ("k2", "polish")
    st.start("k2")
    st.back("k2", 2, size=40, window=10)
    st.measured("k3", 0.7, polish_of="k2")  # no better: the climb ends (k2's limit)
    assert "k2" in st.done and st.due() == ("b", "kick")
    st.start("b", "kick")
    st.kicked("b", ["m"])
    st.measured("m", 0.9)
    st.start("m")
    st.measured("m2", 1.5, polish_of="m")  # the climb beats the best: a new best
    st.back("m", 1, size=40, window=10)
    assert st.best == "m2" and st.since_best == 0 and st.due() == ("m2", "polish")
    st.start("m2")
    st.back("m2", 4, size=40, window=10)  # the best's own limit (4), not kick_limit
    assert "m2" in st.done
    st.measured("z", 0.1)
    st.measured("z2", 0.1)
    assert st.due() == ("m2", "kick")
    st.start("m2", "kick")
    st.kicked("m2", [])  # no kick left
    assert "m2" in st.kicked_out and st.due() == ("", "")
    assert PolishState(after=2, limit=4, window=10).due() == ("", "")


def test_a_kicked_climb_ranks_its_splits_boundary_moves_and_merges_first(
        tiny_graph: Graph, tune_target: Target) -> None:
    """A climb round (``BreedRequest.climb``) proposes the head's neighbours by a split,
    boundary or merge move before its other neighbours, each part best predicted first;
    a kick round proposes the best-predicted kick."""
    from dataclasses import replace

    from autotune.sampling._breed import CLIMB_FIRST
    from search_space._neighbours import kick_vectors

    space = build_space(tiny_graph, tune_target, tiny_graph.batch)
    rng = np.random.default_rng(5)
    ranker = CostModelRanker(tiny_graph, tune_target, seed=0)
    xs = np.asarray(ranker.features([space.sample(rng) for _ in range(24)]))
    ranker.fit(xs, rng.random(24) + 0.5)
    for _ in range(20):
        parent = space.sample(rng)
        moves: dict[str, set[str]] = {}
        for m, v in neighbour_vectors(space, parent):
            moves.setdefault(candidate_id(space.decode(v)), set()).add(m)
        lead = {c for c, m in moves.items() if m & CLIMB_FIRST}
        if lead and len(lead) < len(moves) - 1:
            break
    vec, pid = space.encode(parent), candidate_id(parent)
    req = _request(vec, pid, 10_000)
    plain = breed(space, RankerScorer(ranker), req).picks
    climb = breed(space, RankerScorer(ranker), replace(req, climb=True)).picks
    assert {p.cid for p in climb} == {p.cid for p in plain}
    first = [p.cid in lead for p in climb]
    assert any(first) and first == sorted(first, reverse=True)  # the structural ones lead
    assert [p.cid for p in climb if p.cid not in lead] == [p.cid for p in plain
                                                           if p.cid not in lead]
    kicks = {candidate_id(space.decode(v)) for _, v in kick_vectors(space, parent, 4)}
    got = breed(space, RankerScorer(ranker), replace(req, kick=4, proposals=1)).picks
    assert len(got) == 1 and got[0].cid in kicks


def test_a_kicked_climbs_proposals_go_before_the_queued_evolutions(
        tiny_graph: Graph, tune_target: Target) -> None:
    """With evolution's proposals queued (Ray workers breed ahead), a kicked climb's
    proposals are handed out next (each step of it waits for the last's measurements);
    the best's own polish round queues behind, as before."""
    space = build_space(tiny_graph, tune_target, tiny_graph.batch)
    ranker = CostModelRanker(tiny_graph, tune_target, seed=0)
    sampler = GuidedSampler(space=space, ranker=ranker, seed=3, options=POLISH)
    rng = np.random.default_rng(2)
    parent = space.sample(rng)
    vec, pid = space.encode(parent), candidate_id(parent)
    scorer = RankerScorer(ranker)
    evolved = breed(space, scorer, BreedRequest(
        batch=4, parents=(vec,), seed=4, proposals=6, eps=0, seen=frozenset(), population=32,
        generations=1, random_share=0.25, crossover=0.15))
    polished = breed(space, scorer, _request(vec, pid, 10_000, proposals=4))
    assert evolved.picks and polished.picks
    plain = GuidedSampler(space=space, ranker=ranker, seed=3, options=POLISH)
    plain.bred(evolved)
    plain.bred(polished)  # the best's polish: behind the queue
    assert [p.cid for p in plain._queue][:len(evolved.picks)] == [p.cid for p in evolved.picks]
    sampler.polish.kicked("b", [pid])
    sampler.polish.measured(pid, 0.5)  # a kick, measured: the head of a climb
    sampler.bred(evolved)
    sampler.bred(polished)
    fresh = [p.cid for p in polished.picks if p.cid not in {q.cid for q in evolved.picks}]
    order = [p.cid for p in sampler._queue]
    assert order[:len(fresh)] == fresh and all(p.polish_of == pid for p in
                                               list(sampler._queue)[:len(fresh)])
    assert order[len(fresh):] == [p.cid for p in evolved.picks]


def test_kick_and_climb_rounds_alternate_with_evolution(tiny_graph: Graph,
                                                        tune_target: Target) -> None:
    """Once the best is polished and stalled, every other request is a kick or a climb:
    a kick proposes one schedule; a climb round is a polish round of the head (its
    structural moves first) proposing a share's proposals in-process, and the step's
    whole ``kick_limit`` with workers (``share > 1``)."""
    from dataclasses import replace

    space = build_space(tiny_graph, tune_target, tiny_graph.batch)
    opts = replace(POLISH, polish_after=0, polish_limit=2, polish_kick=3, kick_limit=12,
                   polish_deep=0)  # (the second ring, polished before any kick: off here)
    sampler = GuidedSampler(space=space, ranker=CostModelRanker(tiny_graph, tune_target, seed=0),
                            seed=3, options=opts)
    rng = np.random.default_rng(1)
    for cid in ("b", "h"):
        sampler._vectors[cid] = space.encode(space.sample(rng))
    st = sampler.polish
    st.measured("b", 1.0)
    st.measured("x", 0.5)
    st.done.add("b")
    kick = sampler.breed_request()
    assert (kick.polish_of, kick.kick, kick.proposals, kick.climb) == ("b", 3, 1, False)
    st.kicked("b", ["h"])
    st.measured("h", 0.7)
    assert not sampler.breed_request().polish  # evolution's turn
    climb = sampler.breed_request()
    assert (climb.polish_of, climb.kick, climb.climb) == ("h", 0, True)
    assert climb.proposals == opts.proposals
    st.back("h", 1, size=100, window=climb.polish)
    assert not sampler.breed_request(share=2).polish
    wide = sampler.breed_request(share=2)
    assert wide.polish_of == "h" and wide.proposals == opts.kick_limit
    # a kick round proposes one kick with workers too (review finding: it proposed
    # kick_limit of them, and the climb started from whichever was measured last)
    st.back("h", 0, size=1, window=1 << 20)  # the climb from h ends
    assert not sampler.breed_request(share=2).polish  # evolution's turn
    kick2 = sampler.breed_request(share=2)
    assert (kick2.polish_of, kick2.kick, kick2.proposals) == ("b", 3, 1)


def test_a_climb_starts_from_the_best_of_its_kicks() -> None:
    """Kicks measured out of order (or more than one out): the climb's head is the
    fastest kick measured, not the last one (review finding)."""
    st = PolishState(after=2, limit=4, window=10, kick=3, kick_limit=2)
    st.measured("b", 1.0)
    st.done.add("b")
    st.kicked("b", ["k1", "k2", "k3"])
    st.measured("k1", 0.95)
    st.measured("k2", 0.2)
    st.measured("k3", None)
    assert st.head == "k1" and st.due() == ("k1", "polish")


def test_a_kick_round_ranks_only_kicks_that_move_one_boundary(tune_target: Target) -> None:
    """Kicks that decode to more than one group more or less than the kicked schedule
    (a cut point of another granularity: not one boundary moved) are not ranked: on
    MobileNetV2 b16's O3 schedule some do (one group per operator)."""
    import warnings

    from autotune.sampling._polish import polish_ranked
    from compiler import zoo
    from compiler.model import Model
    from search_space._neighbours import kick_vectors

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        graph = Model(zoo.build("mobilenet_v2", batch=16, weights="inputs"),
                      name="mobilenet_v2").graph
    space = build_space(graph, tune_target, graph.batch)
    (o3,) = [s for name, s in seed_schedules(graph, tune_target) if name == "O3"]
    parent = space.decode(space.encode(o3))
    n = len(parent.groups)
    kicks = [space.decode(v) for _, v in kick_vectors(space, parent, 4)]
    far = {candidate_id(s) for s in kicks if abs(len(s.groups) - n) > 1}
    got = polish_ranked(space, space.encode(parent), parent, 1 << 20, lambda c: True,
                        lambda items: [np.zeros(1)] * len(items),
                        lambda x: np.zeros(len(x)), "t", False, kick=4)
    assert far and got.ranked
    assert all(abs(len(s.groups) - n) <= 1 for _, _, s in got.ranked)
    assert {c for _, c, _ in got.ranked} == {candidate_id(s) for s in kicks} - far - {
        candidate_id(parent)}


def test_a_polish_trial_requeued_from_the_journal_keeps_its_mark(
        tiny_graph: Graph, tune_target: Target, tmp_path: Path) -> None:
    """A tune killed while a polish trial was in flight leaves it RUNNING in the journal
    with its mark; the resume re-queues it (parameters and attributes) and its record
    carries ``prov.polish_of`` although this sampler never proposed it."""
    from optuna.storages import JournalStorage
    from optuna.storages.journal import JournalFileBackend

    def run(log: Path, trials: int) -> None:
        tune([tiny_graph], trials=trials, log=log, search=SearchOptions(seed=5, guided=POLISH),
             run=RunOptions(workers=0, curve=False))

    def study(journal: Path) -> optuna.Study:
        storage = JournalStorage(JournalFileBackend(str(journal)))
        (name,) = optuna.get_all_study_names(storage)
        return optuna.load_study(study_name=name, storage=storage)

    a = tmp_path / "a.jsonl"
    run(a, 48)
    marks = _log_marks(a)
    pn = sorted(marks)[len(marks) // 2]  # a polish trial in the middle of the climbing
    params = study(tmp_path / "a.journal").trials[pn].params
    r = tmp_path / "r.jsonl"
    run(r, pn)  # the same first pn trials; then the kill, with trial pn in flight
    s = study(tmp_path / "r.journal")
    s.enqueue_trial(params)
    trial = s.ask()
    build_space(tiny_graph, tune_target, tiny_graph.batch).suggest(trial)
    trial.set_user_attr(POLISH_ATTR, marks[pn])
    assert s.trials[trial.number].state == optuna.trial.TrialState.RUNNING
    run(r, 48)
    (rec,) = [x for x in _lines(a) if x["prov"]["trial"] == pn]
    want = candidate_id(GraphSchedule.from_json(rec["schedule"]))
    got = [x for x in _lines(r) if candidate_id(GraphSchedule.from_json(x["schedule"])) == want]
    assert len(got) == 1 and got[0]["prov"].get("polish_of") == marks[pn]


@pytest.mark.parametrize("screen", [None, 4.0, 100.0])
def test_under_screen_a_polish_round_adds_screen_per_proposal_to_its_window(
        tiny_graph: Graph, tune_target: Target, screen: float | None) -> None:
    """With ``screen`` (a tune on workers) a polish round ranks ``screen`` more neighbours
    per candidate it proposes than its schedule's last round (at most ``polish_window``),
    its window still cumulative; without it (in-process) ``polish_window`` more, as
    before. A second ring's round is bounded the same way."""
    from dataclasses import replace

    space = build_space(tiny_graph, tune_target, tiny_graph.batch)
    opts = replace(POLISH, screen=screen, polish_after=0, polish_window=64, polish_deep=3)
    sampler = GuidedSampler(space=space, ranker=CostModelRanker(tiny_graph, tune_target, seed=0),
                            seed=3, options=opts)
    sampler._vectors["b"] = space.encode(space.sample(np.random.default_rng(1)))
    st = sampler.polish
    st.measured("b", 1.0)
    st.measured("x", 0.5)
    step = 64 if screen is None else min(64, int(screen * 4))  # 8 proposals over 2 workers
    first = sampler.breed_request(share=2)
    assert (first.polish_of, first.proposals, first.polish) == ("b", 4, step)
    st.back("b", 4, size=1000, window=first.polish)
    second = sampler.breed_request(share=2)
    assert (second.polish_of, second.polish) == ("b", 2 * step)  # cumulative
    st.back("b", 0, size=2 * step, window=second.polish)  # the first ring is done
    deep = sampler.breed_request(share=2)
    assert deep.polish_of == "deep:b" and deep.proposals == 3
    assert deep.polish == (64 if screen is None else min(64, int(screen * 3)))
