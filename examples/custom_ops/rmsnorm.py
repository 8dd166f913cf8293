"""Worked example 2: ``RMSNorm``, a reduction op: ``y = x * gamma / sqrt(mean(x^2) + eps)``.

A graphtune plug-in: ``graphtune --plugin examples/custom_ops/rmsnorm.py ...``.
The four parts of the vendor's operator framework:

* prototype: ``x`` of rank 2 or 3 (normalised over its last axis) and ``gamma``
  of rank 1 (its length must be ``x``'s last axis: checked by the inference,
  one line naming the op and argument), attribute ``epsilon`` (float in
  ``[0, 1]``, default 1e-6); output like ``x``; samples independent;
* information entry: float16/float32, unit ``vector``;
* implementation: :func:`rmsnorm_compute` (a reduction stage ``ss`` and an
  elementwise stage ``y``) and a hand schedule (:func:`make_schedule`):
  ``split`` the last axis of ``y`` by the vector length and ``vectorize``;
* plug-in: ONNX nodes ``com.example:RMSNorm``.
"""

from __future__ import annotations

from typing import Any

from tvm import te

from compiler.ops import (
    Attr,
    Input,
    OpError,
    OpInfo,
    Output,
    Prototype,
    custom_op,
    register_op,
)

DOMAIN = "com.example"
VECTOR_LENGTH = 64


def rmsnorm_compute(x: te.Tensor, gamma: te.Tensor, epsilon: float = 1e-6) -> te.Tensor:
    """RMSNorm over the last axis of ``x``."""
    n = x.shape[-1]
    k = te.reduce_axis((0, n), "k")
    ss = te.compute(x.shape[:-1], lambda *i: te.sum(x(*i, k) * x(*i, k), axis=k), name="ss")
    return te.compute(
        x.shape,
        lambda *i: x(*i) * gamma(i[-1]) / te.sqrt(ss(*i[:-1]) / n + epsilon),
        name="y",
    )


def make_schedule(vector_length: int = VECTOR_LENGTH) -> Any:
    """The hand schedule: split ``y``'s last axis by ``vector_length``, vectorise the inner part."""

    def schedule(sch: Any) -> None:
        block = sch.get_sblock("y")
        *_, last = sch.get_loops(block)
        _, inner = sch.split(last, [None, vector_length])
        sch.vectorize(inner)

    return schedule


def infer(shapes: list[tuple[int, ...]], dtypes: list[str], attrs: dict[str, Any]
          ) -> tuple[tuple[int, ...], str]:
    """Output like ``x``; ``gamma`` must have ``x``'s last axis."""
    x, gamma = shapes
    if gamma[0] != x[-1]:
        raise OpError(f"op RMSNorm: input 'gamma' has length {gamma[0]}, "
                      f"input 'x' has {x[-1]} features")
    return x, dtypes[0]


def register(name: str = "RMSNorm", vector_length: int = VECTOR_LENGTH) -> None:
    """Register the op as ``name`` (ONNX ``com.example:<name>``)."""
    register_op(
        name,
        Prototype(
            (Input("x", rank=(2, 3)), Input("gamma", rank=(1,))),
            Output("y"),
            infer,
            attrs=(Attr("epsilon", "float", 1e-6, (0.0, 1.0)),),
            batch_free=True,
            example=((2, 128), (128,)),
        ),
        OpInfo(dtypes=("float16", "float32"), unit="vector"),
        rmsnorm_compute,
        make_schedule(vector_length),
        framework={"onnx": (DOMAIN, name)},
    )


if custom_op("RMSNorm") is None:  # imported as a plug-in: register once
    register()
