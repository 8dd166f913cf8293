"""Wrap each schedule group's ONNX nodes in an ONNX local function (for Netron).

Input: a model whose nodes carry ``graphtune.group`` metadata (see
``schedule_cmds.export_onnx``). Output: the same model where every group is one
call node ``graphtune.<group>`` of a local function holding the group's nodes;
Netron draws each group as one box that opens into its ops. Initializers a
group reads become inputs of its function (functions cannot see the graph's
initializers). Nodes without a group stay as they are.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from compiler.errors import ScheduleError

DOMAIN = "graphtune"


def wrap_groups(proto: Any) -> Any:
    """A copy of ``proto`` with one local function per group (see the module doc).

    Raises:
        ScheduleError: the groups cannot be ordered as calls (a group's nodes are
            not a convex part of the ONNX graph, so the calls would form a cycle).
    """
    import onnx
    from onnx import helper

    graph = proto.graph
    group_of: list[str | None] = []
    for node in graph.node:
        props = {p.key: p.value for p in node.metadata_props}
        group_of.append(props.get("graphtune.group"))
    members: dict[str, list[int]] = defaultdict(list)
    for i, g in enumerate(group_of):
        if g is not None:
            members[g].append(i)
    produced_by: dict[str, int] = {}
    for i, node in enumerate(graph.node):
        for t in node.output:
            produced_by[t] = i
    graph_outputs = {o.name for o in graph.output}
    consumers: dict[str, set[int]] = defaultdict(set)
    for i, node in enumerate(graph.node):
        for t in node.input:
            if t:
                consumers[t].add(i)

    functions = []
    calls: dict[str, Any] = {}
    for name, idx in members.items():
        inside = set(idx)
        made = {t for i in idx for t in graph.node[i].output}
        inputs = list(dict.fromkeys(
            t for i in idx for t in graph.node[i].input if t and t not in made
        ))
        outputs = [t for t in dict.fromkeys(t for i in idx for t in graph.node[i].output)
                   if t in graph_outputs or consumers[t] - inside]
        body = []
        for i in idx:
            n = onnx.NodeProto()
            n.CopyFrom(graph.node[i])
            body.append(n)
        fn = helper.make_function(
            DOMAIN, name, inputs, outputs, body,
            opset_imports=list(proto.opset_import),
            doc_string=f"graphtune group {name}",
        )
        functions.append(fn)
        call = helper.make_node(name, inputs, outputs, name=name, domain=DOMAIN)
        first = graph.node[idx[0]]
        call.doc_string = first.doc_string
        for p in first.metadata_props:
            if p.key in ("graphtune.group", "graphtune.split", "graphtune.chunks"):
                q = call.metadata_props.add()
                q.key, q.value = p.key, p.value
        calls[name] = call

    # New node list: ungrouped nodes and one call per group, in a topological order.
    items: list[Any] = [graph.node[i] for i, g in enumerate(group_of) if g is None]
    items += list(calls.values())
    order = _topological(items, {i.name for i in graph.input} | {t.name for t in graph.initializer})
    out = onnx.ModelProto()
    out.CopyFrom(proto)
    del out.graph.node[:]
    out.graph.node.extend(order)
    out.functions.extend(functions)
    if not any(o.domain == DOMAIN for o in out.opset_import):
        out.opset_import.append(helper.make_opsetid(DOMAIN, 1))
    onnx.checker.check_model(out)
    return out


def _topological(nodes: list[Any], available: set[str]) -> list[Any]:
    ready = set(available)
    left = list(nodes)
    order: list[Any] = []
    while left:
        progress = False
        rest = []
        for n in left:
            if all(not t or t in ready for t in n.input):
                order.append(n)
                ready.update(n.output)
                progress = True
            else:
                rest.append(n)
        if not progress:
            stuck = ", ".join(sorted({n.name or n.op_type for n in rest})[:3])
            raise ScheduleError(
                f"groups cannot be drawn as ONNX functions (a cycle through {stuck}): "
                "export without --functions"
            )
        left = rest
    return order
