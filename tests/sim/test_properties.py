"""Property tests: random and adversarial schedules never fool or crash the simulator.

For six models (a tiny CNN, a ResNet, MobileNetV2's depthwise convolutions, a
reduced BERT, DeepFM and Wide&Deep: small inputs so that a run stays fast) on the
default target and three changed ones (an eighth of the L1, a 32nd of the LLB,
half the cores), hypothesis draws schedules — random regroupings and splits,
uneven and overlapping core parts, every scope, random orders, malformed values
— from scratch or as mutations of the automatic levels' schedules, and checks:

* the simulator never raises: every outcome is a ``SimResult`` or a ``SimError``
  with a reason (``invalid``, ``capacity``);
* no result violates an invariant (``status == "invariant"`` never appears;
  latency >= lower bound, FLOP/s <= peak, DDR bytes >= compulsory, no resource
  busier than the latency are checked inside the simulator on every result);
* the capacity pre-check (``compiler.capacity.check_capacity``) agrees with the
  simulator on every structurally valid schedule.

The default run takes about a minute; ``-m slow`` runs a larger profile.
"""

from __future__ import annotations

import random
import traceback
import warnings
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from compiler.auto import graph_schedule_level
from compiler.capacity import check_capacity
from compiler.errors import ScheduleError
from compiler.graph import Graph
from compiler.target import Target
from sim import SimError, SimResult, simulate
from tests.sim.conftest import zoo_graph
from tests.sim.random_schedules import mutate, random_schedule

MODELS: dict[str, tuple[str, int, dict[str, Any]]] = {
    "tiny_cnn": ("tiny_cnn", 8, {}),
    "resnet18": ("resnet18", 4, {"image_size": 64}),
    "mobilenet_v2": ("mobilenet_v2", 4, {"image_size": 64}),
    "bert": ("bert_base", 4, {"seq": 32, "num_layers": 1, "hidden": 128, "heads": 2,
                              "intermediate": 512, "vocab": 1000, "max_positions": 64}),
    "deepfm": ("deepfm", 64, {}),
    "wide_and_deep": ("wide_and_deep", 32, {}),
}


def targets() -> dict[str, Target]:
    t = Target.default()
    return {
        "default": t,
        "small_l1": t.replace(l1={"data_bytes": 128 * 1024, "weight_bytes": 32 * 1024}),
        "small_llb": t.replace(llb={"bytes": 256 * 1024}),
        "four_cores": t.replace(chip={"cores_per_cluster": 4}, noc={"mesh_rows": 4, "mesh_cols": 2}),
    }


TARGETS = targets()
_GRAPHS: dict[str, Graph] = {}
_SEEDS: dict[tuple[str, str], list[Any]] = {}


def graph_of(model: str) -> Graph:
    if model not in _GRAPHS:
        name, batch, kw = MODELS[model]
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            _GRAPHS[model] = zoo_graph(name, batch, **kw)
    return _GRAPHS[model]


def seeds(model: str, tname: str) -> list[Any]:
    """The automatic levels' schedules: starting points for mutations."""
    key = (model, tname)
    if key not in _SEEDS:
        g, t = graph_of(model), TARGETS[tname]
        _SEEDS[key] = [graph_schedule_level(g, t, lvl) for lvl in range(4)]
    return _SEEDS[key]


def draw_schedule(g: Graph, t: Target, model: str, tname: str, rng: random.Random) -> Any:
    """A schedule from scratch or mutated from a level's; None when none could be built."""
    cores = t.chip.cores_per_cluster
    bad = rng.random() < 0.25
    for _ in range(8):
        try:
            if rng.random() < 0.4:
                return random_schedule(g, rng, cores, bad)
            s = rng.choice(seeds(model, tname))
            for _ in range(rng.randint(1, 4)):
                s = mutate(g, s, rng, cores, bad)
            return s
        except ScheduleError:
            continue
    return None


def check_one(g: Graph, t: Target, s: Any) -> str:
    """Simulate one schedule and check the properties; returns the status."""
    try:
        r = simulate(g, s, t, timeline=False)
    except Exception:  # the property: never an exception
        pytest.fail(f"simulate raised on\n{s.dumps()}\n{traceback.format_exc()}")
    assert isinstance(r, SimResult | SimError)
    if isinstance(r, SimError):
        assert r.status in ("invalid", "capacity"), f"{r.status}: {r.message}\n{s.dumps()}"
        assert r.message
        if r.status == "capacity":
            assert r.needed_bytes > r.available_bytes and r.resource
    else:
        assert r.latency_over_bound >= 1.0
        assert all(v <= 1 + 1e-9 for v in r.busy_fraction().values())
    if r.status != "invalid":
        issue = check_capacity(g, s, t)
        assert (issue is not None) == (r.status == "capacity"), (issue, r.status)
    return r.status


CASES = [(m, tn) for m in MODELS for tn in TARGETS]


@pytest.mark.parametrize(("model", "tname"), CASES, ids=[f"{m}-{t}" for m, t in CASES])
@settings(max_examples=12, deadline=None, database=None,
          suppress_health_check=[HealthCheck.too_slow])
@given(rng=st.randoms(use_true_random=False))
def test_random_schedules_never_fool_the_simulator(model: str, tname: str,
                                                   rng: random.Random) -> None:
    g, t = graph_of(model), TARGETS[tname]
    s = draw_schedule(g, t, model, tname, rng)
    if s is not None:
        check_one(g, t, s)


@pytest.mark.parametrize(("model", "tname"), CASES, ids=[f"{m}-{t}" for m, t in CASES])
def test_every_level_is_a_result_or_a_reason(model: str, tname: str) -> None:
    g, t = graph_of(model), TARGETS[tname]
    for s in seeds(model, tname):
        check_one(g, t, s)


@pytest.mark.slow
@pytest.mark.parametrize(("model", "tname"), CASES, ids=[f"{m}-{t}" for m, t in CASES])
@settings(max_examples=60, deadline=None, database=None,
          suppress_health_check=[HealthCheck.too_slow])
@given(rng=st.randoms(use_true_random=False))
def test_random_schedules_never_fool_the_simulator_large(model: str, tname: str,
                                                         rng: random.Random) -> None:
    g, t = graph_of(model), TARGETS[tname]
    s = draw_schedule(g, t, model, tname, rng)
    if s is not None:
        check_one(g, t, s)
