"""The guide's manual-schedule flow: on Graphs (GraphModule, no TVM) and on real Relax."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import onnx
import pytest

from compiler import ScheduleError, Target, load_onnx, zoo
from compiler.graph import Graph
from compiler.graph_schedule import (
    FuseTargetOps,
    GetNPUSubFunctions,
    GraphModule,
    Group,
    GroupOps,
    ListOps,
    NPUMemScope,
    Schedule,
    ScheduleInfo,
    SplitGroups,
    schedule_of,
)
from compiler.guide_plans import resnet50_schedule
from compiler.schedule import core_bind_json


@pytest.fixture(scope="module")
def tmp(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("prim")


@pytest.fixture(scope="module")
def resnet50(tmp: Path) -> Graph:
    path = tmp / "resnet50.onnx"
    onnx.save(zoo.build("resnet50", batch=16, weights="inputs"), str(path))
    return load_onnx(path).graph


@pytest.fixture(scope="module")
def tiny_path(tmp: Path) -> Path:
    path = tmp / "tiny.onnx"
    onnx.save(zoo.build("tiny_cnn", batch=2, weights="random", image_size=16), str(path))
    return path


def test_resnet50_schedule_matches_guide(resnet50: Graph) -> None:
    s = schedule_of(resnet50_schedule(GraphModule(resnet50)))
    s.validate(resnet50, Target.default())
    named = [g for g in s.groups if g.name.startswith("group_")]
    assert [g.split for g in named] == [8, 4, 2, 1]
    assert len(s.order) == 23
    steps = [str(x) for x in s.order]
    concat_at = {i: name for i, name in enumerate(steps) if name.startswith("concat")}
    assert concat_at == {3: "concat_0", 7: "concat_1", 9: "concat_2", 13: "concat_3",
                         17: "concat_4", 19: "concat_5", 21: "concat_6"}
    assert steps[0] == "split_0" and steps[-1] == "group_3[0]"
    c4, c2 = [[0, 1, 2, 3], [4, 5, 6, 7]], [[1, 3], [5, 7], [0, 2], [4, 6]]
    g0, g3 = s.group("group_0"), s.group("group_3")
    assert [p.mem_scope for p in g0.chunks] == ["LLB", "L1"] * 4
    assert all(core_bind_json(p.core_bind) == c4 for p in g0.chunks)
    assert all(core_bind_json(p.core_bind) == c2 for p in s.group("group_1").chunks)
    assert core_bind_json(s.group("group_2").chunks[0].core_bind) == [3, 7, 2, 6, 1, 5, 0, 4]
    assert g3.chunks[0].mem_scope == "DDR"
    assert core_bind_json(g3.chunks[0].core_bind) == [7, 6, 5, 4, 3, 2, 1, 0]


def _tiny_graph(tiny_path: Path) -> Graph:
    return load_onnx(tiny_path).graph


def test_group_argument_orders_and_indexing(tiny_path: Path) -> None:
    g = _tiny_graph(tiny_path)
    mod = GraphModule(g)
    func = GetNPUSubFunctions(mod["main"])[0]
    ops = ListOps(func)
    a = Group([func.params[0]], ops["add"][0])
    b = Group(ops["add"][0], [func.params[0]])
    assert a == b and a.op_set(g) == b.op_set(g)
    mod = GroupOps([a])(mod)
    ref = a[3]
    assert ref.group is a and ref.chunk == 3
    with pytest.raises(ScheduleError, match="does not divide"):
        SplitGroups({a: 3})(mod)


def test_fused_group_refuses_split(tiny_path: Path) -> None:
    mod = GraphModule(_tiny_graph(tiny_path))
    func = GetNPUSubFunctions(mod["main"])[0]
    grp = Group([func.params[0]], ListOps(func)["add"][0])
    mod = FuseTargetOps([grp])(mod)
    with pytest.raises(ScheduleError, match="fused"):
        SplitGroups({grp: 2})(mod)


def _flow(mod: Any) -> Any:
    """tiny_cnn: two groups at the residual add, the first split 2 (one image per chunk)."""
    func = GetNPUSubFunctions(mod["main"])[0]
    ops = ListOps(func)
    groups = [Group([func.params[0]], ops["add"][0]),
              Group([ops["add"][0]], ops["nn.softmax"][0])]
    mod = GroupOps(groups)(mod)
    mod = SplitGroups({groups[0]: 2, groups[1]: 1})(mod)
    ops = ListOps(GetNPUSubFunctions(mod["main"])[0])
    by_name = {g.name: g for g in groups}
    transfers = {r.name: r for kind in ("split", "concat") if kind in ops
                 for r in ops[kind]}
    infos = []
    for step in schedule_of(mod).order:
        if step.kind == "transfer":
            infos.append(ScheduleInfo(transfers[step.name], NPUMemScope.DDR, [[0, 1]]))
        elif step.name in by_name:
            infos.append(ScheduleInfo(by_name[step.name][step.chunk], NPUMemScope.L1, [[0, 1]]))
        else:
            infos.append(ScheduleInfo(step.name, NPUMemScope.DDR, [0]))  # pragma: no cover
    return Schedule(infos)(mod)


def test_flow_on_graph(tiny_path: Path) -> None:
    g = _tiny_graph(tiny_path)
    s = schedule_of(_flow(GraphModule(g)))
    s.validate(g, Target.default())
    assert [grp.split for grp in s.groups] == [2, 1]


def test_flow_on_relax_matches_onnxruntime(tiny_path: Path) -> None:
    ort = pytest.importorskip("onnxruntime")
    import tvm
    from tvm import relax

    model = load_onnx(tiny_path)
    mod = _flow(model.mod)
    privates = {gv.name_hint: f for gv, f in mod.functions.items() if gv.name_hint != "main"}
    grouped = [f for f in privates.values() if f.attrs is not None and "graphtune.group" in f.attrs]
    assert len(grouped) == 2
    assert all("graphtune.mem_scope" in f.attrs for f in grouped)
    s = schedule_of(mod)
    s.validate(model.graph)
    proto = onnx.load(str(tiny_path))
    feeds = zoo.random_inputs(proto)
    want = ort.InferenceSession(proto.SerializeToString()).run(None, feeds)[0]
    exe = tvm.compile(mod, target="llvm")
    vm = relax.VirtualMachine(exe, tvm.cpu())
    got = vm["main"](*[tvm.runtime.tensor(feeds[n]) for n in model.data_inputs]).numpy()
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)
