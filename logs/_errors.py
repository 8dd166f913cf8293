"""The error ``logs`` raises: one line that names the problem and what to do."""

from __future__ import annotations

from compiler.errors import GraphtuneError

__all__ = ["LogError"]


class LogError(GraphtuneError):
    """A tuning-record file cannot be used (newer schema, unreadable, wrong kind)."""
