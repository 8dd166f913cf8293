"""``Model.compile`` end to end: schedule -> Relax -> TVM (llvm) -> .stcobj -> Executor.

Every compiled artifact is checked against onnxruntime on the same inputs and
weights. Tolerances: FP32 on the CPU, ``rtol=1e-4, atol=1e-5`` (TVM's unscheduled
kernels sum in a different order than onnxruntime's; measured differences are
below 3e-6 absolute on these models).

The default suite uses small or reduced models at batch 4; ResNet-50 at batch 16
with the guide's ``resnet50_schedule`` runs under ``-m slow`` (about a minute of
CPU execution).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import onnx
import pytest

from compiler import zoo
from compiler.derive import group_io
from compiler.dispatch import DispatchContext
from compiler.errors import CompileError, ScheduleError
from compiler.executor import Executor
from compiler.graph import Graph
from compiler.model import Model
from compiler.schedule import GraphSchedule, GroupSpec, Placement, make_schedule
from compiler.target import Target

RTOL, ATOL = 1e-4, 1e-5
BATCH = 4
BERT_SMALL = {"num_layers": 2, "hidden": 256, "heads": 4, "intermediate": 1024, "vocab": 1000,
              "seq": 32}
MODELS: dict[str, dict[str, Any]] = {"tiny_cnn": {}, "deepfm": {}, "bert_base": BERT_SMALL}


@dataclass
class Case:
    """A zoo model, its inputs, and onnxruntime's outputs on them."""

    name: str
    proto: onnx.ModelProto
    inputs: dict[str, np.ndarray]
    expected: list[np.ndarray]

    def model(self) -> Model:
        return Model(self.proto, name=self.name)


def reference(proto: onnx.ModelProto, inputs: dict[str, np.ndarray]) -> list[np.ndarray]:
    """onnxruntime's outputs with the zoo weights materialised."""
    import onnxruntime as ort

    sess = ort.InferenceSession(proto.SerializeToString(), providers=["CPUExecutionProvider"])
    return list(sess.run(None, {**inputs, **zoo.materialize_weights(proto)}))


def make_case(name: str, batch: int = BATCH, **options: Any) -> Case:
    proto = zoo.build(name, batch=batch, weights="inputs", **options)
    inputs = zoo.random_inputs(proto, seed=1)
    return Case(name, proto, inputs, reference(proto, inputs))


@pytest.fixture(scope="module", params=sorted(MODELS))
def case(request: pytest.FixtureRequest) -> Case:
    return make_case(request.param, **MODELS[request.param])


@pytest.fixture(scope="module")
def tiny() -> Case:
    return make_case("tiny_cnn")


def run_artifact(path: Path, inputs: dict[str, np.ndarray]) -> list[np.ndarray]:
    ex = Executor.load(path)
    ex.set_input(inputs)
    return ex()


def assert_matches(got: list[np.ndarray], expected: list[np.ndarray]) -> None:
    assert len(got) == len(expected)
    for g, e in zip(got, expected):
        assert g.shape == e.shape and g.dtype == e.dtype
        np.testing.assert_allclose(g, e, rtol=RTOL, atol=ATOL)


# ---- schedules used by the tests ---------------------------------------------------------
def splittable(graph: Graph, ops: range) -> bool:
    """Whether a group of ``ops`` can be cut along the batch (every value carries it)."""
    return all(graph.ops[i].batch_separable and graph.tensors[graph.ops[i].output].batched
               for i in ops)


def two_groups(graph: Graph) -> tuple[int, int, int]:
    """``(c, head_split, tail_split)``: ops[:c+1] and ops[c+1:] meet at one batched tensor.

    At least one side is split 2; cuts where both sides split, then cuts near the
    middle, are preferred.
    """
    n = len(graph.ops)
    best: tuple[tuple[int, int], tuple[int, int, int]] | None = None
    for c in range(n - 1):
        head, tail = range(c + 1), range(c + 1, n)
        outs = group_io(graph, head).outputs
        if len(outs) != 1 or not graph.tensors[outs[0]].batched:
            continue
        if not set(group_io(graph, tail).inputs) <= {outs[0], *graph.inputs}:
            continue
        hs, ts = (2 if splittable(graph, r) else 1 for r in (head, tail))
        if hs == ts == 1:
            continue
        score = (hs + ts, -abs(c - n // 2))
        if best is None or score > best[0]:
            best = (score, (c, hs, ts))
    assert best is not None, f"{graph.name}: no single-tensor cut with a splittable side"
    return best[1]


def split_schedule(graph: Graph) -> GraphSchedule:
    """Two groups meeting at one tensor, at least one split 2, everything in L1."""
    c, hs, ts = two_groups(graph)
    n = len(graph.ops)
    place = Placement("L1", ((0, 1, 2, 3),))
    groups = [
        GroupSpec("head", tuple(range(c + 1)), hs, (place,) * hs),
        GroupSpec("tail", tuple(range(c + 1, n)), ts, (place,) * ts),
    ]
    return make_schedule(graph, groups, source="test_split")


def two_group_primitives(mod: Any, batch: int) -> Any:
    """A schedule function written with the guide's primitives: the same two groups."""
    from compiler.graph_schedule import (
        GetNPUSubFunctions,
        GroupOps,
        ListOps,
        SplitGroups,
        graph_of,
    )
    from compiler.graph_schedule import Group as PGroup

    graph = graph_of(mod)
    assert graph.batch == batch
    func = GetNPUSubFunctions(mod["main"])[0]
    ops = ListOps(func)
    c, hs, ts = two_groups(graph)
    cut = graph.ops[c]
    assert cut in ops[cut.op_type]
    head = PGroup(list(func.params), cut)
    tail = PGroup([cut], graph.ops[graph.producer[graph.outputs[0]]])
    mod = GroupOps([head, tail])(mod)
    return SplitGroups({head: hs, tail: ts})(mod)


# ---- equivalence with onnxruntime ----------------------------------------------------------
@pytest.mark.parametrize("how", ["auto", "split", "primitives"])
def test_compiled_model_matches_onnxruntime(case: Case, how: str, tmp_path: Path) -> None:
    model = case.model()
    out = tmp_path / f"{case.name}.stcobj"
    schedule: Any
    if how == "auto":
        schedule = None
    elif how == "split":
        schedule = split_schedule(model.graph)
    else:
        schedule = two_group_primitives
    used = model.compile(out, schedule=schedule)
    if how == "split":
        assert used == schedule
    elif how == "primitives":
        assert used.source == "two_group_primitives"
        assert max(g.split for g in used.groups) == 2
    else:
        assert used.source == "O3"
    ex = Executor.load(out)
    if how != "auto":
        assert "R.split" in ex.ir and "graphtune.split" in ex.ir  # really split in the IR
    assert ex.schedule == used
    ex.set_input(case.inputs)
    assert_matches(ex(), case.expected)


def test_every_level_matches_onnxruntime(tiny: Case, tmp_path: Path) -> None:
    for level in (0, 1, 2):
        out = tmp_path / f"o{level}.stcobj"
        used = tiny.model().compile(out, **{"tb.graph_schedule_level": level})
        assert used.source == f"O{level}"
        assert_matches(run_artifact(out, tiny.inputs), tiny.expected)


def test_guide_float16_inputs_are_cast(tiny: Case, tmp_path: Path) -> None:
    out = tmp_path / "t.stcobj"
    tiny.model().compile(out)
    ex = Executor.load_from_stcobj(out)
    half = {k: v.astype(np.float16) for k, v in tiny.inputs.items()}
    ex.set_input(half)
    got = ex()[0]
    want = reference(tiny.proto, {k: v.astype(np.float32) for k, v in half.items()})[0]
    np.testing.assert_allclose(got, want, rtol=RTOL, atol=ATOL)


# ---- schedule resolution -----------------------------------------------------------------
def test_graph_schedule_at_another_batch_rebatches_the_model(tiny: Case, tmp_path: Path) -> None:
    graph2 = Model(zoo.build("tiny_cnn", batch=2, weights="inputs"), "tiny_cnn").graph
    s = split_schedule(graph2)
    model = tiny.model()
    out = tmp_path / "b2.stcobj"
    model.compile(out, schedule=s)
    assert model.batch == 2
    ex = Executor.load(out)
    assert ex.meta.batch == 2 and ex.meta.workload_key == graph2.workload_key
    inputs = {k: v[:2] for k, v in tiny.inputs.items()}
    assert_matches(ex.run(inputs), [e[:2] for e in tiny.expected])


class _Fixed(DispatchContext):
    def __init__(self, answer: dict[str, Any] | None) -> None:
        self.answer = answer
        self.queries: list[tuple[str, str]] = []
        self.fallbacks: list[str] = []

    def query(self, workload_key: str, target_key: str) -> dict[str, Any] | None:
        self.queries.append((workload_key, target_key))
        return self.answer

    def on_fallback(self, workload_key: str, target_key: str, fallback: str) -> None:
        self.fallbacks.append(fallback)


def test_dispatch_context_is_asked_first(tiny: Case, tmp_path: Path) -> None:
    model = tiny.model()
    s = split_schedule(model.graph)
    with _Fixed(s.to_json()) as ctx:
        used = model.compile(tmp_path / "d.stcobj")
    assert used == s
    assert ctx.queries == [(model.graph.workload_key, Target.default().key)]
    assert Executor.load(tmp_path / "d.stcobj").schedule == s


def test_dispatch_miss_falls_back_to_the_level(tiny: Case, tmp_path: Path) -> None:
    with _Fixed(None) as ctx:
        used = tiny.model().compile(tmp_path / "m.stcobj", **{"tb.graph_schedule_level": 1})
    assert used.source == "O1"
    assert ctx.fallbacks == ["automatic level O1"]


def test_invalid_tuned_schedule_is_a_schedule_error(tiny: Case, tmp_path: Path) -> None:
    bad = split_schedule(tiny.model().graph).to_json()
    bad["groups"][0]["ops"] = [[0, 999]]
    with _Fixed(bad), pytest.raises(ScheduleError, match=r"tuned schedule .*op index 16 does not exist"):
        tiny.model().compile(tmp_path / "x.stcobj")
    assert not (tmp_path / "x.stcobj").exists()


def test_schedule_for_another_model_is_rejected(tiny: Case, tmp_path: Path) -> None:
    other = Model(zoo.build("deepfm", batch=BATCH, weights="inputs"), "deepfm").graph
    s = split_schedule(other)
    with pytest.raises(ScheduleError, match="workload"):
        tiny.model().compile(tmp_path / "x.stcobj", schedule=s)


def test_schedule_function_without_a_schedule_is_rejected(tiny: Case, tmp_path: Path) -> None:
    with pytest.raises(ScheduleError):
        tiny.model().compile(tmp_path / "x.stcobj", schedule=lambda mod: mod)


def test_schedule_of_wrong_type_is_rejected(tiny: Case, tmp_path: Path) -> None:
    with pytest.raises(ScheduleError, match="GraphSchedule, a schedule function or None"):
        tiny.model().compile(tmp_path / "x.stcobj", schedule="O3")  # type: ignore[arg-type]


# ---- config --------------------------------------------------------------------------------
def test_documented_options_are_noted_and_ignored(
    tiny: Case, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.INFO, logger="compiler._build"):
        tiny.model().compile(
            tmp_path / "t.stcobj", required_pass=["FuseConvAddBnRelu"],
            **{"tb.fuse_transpose": True},
        )
    text = caplog.text
    assert "required_pass does not apply" in text
    assert "tb.fuse_transpose does not apply" in text
    assert "building for the host CPU" in text  # progress is logged at INFO


@pytest.mark.parametrize(
    ("config", "match"),
    [
        ({"tb.no_such_option": 1}, "unknown compile option 'tb.no_such_option'"),
        ({"tb.graph_schedule_level": 4}, "must be 0, 1, 2 or 3"),
        ({"tb.graph_schedule_level": "3"}, "must be 0, 1, 2 or 3"),
    ],
)
def test_bad_options_are_one_line_errors(
    tiny: Case, tmp_path: Path, config: dict[str, Any], match: str
) -> None:
    with pytest.raises(CompileError, match=match) as info:
        tiny.model().compile(tmp_path / "x.stcobj", **config)
    assert "\n" not in str(info.value)


def test_missing_output_directory_is_a_compile_error(tiny: Case, tmp_path: Path) -> None:
    with pytest.raises(CompileError, match="does not exist"):
        tiny.model().compile(tmp_path / "nope" / "x.stcobj")


# ---- full size -------------------------------------------------------------------------------
@pytest.mark.slow
def test_resnet50_with_the_guide_schedule_matches_onnxruntime(tmp_path: Path) -> None:
    from compiler.guide_plans import resnet50_schedule

    case = make_case("resnet50", batch=16)
    out = tmp_path / "resnet50.stcobj"
    used = case.model().compile(out, schedule=resnet50_schedule)
    assert used.source == "resnet50_schedule"
    assert max(g.split for g in used.groups) > 1
    assert_matches(run_artifact(out, case.inputs), case.expected)


@pytest.mark.slow
def test_bert_base_with_the_guide_schedule_matches_onnxruntime(tmp_path: Path) -> None:
    """Full-size BERT-base (seq 128, batch 8) with the guide's plan; ~4 minutes of CPU."""
    from compiler.guide_plans import bert_base_schedule

    case = make_case("bert_base", batch=8, seq=128)
    out = tmp_path / "bert_base.stcobj"
    used = case.model().compile(out, schedule=bert_base_schedule)
    assert used.source == "bert_base_schedule"
    assert len(used.groups) == 2 + 6 * 12  # pre, 6 per block, post
    assert_matches(run_artifact(out, case.inputs), case.expected)


@pytest.mark.slow
def test_resnet50_at_batch_1_unscheduled_level_matches_onnxruntime(tmp_path: Path) -> None:
    case = make_case("resnet50", batch=1)
    out = tmp_path / "resnet50_b1.stcobj"
    case.model().compile(out)
    assert_matches(run_artifact(out, case.inputs), case.expected)
