"""Tensor sizes in the target's compute data type (defined beside the capacity model)."""

from compiler.capacity import in_compute_dtype

__all__ = ["in_compute_dtype"]
