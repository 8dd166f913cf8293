"""Tuning tasks: one per distinct NPU sub-function of the models being tuned.

A task is one NPU sub-function of a model at its batch, keyed by its workload
key (``Graph.workload_key``). A model whose ops all run on the NPU is one task
whose graph is the model's own graph, so ``graphtune compile --log`` finds its
record under the model's key. Identical sub-functions (the same key) in one or
several models share one task, weighted by how often they occur.

Example:
    >>> tasks = extract_tasks([("resnet50", g1), ("bert_base", g2)])
    >>> [(t.name, t.weight) for t in tasks]
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from compiler.errors import GraphtuneError

if TYPE_CHECKING:
    from compiler.graph import Graph

__all__ = ["Task", "TaskUse", "extract_tasks"]


@dataclass(frozen=True)
class TaskUse:
    """Where a task occurs: ``count`` times in model ``model`` (sub-function ``part``)."""

    model: str
    count: int
    parts: tuple[int, ...]


@dataclass(frozen=True)
class Task:
    """One workload to tune.

    Attributes:
        key: The workload key (the log and ``ApplyHistoryBest`` look records up by it).
        graph: The sub-function's graph at its batch (the model's graph when the
            whole model runs on the NPU).
        name: For people: the model's name, or ``model[first:last]`` for a part.
        uses: Each model it occurs in, and how often.
    """

    key: str
    graph: Graph
    name: str
    uses: tuple[TaskUse, ...]

    @property
    def weight(self) -> int:
        """How many times the task runs in one inference of all the models together."""
        return sum(u.count for u in self.uses)

    @property
    def batch(self) -> int:
        """The batch the task is tuned at."""
        return self.graph.batch

    def count_in(self, model: str) -> int:
        """How many times the task runs in one inference of ``model``."""
        return sum(u.count for u in self.uses if u.model == model)


def model_parts(graph: Graph) -> list[Graph]:
    """The NPU sub-functions of a model as graphs (the model's graph when it is one).

    Raises:
        GraphtuneError: the model has no op that runs on the NPU.
    """
    runs = graph.npu_subfunctions()
    if not runs:
        raise GraphtuneError(f"{graph.name}: no op runs on the NPU, there is nothing to tune")
    if len(runs) == 1 and len(runs[0]) == len(graph.ops):
        return [graph]
    return [graph.subgraph(ops, name=f"{graph.name}[{ops[0]}:{ops[-1]}]") for ops in runs]


def extract_tasks(models: Iterable[tuple[str, Graph]]) -> list[Task]:
    """The tasks of some models, in order of first appearance.

    Args:
        models: ``(name, graph)`` pairs; each graph at the batch to tune.

    Returns:
        One :class:`Task` per distinct workload key.

    Raises:
        GraphtuneError: two models share a name, or a model has no NPU op.
    """
    graphs: dict[str, Graph] = {}
    names: dict[str, str] = {}
    uses: dict[str, dict[str, list[int]]] = {}
    seen_models: set[str] = set()
    for model, graph in models:
        if model in seen_models:
            raise GraphtuneError(f"two models are named {model!r}: give each a distinct name")
        seen_models.add(model)
        for part, g in enumerate(model_parts(graph)):
            key = g.workload_key
            graphs.setdefault(key, g)
            names.setdefault(key, g.name if g is not graph else model)
            uses.setdefault(key, {}).setdefault(model, []).append(part)
    return [
        Task(key, graphs[key], names[key],
             tuple(TaskUse(m, len(parts), tuple(parts)) for m, parts in uses[key].items()))
        for key in graphs
    ]


def model_names(tasks: Sequence[Task]) -> list[str]:
    """The models the tasks come from, in order of first appearance."""
    out: dict[str, None] = {}
    for t in tasks:
        for u in t.uses:
            out.setdefault(u.model, None)
    return list(out)
