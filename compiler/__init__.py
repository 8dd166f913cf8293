"""ONNX import, the Graph view, targets, graph schedules, compile and the model zoo.

Importing this package imports nothing heavy: the public names below load their
modules on first use (PEP 562), so ``import compiler.errors`` or
``from compiler import Target`` never pulls in TVM, ONNX or the rest.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from compiler.derive import group_io
    from compiler.errors import (
        CapacityError,
        CompileError,
        GraphtuneError,
        ModelError,
        OutputError,
        ScheduleError,
        TargetError,
    )
    from compiler.executor import Executor
    from compiler.graph import Graph, Op, OpIndex, Tensor
    from compiler.model import Model, from_onnx, load_onnx
    from compiler.schedule import (
        SCHEMA_VERSION,
        GraphSchedule,
        GroupSpec,
        NPUMemScope,
        Placement,
        Step,
        Transfer,
        make_schedule,
    )
    from compiler.target import Target
    from compiler.torch_import import TorchModel, load_pt2, load_torch

_WHERE = {
    "CapacityError": "errors", "CompileError": "errors", "GraphtuneError": "errors",
    "ModelError": "errors", "OutputError": "errors", "ScheduleError": "errors", "TargetError": "errors",
    "Executor": "executor",
    "Graph": "graph", "Op": "graph", "OpIndex": "graph", "Tensor": "graph",
    "Model": "model", "from_onnx": "model", "load_onnx": "model",
    "group_io": "derive", "make_schedule": "schedule",
    "SCHEMA_VERSION": "schedule", "GraphSchedule": "schedule", "GroupSpec": "schedule",
    "NPUMemScope": "schedule", "Placement": "schedule", "Step": "schedule",
    "Transfer": "schedule",
    "Target": "target",
    "TorchModel": "torch_import", "load_pt2": "torch_import", "load_torch": "torch_import",
}

__all__ = [
    "SCHEMA_VERSION",
    "CapacityError",
    "CompileError",
    "Executor",
    "Graph",
    "GraphSchedule",
    "GraphtuneError",
    "GroupSpec",
    "Model",
    "ModelError",
    "NPUMemScope",
    "Op",
    "OpIndex",
    "OutputError",
    "Placement",
    "ScheduleError",
    "Step",
    "Target",
    "TargetError",
    "Tensor",
    "TorchModel",
    "Transfer",
    "from_onnx",
    "group_io",
    "load_onnx",
    "load_pt2",
    "load_torch",
    "make_schedule",
]


def __getattr__(name: str) -> Any:
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f"module 'compiler' has no attribute {name!r}")
    value = getattr(importlib.import_module(f"compiler.{module}"), name)
    globals()[name] = value
    return value
