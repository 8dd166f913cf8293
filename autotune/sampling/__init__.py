"""Proposing candidates: Optuna studies, samplers, the guided sampler, breeding, rankers.

Owns: :mod:`._studies` (study names, candidate identity, seeds), :mod:`._samplers`
(a sampler by name), :mod:`._guided` (``GuidedSampler``/``GuidedOptions``),
:mod:`._breed` (one breeding round, runnable in a worker), :mod:`._ranker` (the
cost model behind the guided sampler).

May import: ``compiler``, ``search_space``, ``cost_model``; of ``autotune`` nothing.
Optuna is imported only by the modules that need it, never by this ``__init__``.
"""
