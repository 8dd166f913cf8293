"""``Graph``: an immutable, plain-Python view of a model's Relax dataflow.

Built once per imported model (see :mod:`compiler._relax_graph`); everything
downstream of import — schedules, the simulator, the search space, the cost
model — reads this view, never the Relax IR, so it is fast and picklable.

Sizes: ``Tensor.nbytes(dtype_bytes)`` is the size on the NPU. Floating-point
tensors are planned in the target's compute type (FP16 on the STCP920, as in
the vendor's memory figures) whatever the ONNX file's type; 8-bit integers
(INT8 activations and weights of a quantized model, ``compiler._qdq``) as one
byte; other integer tensors as 32-bit, booleans as one byte.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Hashable, Iterator, Mapping, Sequence
from dataclasses import dataclass, fields, replace
from functools import cached_property
from typing import Any, TypeVar

from compiler.errors import ScheduleError
from compiler.memo import memo_of
from compiler.optable import RELAY_ALIASES, op_spec

GRAPH_KEY_VERSION = 1
K = TypeVar("K", bound=Hashable)


@dataclass(frozen=True)
class Tensor:
    """A value in the graph: a model input, an op output, or a weight."""

    name: str
    shape: tuple[int, ...]
    dtype: str
    kind: str  # "input" | "activation" | "weight"
    elements: int
    batch_mult: int | None = None  # dim 0 == batch * batch_mult, or None: no batch axis
    # A weight holding the bytes of another weight (the same parameter, or a view of it
    # such as GPT's tied LM head reading the token embedding transposed): that weight's
    # name. Stored once, so totals count it once; each op still reads it.
    storage: str | None = None

    @property
    def batched(self) -> bool:
        """Whether dim 0 carries the batch (found by dataflow from the data inputs)."""
        return self.batch_mult is not None

    def nbytes(self, float_bytes: int = 2) -> int:
        """Bytes on the NPU when floats are stored with ``float_bytes`` per element."""
        if self.dtype.startswith(("float", "bfloat")):
            per = float_bytes
        elif self.dtype in ("bool", "int8", "uint8"):
            per = 1
        else:
            per = 4
        return self.elements * per

    def per_sample_bytes(self, batch: int, float_bytes: int = 2) -> int:
        """Bytes of one sample of a batched tensor (the whole tensor otherwise)."""
        total = self.nbytes(float_bytes)
        return total // batch if self.batched else total


@dataclass(frozen=True)
class Op:
    """One operator of the dataflow, in topological order."""

    index: int
    name: str
    op_type: str
    inputs: tuple[str, ...]  # activation / input tensors, in call order
    weights: tuple[str, ...]  # constant tensors
    output: str
    attrs: tuple[tuple[str, Any], ...]
    macs: int
    flops: int
    on_npu: bool
    batch_separable: bool
    bindings: tuple[str, ...] = ()  # Relax vars this op covers (call + tuple projections)

    @property
    def unit(self) -> str:
        """Where the op's work runs: matrix, vector, special or move."""
        return op_spec(self.op_type).unit

    @property
    def allowed_scopes(self) -> tuple[str, ...]:
        """Memory scopes the op's output may live in on the NPU."""
        return op_spec(self.op_type).scopes

    def attr(self, key: str, default: Any = None) -> Any:
        """One attribute value."""
        return dict(self.attrs).get(key, default)


class MissingOpError(ScheduleError, KeyError):
    """``ListOps(...)["nn.layer_norm"]`` on a graph without that op type."""

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else ""


class OpIndex(dict[str, list[Op]]):
    """``ListOps`` result: ``{op_type: [ops in DFS post-order]}`` with Relay aliases.

    ``ops["concatenate"]`` finds Relax's ``concat``; ``ops["nn.conv2d"][1]`` is the
    second convolution in post-order.
    """

    def __missing__(self, key: str) -> list[Op]:
        alias = RELAY_ALIASES.get(key)
        if alias is not None and alias in self:
            return self[alias]
        if not key.startswith("nn.") and f"nn.{key}" in self:
            return self[f"nn.{key}"]
        raise MissingOpError(
            f"this model has no op of type {key!r} (it has: {', '.join(sorted(self))})"
        )


@dataclass(frozen=True)
class Graph:
    """The dataflow of one model at one batch size. Immutable; cheap to pickle."""

    name: str
    batch: int
    ops: tuple[Op, ...]
    tensors: Mapping[str, Tensor]
    inputs: tuple[str, ...]
    outputs: tuple[str, ...]
    float_bytes: int = 2

    def __getstate__(self) -> dict[str, Any]:
        # Fields only (and the workload key once computed): lookups derived with
        # cached_property are rebuilt on use, so a pickle never grows with use.
        state = {f.name: getattr(self, f.name) for f in fields(self)}
        if "workload_key" in self.__dict__:
            state["workload_key"] = self.__dict__["workload_key"]
        return state

    # ---- lookups -----------------------------------------------------------------
    def __len__(self) -> int:
        return len(self.ops)

    def __iter__(self) -> Iterator[Op]:
        return iter(self.ops)

    @cached_property
    def op_by_name(self) -> dict[str, Op]:
        """Ops keyed by their unique name."""
        return {op.name: op for op in self.ops}

    @cached_property
    def producer(self) -> dict[str, int]:
        """Tensor name -> index of the op that produces it (inputs and weights absent)."""
        return {op.output: op.index for op in self.ops}

    @cached_property
    def consumers(self) -> dict[str, tuple[int, ...]]:
        """Tensor name -> indices of the ops that read it, in order."""
        out: dict[str, list[int]] = {}
        for op in self.ops:
            for t in dict.fromkeys(op.inputs):
                out.setdefault(t, []).append(op.index)
        return {k: tuple(v) for k, v in out.items()}

    def preds(self, index: int) -> tuple[int, ...]:
        """Indices of the ops whose outputs op ``index`` reads."""
        return self._preds[index]

    @cached_property
    def _preds(self) -> tuple[tuple[int, ...], ...]:
        prod = self.producer
        return tuple(tuple(dict.fromkeys(prod[t] for t in op.inputs if t in prod))
                     for op in self.ops)

    def succs(self, index: int) -> tuple[int, ...]:
        """Indices of the ops that read op ``index``'s output."""
        return self.consumers.get(self.ops[index].output, ())

    def nbytes(self, tensor: str) -> int:
        """Size of a tensor on the NPU (compute dtype for floats)."""
        return self.tensors[tensor].nbytes(self.float_bytes)

    def weight_bytes_of(self, op: Op) -> int:
        """Bytes of the constants an op reads."""
        return sum(self.nbytes(w) for w in op.weights)

    # ---- totals ------------------------------------------------------------------
    @property
    def flops(self) -> int:
        """Total FLOPs for the whole batch."""
        return sum(op.flops for op in self.ops)

    @property
    def macs(self) -> int:
        """Total multiply-accumulates for the whole batch."""
        return sum(op.macs for op in self.ops)

    @property
    def weight_bytes(self) -> int:
        """Bytes of all distinct parameters (compute dtype): a weight that shares another's
        storage (:attr:`Tensor.storage`, e.g. a tied embedding) counts once."""
        return sum(t.nbytes(self.float_bytes) for t in self.tensors.values()
                   if t.kind == "weight" and t.storage is None)

    def op_counts(self) -> dict[str, int]:
        """Number of ops per type, sorted by type."""
        counts: dict[str, int] = {}
        for op in self.ops:
            counts[op.op_type] = counts.get(op.op_type, 0) + 1
        return dict(sorted(counts.items()))

    # ---- the guide's indexing primitives -------------------------------------------
    def postorder(self) -> tuple[int, ...]:
        """Op indices in depth-first post-order from the outputs (the guide's ListOps order)."""
        memo = memo_of(self)
        cached = memo.get("postorder")
        if cached is not None:
            return tuple(cached)
        prod = self.producer
        deps = {
            op.index: list(dict.fromkeys(prod[t] for t in op.inputs if t in prod))
            for op in self.ops
        }
        roots = [prod[t] for t in self.outputs if t in prod]
        # ops not reaching an output (dead code kept for completeness) follow in topo order
        order = dfs_postorder(deps, roots)
        memo["postorder"] = order
        return tuple(order)

    def list_ops(self, indices: tuple[int, ...] | None = None) -> OpIndex:
        """``ListOps``: ``{op_type: [Op...]}`` in DFS post-order (optionally a subset)."""
        keep = None if indices is None else set(indices)
        out = OpIndex()
        for idx in self.postorder():
            if keep is not None and idx not in keep:
                continue
            op = self.ops[idx]
            out.setdefault(op.op_type, []).append(op)
        return out

    def npu_subfunctions(self) -> list[tuple[int, ...]]:
        """Maximal runs of NPU ops in topological order, separated by CPU ops.

        Each run is one NPU kernel function (``GetNPUSubFunctions``); the ops
        between runs execute on the host CPU. Runs are contiguous in the
        topological order, so the partition is acyclic by construction.
        """
        runs: list[tuple[int, ...]] = []
        cur: list[int] = []
        for op in self.ops:
            if op.on_npu:
                cur.append(op.index)
            elif cur:
                runs.append(tuple(cur))
                cur = []
        if cur:
            runs.append(tuple(cur))
        return runs

    def subgraph(self, ops: Sequence[int], name: str | None = None) -> Graph:
        """The graph of an op set (e.g. one NPU sub-function), ops re-indexed from 0.

        Tensors read from outside the set become its inputs (model inputs or
        results of other ops, in first-use order); results used outside the set or
        that are model outputs become its outputs. It has its own workload key, so
        a model with CPU ops gives one tuning task per NPU sub-function.

        Raises:
            ScheduleError: when ``ops`` is empty or names an op that does not exist.
        """
        keep = sorted(set(ops))
        if not keep or keep[0] < 0 or keep[-1] >= len(self.ops):
            raise ScheduleError(f"subgraph needs op indices in 0-{len(self.ops) - 1}, got {list(ops)[:5]}")
        members = set(keep)
        produced = {self.ops[i].output for i in keep}
        inputs: dict[str, None] = {}
        for i in keep:
            for t in self.ops[i].inputs:
                if t not in produced:
                    inputs[t] = None
        outs = set(self.outputs)
        outputs = [self.ops[i].output for i in keep
                   if self.ops[i].output in outs
                   or any(c not in members for c in self.consumers.get(self.ops[i].output, ()))]
        new_ops = tuple(replace(self.ops[i], index=k) for k, i in enumerate(keep))
        tensors: dict[str, Tensor] = {}
        for op in new_ops:
            for t in (*op.inputs, *op.weights, op.output):
                tensors[t] = self.tensors[t]
        for t in inputs:
            if tensors[t].kind == "activation":
                tensors[t] = replace(tensors[t], kind="input")
        _own_storage(tensors)
        return Graph(name or f"{self.name}[{keep[0]}:{keep[-1]}]", self.batch, new_ops, tensors,
                     tuple(inputs), tuple(outputs), self.float_bytes)

    def cpu_ops(self) -> list[Op]:
        """Ops that run on the host CPU."""
        return [op for op in self.ops if not op.on_npu]

    # ---- identity ------------------------------------------------------------------
    def canonical(self) -> dict[str, Any]:
        """Structure, attributes and shapes (never names or weight values), as JSON."""
        ids: dict[str, str] = {}
        for i, name in enumerate(self.inputs):
            ids[name] = f"in{i}"
        w = 0
        for op in self.ops:
            for t in op.weights:
                if t not in ids:
                    ids[t] = f"w{w}"
                    w += 1
            ids[op.output] = f"op{op.index}"

        def tdesc(name: str) -> list[Any]:
            t = self.tensors[name]
            return [ids[name], list(t.shape), t.dtype]

        return {
            "v": GRAPH_KEY_VERSION,
            "batch": self.batch,
            "inputs": [tdesc(n) for n in self.inputs],
            "outputs": [ids[n] for n in self.outputs],
            "ops": [
                [
                    op.op_type,
                    [tdesc(t) for t in op.inputs],
                    [tdesc(t) for t in op.weights],
                    tdesc(op.output),
                    _jsonable(op.attrs),
                ]
                for op in self.ops
            ],
        }

    @cached_property
    def workload_key(self) -> str:
        """Stable hash of structure, attributes and shapes (not weights, not names).

        The same in every process and after re-import of the same file; it
        changes with any shape, including the batch.
        """
        text = json.dumps(self.canonical(), sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(text.encode()).hexdigest()[:24]

    def input_shapes(self) -> dict[str, list[int]]:
        """Data input name -> shape."""
        return {n: list(self.tensors[n].shape) for n in self.inputs}

    def summary(self) -> dict[str, Any]:
        """What ``graphtune info --json`` prints."""
        subs = self.npu_subfunctions()
        return {
            "model": self.name,
            "batch": self.batch,
            "inputs": {
                n: {"shape": list(self.tensors[n].shape), "dtype": self.tensors[n].dtype}
                for n in self.inputs
            },
            "outputs": {
                n: {"shape": list(self.tensors[n].shape), "dtype": self.tensors[n].dtype}
                for n in self.outputs
            },
            "num_ops": len(self.ops),
            "op_counts": self.op_counts(),
            "flops": self.flops,
            "flops_per_sample": self.flops / self.batch,
            "macs": self.macs,
            "macs_per_sample": self.macs / self.batch,
            "weight_bytes": self.weight_bytes,
            "npu_subfunctions": [
                {
                    "index": i,
                    "num_ops": len(run),
                    "first_op": self.ops[run[0]].name,
                    "last_op": self.ops[run[-1]].name,
                }
                for i, run in enumerate(subs)
            ],
            "cpu_ops": [op.name for op in self.cpu_ops()],
            "workload_key": self.workload_key,
        }


def _own_storage(tensors: dict[str, Tensor]) -> None:
    """Point shared weights at an owner inside ``tensors`` (in place).

    When a subgraph keeps the users of a parameter but not the weight that owned it,
    the first one it keeps becomes the owner.
    """
    new_owner: dict[str, str] = {}
    for name, t in tensors.items():
        if t.storage is None or t.storage in tensors:
            continue
        owner = new_owner.setdefault(t.storage, name)
        tensors[name] = replace(t, storage=None if owner == name else owner)


def dfs_postorder(deps: Mapping[K, Sequence[K]], roots: Sequence[K]) -> list[K]:
    """Depth-first post-order from ``roots`` (dependencies first, in their listed order).

    Nodes of ``deps`` that no root reaches follow, each after its own dependencies,
    in ``deps`` order. Iterative: deep graphs do not hit Python's recursion limit.
    """
    seen: set[K] = set()
    out: list[K] = []
    for root in [*roots, *deps]:
        if root in seen:
            continue
        stack: list[tuple[K, int]] = [(root, 0)]
        seen.add(root)
        while stack:
            n, i = stack.pop()
            ds = deps.get(n, ())
            if i < len(ds):
                stack.append((n, i + 1))
                if ds[i] not in seen:
                    seen.add(ds[i])
                    stack.append((ds[i], 0))
            else:
                out.append(n)
    return out


def _jsonable(value: Any) -> Any:
    if isinstance(value, tuple | list):
        return [_jsonable(v) for v in value]
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, bool | int | float | str) or value is None:
        return value
    return str(value)
