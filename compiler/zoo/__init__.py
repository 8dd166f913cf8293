"""The model zoo: ONNX models built locally with ``onnx.helper`` (no downloads).

Every model is opset 17, float32, with fixed shapes and the batch in dim 0 of
every data input and output; the same arguments give byte-identical bytes.
Weights are seeded random values, zeros, or graph inputs that
:func:`materialize_weights` fills with exactly the random values.

Example:
    >>> from compiler import zoo
    >>> [e.name for e in zoo.list_models()][:3]
    ['bert_base', 'bert_large', 'deepfm']
    >>> m = zoo.build("resnet50", batch=16, weights="inputs")   # < 1 MB
    >>> feeds = {**zoo.random_inputs(m), **zoo.materialize_weights(m)}
"""

from compiler.zoo._registry import (
    WEIGHT_INPUTS_KEY,
    ZOO_KEY,
    ZooEntry,
    build,
    data_input_names,
    list_models,
    materialize_weights,
    random_inputs,
    weight_input_names,
)

__all__ = [
    "WEIGHT_INPUTS_KEY",
    "ZOO_KEY",
    "ZooEntry",
    "build",
    "data_input_names",
    "list_models",
    "materialize_weights",
    "random_inputs",
    "weight_input_names",
]
