"""ONNX import, the Graph view, targets, graph schedules, compile and the model zoo."""

from compiler.errors import (
    CapacityError,
    CompileError,
    GraphtuneError,
    LogError,
    ModelError,
    ScheduleError,
    TargetError,
)

__all__ = [
    "CapacityError",
    "CompileError",
    "GraphtuneError",
    "LogError",
    "ModelError",
    "ScheduleError",
    "TargetError",
]
