"""Pluggable measurers: DelayedMeasurer, finding a measurer by spec or entry point, the CLI."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from click.testing import CliRunner

from autotune import DelayedMeasurer, GuidedOptions, Measurer, SimMeasurer, tune
from autotune.cli import main
from autotune.measure._plugins import load_measurer, measurer_names, parse_key_values, parse_resources
from compiler.errors import GraphtuneError
from compiler.graph import Graph
from compiler.target import Target
from search_space import build_space

SMALL = GuidedOptions(population=24, generations=1, proposals=8, parents=4, retrain_every=8)


def _lines(log: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in log.read_text().splitlines()]


@pytest.fixture(scope="module")
def candidates(tiny_graph: Graph) -> list[Any]:
    space = build_space(tiny_graph, Target.default(), tiny_graph.batch)
    rng = np.random.default_rng(0)
    return [space.sample(rng) for _ in range(60)]


# ---- DelayedMeasurer ----------------------------------------------------------------------------
def test_delayed_measurer_is_the_simulator_at_a_slower_pace(tiny_graph: Graph,
                                                           candidates: list[Any]) -> None:
    batch = candidates[:3]
    sim = SimMeasurer().measure(tiny_graph, batch, Target.default(), None)
    t0 = time.monotonic()
    slow = DelayedMeasurer(delay_s=0.05).measure(tiny_graph, batch, Target.default(), None)
    assert time.monotonic() - t0 >= 3 * 0.05  # a lower bound only: sleeps never end early
    assert [(m.status, m.latency_us) for m in slow] == [(m.status, m.latency_us) for m in sim]
    assert all(m.seconds >= 0.05 for m in slow)


def test_a_batch_is_simulated_back_to_back_then_waits_once(
        tiny_graph: Graph, candidates: list[Any], monkeypatch: pytest.MonkeyPatch) -> None:
    """The CPU's work of a batch comes first (as a board runner compiles its batch before
    running it): simulating right after each sleep cost twice the CPU (cold caches), and
    each wait hands a multi-slot process's lock over. The batch still takes its time:
    every measurement at least ``delay_s``, the batch at least their sum."""
    import sim

    events: list[str] = []
    real_measure, real_sleep = sim.measure, time.sleep

    def measure(*a: Any, **k: Any) -> Any:
        out = real_measure(*a, **k)
        events.extend("sim" for _ in out)
        return out

    def sleep(s: float) -> None:
        events.append("sleep")
        real_sleep(s)

    monkeypatch.setattr(sim, "measure", measure)
    monkeypatch.setattr(time, "sleep", sleep)
    m = DelayedMeasurer(delay_s=0.05, fail_rate=0.5, seed=3)
    batch = candidates[:6]
    t0 = time.monotonic()
    got = m.measure(tiny_graph, batch, Target.default(), None)
    assert time.monotonic() - t0 >= 6 * 0.05
    fails = sum(m.fails(s) for s in batch)
    assert 0 < fails < 6  # both kinds in the batch
    assert events == ["sim"] * (6 - fails) + ["sleep"]
    assert all(x.seconds >= 0.05 for x in got)
    assert [x.status for x in got] == [
        "sim_error" if m.fails(s) else SimMeasurer().measure(tiny_graph, [s], Target.default(),
                                                             None)[0].status for s in batch]


def test_failures_are_seeded_records_with_a_status(tiny_graph: Graph, candidates: list[Any]) -> None:
    target = Target.default()
    a = DelayedMeasurer(delay_s=0.0, fail_rate=0.5, seed=1)
    b = DelayedMeasurer(delay_s=0.0, fail_rate=0.5, seed=1)
    c = DelayedMeasurer(delay_s=0.0, fail_rate=0.5, seed=2)
    fa = [a.fails(s) for s in candidates]
    assert fa == [b.fails(s) for s in candidates]  # deterministic
    assert fa != [c.fails(s) for s in candidates]  # the seed chooses
    assert 15 <= sum(fa) <= 45  # about half of 60
    ms = a.measure(tiny_graph, candidates[:12], target, None)
    for s, m in zip(candidates[:12], ms):
        if a.fails(s):
            assert m.status == "sim_error" and "injected failure" in m.error and m.latency_us is None
        else:
            assert m.status == SimMeasurer().measure(tiny_graph, [s], target, None)[0].status
    assert not any(DelayedMeasurer(delay_s=0.0, fail_rate=0.0).fails(s) for s in candidates)
    assert all(DelayedMeasurer(delay_s=0.0, fail_rate=1.0, fail_status="timeout").fails(s)
               for s in candidates)
    # A different failure set is a different measurer version (records are not reused).
    assert a.version == b.version != c.version and a.name == "sim-delayed"


def test_a_delay_over_the_time_limit_is_a_timeout(tiny_graph: Graph, candidates: list[Any]) -> None:
    (m,) = DelayedMeasurer(delay_s=5.0).measure(tiny_graph, candidates[:1], Target.default(), 0.01)
    assert m.status == "timeout" and "over the 0.01 s limit" in m.error


@pytest.mark.parametrize("kwargs, words", [
    ({"delay_s": -1}, "delay_s"), ({"fail_rate": 2}, "fail_rate"),
    ({"fail_status": "ok"}, "fail_status"), ({"seed": "x"}, "seed"), ({"num_cpus": -0.5}, "num_cpus"),
])
def test_delayed_measurer_options_are_checked(kwargs: dict[str, Any], words: str) -> None:
    with pytest.raises(GraphtuneError, match=words):
        DelayedMeasurer(**kwargs)


# ---- finding a measurer -------------------------------------------------------------------------
PLUGIN = '''
from autotune import Measurer, SimMeasurer


class Echo(SimMeasurer):
    def __init__(self, tag="x"):
        super().__init__()
        self.name = "echo-" + tag


class Nameless(SimMeasurer):
    def __init__(self):
        super().__init__()
        self.name = ""


class Half(Measurer):
    name = "half"
    version = "1"


class NotOne:
    pass


class Boom(SimMeasurer):
    def __init__(self):
        raise RuntimeError("no board on /dev/stcp0")
'''


@pytest.fixture
def plugin(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    (tmp_path / "gt_plugin_mod.py").write_text(PLUGIN)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "gt_plugin_mod", raising=False)
    return "gt_plugin_mod"


def test_specs_load_by_module_and_by_name(plugin: str) -> None:
    assert type(load_measurer("sim")) is SimMeasurer
    m = load_measurer("delayed", {"delay_s": 0.3, "fail_rate": 0.1})
    assert isinstance(m, DelayedMeasurer) and m.delay_s == 0.3 and m.fail_rate == 0.1
    assert isinstance(load_measurer("autotune:DelayedMeasurer"), DelayedMeasurer)
    echo = load_measurer(f"{plugin}:Echo", {"tag": "board"})
    assert isinstance(echo, Measurer) and echo.name == "echo-board"


@pytest.mark.parametrize("spec, options, words", [
    ("nosuch", None, "unknown measurer 'nosuch'"),
    ("no_such_module_x:Cls", None, "cannot import no_such_module_x (ModuleNotFoundError"),
    ("{plugin}:Missing", None, "has no 'Missing'"),
    ("{plugin}:NotOne", None, "NotOne is not a subclass of autotune.Measurer"),
    ("{plugin}:Half", None, "does not implement measure"),
    ("{plugin}:Boom", None, "Boom() failed: RuntimeError: no board on /dev/stcp0"),
    ("{plugin}:Echo", {"colour": 1}, "unexpected keyword argument 'colour'"),
    ("{plugin}:Nameless", None, "must set name and version"),
    ("delayed", {"delay_s": "slow"}, "delay_s must be a finite number"),
    (":Echo", None, "expected MODULE:CLASS"),
])
def test_bad_specs_are_one_line_errors(plugin: str, spec: str, options: dict[str, Any] | None,
                                       words: str) -> None:
    with pytest.raises(GraphtuneError) as info:
        load_measurer(spec.format(plugin=plugin), options)
    assert words in str(info.value) and "\n" not in str(info.value)


def test_entry_points_name_measurers(plugin: str, tmp_path: Path,
                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """A package's ``graphtune.measurers`` entry point, found through installed metadata."""
    dist = tmp_path / "site" / "gt_board_runner-1.0.dist-info"
    dist.mkdir(parents=True)
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: gt-board-runner\nVersion: 1.0\n")
    (dist / "entry_points.txt").write_text(
        f"[graphtune.measurers]\nboard = {plugin}:Echo\n")
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    assert measurer_names()["board"] == f"{plugin}:Echo"
    assert load_measurer("board", {"tag": "ep"}).name == "echo-ep"


def test_key_values_and_resources_parse() -> None:
    assert parse_key_values(["delay_s=0.2", "mode=fast", "flags=[1, 2]", "on=true"], "x") == {
        "delay_s": 0.2, "mode": "fast", "flags": [1, 2], "on": True}
    assert parse_resources(["stcp920=1", "board_b=0.5"]) == {"stcp920": 1.0, "board_b": 0.5}
    for bad in (["delay_s"], ["=3"], ["a b=1"]):
        with pytest.raises(GraphtuneError, match="KEY=VALUE"):
            parse_key_values(bad, "--measurer-arg")
    for bad_res in (["stcp920"], ["stcp920=0"], ["stcp920=x"], ["=1"], ["CPU=1"]):
        with pytest.raises(GraphtuneError, match="--worker-resource"):
            parse_resources(bad_res)


# ---- tuning with a plugged measurer -------------------------------------------------------------
def test_tune_takes_a_spec_and_options(plugin: str, tiny_graph: Graph, tmp_path: Path) -> None:
    res = tune([tiny_graph], trials=6, workers=0, log=tmp_path / "e.jsonl", seed=0, guided=SMALL,
               curve=False, measurer=f"{plugin}:Echo", measurer_options={"tag": "api"})
    assert res.total == 6
    assert {r["prov"]["measurer"] for r in _lines(tmp_path / "e.jsonl")} == {"echo-api"}
    with pytest.raises(GraphtuneError, match="need a measurer spec"):
        tune([tiny_graph], trials=6, workers=0, log=tmp_path / "f.jsonl", measurer=SimMeasurer(),
             measurer_options={"tag": "x"})


def test_cli_tunes_with_the_delayed_measurer(tiny_onnx: Path, tmp_path: Path) -> None:
    log = tmp_path / "d.jsonl"
    res = CliRunner().invoke(main, [
        "tune", str(tiny_onnx), "--trials", "14", "--workers", "0", "--seed", "0", "--log", str(log),
        "--measurer", "delayed", "--measurer-arg", "delay_s=0.01", "--measurer-arg", "fail_rate=0.4",
        "--measurer-arg", "seed=3", "--json"])
    assert res.exit_code == 0, res.output
    recs = _lines(log)
    assert len(recs) == 14 and {r["prov"]["measurer"] for r in recs} == {"sim-delayed"}
    failed = [r for r in recs if "injected failure" in r["result"]["error"]]
    assert failed and all(r["result"]["status"] == "sim_error" for r in failed)
    assert any(r["result"]["status"] == "ok" for r in recs)
    # The same candidates fail on a second look: the measurer is deterministic.
    m = DelayedMeasurer(delay_s=0, fail_rate=0.4, seed=3)
    from compiler.schedule import GraphSchedule

    assert all(m.fails(GraphSchedule.from_json(r["schedule"])) == (r in failed) for r in recs)


@pytest.fixture
def no_ray(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(*args: object, **kwargs: object) -> None:
        raise AssertionError("Ray must not start for a user error")

    monkeypatch.setattr("autotune.running._ray_pool.start_ray", refuse)


@pytest.mark.parametrize("extra, words", [
    (["--measurer", "no_such_module_x:Board"], "cannot import no_such_module_x"),
    (["--measurer", "autotune:tune"], "tune is not a subclass of autotune.Measurer"),
    (["--measurer", "delayed", "--measurer-arg", "delay_s=-2"], "delay_s must be a finite number >= 0"),
    (["--measurer", "delayed", "--measurer-arg", "speed"], "--measurer-arg wants KEY=VALUE"),
    (["--measurer", "delayed", "--measurer-arg", "colour=1"], "unexpected keyword argument"),
    (["--worker-resource", "stcp920"], "--worker-resource wants NAME=AMOUNT"),
    (["--worker-cpus", "-1"], "--worker-cpus must be a finite number >= 0"),
])
def test_cli_measurer_errors_are_one_line(no_ray: None, tiny_onnx: Path, tmp_path: Path,
                                          extra: list[str], words: str) -> None:
    res = CliRunner().invoke(main, ["tune", str(tiny_onnx), "--trials", "5", "--workers", "1",
                                    "--log", str(tmp_path / "x.jsonl"), *extra])
    assert res.exit_code == 2, res.output
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("graphtune: error: ") and words in lines[0], lines


def test_a_measurer_that_cannot_travel_to_workers_is_refused(no_ray: None, tiny_graph: Graph,
                                                             tmp_path: Path) -> None:
    class Holding(SimMeasurer):
        def __init__(self) -> None:
            super().__init__()
            self.handle = open(tmp_path / "dev", "w")  # noqa: SIM115 - a device handle

    with pytest.raises(GraphtuneError, match="cannot be sent to Ray workers"):
        tune([tiny_graph], trials=4, workers=1, log=tmp_path / "h.jsonl", measurer=Holding())



# ---- Ray workers with a resource label (one local Ray start) -----------------------------------
@pytest.fixture(scope="module")
def board_ray() -> Any:
    """A local loopback Ray whose one node has 2 CPUs and 2 ``stcp920`` boards."""
    import ray

    from autotune.running._ray_pool import LOOPBACK, _loopback_only

    assert not ray.is_initialized()
    undo = _loopback_only()
    ray.init(address="local", num_cpus=2, resources={"stcp920": 2}, include_dashboard=False,
             _node_ip_address=LOOPBACK, log_to_driver=False, configure_logging=False,
             namespace="graphtune-test")
    try:
        yield ray
    finally:
        ray.shutdown()
        undo()


def test_workers_go_where_the_board_is_and_say_so_when_none_is(
        board_ray: Any, tiny_graph: Graph, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    ray = board_ray
    board = DelayedMeasurer(delay_s=0.01, num_cpus=0.01, resources={"stcp920": 1})
    seen: list[dict[str, float]] = []

    def used(job: Any) -> None:
        if not seen:
            seen.append(ray.available_resources())

    res = tune([tiny_graph], trials=8, workers=2, log=tmp_path / "b.jsonl", seed=0, guided=SMALL,
               curve=False, measurer=board, callbacks=[used])
    assert res.total == 8 and seen and seen[0].get("stcp920", 0) == 0  # both boards taken
    assert {r["prov"]["measurer"] for r in _lines(tmp_path / "b.jsonl")} == {"sim-delayed"}

    def error(**kwargs: Any) -> str:
        t0 = time.monotonic()
        with pytest.raises(GraphtuneError) as info:
            tune([tiny_graph], trials=4, log=tmp_path / "x.jsonl", guided=SMALL, curve=False,
                 **kwargs)
        assert time.monotonic() - t0 < 30 and "\n" not in str(info.value)
        return str(info.value)

    # A resource no node has: at once, naming it.
    assert "no node of the Ray cluster has the resource board_x=1" in error(
        workers=1, measurer=board, worker_resources={"board_x": 1})
    # More workers than boards.
    assert "room for 2 of 3 measurer workers" in error(workers=3, measurer=board)
    # Boards that exist but stay busy (another job holds them): the start times out.
    monkeypatch.setattr("autotune.running._ray_pool.START_TIMEOUT_S", 3.0)

    @ray.remote(num_cpus=0, resources={"stcp920": 2})
    class Holder:
        def ping(self) -> int:
            return 1

    holder = Holder.remote()
    ray.get(holder.ping.remote())
    try:
        assert "1 of 1 measurer workers did not start within 3 s" in error(
            workers=1, measurer=board)
    finally:
        ray.kill(holder)
    assert ray.is_initialized()  # the caller's Ray is left as it was
