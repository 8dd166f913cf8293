"""Worked example 1: ``Swish`` (SiLU, ``x * sigmoid(x)``), a fused activation on the vector unit.

A graphtune plug-in: ``graphtune --plugin examples/custom_ops/swish.py ...``
registers the op when the module is imported. The four parts of the vendor's
operator framework:

* prototype: one input ``x`` of any rank, the output has its shape and dtype,
  samples are independent (``batch_free``: a group holding it may be split
  along the batch);
* information entry: float16/float32, unit ``special`` (the sigmoid runs at the
  transcendental rate of the vector unit), every memory scope;
* implementation: :func:`swish_compute` in TVM's tensor expressions and a hand
  schedule (:func:`make_schedule`): fuse every loop, ``split`` by the vector
  length, ``vectorize`` the inner part;
* plug-in: ONNX nodes ``com.example:Swish`` map onto it, and it claims the
  standard chain ``Mul(x, Sigmoid(x))`` (how PyTorch and the zoo's
  EfficientNet-B0 export SiLU), which it replaces at import.
"""

from __future__ import annotations

from typing import Any

from tvm import te

from compiler.ops import Input, OpInfo, Output, Prototype, custom_op, register_op, register_pattern

DOMAIN = "com.example"
VECTOR_LENGTH = 64  # one 64-lane vector instruction per inner loop: no lane padding


def swish_compute(x: te.Tensor) -> te.Tensor:
    """``y = x * sigmoid(x)``, elementwise."""
    return te.compute(x.shape, lambda *i: x(*i) * te.sigmoid(x(*i)), name="swish")


def make_schedule(vector_length: int = VECTOR_LENGTH) -> Any:
    """The hand schedule: fuse all loops, split by ``vector_length``, vectorise the inner loop."""

    def schedule(sch: Any) -> None:
        block = sch.get_sblock("swish")
        fused = sch.fuse(*sch.get_loops(block))
        _, inner = sch.split(fused, [None, vector_length])
        sch.vectorize(inner)

    return schedule


def _same(shapes: list[tuple[int, ...]], dtypes: list[str], attrs: dict[str, Any]
          ) -> tuple[tuple[int, ...], str]:
    return shapes[0], dtypes[0]


def register(name: str = "Swish", vector_length: int = VECTOR_LENGTH,
             pattern: bool = True) -> None:
    """Register the op as ``name`` (ONNX ``com.example:<name>``), and claim ``Mul(x, Sigmoid(x))``."""
    register_op(
        name,
        Prototype((Input("x"),), Output("y"), _same, batch_free=True, example=((2, 8, 4, 4),)),
        OpInfo(dtypes=("float16", "float32"), unit="special"),
        swish_compute,
        make_schedule(vector_length),
        framework={"onnx": (DOMAIN, name)},
    )
    if pattern:
        register_pattern(name, ("Mul", "x", ("Sigmoid", "x")))


if custom_op("Swish") is None:  # imported as a plug-in: register once
    register()
