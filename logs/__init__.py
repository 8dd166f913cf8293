"""Tuning records."""

__all__: list[str] = []
