"""Standard ONNX op chains a user op claims (``Mul(x, Sigmoid(x))`` -> ``Swish``).

A pattern is a nested tuple ``(op_type, arg, ...)`` whose leaves are variable
names (strings): ``("Mul", "x", ("Sigmoid", "x"))``. It matches a node whose
op type is the root's and whose inputs match the arguments (either order for
the commutative ``Add``, ``Mul``, ``Max``, ``Min``); a variable matches any
tensor, the same tensor at every place it appears. The nodes inside the match
other than the root must feed only the match (their values are not needed
elsewhere, nor graph outputs); the root's output becomes the user op's output,
its inputs the pattern's variables in the order given by ``inputs``.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from compiler.ops._registry import OpError, custom_op

__all__ = ["Pattern", "drop", "patterns", "register_pattern", "rewrite"]

_COMMUTATIVE = frozenset({"Add", "Mul", "Max", "Min"})
_LOCK = threading.Lock()
_PATTERNS: list[Pattern] = []


@dataclass(frozen=True)
class Pattern:
    """One claim: ``tree`` is replaced by op ``op`` on the variables ``inputs``."""

    op: str
    tree: tuple[Any, ...]
    inputs: tuple[str, ...]
    attrs: tuple[tuple[str, Any], ...] = ()


def _variables(tree: Any, out: list[str]) -> None:
    if isinstance(tree, str):
        if tree not in out:
            out.append(tree)
        return
    for a in tree[1:]:
        _variables(a, out)


def _check_tree(op: str, tree: Any) -> None:
    if isinstance(tree, str):
        return
    if not (isinstance(tree, tuple) and len(tree) >= 2 and isinstance(tree[0], str)):
        raise OpError(f"op {op}: pattern node {tree!r} must be (op_type, arg, ...) with "
                      "variable names (str) or pattern nodes as args")
    for a in tree[1:]:
        _check_tree(op, a)


def register_pattern(op: str, tree: tuple[Any, ...], inputs: Sequence[str] | None = None,
                     attrs: dict[str, Any] | None = None) -> Pattern:
    """Claim a standard ONNX op chain for the registered op ``op`` (see the module doc).

    Args:
        op: A registered user op.
        tree: The pattern, e.g. ``("Mul", "x", ("Sigmoid", "x"))``.
        inputs: The pattern's variables in the op's input order (default: order of
            first appearance).
        attrs: The op's attributes for the replacement (checked now).

    Raises:
        OpError: unknown op, malformed pattern, inputs that are not its variables.
    """
    custom = custom_op(op)
    if custom is None:
        raise OpError(f"pattern for op {op}: no such registered op (register it first)")
    _check_tree(op, tree)
    if isinstance(tree, str):
        raise OpError(f"op {op}: a pattern must be an op node, not the variable {tree!r}")
    found: list[str] = []
    _variables(tree, found)
    order = tuple(inputs) if inputs is not None else tuple(found)
    if sorted(order) != sorted(found):
        raise OpError(f"op {op}: pattern inputs {list(order)} must be its variables {found}")
    if len(order) != len(custom.prototype.inputs):
        raise OpError(f"op {op}: pattern has {len(order)} variable(s), the prototype takes "
                      f"{len(custom.prototype.inputs)} input(s)")
    checked = custom.check_attrs(attrs or {})
    p = Pattern(op, tree, order, tuple(sorted(checked.items())))
    with _LOCK:
        _PATTERNS.append(p)
    return p


def patterns() -> list[Pattern]:
    """The registered patterns (a copy)."""
    return list(_PATTERNS)


def drop(op: str) -> None:
    """Forget the patterns of ``op``."""
    with _LOCK:
        _PATTERNS[:] = [p for p in _PATTERNS if p.op != op]


def _match(tree: Any, tensor: str, producers: dict[str, Any], env: dict[str, str],
           nodes: list[Any]) -> bool:
    if isinstance(tree, str):
        bound = env.get(tree)
        if bound is None:
            env[tree] = tensor
            return True
        return bound == tensor
    node = producers.get(tensor)
    if node is None or node.op_type != tree[0] or node.domain not in ("", "ai.onnx") \
            or len(node.input) != len(tree) - 1:
        return False
    orders = [list(node.input)]
    if node.op_type in _COMMUTATIVE and len(node.input) == 2:
        orders.append(list(reversed(node.input)))
    for ins in orders:
        env2, nodes2 = dict(env), [*nodes, node]
        if all(_match(a, t, producers, env2, nodes2) for a, t in zip(tree[1:], ins, strict=True)):
            env.clear()
            env.update(env2)
            nodes[:] = nodes2
            return True
    return False


def rewrite(graph: Any, node_type: str) -> int:
    """Replace every match of every pattern in an ONNX ``GraphProto`` (in place).

    The replacement node has op type ``node_type.format(op=...)`` in the default
    domain (the importer's key for the user op). Returns the number of matches.
    """
    from onnx import helper

    count = 0
    for p in patterns():
        while True:
            producers = {o: n for n in graph.node for o in n.output}
            uses: dict[str, int] = {}
            for n in graph.node:
                for t in n.input:
                    uses[t] = uses.get(t, 0) + 1
            outputs = {o.name for o in graph.output}
            hit = None
            for n in graph.node:
                if len(n.output) != 1:
                    continue
                env: dict[str, str] = {}
                nodes: list[Any] = []
                if not _match(p.tree, n.output[0], producers, env, nodes):
                    continue
                inner = [m for m in nodes if m is not n]
                ids = {id(m) for m in nodes}
                internal = {t: sum(1 for m in nodes for i in m.input if i == t)
                            for m in inner for t in m.output}
                if any(t in outputs or uses.get(t, 0) != k for t, k in internal.items()):
                    continue
                hit = (n, ids, env)
                break
            if hit is None:
                break
            root, ids, env = hit
            new = helper.make_node(node_type.format(op=p.op), [env[v] for v in p.inputs],
                                   list(root.output), name=root.name or root.output[0],
                                   **dict(p.attrs))
            kept = []
            for n in graph.node:
                if n is root:
                    kept.append(new)
                elif id(n) not in ids:
                    kept.append(n)
            del graph.node[:]
            graph.node.extend(kept)
            count += 1
    return count
