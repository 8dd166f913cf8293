"""Automatic levels O0-O3: valid for every zoo model at batch 1 and 16, and capacity-aware."""

from __future__ import annotations

import pytest

from compiler import zoo
from compiler.auto import core_bind_for, graph_schedule_level
from compiler.errors import ScheduleError
from compiler.model import Model
from compiler.target import Target

# Full-size models except the two largest encoders, which keep their structure reduced
# so the default suite stays fast (the full ones run under -m slow below).
MODELS = {
    "tiny_cnn": {},
    "resnet18": {},
    "resnet34": {},
    "resnet50": {},
    "resnet101": {},
    "mobilenet_v2": {},
    "bert_base": {"num_layers": 2},
    "bert_large": {"num_layers": 2},
    "deepfm": {},
    "wide_and_deep": {},
}


def _graph(name: str, batch: int, **options: object):  # type: ignore[no-untyped-def]
    proto = zoo.build(name, batch=batch, weights="inputs", **options)
    return Model(proto, name=name).graph


@pytest.mark.parametrize("batch", [1, 16])
@pytest.mark.parametrize("name", sorted(MODELS))
def test_levels_are_valid_for_every_zoo_model(name: str, batch: int) -> None:
    target = Target.default()
    graph = _graph(name, batch, **MODELS[name])
    for level in range(4):
        s = graph_schedule_level(graph, target, level)
        s.validate(graph, target)  # raises with the reason if not
        assert s.batch == batch and s.source == f"O{level}"
        assert sum(len(g.ops) for g in s.groups) == len(graph.ops)


@pytest.mark.slow
@pytest.mark.parametrize("name", ["bert_base", "bert_large"])
def test_levels_full_size_encoders(name: str) -> None:
    target = Target.default()
    for batch in (1, 16):
        graph = _graph(name, batch)
        for level in range(4):
            s = graph_schedule_level(graph, target, level)
            s.validate(graph, target)  # raises with the reason if not
            assert sum(len(g.ops) for g in s.groups) == len(graph.ops)


def test_scopes_follow_the_level_meaning() -> None:
    target = Target.default()
    graph = _graph("resnet50", 16)
    o0, o1, o2 = (graph_schedule_level(graph, target, lvl) for lvl in range(3))
    scopes = [{c.mem_scope for g in s.groups for c in g.chunks} for s in (o0, o1, o2)]
    assert scopes[0] == {"DDR"}
    assert "LLB" in scopes[1] and "L1" not in scopes[1]
    assert "L1" in scopes[2]


def test_o3_splits_resnet_like_the_guide() -> None:
    """Early, large stages split into more chunks than late, small ones (the inverted pyramid)."""
    target = Target.default()
    graph = _graph("resnet50", 16)
    s = graph_schedule_level(graph, target, 3)
    first = next(g for g in s.groups if 0 in g.ops)
    last = next(g for g in s.groups if len(graph.ops) - 1 in g.ops)
    assert first.split > last.split
    assert len(s.groups) < len(graph.ops) / 3  # it merged


def test_o3_respects_a_smaller_l1() -> None:
    target = Target.default()
    small = target.replace(l1={"data_bytes": 256 * 1024})
    graph = _graph("resnet50", 16)
    big_splits = sum(g.split for g in graph_schedule_level(graph, target, 3).groups)
    small_schedule = graph_schedule_level(graph, small, 3)
    small_schedule.validate(graph, small)
    assert sum(g.split for g in small_schedule.groups) > big_splits


def test_bad_level() -> None:
    graph = _graph("tiny_cnn", 1)
    with pytest.raises(ScheduleError, match="0, 1, 2 or 3"):
        graph_schedule_level(graph, Target.default(), 4)


@pytest.mark.parametrize(
    ("samples", "expected"),
    [(16, 8 * ((0,),)), (1, ((0, 1, 2, 3, 4, 5, 6, 7),)), (2, ((0, 1, 2, 3), (4, 5, 6, 7)))],
)
def test_core_bind_for(samples: int, expected: tuple[tuple[int, ...], ...]) -> None:
    bind = core_bind_for(samples, 8)
    assert len(bind) == len(expected)
    assert all(len(p) == len(e) for p, e in zip(bind, expected))
    assert sorted(c for p in bind for c in p) == list(range(8))


@pytest.mark.parametrize("name", sorted(MODELS))
def test_every_zoo_op_splits_along_the_batch(name: str) -> None:
    """Batch propagation reaches every op and output, so any group may be split."""
    graph = _graph(name, 4, **MODELS[name])
    stuck = [op.name for op in graph.ops if not op.batch_separable]
    unbatched = [op.name for op in graph.ops if not graph.tensors[op.output].batched]
    assert stuck == [] and unbatched == []
