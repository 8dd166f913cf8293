"""The sampler of a study by name (``guided``, ``tpe``, ``gp``, ``nsga2``, ``random``).

Apart from :mod:`autotune.sampling._studies` because it builds the guided sampler,
which itself needs the studies' candidate identity.
"""

from __future__ import annotations

import warnings
from typing import TYPE_CHECKING, Any

from autotune.sampling._studies import check_sampler

if TYPE_CHECKING:
    from optuna.samplers import BaseSampler

__all__ = ["make_sampler"]


def make_sampler(name: str, seed: int | None, **guided: Any) -> BaseSampler:
    """A sampler for one study; ``guided`` holds the guided sampler's arguments."""
    import optuna

    check_sampler(name)
    if name == "guided":
        from autotune.sampling._guided import GuidedSampler

        return GuidedSampler(seed=seed, **guided)
    if name == "tpe":
        # group=True models the space's conditional parameters; constant_liar keeps
        # parallel proposals apart while their measurements are in flight.
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
            return optuna.samplers.TPESampler(seed=seed, multivariate=True, group=True,
                                              constant_liar=True)
    if name == "nsga2":
        return optuna.samplers.NSGAIISampler(seed=seed)
    if name == "gp":
        return optuna.samplers.GPSampler(seed=seed)
    return optuna.samplers.RandomSampler(seed=seed)
