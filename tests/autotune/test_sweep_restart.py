"""Restarts (``autotune.whatif._budget.later_options``, ``GuidedOptions.apart``): after a chunk that
gained less than ``RESTART_TOL``, a variant's next chunk breeds from the best measured candidates
far from its best, unpolished (``bench/results/sweep.md``, twenty-second pass)."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import numpy as np
import optuna
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from autotune.sampling._guided import GuidedOptions, GuidedSampler
from autotune.sampling._ranker import CostModelRanker
from autotune.sampling._studies import candidate_id
from autotune.whatif._budget import (
    RESTART_TOL,
    STALL_TOL,
    chunk_guided,
    chunk_size,
    later_options,
    probe_size,
    stalled,
)
from autotune.whatif._targets import make_variants, parse_set
from compiler.graph import Graph
from compiler.target import Target
from search_space import build_space
from tests.autotune.test_sweep_graft import small  # noqa: F401 - the fixture

OPTIONS = GuidedOptions(population=24, generations=1, proposals=6, parents=4, retrain_every=4)


def _measured(tiny_graph: Graph, target: Target, n: int) -> tuple[Any, optuna.Study, GuidedSampler,
                                                                    dict[str, float]]:
    """A study of ``n`` distinct random candidates told made-up latencies."""
    space = build_space(tiny_graph, target, tiny_graph.batch)
    sampler = GuidedSampler(space=space, ranker=CostModelRanker(tiny_graph, target, seed=0), seed=3,
                            options=OPTIONS)
    study = optuna.create_study(sampler=sampler)
    rng = np.random.default_rng(5)
    lat: dict[str, float] = {}
    while len(lat) < n:
        s = space.sample(rng)
        cid = candidate_id(s)
        if cid in lat or not space.precheck(s).ok:
            continue
        lat[cid] = 100.0 + float(rng.random())
        study.enqueue_trial(dict(space.project(s).params))
        trial = study.ask()
        got = space.suggest(trial)
        study.tell(trial, lat[candidate_id(got)])
    sampler.sync(study)
    return space, study, sampler, lat


def _expected(space: Any, study: optuna.Study, inc: np.ndarray, apart: int, k: int) -> list[list[int]]:
    done = sorted((t.value, t.number, space.encode(space.suggest(_Fixed(t.params)))) for t in study.trials)
    return [v.tolist() for _, _, v in done if np.count_nonzero(v != inc) >= apart][:k]


class _Fixed:
    """A trial stand-in whose suggestions are its params (to decode a finished trial)."""

    def __init__(self, params: dict[str, Any]) -> None:
        self.params = params

    def suggest_categorical(self, name: str, choices: Any) -> Any:
        return self.params[name]

    def suggest_int(self, name: str, low: int, high: int, **_: Any) -> int:
        return int(self.params[name])


def test_apart_breeds_from_the_best_far_from_the_incumbent(tiny_graph: Graph, tune_target: Target) -> None:
    """With ``apart=d`` a round's parents are the best measured candidates at least ``d``
    parameters from the incumbent (the best when first asked), best first; a faster candidate
    measured later does not move the incumbent; ``apart=0``: the best, as before."""
    space, study, sampler, _ = _measured(tiny_graph, target := tune_target, 40)
    inc = sampler._best(1)[0].copy()
    dists = sorted(int(np.count_nonzero(v != inc)) for v in sampler._vectors.values())
    apart = max(1, dists[len(dists) // 2])
    plain = sampler.breed_request(study)
    assert [v.tolist() for v in plain.parents] == [v.tolist() for v in sampler._best(OPTIONS.parents)]
    sampler.options = dataclasses.replace(OPTIONS, apart=apart)
    req = sampler.breed_request(study)
    got = [v.tolist() for v in req.parents]
    assert got and got == _expected(space, study, inc, apart, OPTIONS.parents)
    assert all(np.count_nonzero(np.asarray(v) != inc) >= apart for v in got)
    # a far, faster candidate: the new best, yet the incumbent stays the first one
    rng = np.random.default_rng(11)
    far = next(s for s in (space.sample(rng) for _ in range(500))
               if space.precheck(s).ok and np.count_nonzero(space.encode(s) != inc) >= apart
               and candidate_id(s) not in {candidate_id(space.decode(v)) for v in sampler._vectors.values()})
    study.enqueue_trial(dict(space.project(far).params))
    trial = study.ask()
    space.suggest(trial)
    study.tell(trial, 1.0)
    req = sampler.breed_request(study)
    assert candidate_id(space.decode(req.parents[0])) == candidate_id(space.project(far).schedule)
    assert [v.tolist() for v in req.parents] == _expected(space, study, inc, apart, OPTIONS.parents)
    del target


def test_later_options_at_the_sweeps_miss() -> None:
    """ResNet-50 b16 seed 0, L1 384K / DDR 27: its third chunk moved the best by 1e-12 us, so
    with no tolerance ``stalled`` (and the kick) never held; with ``STALL_TOL`` the kick comes,
    and a restart takes it for a stall first."""
    per = 200
    c = chunk_size(per)
    h: list[float | None] = [9640.9] * probe_size(per) + [9518.163398148146] * c
    h += [9518.163398148146] * (c - 7) + [9518.163398148145] * 7
    late = chunk_guided(per)
    assert not stalled(h, per, 0.0) and stalled(h, per) and stalled(h, per, RESTART_TOL)
    assert later_options(late, h, per, kick=4) == dataclasses.replace(late, polish_kick=4)
    r = later_options(late, h, per, kick=4, restart=20)
    assert (r.apart, r.polish_after, r.polish_kick) == (20, -1, 0)
    assert dataclasses.replace(r, apart=0, polish_after=late.polish_after) == late
    flat = h[:-7] + [9518.163398148146] * 7  # no gain at all: the restart still comes first
    assert stalled(flat, per) and later_options(late, flat, per, kick=4, restart=20) == r


@settings(max_examples=80, deadline=None)
@given(st.sampled_from([0.0, 1e-16, 1e-12, 5e-7, 5e-5, 2e-4, 0.1]), st.integers(1, chunk_size(48)),
       st.booleans(), st.sampled_from([0, 3]), st.sampled_from([0, 20]))
def test_later_options_is_a_restart_a_kick_or_the_chunk(gain: float, tail: int, short: bool,
                                                         kick: int, restart: int) -> None:
    """A restart exactly when ``restart`` and the last chunk gained < ``RESTART_TOL``; else a
    kick exactly when ``kick`` and it gained < ``STALL_TOL``; else the chunk's options
    themselves. The last chunk's gain is drawn on both sides of both tolerances (float noise
    1e-16 and 1e-12 included), coming ``tail`` records before its end; ``short``: one record
    too few for a stall to be asked."""
    per, b = 48, 9518.163398148146
    c, p = chunk_size(per), probe_size(per)
    best: list[float | None] = [b * 1.05] * p + [b] * c + [b] * (c - tail) + [b * (1 - gain)] * tail
    if short:
        best = best[:p + c - 1]
    late = chunk_guided(per)
    got = later_options(late, best, per, kick, restart)
    last = best[-1] / best[-c - 1]  # type: ignore[operator]
    if restart and not short and last >= 1 - RESTART_TOL:
        assert (got.apart, got.polish_after, got.polish_kick) == (restart, -1, 0)
    elif kick and not short and last >= 1 - STALL_TOL:
        assert got == dataclasses.replace(late, polish_kick=kick)
    else:
        assert got is late


def test_a_sweep_restarts_a_stalled_variants_next_chunk(
        small: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:  # noqa: F811
    """``sweep(restart=d)`` gives a later chunk ``apart=d`` and no polish exactly when the
    variant's last chunk gained < RESTART_TOL (here: every other time it asks); ``restart=0``
    (the default): never, and no stall is asked without kicks."""
    import autotune._tune as tune_module
    import autotune.whatif._budget as budget_module
    import autotune.whatif._sweep as sweep_module

    seen: list[tuple[bool, int, int]] = []
    real_tune, real_stalled = tune_module.tune, budget_module.stalled
    state: dict[str, Any] = {"stalled": False, "n": 0, "asked": 0}

    def spy_stalled(history: Any, tpv: int, tol: float = 0.0) -> bool:  # every other: stalled
        real_stalled(history, tpv, tol)
        state["asked"] += 1
        state["n"] += 1
        state["stalled"] = state["n"] % 2 == 1
        return state["stalled"]

    def spy_tune(*args: Any, **kwargs: Any) -> Any:
        g = kwargs["search"].guided
        if g is not None:
            seen.append((state["stalled"], g.apart, g.polish_after))
        state["stalled"] = False
        return real_tune(*args, **kwargs)

    monkeypatch.setattr(budget_module, "stalled", spy_stalled)
    monkeypatch.setattr(tune_module, "tune", spy_tune)
    vs = make_variants(Target.default(), [parse_set("l1.data_bytes=384K,1M")])
    late = chunk_guided(24)
    for restart in (5, 0):
        seen.clear()
        state.update(n=0, asked=0)
        sweep_module.sweep([small[0]], vs, trials_per_variant=24, log=tmp_path / f"r{restart}.jsonl",
                           workers=0, seed=0, pretrained=False, kick=0, regroup=0, graft=0,
                           restart=restart, lend=False)  # lend_to asks stalled too
        assert seen
        assert all((a, p) == ((restart, -1) if was else (0, late.polish_after)) for was, a, p in seen)
        assert any(was for was, _, _ in seen) == bool(restart)
        assert bool(state["asked"]) == bool(restart)
