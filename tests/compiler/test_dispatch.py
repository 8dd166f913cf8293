"""The compile-time dispatch hook: innermost context first, fallback notifications."""

from __future__ import annotations

from typing import Any

from compiler import dispatch


class Fixed(dispatch.DispatchContext):
    def __init__(self, table: dict[str, dict[str, Any]]) -> None:
        self.table = table
        self.fallbacks: list[tuple[str, str, str]] = []

    def query(self, workload_key: str, target_key: str) -> dict[str, Any] | None:
        return self.table.get(workload_key)

    def on_fallback(self, workload_key: str, target_key: str, fallback: str) -> None:
        self.fallbacks.append((workload_key, target_key, fallback))


def test_innermost_first_and_fall_through() -> None:
    outer = Fixed({"a": {"who": "outer"}, "b": {"who": "outer"}})
    inner = Fixed({"a": {"who": "inner"}})
    assert dispatch.resolve("a", "T", "O3") is None  # no context at all
    with outer, inner:
        assert dispatch.resolve("a", "T", "O3") == {"who": "inner"}
        assert dispatch.resolve("b", "T", "O3") == {"who": "outer"}
        assert dispatch.resolve("c", "T", "O3") is None
    assert inner.fallbacks == outer.fallbacks == [("c", "T", "O3")]
    assert dispatch.active_contexts() == []
