"""ONNX import, the Graph view, targets, graph schedules, compile and the model zoo.

Importing this package does not import TVM or ONNX; those load on first use.
"""

from compiler.errors import (
    CapacityError,
    CompileError,
    GraphtuneError,
    LogError,
    ModelError,
    OutputError,
    ScheduleError,
    TargetError,
)
from compiler.executor import Executor
from compiler.graph import Graph, Op, OpIndex, Tensor
from compiler.model import Model, from_onnx, load_onnx
from compiler.plan import group_io, make_schedule
from compiler.schedule import (
    SCHEMA_VERSION,
    GraphSchedule,
    Group,
    NPUMemScope,
    Placement,
    Step,
    Transfer,
)
from compiler.target import Target

__all__ = [
    "SCHEMA_VERSION",
    "CapacityError",
    "CompileError",
    "Executor",
    "Graph",
    "GraphSchedule",
    "GraphtuneError",
    "Group",
    "LogError",
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
    "Transfer",
    "from_onnx",
    "group_io",
    "load_onnx",
    "make_schedule",
]
