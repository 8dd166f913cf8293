"""The error of quantization (its own module: the config and the calibration set both raise it)."""

from compiler.errors import GraphtuneError

__all__ = ["QuantError"]


class QuantError(GraphtuneError):
    """A bad ``quant_config``, a bad calibration set, or quantization that cannot run."""
