"""``graphtune report``: a self-contained, well-formed HTML page with every task of the log.

The log is written with ``logs.RecordWriter`` from real simulations (``sim.measure``) of
two tiny zoo models at their automatic levels, plus error records and a task whose
texts try to inject markup.
"""

from __future__ import annotations

import base64
import itertools
import re
import warnings
import xml.etree.ElementTree as ET
from html.parser import HTMLParser
from pathlib import Path
from typing import Any, ClassVar

import onnx
import pytest

from autotune.report._report import TaskLog, bound_analysis, read_tasks
from compiler import zoo
from compiler.auto import graph_schedule_level
from compiler.graph import Graph
from compiler.model import Model
from compiler.target import Target
from logs import Provenance, Record, RecordWriter, Status, TargetKey, WorkloadInfo
from logs import Result as LogResult
from sim import MEASURER, MEASURER_VERSION, SimResult, measure, simulate
from tests.autotune.test_cli_model import one_line_error, run

GPT_SMALL: dict[str, Any] = dict(num_layers=1, hidden=64, heads=4, inner=128, vocab=100)
EVIL = '<script>alert("x")</script>'
MATH = "plan:$\\frac{1}{$"  # a seed label that matplotlib would parse as mathtext




def _graph(proto: onnx.ModelProto, name: str) -> Graph:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return Model(proto, name=name).graph


def _record(graph: Graph, model: str, schedule: dict[str, Any], result: LogResult, tuner: str,
            trial: int, target: Target) -> Record:
    shapes = {k: tuple(v) for k, v in graph.input_shapes().items()}
    return Record(WorkloadInfo(graph.workload_key, model, shapes, graph.batch),
                  TargetKey(target.name, target.hash), schedule, result,
                  Provenance.now(measurer=MEASURER, measurer_version=MEASURER_VERSION,
                                 tuner=tuner, study="test", trial=trial))


class Fixture:
    """Two tuned models and a hostile task, written to one log."""

    def __init__(self, tmp: Path) -> None:
        self.target = Target.default()
        self.log = tmp / "tune.jsonl"
        self.cnn_path, self.gpt_path = tmp / "tiny.onnx", tmp / "gpt.onnx"
        cnn = zoo.build("tiny_cnn", batch=2, weights="inputs", image_size=16)
        gpt = zoo.build("gpt", batch=1, seq=16, weights="inputs", **GPT_SMALL)
        onnx.save(cnn, str(self.cnn_path))
        onnx.save(gpt, str(self.gpt_path))
        self.cnn, self.gpt = _graph(cnn, "tiny"), _graph(gpt, "gpt")
        self.latencies: dict[str, list[float | None]] = {}
        with RecordWriter(self.log) as out:
            for name, graph in (("tiny_cnn", self.cnn), ("gpt", self.gpt)):
                levels = [graph_schedule_level(graph, self.target, lv) for lv in range(4)]
                # O0-O3 as seeds, then the other model's O3 (invalid here) and O1 again
                wrong = graph_schedule_level(self.gpt if graph is self.cnn else self.cnn,
                                             self.target, 3)
                tried = [*((f"O{i}", s) for i, s in enumerate(levels)), ("random", wrong),
                         ("random", levels[1])]
                lats: list[float | None] = []
                for trial, (tuner, s) in enumerate(tried):
                    (m,) = measure(graph, [s], self.target)
                    lats.append(m.latency_us)
                    out.write(_record(graph, name, s.to_json(), m.to_log_result(), tuner, trial,
                                      self.target))
                out.write(_record(graph, name, {"v": 1, "batch": graph.batch},
                                  LogResult(Status.WORKER_LOST, error="worker <lost> & gone"),
                                  "random", 99, self.target))
                self.latencies[name] = [*lats, None]
            # A task whose every text is markup, with an ok record whose schedule is garbage.
            hostile = WorkloadInfo("feedface" + "0" * 16, EVIL, {"x<y": (1, 2)}, 1)
            out.write(Record(hostile, TargetKey("STCP920", "0ddba11"), {"v": 1, "batch": 1},
                             LogResult(Status.OK, latency_us=5.0, error=""),
                             Provenance.now(tuner=MATH)))
            out.write(Record(hostile, TargetKey("STCP920", "0ddba11"), {"v": 1, "batch": 1},
                             LogResult(Status.CAPACITY, error=f"L1 overflow {EVIL}"),
                             Provenance.now(tuner=EVIL)))


@pytest.fixture(scope="module")
def fx(tmp_path_factory: pytest.TempPathFactory) -> Fixture:
    return Fixture(tmp_path_factory.mktemp("report"))


@pytest.fixture(scope="module")
def page(fx: Fixture) -> str:
    out = fx.log.parent / "report.html"
    r = run("report", fx.log, "-o", out, "--model", fx.cnn_path)
    assert r.exit_code == 0, (r.output, r.stderr)
    assert r.stdout.strip() == f"{out}: 3 task(s), 1 simulated, " \
                               f"{out.stat().st_size / 1024:,.0f} KiB"
    return out.read_text(encoding="utf-8")


class _Nesting(HTMLParser):
    """Checks that every element is closed, in order."""

    VOID: ClassVar[set[str]] = {"meta", "img", "br", "hr", "link", "input"}

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.stack: list[str] = []
        self.tags: list[tuple[str, dict[str, str | None]]] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, dict(attrs)))
        if tag not in self.VOID:
            self.stack.append(tag)

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, dict(attrs)))

    def handle_endtag(self, tag: str) -> None:
        assert self.stack and self.stack[-1] == tag, (tag, self.stack[-5:])
        self.stack.pop()


def test_page_is_well_formed_and_self_contained(page: str) -> None:
    parser = _Nesting()
    parser.feed(page)
    parser.close()
    assert parser.stack == []
    root = ET.fromstring(page.split("\n", 1)[1])  # after <!DOCTYPE html>: well-formed XML
    assert root.tag == "html"
    tags = {t for t, _ in parser.tags}
    assert "script" not in tags and "link" not in tags and "iframe" not in tags
    assert not re.search(r"https?://", page)
    assert "@import" not in page and "url(" not in page
    images = [a for t, a in parser.tags if t == "img"]
    assert len(images) == 3 + 1  # a curve per task, a timeline per simulated task
    for attrs in images:
        src = attrs["src"] or ""
        assert src.startswith("data:image/png;base64,")
        assert base64.b64decode(src.split(",", 1)[1])[:8] == b"\x89PNG\r\n\x1a\n"


def test_every_task_is_reported(fx: Fixture, page: str) -> None:
    for i, key in enumerate([fx.cnn.workload_key, fx.gpt.workload_key, "feedface"], start=1):
        assert f'<section id="task-{i}">' in page and key in page
    assert "tiny_cnn batch 2 on STCP920" in page and "gpt batch 1 on STCP920" in page
    assert page.count("<h3>Tuning curve</h3>") == 3


def test_user_text_is_escaped(page: str) -> None:
    assert EVIL not in page and "<lost>" not in page and "x<y" not in page
    assert "&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt;" in page
    assert "worker &lt;lost&gt; &amp; gone" in page
    assert "the best record&#x27;s schedule does not parse" in page
    assert "the best schedule does not parse: nothing to simulate" in page


def test_model_task_is_simulated_and_bounded(fx: Fixture, page: str) -> None:
    tiny = page.split('<section id="task-1">')[1].split("</section>")[0]
    best = graph_schedule_level(fx.cnn, fx.target, 3)
    r = simulate(fx.cnn, best, fx.target, timeline=False)
    assert isinstance(r, SimResult)
    assert f"{r.latency_us:,.1f} µs ({r.latency_cycles:,.0f} cycles)" in tiny
    assert f"<th>latency / lower bound</th><td>{r.latency_over_bound:.3f}</td>" in tiny
    assert "What bounds it" in tiny and '<p class="verdict">' in tiny
    assert "simulated now / logged = 1.000" in tiny
    # the guide's table, with the model's op names and a chunk column from schedule show
    assert "conv2d_0..softmax_0 (" in tiny and "mem_scope core_bind (per chunk)" in tiny
    assert "seeds</th><td>O0 " in tiny and "O3 " in tiny
    gpt = page.split('<section id="task-2">')[1].split("</section>")[0]
    assert "give the model with --model to simulate the best schedule" in gpt
    assert "invalid_schedule 1" in gpt and "worker_lost 1" in gpt


def test_summary_numbers(fx: Fixture) -> None:
    tasks, notes = read_tasks([fx.log])
    assert notes == [] and [t.count for t in tasks] == [7, 7, 2]
    for task, name in zip(tasks, ("tiny_cnn", "gpt"), strict=False):
        assert task.latencies == fx.latencies[name]
        ok = [x for x in fx.latencies[name] if x is not None]
        assert task.best is not None and task.best.result.latency_us == min(ok)
        assert task.statuses["ok"] == len(ok) and task.tuners["O2"] == 1
        assert set(task.baselines) == {"O0", "O1", "O2", "O3"}
        curve = task.best_so_far()
        assert curve[0] == fx.latencies[name][0] and curve[-1] == min(ok)
        assert all(a is None or (b is not None and b <= a) for a, b in itertools.pairwise(curve))
        assert task.to_reach(0.95) == next(i for i, v in enumerate(curve, 1)
                                           if v is not None and v <= min(ok) / 0.95)
    hostile = tasks[2]
    assert hostile.best is not None and hostile.baselines == {MATH: 5.0}
    assert hostile.first_errors == {"capacity": f"L1 overflow {EVIL}"}


def test_bound_analysis_splits_the_floor(fx: Fixture) -> None:
    for graph in (fx.cnn, fx.gpt):
        s = graph_schedule_level(graph, fx.target, 3)
        r = simulate(graph, s, fx.target, timeline=False)
        assert isinstance(r, SimResult)
        a = bound_analysis(graph, r, fx.target)
        term = a.compute_floor_us if a.compute_floor_us is not None else a.ddr_floor_us
        assert a.floor_us == pytest.approx(a.launch_us + term, rel=1e-9)
        if a.compute_floor_us is not None:
            assert a.floor == "compute" and a.compute_floor_us > a.ddr_floor_us
        busy = dict(a.resources)
        assert busy["DDR channel"] == pytest.approx(r.busy_fraction()["ddr"])
        assert [v for _, v in a.resources] == sorted(busy.values(), reverse=True)
        named = [r for r in a.resources if not r[0].startswith("cores occupied")]
        assert a.limit == named[0][0] or (a.limit == "dependencies" and named[0][1] <= 0.5)
        assert 0 < a.l1_fraction < 1 and a.verdict.endswith(".")


@pytest.mark.parametrize(
    ("name", "batch", "options", "floor", "limit", "verdict"),
    [
        # 16-channel convs on 64x32 matrix units: the engines run, padded, all the time
        ("tiny_cnn", 64, {"image_size": 64}, "compute", "matrix engine", "Compute-bound"),
        # two ViT-B layers at batch 16 under O3: weights stream again for every chunk
        ("vit", 16, {"num_layers": 2}, "compute", "DDR channel",
         "DDR-bound: the DDR channel is busy"),
    ],
)
def test_bound_analysis_names_the_limit(name: str, batch: int, options: dict[str, Any],
                                        floor: str, limit: str, verdict: str) -> None:
    target = Target.default()
    graph = _graph(zoo.build(name, batch=batch, weights="inputs", **options), name)
    r = simulate(graph, graph_schedule_level(graph, target, 3), target, timeline=False)
    assert isinstance(r, SimResult)
    a = bound_analysis(graph, r, target)
    assert a.floor == floor and a.limit.startswith(limit) and a.verdict.startswith(verdict)
    busy = dict(a.resources)
    assert busy[a.limit] > 0.5
    if limit.startswith("DDR"):
        assert r.ddr_bytes > 1.2 * a.compulsory_ddr_bytes
        assert f"moves {r.ddr_bytes / a.compulsory_ddr_bytes:.1f}x the compulsory bytes" \
            in a.verdict


def test_task_without_model_or_records(fx: Fixture, tmp_path: Path) -> None:
    out = tmp_path / "r.html"
    r = run("report", fx.log, "-o", out, "--model", fx.gpt_path, "--model", fx.cnn_path)
    assert r.exit_code == 0, r.stderr
    assert "3 task(s), 2 simulated" in r.stdout
    text = out.read_text(encoding="utf-8")
    assert text.count('<p class="verdict">') == 2


def test_unmatched_model_is_a_warning(fx: Fixture, tmp_path: Path) -> None:
    other = tmp_path / "other.onnx"
    onnx.save(zoo.build("tiny_cnn", batch=2, weights="inputs", image_size=8), str(other))
    out = tmp_path / "r.html"
    r = run("report", fx.log, "-o", out, "--model", other)
    assert r.exit_code == 0
    warning = (f"graphtune: warning: {other} matches no task of the log (none of its workload "
               "keys at batch 1, 2 is in the log)")
    assert warning in r.stderr.splitlines()  # besides progress lines on a slow machine
    assert "matches no task of the log" in out.read_text(encoding="utf-8")


def test_targets_by_hash(fx: Fixture, tmp_path: Path) -> None:
    # One task tuned on a smaller target (given with --target), one on an unknown target.
    small = fx.target.replace(l1={"data_bytes": 512 * 1024}, llb={"bytes": 2 * 1024 * 1024})
    toml = tmp_path / "small.toml"
    toml.write_text(_toml(small.to_dict()))
    log = tmp_path / "targets.jsonl"
    s = graph_schedule_level(fx.cnn, small, 3)
    (m,) = measure(fx.cnn, [s], small)
    with RecordWriter(log) as w:
        w.write(_record(fx.cnn, "tiny_cnn", s.to_json(), m.to_log_result(), "O3", 0, small))
        rec = _record(fx.cnn, "tiny_cnn", s.to_json(), m.to_log_result(), "O3", 0, small)
        w.write(Record(rec.workload, TargetKey("STCP920", "abcdef0123456789"), rec.schedule,
                       rec.result, rec.prov))
    out = tmp_path / "r.html"
    r = run("report", log, "-o", out, "--model", fx.cnn_path, "--target", toml)
    assert r.exit_code == 0, r.stderr
    assert "2 task(s), 1 simulated" in r.stdout
    text = out.read_text(encoding="utf-8")
    assert f"target {small.key}" in text and "of 512 KiB" in text and "of 2,048 KiB" in text
    assert "target STCP920:abcdef0123456789 is neither the default STCP920 nor a --target " \
           "file" in text


def _model_with_a_cpu_op() -> onnx.ModelProto:
    """conv, relu, Pad (not an NPU op: the host runs it), conv, relu: two NPU sub-functions."""
    import numpy as np
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(0)
    inits = [numpy_helper.from_array(rng.standard_normal(s).astype(np.float32), n)
             for n, s in (("w1", (8, 3, 3, 3)), ("w2", (8, 8, 3, 3)))]
    inits.append(numpy_helper.from_array(np.array([0, 0, 1, 1, 0, 0, 1, 1]), "pads"))
    nodes = [helper.make_node("Conv", ["x", "w1"], ["c1"], name="conv1", pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["c1"], ["r1"], name="relu1"),
             helper.make_node("Pad", ["r1", "pads"], ["p"], name="pad"),
             helper.make_node("Conv", ["p", "w2"], ["c2"], name="conv2"),
             helper.make_node("Relu", ["c2"], ["y"], name="relu2")]
    graph = helper.make_graph(
        nodes, "two_parts", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3, 16, 16])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 8, 16, 16])], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def test_npu_subfunctions_are_matched(tmp_path: Path) -> None:
    target = Target.default()
    proto = _model_with_a_cpu_op()
    path = tmp_path / "two_parts.onnx"
    onnx.save(proto, str(path))
    graph = _graph(proto, "two_parts")
    runs = graph.npu_subfunctions()
    assert len(runs) == 2
    log = tmp_path / "parts.jsonl"
    with RecordWriter(log) as w:
        for i, ops in enumerate(runs):
            part = graph.subgraph(ops, name=f"two_parts[{ops[0]}:{ops[-1]}]")
            s = graph_schedule_level(part, target, 3)
            (m,) = measure(part, [s], target)
            assert m.ok
            w.write(_record(part, part.name, s.to_json(), m.to_log_result(), "O3", i, target))
    out = tmp_path / "r.html"
    r = run("report", log, "-o", out, "--model", path)
    assert r.exit_code == 0, r.stderr
    assert "2 task(s), 2 simulated" in r.stdout
    text = out.read_text(encoding="utf-8")
    assert "NPU sub-function 0 (conv2d_0..relu_0, 2 ops)" in text
    assert "NPU sub-function 1 (conv2d_1..relu_1, 2 ops)" in text


def _toml(data: dict[str, Any]) -> str:
    lines = [f"{k} = {_value(v)}" for k, v in data.items() if not isinstance(v, dict)]
    for section, values in data.items():
        if isinstance(values, dict):
            lines.append(f"[{section}]")
            lines += [f"{k} = {_value(v)}" for k, v in values.items()]
    return "\n".join(lines) + "\n"


def _value(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, str):
        return f'"{v}"'
    return repr(v)


# ---- user errors: one line, exit 2, nothing written ---------------------------------------
@pytest.mark.parametrize("content", [None, b"", b"hello\nworld\n", b"\x08\x07onnx\x00\xff"])
def test_missing_or_garbage_log(tmp_path: Path, content: bytes | None) -> None:
    log = tmp_path / "log.jsonl"
    if content is not None:
        log.write_bytes(content)
    out = tmp_path / "r.html"
    line = one_line_error(run("report", log, "-o", out))
    assert line.startswith("graphtune: error: ") and str(log) in line
    assert not out.exists()


def test_bad_output_dir_and_bad_model(fx: Fixture, tmp_path: Path) -> None:
    line = one_line_error(run("report", fx.log, "-o", tmp_path / "no" / "r.html"))
    assert "does not exist" in line
    bad = tmp_path / "bad.onnx"
    bad.write_bytes(b"not onnx")
    out = tmp_path / "r.html"
    line = one_line_error(run("report", fx.log, "-o", out, "--model", bad))
    assert str(bad) in line and not out.exists()


def test_task_log_helpers() -> None:
    task = TaskLog(WorkloadInfo("k"), TargetKey("c", "h"), latencies=[None, 9.0, 12.0, 4.0, 5.0])
    assert task.best_so_far() == [None, 9.0, 9.0, 4.0, 4.0]
    assert task.to_reach(0.95) is None  # no best record
    task.baselines = {"O3": 9.0, "plan:x": None, "O1": 12.0}
    assert task.best_baseline() == ("O3", 9.0)
