"""The error hierarchy shared by every graphtune package.

Every user mistake raises a subclass of :class:`GraphtuneError` whose message is
one line that names the problem and says what to do. The CLI prints that line
and exits with status 2; nothing else is a user error.
"""

from __future__ import annotations


class GraphtuneError(Exception):
    """Root of graphtune's user-facing errors (message: one line, actionable)."""


class ModelError(GraphtuneError):
    """The model file is missing, not ONNX, truncated, or uses an unsupported op."""


class TargetError(GraphtuneError):
    """The hardware description file is malformed or physically impossible."""


class ScheduleError(GraphtuneError):
    """A graph schedule is malformed or does not match the model it is applied to."""


class CapacityError(ScheduleError):
    """A schedule's memory plan does not fit the target's L1 or LLB."""


class CompileError(GraphtuneError):
    """Building or loading a compiled artifact failed."""


class OutputError(GraphtuneError):
    """An output path cannot take the output: a directory, a device, an input, unwritable."""


# ``logs.LogError`` (a GraphtuneError too) lives with the logs package.
