"""``sim._explain``: latency - bound in named terms that add up, and edits that give what they say.

Every zoo model (reduced sizes, as ``tests/compiler/test_zoo.py`` builds them) at
every automatic level O0-O3: the terms sum to the gap, each term that is a time
spent is non-negative, the terms agree with the timeline they come from, and
every suggested edit simulates to the latency it reports.
"""

from __future__ import annotations

import json
import random
import warnings
from typing import Any

import pytest
from click.testing import CliRunner

from compiler import zoo
from compiler.auto import graph_schedule_level
from compiler.graph import Graph
from compiler.model import Model
from compiler.schedule import GraphSchedule
from compiler.target import Target
from sim import SimResult, simulate
from sim._explain import TERMS, explain
from tests.compiler.test_zoo import REDUCED, SEQ
from tests.sim.random_schedules import mutate

BATCH = {"deepfm": 64, "wide_and_deep": 32}
# every term but the bound remainder is a time someone spent: never negative
SPENT = [t for t in TERMS if t != "bound remainder"]

_GRAPHS: dict[str, Graph] = {}


def graph(name: str) -> Graph:
    if name not in _GRAPHS:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            model = zoo.build(name, batch=BATCH.get(name, 4), weights="inputs", seq=SEQ,
                              **REDUCED[name])
            _GRAPHS[name] = Model(model, name=name).graph
    return _GRAPHS[name]


def check(g: Graph, s: GraphSchedule, t: Target, edits: int = 0) -> Any:
    r = simulate(g, s, t, timeline=False)
    assert isinstance(r, SimResult), r
    e = explain(g, s, t, r, edits=edits)
    total = sum(e.terms_us.values())
    assert e.gap_us == pytest.approx(r.latency_us - r.lower_bound_us, abs=1e-9)
    assert total == pytest.approx(e.gap_us, rel=1e-6, abs=1e-6), e.terms_us
    for name in SPENT:
        assert e.terms_us[name] >= -1e-6, (name, e.terms_us)
    per_group = sum(gx.total_us for gx in e.groups)
    assert per_group == pytest.approx(total, rel=1e-6, abs=1e-6)
    for ed in e.edits:
        again = simulate(g, ed.schedule, t, timeline=False)
        assert isinstance(again, SimResult)
        assert again.latency_us == ed.latency_us
        assert ed.gain_us == pytest.approx(r.latency_us - again.latency_us)
    return e


def test_every_zoo_model_is_covered() -> None:
    assert {e.name for e in zoo.list_models()} == set(REDUCED)


@pytest.mark.parametrize("name", sorted(REDUCED))
def test_terms_add_up_to_the_gap_at_every_level(name: str) -> None:
    g, t = graph(name), Target.default()
    for level in range(4):
        check(g, graph_schedule_level(g, t, level), t)


def test_terms_add_up_on_mutated_schedules() -> None:
    """Uneven and overlapping parts, idle cores, odd orders: the identity still holds."""
    rng = random.Random(3)
    t = Target.default()
    seen = 0
    for name in ("resnet18", "mobilenet_v2", "bert_base", "deepfm"):
        g = graph(name)
        s = graph_schedule_level(g, t, 3)
        for _ in range(12):
            try:
                cand = mutate(g, s, rng, t.chip.cores_per_cluster)
            except Exception:
                continue
            r = simulate(g, cand, t, timeline=False)
            if isinstance(r, SimResult):
                check(g, cand, t)
                seen += 1
                s = cand
    assert seen >= 20


def test_terms_name_what_the_schedule_does(target: Target) -> None:
    """A group on half the cluster leaves cores unused; padding shows on small maps."""
    from compiler.schedule import GroupSpec, Placement, make_schedule

    g = graph("resnet18")
    ops = tuple(range(len(g.ops)))
    half = make_schedule(g, [GroupSpec("all", ops, 1,
                                       (Placement("DDR", ((0,), (1,), (2,), (3,))),))])
    r = simulate(g, half, target, timeline=False)
    if not isinstance(r, SimResult):
        pytest.skip(f"the half-cluster schedule does not fit: {r.message}")
    e = check(g, half, target)
    # four of eight cores never run: half of N x E is idle
    assert e.terms_us["unused cores"] == pytest.approx(
        target.cycles_to_us((r.latency_cycles - target.host.launch_overhead_us
                             * target.clock_hz / 1e6) * 4 / 8))
    assert e.terms_us["granule padding"] > 0


def test_edits_give_the_latency_they_print(target: Target) -> None:
    g = graph("resnet50")
    e = check(g, graph_schedule_level(g, target, 3), target, edits=3)
    assert 1 <= len(e.edits) <= 3
    assert [x.gain_us for x in e.edits] == sorted((x.gain_us for x in e.edits), reverse=True)


def test_cli_explain_json_and_errors(tmp_path: Any) -> None:
    from autotune.cli import main

    g_onnx = tmp_path / "m.onnx"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = zoo.build("resnet18", batch=4, weights="inputs", **REDUCED["resnet18"])
    g_onnx.write_bytes(model.SerializeToString())
    runner = CliRunner()
    res = runner.invoke(main, ["explain", str(g_onnx), "--level", "3", "--json"])
    assert res.exit_code == 0, res.output
    out = json.loads(res.output)
    assert sum(out["terms_us"].values()) == pytest.approx(out["gap_us"], rel=1e-6, abs=1e-6)
    g = Model(model, name="m").graph
    t = Target.default()
    for ed in out["edits"]:
        r = simulate(g, GraphSchedule.from_json(ed["schedule"]), t, timeline=False)
        assert isinstance(r, SimResult)
        assert r.latency_us == pytest.approx(ed["latency_us"], rel=1e-12)
    res = runner.invoke(main, ["explain", str(g_onnx), "--level", "3"])
    assert res.exit_code == 0 and "granule padding" in res.output
    res = runner.invoke(main, ["explain", str(g_onnx)])
    assert res.exit_code == 2
    assert res.output.strip().startswith("graphtune: error: give exactly one of")
    res = runner.invoke(main, ["explain", str(g_onnx), "--log", str(tmp_path / "none.jsonl")])
    assert res.exit_code == 2 and "Traceback" not in res.output
    log = tmp_path / "hand.jsonl"
    res = runner.invoke(main, ["simulate", str(g_onnx), "--level", "2", "--record", str(log)])
    assert res.exit_code == 0, res.output
    res = runner.invoke(main, ["explain", str(g_onnx), "--log", str(log), "--json",
                               "--edits", "0"])
    assert res.exit_code == 0, res.output
    o2 = simulate(g, graph_schedule_level(g, t, 2), t, timeline=False)
    assert isinstance(o2, SimResult)
    assert json.loads(res.output)["latency_us"] == pytest.approx(o2.latency_us, rel=1e-12)
