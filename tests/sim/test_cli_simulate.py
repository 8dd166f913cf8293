"""``graphtune simulate``: summary, JSON, trace, bad schedules and options."""

from __future__ import annotations

import json
from pathlib import Path

import onnx
import pytest
from click.testing import CliRunner

from autotune.cli import main
from compiler import zoo
from compiler.graph import Graph
from compiler.schedule import GraphSchedule, Placement, single_group_schedule

JSON_KEYS = {"status", "latency_us", "throughput_per_s", "chip_throughput_per_s",
             "peak_l1_bytes", "peak_llb_bytes", "ddr_bytes", "noc_bytes", "lower_bound_us",
             "error"}


@pytest.fixture(scope="module")
def model_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("models") / "tiny.onnx"
    onnx.save(zoo.build("tiny_cnn", batch=8, weights="inputs"), str(path))
    return path


def run(*args: str) -> tuple[int, str, str]:
    r = CliRunner().invoke(main, list(args))
    return r.exit_code, r.stdout, r.stderr


def test_level_summary(model_file: Path) -> None:
    code, out, _ = run("simulate", str(model_file), "--level", "3")
    assert code == 0, out
    for word in ("latency", "throughput", "lower bound", "peak L1", "DDR", "busy"):
        assert word in out


def test_json_and_trace(model_file: Path, tmp_path: Path) -> None:
    trace = tmp_path / "t.json"
    code, out, _ = run("simulate", str(model_file), "--level", "2", "--json",
                       "--trace", str(trace))
    assert code == 0
    data = json.loads(out)
    assert set(data) >= JSON_KEYS and data["status"] == "ok" and data["error"] is None
    assert data["batch"] == 8 and data["latency_us"] >= data["lower_bound_us"] > 0
    assert data["chip_throughput_per_s"] == pytest.approx(4 * data["throughput_per_s"])
    events = json.loads(trace.read_text())["traceEvents"]
    assert any(e["ph"] == "X" for e in events)
    assert {"core0.mme", "ddr"} <= {e["args"]["name"] for e in events
                                     if e.get("name") == "thread_name"}



def test_trace_events_name_their_ops_and_bytes(model_file: Path, tmp_path: Path) -> None:
    """Issue 21: each step event names the ops its group runs; each transfer event the
    bytes it moved (the DDR track's bytes add up to the result's DDR bytes)."""
    trace = tmp_path / "t.json"
    code, out, _ = run("simulate", str(model_file), "--level", "2", "--json", "--trace", str(trace))
    assert code == 0
    ddr_bytes = json.loads(out)["ddr_bytes"]
    events = json.loads(trace.read_text())["traceEvents"]
    tracks = {e["tid"]: e["args"]["name"] for e in events if e.get("name") == "thread_name"}
    steps = [e for e in events if e["ph"] == "X" and e["cat"] == "step"]
    assert steps and all(e["args"]["ops"] and len(e["args"]["ops"]) == len(e["args"]["op_types"])
                         for e in steps)
    assert all(isinstance(n, str) and n for e in steps for n in e["args"]["ops"])
    moves = [e for e in events if e["ph"] == "X" and e["cat"] not in ("step", "mme", "vme", "host")]
    assert moves and all(e["args"]["bytes"] > 0 for e in moves)
    on_ddr = sum(e["args"]["bytes"] for e in moves if tracks[e["tid"]] == "ddr")
    assert on_ddr == pytest.approx(ddr_bytes, rel=1e-9)

def test_batch_option_sets_the_batch(model_file: Path) -> None:
    code, out, _ = run("simulate", str(model_file), "--level", "3", "--batch", "4", "--json")
    assert code == 0 and json.loads(out)["batch"] == 4


def test_schedule_file(model_file: Path, tiny: Graph, tmp_path: Path) -> None:
    path = tmp_path / "s.json"
    single_group_schedule(tiny, Placement.make("DDR", list(range(8)))).save(str(path))
    code, out, _ = run("simulate", str(model_file), "--schedule", str(path), "--json")
    assert code == 0 and json.loads(out)["status"] == "ok"


def test_schedule_that_does_not_fit_the_model(model_file: Path, tiny: Graph,
                                              tmp_path: Path) -> None:
    s = single_group_schedule(tiny, Placement.make("DDR", list(range(8))))
    bad = GraphSchedule(batch=s.batch, groups=s.groups[:0], transfers=(), order=())
    path = tmp_path / "bad.json"
    bad.save(str(path))
    code, out, err = run("simulate", str(model_file), "--schedule", str(path))
    assert code == 2 and out == ""
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "bad.json" in lines[0] and "in no group" in lines[0]
    code, out, _ = run("simulate", str(model_file), "--schedule", str(path), "--json")
    data = json.loads(out)
    assert code == 2 and data["status"] == "invalid" and "in no group" in data["error"]
    assert set(data) >= JSON_KEYS


def test_schedule_for_another_batch(model_file: Path, tiny: Graph, tmp_path: Path) -> None:
    path = tmp_path / "s8.json"
    single_group_schedule(tiny, Placement.make("DDR", list(range(8)))).save(str(path))
    code, out, _ = run("simulate", str(model_file), "--schedule", str(path), "--batch", "4",
                       "--json")
    assert code == 2 and json.loads(out)["status"] == "invalid"


def test_capacity_overflow(model_file: Path, tiny: Graph, tmp_path: Path) -> None:
    sched = tmp_path / "l1.json"
    single_group_schedule(tiny, Placement.make("L1", list(range(8)))).save(str(sched))
    small = tmp_path / "small.toml"
    text = Path(__file__).parents[2].joinpath("compiler/targets/stcp920.toml").read_text()
    small.write_text(text.replace("data_bytes = 1048576", "data_bytes = 4096"))
    args = ["simulate", str(model_file), "--schedule", str(sched), "--target", str(small)]
    code, out, _ = run(*args, "--json")
    data = json.loads(out)
    assert code == 1 and data["status"] == "invalid" and data["reason"] == "capacity"
    assert data["resource"].startswith("L1 of core") and data["available_bytes"] == 4096
    code, out, err = run(*args)
    assert code == 1 and "L1 of core" in err and len(err.strip().splitlines()) == 1


@pytest.mark.parametrize("args", [[], ["--level", "1", "--schedule", "x.json"],
                                  ["--level", "3", "--batch", "0"]])
def test_option_errors(model_file: Path, args: list[str]) -> None:
    code, _, err = run("simulate", str(model_file), *args)
    assert code == 2 and len(err.strip().splitlines()) == 1 and "error" in err


def test_record_feeds_apply_history_best(model_file: Path, tmp_path: Path) -> None:
    """simulate --record appends one record per run (failures too); compile --log uses the best."""
    from compiler.target import Target
    from logs import Status, read_records

    log, o3 = tmp_path / "hand.jsonl", tmp_path / "o3.json"
    for level in ("2", "3"):
        code, out, err = run("simulate", str(model_file), "--level", level, "--record", str(log))
        assert code == 0, (out, err)
    code, _, _ = run("schedule", "make", str(model_file), "--level", "3", "-o", str(o3))
    assert code == 0
    tight = tmp_path / "tight.toml"
    tight.write_text(_toml(Target.default().replace(l1={"data_bytes": 4096}).to_dict()))
    code, _, _ = run("simulate", str(model_file), "--schedule", str(o3), "--target", str(tight),
                     "--record", str(log))
    assert code == 1  # overflows: recorded as such
    records = list(read_records(str(log)))
    assert [r.result.status for r in records] == [Status.OK, Status.OK, Status.CAPACITY]
    assert records[0].prov.tuner == "O2" and records[1].prov.measurer == "sim"
    assert "overflows" in records[2].result.error
    best = min(records[:2], key=lambda r: r.result.latency_us or 0)
    code, out, err = run("compile", str(model_file), "--log", str(log), "--strict",
                         "-o", str(tmp_path / "m.stcobj"))
    assert code == 0, (out, err)
    assert f"from {log}" in out and best.schedule["source"] in out


def _toml(d: dict[str, object], prefix: str = "") -> str:
    """A flat-enough TOML writer for a target's to_dict()."""
    lines, tables = [], []
    for k, v in d.items():
        if isinstance(v, dict):
            tables.append((k, v))
        else:
            lines.append(f"{k} = {json.dumps(v)}")
    for k, v in tables:
        lines.append(f"[{prefix}{k}]")
        lines.append(_toml(v))
    return "\n".join(lines)
