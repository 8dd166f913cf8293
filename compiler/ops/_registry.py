"""The registry of user operators: prototype, information entry, implementation, plug-in.

The four parts follow the vendor's operator framework (TBE guide, "算子原型库",
"算子信息库", "算子实现", "算子适配插件"); see :mod:`compiler.ops` for the whole story.
Every check here raises :class:`OpError` with one line that names the op and
the part (or argument) at fault. A registration is checked whole before it is
recorded, so a bad one leaves nothing behind.
"""

from __future__ import annotations

import math
import re
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from compiler.errors import GraphtuneError

__all__ = [
    "ATTR_TYPES",
    "UNITS",
    "Attr",
    "CostHints",
    "CustomOp",
    "Input",
    "OpError",
    "OpInfo",
    "Output",
    "Prototype",
    "custom_op",
    "custom_ops",
    "onnx_op",
]

UNITS = ("vector", "special")
DTYPES = ("float16", "float32")
ATTR_TYPES = ("int", "float", "str", "ints", "floats")
_NAME = re.compile(r"[A-Za-z][A-Za-z0-9_]{0,63}")
_SCOPES = ("DDR", "LLB", "L1")
MATRIX_REFUSED = (
    "matrix (cube) operators are not open to users: the vendor delivers them "
    "(TBE guide: '当前仅支持用户开发Vector算子，由于开发高性能Cube算子难度较大，暂由华为交付'); "
    "declare unit 'vector' or 'special'"
)


class OpError(GraphtuneError):
    """A user operator's registration or use is wrong (one line naming op and part)."""


@dataclass(frozen=True)
class Input:
    """One input of the prototype.

    Attributes:
        name: The argument's name (errors name it).
        rank: Accepted ranks (``None``: any).
        const: The input must be a constant (a weight, e.g. RMSNorm's ``gamma``).
    """

    name: str
    rank: tuple[int, ...] | None = None
    const: bool = False


@dataclass(frozen=True)
class Output:
    """The output of the prototype (``rank``: its rank, checked against inference)."""

    name: str
    rank: int | None = None


@dataclass(frozen=True)
class Attr:
    """One attribute: ``type`` in :data:`ATTR_TYPES`, a default, and a range.

    Attributes:
        name: The ONNX attribute name.
        type: ``int``, ``float``, ``str``, ``ints`` or ``floats``.
        default: Value when absent; ``None`` makes the attribute required.
        range: ``(low, high)``, inclusive, for numbers (each element of a list).
        choices: Accepted values of a ``str`` attribute.
    """

    name: str
    type: str
    default: Any = None
    range: tuple[float, float] | None = None
    choices: tuple[str, ...] | None = None


InferFn = Callable[[list[tuple[int, ...]], list[str], dict[str, Any]],
                   tuple[Sequence[int], str]]


@dataclass(frozen=True)
class Prototype:
    """The op prototype ("算子原型"): its mathematical interface.

    Attributes:
        inputs: The inputs, in call order.
        output: The single output (one result per op).
        attrs: The attributes.
        infer: ``infer(shapes, dtypes, attrs) -> (shape, dtype)`` of the output.
        batch_free: Samples are independent (axis 0 of the first input is the batch
            and the output keeps it there): the op may be split along the batch.
        example: Input shapes the registration check runs the op on (inference,
            compute, schedule); ``None`` skips that trial (the checks then run on
            first use only).
    """

    inputs: tuple[Input, ...]
    output: Output
    infer: InferFn
    attrs: tuple[Attr, ...] = ()
    batch_free: bool = False
    example: tuple[tuple[int, ...], ...] | None = None


@dataclass(frozen=True)
class OpInfo:
    """The op information entry ("算子信息库"): what the hardware implementation accepts.

    Attributes:
        dtypes: Accepted input/output dtypes (``float16``, ``float32``).
        unit: ``vector`` (64 lanes, one element per lane per cycle) or ``special``
            (the vector unit at the transcendental rate); ``matrix`` is refused.
        scopes: Memory scopes the op's output may live in.
    """

    dtypes: tuple[str, ...] = DTYPES
    unit: str = "vector"
    scopes: tuple[str, ...] = _SCOPES


@dataclass(frozen=True)
class CostHints:
    """Override the work the simulator derives from the compute, with a reason.

    Attributes:
        work_per_element: Vector-lane operations per output element (replaces the
            element and reduction counts of the TE body; lane padding still applies).
        reason: Why the TE body's count is wrong for this op (required).
    """

    work_per_element: float
    reason: str


@dataclass(frozen=True)
class CustomOp:
    """One registered user operator (see :func:`register_op`)."""

    name: str
    prototype: Prototype
    info: OpInfo
    compute: Callable[..., Any]
    schedule: Callable[[Any], Any] | None = None
    framework: Mapping[str, tuple[str, str]] = field(default_factory=dict)
    cost_hints: CostHints | None = None

    # ---- use-time checks ---------------------------------------------------------
    def check_attrs(self, given: Mapping[str, Any]) -> dict[str, Any]:
        """Attribute values with defaults filled, each checked (type, range, choices)."""
        known = {a.name: a for a in self.prototype.attrs}
        extra = sorted(set(given) - set(known))
        if extra:
            raise OpError(f"op {self.name}: unknown attribute {extra[0]!r} "
                          f"(attributes: {', '.join(known) or 'none'})")
        out: dict[str, Any] = {}
        for a in self.prototype.attrs:
            if a.name not in given:
                if a.default is None:
                    raise OpError(f"op {self.name}: attribute {a.name!r} is required")
                out[a.name] = a.default
                continue
            out[a.name] = _check_attr_value(self.name, a, given[a.name])
        return out

    def check_inputs(self, shapes: Sequence[Sequence[int]], dtypes: Sequence[str],
                     consts: Sequence[bool] | None = None) -> None:
        """Count, rank, constness and dtype of the inputs (one line naming the argument)."""
        proto = self.prototype
        if len(shapes) != len(proto.inputs):
            raise OpError(f"op {self.name}: takes {len(proto.inputs)} input(s) "
                          f"({', '.join(i.name for i in proto.inputs)}), got {len(shapes)}")
        for k, (inp, shape, dtype) in enumerate(zip(proto.inputs, shapes, dtypes, strict=True)):
            if inp.rank is not None and len(shape) not in inp.rank:
                raise OpError(f"op {self.name}: input {inp.name!r} has rank {len(shape)}, "
                              f"the prototype accepts rank {_ranks(inp.rank)}")
            if any(int(d) <= 0 for d in shape):
                raise OpError(f"op {self.name}: input {inp.name!r} has shape {list(shape)}: "
                              "dynamic shapes are not supported")
            if dtype not in self.info.dtypes:
                raise OpError(f"op {self.name}: input {inp.name!r} is {dtype}, the information "
                              f"entry accepts {', '.join(self.info.dtypes)}")
            if inp.const and consts is not None and not consts[k]:
                raise OpError(f"op {self.name}: input {inp.name!r} must be a constant (a weight)")

    def infer(self, shapes: Sequence[Sequence[int]], dtypes: Sequence[str],
              attrs: Mapping[str, Any]) -> tuple[tuple[int, ...], str]:
        """The prototype's inference, its result checked (shape of ints, rank, dtype)."""
        try:
            shape, dtype = self.prototype.infer([tuple(int(d) for d in s) for s in shapes],
                                                list(dtypes), dict(attrs))
            out = tuple(int(d) for d in shape)
        except OpError:
            raise
        except Exception as exc:
            raise OpError(f"op {self.name}: shape inference raised {_one_line(exc)}") from None
        rank = self.prototype.output.rank
        if rank is not None and len(out) != rank:
            raise OpError(f"op {self.name}: shape inference returned rank {len(out)} {list(out)} "
                          f"for output {self.prototype.output.name!r}, the prototype says "
                          f"rank {rank}")
        if any(d <= 0 for d in out):
            raise OpError(f"op {self.name}: shape inference returned {list(out)}: "
                          "every dimension must be positive")
        if str(dtype) not in self.info.dtypes:
            raise OpError(f"op {self.name}: shape inference returned dtype {dtype}, the "
                          f"information entry accepts {', '.join(self.info.dtypes)}")
        return out, str(dtype)


def _ranks(r: tuple[int, ...]) -> str:
    return " or ".join(str(x) for x in r)


def _one_line(exc: BaseException) -> str:
    lines = [ln.strip() for ln in str(exc).strip().splitlines() if ln.strip()]
    return f"{type(exc).__name__}: {lines[-1]}" if lines else type(exc).__name__


def _check_attr_value(op: str, a: Attr, value: Any) -> Any:
    where = f"op {op}: attribute {a.name!r}"
    if isinstance(value, bytes):
        value = value.decode()
    if a.type in ("ints", "floats"):
        if not isinstance(value, list | tuple):
            raise OpError(f"{where} must be a list of {a.type[:-1]}s, got {value!r}")
        items = [_scalar(where, a.type[:-1], v) for v in value]
        for v in items:
            _in_range(where, a, v)
        return tuple(items)
    if a.type == "str":
        if not isinstance(value, str):
            raise OpError(f"{where} must be a string, got {value!r}")
        if a.choices is not None and value not in a.choices:
            raise OpError(f"{where} must be one of {', '.join(a.choices)}, got {value!r}")
        return value
    v = _scalar(where, a.type, value)
    _in_range(where, a, v)
    return v


def _scalar(where: str, kind: str, value: Any) -> Any:
    if isinstance(value, bool):
        raise OpError(f"{where} must be {'an int' if kind == 'int' else 'a float'}, got {value!r}")
    if kind == "int":
        if not isinstance(value, int):
            raise OpError(f"{where} must be an int, got {value!r}")
        return int(value)
    if not isinstance(value, int | float) or not math.isfinite(float(value)):
        raise OpError(f"{where} must be a finite float, got {value!r}")
    return float(value)


def _in_range(where: str, a: Attr, v: float) -> None:
    if a.range is not None and not a.range[0] <= v <= a.range[1]:
        raise OpError(f"{where} = {v!r} is outside its range [{a.range[0]}, {a.range[1]}]")


# ---- the registry ------------------------------------------------------------------------
_LOCK = threading.Lock()
_OPS: dict[str, CustomOp] = {}
_ONNX: dict[tuple[str, str], str] = {}


def custom_ops() -> dict[str, CustomOp]:
    """The registered ops by name (a copy)."""
    return dict(_OPS)


def custom_op(name: str) -> CustomOp | None:
    """The registered op called ``name``, or None."""
    return _OPS.get(name)


def onnx_op(domain: str, op_type: str) -> CustomOp | None:
    """The registered op an ONNX ``domain:op_type`` node maps to, or None."""
    name = _ONNX.get((domain, op_type))
    return None if name is None else _OPS.get(name)


def onnx_claims() -> dict[tuple[str, str], str]:
    """``(domain, op_type) -> op name`` of every ONNX mapping (a copy)."""
    return dict(_ONNX)


def _checked(name: str, prototype: Prototype, info: OpInfo, compute: Callable[..., Any],
             schedule: Callable[[Any], Any] | None, framework: Mapping[str, tuple[str, str]],
             cost_hints: CostHints | None) -> CustomOp:
    from compiler.optable import NPU_OPS, RELAY_ALIASES

    if not isinstance(name, str) or not _NAME.fullmatch(name):
        raise OpError(f"op name {name!r} must be a letter then letters, digits or '_' "
                      "(at most 64)")
    if (name in NPU_OPS and name not in _OPS) or name in RELAY_ALIASES \
            or f"nn.{name}" in NPU_OPS:
        raise OpError(f"op {name}: name clashes with the built-in NPU op {name!r}: "
                      "choose another name")
    if not isinstance(prototype, Prototype):
        raise OpError(f"op {name}: prototype must be a compiler.ops.Prototype, "
                      f"got {type(prototype).__name__}")
    if not isinstance(info, OpInfo):
        raise OpError(f"op {name}: info must be a compiler.ops.OpInfo, got {type(info).__name__}")
    if info.unit == "matrix":
        raise OpError(f"op {name}: unit 'matrix' refused: {MATRIX_REFUSED}")
    if info.unit not in UNITS:
        raise OpError(f"op {name}: unit {info.unit!r} unknown (vector or special)")
    if not info.dtypes or any(d not in DTYPES for d in info.dtypes):
        raise OpError(f"op {name}: info dtypes {list(info.dtypes)} must be among "
                      f"{', '.join(DTYPES)}")
    if not info.scopes or any(s not in _SCOPES for s in info.scopes) or "DDR" not in info.scopes:
        raise OpError(f"op {name}: info scopes {list(info.scopes)} must include DDR and be "
                      "among DDR, LLB, L1")
    if not prototype.inputs:
        raise OpError(f"op {name}: the prototype has no inputs")
    names = [i.name for i in prototype.inputs] + [a.name for a in prototype.attrs]
    if len(set(names)) != len(names):
        raise OpError(f"op {name}: prototype argument names repeat: {names}")
    if not callable(prototype.infer):
        raise OpError(f"op {name}: prototype infer must be a function")
    for a in prototype.attrs:
        if a.type not in ATTR_TYPES:
            raise OpError(f"op {name}: attribute {a.name!r} has type {a.type!r} "
                          f"(types: {', '.join(ATTR_TYPES)})")
        if a.range is not None and not (len(a.range) == 2 and a.range[0] <= a.range[1]):
            raise OpError(f"op {name}: attribute {a.name!r} range {a.range!r} is not (low, high)")
        if a.default is not None:
            _check_attr_value(name, a, a.default)
    if not callable(compute):
        raise OpError(f"op {name}: compute must be a function of TE tensors")
    if schedule is not None and not callable(schedule):
        raise OpError(f"op {name}: schedule must be a function of a tvm.s_tir.Schedule")
    unknown = sorted(set(framework) - {"onnx"})
    if unknown:
        raise OpError(f"op {name}: framework {unknown[0]!r} unknown (only 'onnx')")
    claim = framework.get("onnx")
    fw: dict[str, tuple[str, str]] = {}
    if claim is not None:
        if not (isinstance(claim, tuple | list) and len(claim) == 2
                and all(isinstance(x, str) for x in claim) and claim[1]):
            raise OpError(f"op {name}: framework onnx must be (domain, op_type), got {claim!r}")
        if claim[0] in ("", "ai.onnx"):
            raise OpError(f"op {name}: framework onnx domain must be a custom domain, not "
                          f"{claim[0]!r} (claim standard ops with compiler.ops.register_pattern)")
        fw["onnx"] = (claim[0], claim[1])
    if cost_hints is not None:
        if not isinstance(cost_hints, CostHints):
            raise OpError(f"op {name}: cost_hints must be a compiler.ops.CostHints")
        if not cost_hints.reason.strip():
            raise OpError(f"op {name}: cost_hints needs a reason")
        w = cost_hints.work_per_element
        if isinstance(w, bool) or not isinstance(w, int | float) or not math.isfinite(w) \
                or w <= 0:
            raise OpError(f"op {name}: cost_hints work_per_element must be a positive number")
    return CustomOp(name, prototype, info, compute, schedule, fw, cost_hints)
