"""Issue 5 acceptance: compiling under ApplyHistoryBest applies the logged schedule.

A log that holds the model's workload gives the logged schedule (read back from
the artifact's schedule JSON); another model's log falls back to O3 with one
warning naming the workload key; the CLI's ``compile --log`` does the same.
"""

from __future__ import annotations

import warnings
from pathlib import Path

import onnx
import pytest
from click.testing import CliRunner

from autotune import ApplyHistoryBest
from autotune.cli import main
from compiler import zoo
from compiler.artifact import read_text
from compiler.auto import graph_schedule_level
from compiler.model import load_onnx
from compiler.schedule import GraphSchedule
from compiler.target import Target
from logs import Provenance, Record, RecordWriter, Result, Status, TargetKey, WorkloadInfo


def _record(model_graph, schedule: GraphSchedule, latency_us: float, target: Target) -> Record:  # type: ignore[no-untyped-def]
    return Record(
        WorkloadInfo(model_graph.workload_key, model_graph.name, model_graph.input_shapes(),
                     model_graph.batch),
        TargetKey(target.name, target.hash),
        schedule.to_json(),
        Result(Status.OK, latency_us=latency_us, throughput_per_s=1e6 / latency_us),
        Provenance.now(measurer="test", tuner="manual"),
    )


@pytest.fixture(scope="module")
def setup(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    d = tmp_path_factory.mktemp("ahb")
    target = Target.default()
    cnn = d / "tiny_cnn.onnx"
    onnx.save(zoo.build("tiny_cnn", batch=2, weights="inputs", image_size=16), cnn)
    other = d / "deepfm.onnx"
    onnx.save(zoo.build("deepfm", batch=2, weights="inputs"), other)
    g = load_onnx(cnn).graph
    best = graph_schedule_level(g, target, 0)  # distinctive: every op its own group, all DDR
    worse = graph_schedule_level(g, target, 2)
    log = d / "cnn.jsonl"
    with RecordWriter(log) as w:
        w.write(_record(g, worse, 900.0, target))
        w.write(_record(g, best, 500.0, target))
        w.write(Record(_record(g, worse, 1.0, target).workload, TargetKey(target.name, target.hash),
                       worse.to_json(), Result(Status.CAPACITY, error="L1 of core 1"),
                       Provenance.now()))
    go = load_onnx(other).graph
    other_log = d / "deepfm.jsonl"
    with RecordWriter(other_log) as w:
        w.write(_record(go, graph_schedule_level(go, target, 0), 10.0, target))
    return {"dir": d, "cnn": cnn, "log": log, "other_log": other_log, "best": best}  # type: ignore[dict-item]


def test_hit_applies_the_logged_schedule(setup: dict) -> None:  # type: ignore[type-arg]
    model = load_onnx(setup["cnn"])
    out = setup["dir"] / "hit.stcobj"
    with ApplyHistoryBest(setup["log"]) as ctx, warnings.catch_warnings():
        warnings.simplefilter("error")  # a hit must not warn
        used = model.compile(out)
    assert ctx.hits == 1 and ctx.misses == 0
    logged = GraphSchedule.loads(read_text(out, "schedule.json"))
    assert logged.groups == setup["best"].groups and logged.order == setup["best"].order
    assert used.groups == setup["best"].groups


def test_other_models_log_falls_back_with_a_warning(setup: dict) -> None:  # type: ignore[type-arg]
    model = load_onnx(setup["cnn"])
    out = setup["dir"] / "miss.stcobj"
    with ApplyHistoryBest(setup["other_log"]) as ctx, pytest.warns(UserWarning) as caught:
        model.compile(out)
    assert ctx.misses == 1 and ctx.hits == 0
    text = " ".join(str(w.message) for w in caught)
    assert model.graph.workload_key in text and "O3" in text
    assert GraphSchedule.loads(read_text(out, "schedule.json")).source == "O3"


def test_strict_miss_is_an_error(setup: dict) -> None:  # type: ignore[type-arg]
    model = load_onnx(setup["cnn"])
    with ApplyHistoryBest(setup["other_log"], strict=True), pytest.raises(Exception) as err:
        model.compile(setup["dir"] / "strict.stcobj")
    assert model.graph.workload_key in str(err.value)


def test_cli_compile_with_log(setup: dict) -> None:  # type: ignore[type-arg]
    out = setup["dir"] / "cli.stcobj"
    res = CliRunner().invoke(main, ["compile", str(setup["cnn"]), "--log", str(setup["log"]),
                                    "-o", str(out)])
    assert res.exit_code == 0, res.output
    logged = GraphSchedule.loads(read_text(out, "schedule.json"))
    assert logged.groups == setup["best"].groups
