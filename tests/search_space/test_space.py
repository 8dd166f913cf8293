"""The search space: determinism, seeds project exactly, round trips, the four views."""

from __future__ import annotations

import json

import numpy as np
import pytest

from compiler.auto import graph_schedule_level
from compiler.schedule import GraphSchedule
from compiler.target import Target
from search_space import SpaceError, SpaceOptions, build_space, build_spaces
from sim import SimError, simulate
from tests.search_space.conftest import SMALL, cpu_split_graph, single_op_graph, small_graph


def _copy(s: GraphSchedule) -> GraphSchedule:
    """A fresh value (so encode takes the projection path, not the decode memo)."""
    return GraphSchedule.from_json(json.loads(s.dumps()))


@pytest.mark.parametrize("key", sorted(SMALL))
def test_build_is_deterministic(key: str, target: Target) -> None:
    g = small_graph(key)
    a, b = build_space(g, target), build_space(g, target)
    assert [(d.name, d.choices) for d in a.dims] == [(d.name, d.choices) for d in b.dims]
    rng_a, rng_b = np.random.default_rng(7), np.random.default_rng(7)
    assert a.sample(rng_a).structural_key() == b.sample(rng_b).structural_key()


@pytest.mark.parametrize("key", sorted(SMALL))
def test_levels_project_exactly_and_round_trip(key: str, target: Target) -> None:
    g = small_graph(key)
    space = build_space(g, target)
    for level in range(4):
        s = graph_schedule_level(g, target, level)
        p = space.project(_copy(s))
        assert p.schedule is not None, f"O{level}: {p.reason}"
        assert p.schedule.structural_key() == s.structural_key()
        assert space.decode(space.encode(_copy(s))).structural_key() == s.structural_key()


def test_guide_plans_project_exactly(target: Target) -> None:
    from compiler import guide_plans

    for key, name in (("bert2", "bert_base"), ("deepfm", "deepfm")):
        g = small_graph(key)
        plan = guide_plans.guide_plan(name, g)
        p = build_space(g, target).project(_copy(plan))
        assert p.schedule is not None, f"{name}: {p.reason}"
        assert p.params["order"] == ("breadth" if name == "bert_base" else p.params["order"])


@pytest.mark.parametrize("key", sorted(SMALL))
def test_samples_round_trip_and_are_structurally_valid(key: str, target: Target) -> None:
    g = small_graph(key)
    space = build_space(g, target)
    rng = np.random.default_rng(1)
    for k in range(40):
        s = space.sample(rng, uniform=k % 2 == 1)  # uniform: one group per op as often as not
        s.validate(g, target)
        v = space.encode(_copy(s))
        assert space.decode(v).structural_key() == s.structural_key()
        # the decode memo may keep another vector of the same point (repairs, equal partitions)
        assert space.decode(space.encode(s)).structural_key() == s.structural_key()


@pytest.mark.parametrize("key", ["tiny_cnn", "bert2"])
def test_samples_are_mostly_valid(key: str, target: Target) -> None:
    """Scopes are decided along the capacity walk: the simulator accepts most samples."""
    g = small_graph(key)
    space = build_space(g, target)
    rng = np.random.default_rng(9)
    ok = sum(not isinstance(simulate(g, space.sample(rng), target, timeline=False), SimError)
             for _ in range(30))
    assert ok >= 27


@pytest.mark.parametrize("key", ["tiny_cnn", "deepfm", "bert2"])
def test_precheck_agrees_with_the_simulator(key: str, target: Target) -> None:
    g = small_graph(key)
    space = build_space(g, target, options=SpaceOptions())
    rng = np.random.default_rng(2)
    kinds = set()
    for _ in range(30):
        s = space.sample(rng)
        for cand in (s, _copy(s)):  # trusted (decoded here) and untrusted paths
            check = space.precheck(cand)
            r = simulate(g, cand, target, timeline=False)
            assert check.ok == (not isinstance(r, SimError)), (check, r)
            if isinstance(r, SimError):
                assert check.kind == r.status and check.reason == r.message
                kinds.add(r.status)


def test_precheck_reports_structure(target: Target) -> None:
    g = small_graph("tiny_cnn")
    space = build_space(g, target)
    s = graph_schedule_level(g, target, 3)
    broken = GraphSchedule(s.batch, s.groups[1:], s.transfers, s.order, s.workload_key)
    check = space.precheck(broken)
    assert not check.ok and check.kind == "structure" and "no group" in (check.reason or "")


def test_vectors_are_checked(target: Target) -> None:
    space = build_space(small_graph("tiny_cnn"), target)
    with pytest.raises(SpaceError, match="entries"):
        space.decode(np.zeros(3, dtype=np.int16))
    v = np.zeros(space.dimension, dtype=np.int16)
    v[0] = 99
    with pytest.raises(SpaceError, match="choices"):
        space.decode(v)


def test_encode_many_is_one_array(target: Target) -> None:
    space = build_space(small_graph("deepfm"), target)
    rng = np.random.default_rng(3)
    ss = [space.sample(rng) for _ in range(50)]
    m = space.encode_many(ss)
    assert m.shape == (50, space.dimension) and m.dtype == np.int16
    assert all(space.decode(m[k]).structural_key() == ss[k].structural_key() for k in range(50))


def test_mutate_changes_one_thing_and_crossover_mixes(target: Target) -> None:
    g = small_graph("bert2")
    space = build_space(g, target)
    rng = np.random.default_rng(4)
    o3 = space.project(graph_schedule_level(g, target, 3)).schedule
    assert o3 is not None
    changed = 0
    for move in ("boundary", "merge", "split_group", "split", "rebind", "scope", "reorder"):
        for _ in range(3):
            m = space.mutate(o3, rng, move=move)
            m.validate(g, target)
            changed += m.structural_key() != o3.structural_key()
    assert changed >= 10
    a, b = space.sample(rng), space.sample(rng)
    child = space.crossover(a, b, rng)
    child.validate(g, target)
    ea, eb, ec = space.encode(a), space.encode(b), space.encode(child)
    assert ((ec == ea) | (ec == eb) | (ec == 0)).mean() > 0.8


def test_split_group_cuts_one_group_in_two(target: Target) -> None:
    """Issue 26: from a schedule without boundaries (O3's one group: granularity 0, every
    cut rank inactive, 0 in the canonical vector) a new boundary is one boundary, and the
    new group keeps the split and cores of the group it is cut from. (The move used to
    make every cut point a boundary, or leave the new group at the most chunks, so the
    guided search never reached DLRM's bottom MLP as a group of its own.)"""
    g = small_graph("tiny_cnn")
    space = build_space(g, target)
    one = space.project(graph_schedule_level(g, target, 3)).schedule
    assert one is not None and len(one.groups) == 1
    parent = (one.groups[0].split, one.groups[0].chunks[0].core_bind)
    rng = np.random.default_rng(0)
    halves = 0
    for _ in range(20):
        m = space.mutate(one, rng, move="split_group")
        m.validate(g, target)
        if len(m.groups) == 2 and all((gr.split, gr.chunks[0].core_bind) == parent
                                      for gr in m.groups):
            halves += 1
    assert halves >= 8


def test_unexpressible_schedules_say_why(target: Target) -> None:
    from dataclasses import replace

    from compiler.schedule import Placement

    g = small_graph("tiny_cnn")
    space = build_space(g, target)
    s = graph_schedule_level(g, target, 0)
    odd = replace(s.groups[0], chunks=(Placement("DDR", ((1,), (0,), (3,), (2,), (5,), (4,), (7,),
                                                          (6,))),))
    p = space.project(replace(s, groups=(odd, *s.groups[1:])))
    assert p.schedule is None and "core binding" in (p.reason or "")
    other = space.project(replace(s, batch=s.batch * 2))
    assert other.schedule is None and "batch" in (other.reason or "")


def test_optuna_suggest_is_define_by_run_with_stable_names(target: Target) -> None:
    import optuna

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    g = small_graph("bert2")
    space = build_space(g, target)
    o3 = graph_schedule_level(g, target, 3)
    seed = space.project(o3)
    study = optuna.create_study(sampler=optuna.samplers.TPESampler(seed=0, multivariate=True,
                                                                   group=True))
    study.enqueue_trial(seed.params)
    got: list[GraphSchedule] = []

    def objective(trial: optuna.Trial) -> float:
        s = space.suggest(trial)
        got.append(s)
        return float(len(s.order))

    study.optimize(objective, n_trials=12)
    assert got[0].structural_key() == o3.structural_key()
    names = {d.name for d in space.free}
    for t in study.trials:
        assert set(t.params) <= names
        v = np.array([0] * space.dimension, dtype=np.int16)
        for k, d in enumerate(space.free):
            if d.name in t.params:
                v[k] = d.choices.index(t.params[d.name])
        assert space.decode(v).structural_key() == got[t.number].structural_key()


def test_ties_shrink_the_space(target: Target) -> None:
    g = small_graph("bert2")
    tied = build_space(g, target, options=SpaceOptions(ties=True))
    untied = build_space(g, target)
    assert tied.size() < untied.size() and tied.dimension < untied.dimension
    # with ties the segments are the single-tensor ones: fewer cut points than untied
    assert tied.size() < tied.size(ties=False) < untied.size()
    assert len(tied.structure.segments) < len(untied.structure.segments)
    rng = np.random.default_rng(5)
    for _ in range(10):
        s = tied.sample(rng)
        assert tied.decode(tied.encode(_copy(s))).structural_key() == s.structural_key()


def test_cpu_ops_give_one_space_per_npu_function(target: Target) -> None:
    g = cpu_split_graph()
    spaces = build_spaces(g, target)
    assert len(spaces) == 2
    rng = np.random.default_rng(6)
    for sp in spaces:
        assert sp.graph.workload_key != g.workload_key
        for level in range(4):
            s = graph_schedule_level(sp.graph, target, level)
            assert sp.project(_copy(s)).schedule is not None
        s = sp.sample(rng)
        assert not isinstance(simulate(sp.graph, s, target, timeline=False), SimError)


def test_single_op_model(target: Target) -> None:
    g = single_op_graph()
    space = build_space(g, target)
    rng = np.random.default_rng(8)
    for _ in range(20):
        s = space.sample(rng)
        assert len(s.groups) == 1 and space.precheck(s).ok
        assert space.decode(space.encode(_copy(s))).structural_key() == s.structural_key()
    for level in range(4):
        assert space.project(graph_schedule_level(g, target, level)).schedule is not None
    assert "ops" in space.describe() and space.size() > 0


def test_structural_key_ignores_labels(target: Target) -> None:
    from dataclasses import replace

    g = small_graph("tiny_cnn")
    s = graph_schedule_level(g, target, 3)
    renamed_groups = tuple(replace(gr, name=f"x{k}") for k, gr in enumerate(s.groups))
    mapping = {gr.name: f"x{k}" for k, gr in enumerate(s.groups)}
    order = tuple(replace(st, name=mapping.get(st.name, st.name)) for st in s.order)
    other = replace(s, groups=renamed_groups, order=order, source="elsewhere", workload_key=None)
    assert other.structural_key() == s.structural_key()
    hash(s.structural_key())
    assert replace(s, batch=s.batch + 1).structural_key() != s.structural_key()
