"""What building a model needs of it: the type :mod:`compiler._build` compiles.

A protocol, so that ``_build`` need not import :mod:`compiler.model` (whose
``Model.compile`` calls ``_build``): ``compiler.model.Model`` satisfies it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from compiler.graph import Graph

__all__ = ["ModelLike"]


class ModelLike(Protocol):
    """A model to build: ``compiler.model.Model``."""

    name: str
    path: str | None
    data_inputs: list[str]

    @property
    def batch(self) -> int: ...

    @property
    def mod(self) -> Any: ...

    @property
    def graph(self) -> Graph: ...

    def set_batch(self, batch: int) -> None: ...

    def get_output_info(self) -> dict[str, dict[str, Any]]: ...

