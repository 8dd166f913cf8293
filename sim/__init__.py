"""STCP920 simulator."""

__all__: list[str] = []
