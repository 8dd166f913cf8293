"""GraphSchedule JSON round trips and a table of malformed schedules (each error names the culprit)."""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import onnx
import pytest

from compiler import GraphSchedule, ScheduleError, Target, load_onnx, zoo
from compiler.graph import Graph
from compiler.guide_plans import guide_plan
from compiler.schedule import GroupSpec, Placement, make_schedule

BERT_SMALL = dict(num_layers=1, hidden=64, heads=2, intermediate=128, vocab=100, seq=16)
ALL = (tuple(range(8)),)


def _graph(tmp: Path, name: str, batch: int, **kw: Any) -> Graph:
    path = tmp / f"{name}_{batch}.onnx"
    onnx.save(zoo.build(name, batch=batch, weights="inputs", **kw), str(path))
    return load_onnx(path).graph


@pytest.fixture(scope="module")
def graphs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Graph]:
    tmp = tmp_path_factory.mktemp("models")
    return {
        "tiny": _graph(tmp, "tiny_cnn", 4, image_size=16),
        "resnet50": _graph(tmp, "resnet50", 16, image_size=32, base_channels=8),
        "bert": _graph(tmp, "bert_base", 8, **BERT_SMALL),
    }


@pytest.mark.parametrize("which,plan_name", [("resnet50", "resnet50"), ("bert", "bert_base")])
def test_json_round_trip(graphs: dict[str, Graph], which: str, plan_name: str, tmp_path: Path) -> None:
    g = graphs[which]
    s = guide_plan(plan_name, g)
    again = GraphSchedule.loads(s.dumps())
    assert again == s
    assert again.to_json() == s.to_json()
    path = tmp_path / "s.json"
    s.save(str(path))
    assert GraphSchedule.load(str(path)) == s
    again.validate(g, Target.default())


def _tiny_split2(g: Graph) -> dict[str, Any]:
    """tiny_cnn in two groups at the maxpool, the first split 2."""
    cut = g.op_by_name["max_pool2d_0"].index
    a = GroupSpec("A", tuple(range(cut + 1)), 2, (Placement("L1", ALL),) * 2)
    b = GroupSpec("B", tuple(range(cut + 1, len(g.ops))), 1, (Placement("DDR", ALL),))
    s = make_schedule(g, [a, b])
    s.validate(g, Target.default())
    return s.to_json()


def _op_in_two(d: dict[str, Any], g: Graph) -> None:
    d["groups"][1]["ops"].insert(0, [0, 0])


def _op_in_none(d: dict[str, Any], g: Graph) -> None:
    last = d["groups"][1]["ops"][-1]
    last[1] -= 1


def _split_not_dividing(d: dict[str, Any], g: Graph) -> None:
    d["groups"][0]["split"] = 3
    d["groups"][0]["chunks"] = d["groups"][0]["chunks"][:1] * 3


def _unknown_core(d: dict[str, Any], g: Graph) -> None:
    d["groups"][1]["chunks"][0]["core_bind"] = [0, 9]


def _chunk_count(d: dict[str, Any], g: Graph) -> None:
    d["groups"][0]["chunks"] = d["groups"][0]["chunks"][:1]


def _order_violates(d: dict[str, Any], g: Graph) -> None:
    d["order"] = list(reversed(d["order"]))


def _order_missing(d: dict[str, Any], g: Graph) -> None:
    d["order"] = [s for s in d["order"] if s != ["g", "B", 0]]


def _two_outputs(d: dict[str, Any], g: Graph) -> None:
    # A ends at relu_0, whose output is read by conv2d_1 and by the add in B... give A the
    # conv2d_1 too: then both relu_0 (for the add) and conv2d_1 leave A.
    conv = g.op_by_name["conv2d_1"].index
    d["groups"][0]["ops"] = [[0, conv]]
    d["groups"][1]["ops"] = [[conv + 1, len(g.ops) - 1]]
    d["groups"][0]["split"] = 1
    d["groups"][0]["chunks"] = d["groups"][0]["chunks"][:1]


def _cyclic(d: dict[str, Any], g: Graph) -> None:
    # A = {conv1, bn1, relu1, add}, B = the middle conv/bn: A feeds B and B feeds A.
    add = g.op_by_name["add_0"].index
    chunk = d["groups"][0]["chunks"][0]
    d["groups"] = [
        {"name": "A", "ops": [[0, 2], [add, add]], "split": 1, "chunks": [chunk]},
        {"name": "B", "ops": [[3, add - 1]], "split": 1, "chunks": [chunk]},
        {"name": "C", "ops": [[add + 1, len(g.ops) - 1]], "split": 1, "chunks": [chunk]},
    ]


def _wrong_batch(d: dict[str, Any], g: Graph) -> None:
    d["batch"] = 8


def _wrong_key(d: dict[str, Any], g: Graph) -> None:
    d["workload_key"] = "0" * 24


def _newer_version(d: dict[str, Any], g: Graph) -> None:
    d["v"] = 99


CASES: dict[str, tuple[Callable[[dict[str, Any], Graph], None], list[str]]] = {
    "op in two groups": (_op_in_two, ["conv2d_0", "two groups", "A", "B"]),
    "op in no group": (_op_in_none, ["softmax_0", "no group"]),
    "split not dividing batch": (_split_not_dividing, ["group A", "split factor 3", "batch 4"]),
    "unknown core": (_unknown_core, ["group B", "core 9"]),
    "chunk count != split": (_chunk_count, ["group A", "split 2", "got 1"]),
    "order violates dependency": (_order_violates, ["order", "runs before"]),
    "missing order entry": (_order_missing, ["order", "B[0]", "missing"]),
    "cyclic groups": (_cyclic, ["cycle", "A -> B", "B -> A"]),
    "group with two outputs": (_two_outputs, ["group A", "2 outputs", "relu_0", "conv2d_1"]),
    "wrong batch": (_wrong_batch, ["batch 8", "batch 4"]),
    "wrong workload key": (_wrong_key, ["000000000000000000000000"]),
    "newer schema version": (_newer_version, ["version 99", "upgrade"]),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_malformed_schedule(graphs: dict[str, Graph], case: str) -> None:
    g = graphs["tiny"]
    d = copy.deepcopy(_tiny_split2(g))
    mutate, words = CASES[case]
    mutate(d, g)
    with pytest.raises(ScheduleError) as err:
        GraphSchedule.loads(json.dumps(d)).validate(g, Target.default())
    msg = str(err.value)
    assert "\n" not in msg
    for w in words:
        assert w in msg, (case, msg)


def test_take_output_not_in_llb(graphs: dict[str, Graph]) -> None:
    g = graphs["bert"]
    take = g.list_ops()["take"][0]
    groups = [
        GroupSpec("embed", tuple(range(take.index + 1)), 1, (Placement("LLB", ALL),)),
        GroupSpec("rest", tuple(range(take.index + 1, len(g.ops))), 1, (Placement("DDR", ALL),)),
    ]
    with pytest.raises(ScheduleError, match=rf"group embed .*{take.name} \(take\).*LLB"):
        make_schedule(g, groups).validate(g, Target.default())
    ok = [groups[0].__class__("embed", groups[0].ops, 1, (Placement("L1", ALL),)), groups[1]]
    make_schedule(g, ok).validate(g, Target.default())


def test_cycle_is_named_by_group_order(graphs: dict[str, Graph]) -> None:
    """The cycle message lists the groups in cycle order."""
    from compiler.derive import group_order

    g = graphs["tiny"]
    add = g.op_by_name["add_0"].index
    place = (Placement("DDR", ALL),)
    groups = [
        GroupSpec("A", (0, 1, 2, add), 1, place),
        GroupSpec("B", tuple(range(3, add)), 1, place),
        GroupSpec("C", tuple(range(add + 1, len(g.ops))), 1, place),
    ]
    with pytest.raises(ScheduleError, match=r"cycle: (A -> B -> A|B -> A -> B)"):
        group_order(g, groups)


def test_load_binary_file(tmp_path: Path) -> None:
    p = tmp_path / "model.onnx"
    p.write_bytes(b"\x08\x08\x12\xd5\xff\xfe" * 10)
    with pytest.raises(ScheduleError):
        GraphSchedule.load(str(p))
