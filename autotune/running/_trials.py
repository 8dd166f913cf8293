"""``journal_storage``: Optuna's ``JournalStorage`` whose trials with parameters are created cheaply.

The guided sampler creates each trial with all its parameters in one storage call
(``GuidedSampler.ask_queued``: ``create_new_trial`` with a template trial). Optuna's
journal then writes every parameter's distribution as JSON and its value's index in the
choices (``CategoricalDistribution.to_internal_repr``, a ``tuple.index``), one call each:
on BERT-base s128 b8 (226 parameters) ~0.15 of the ~0.23 ms the call took on the driver's
thread, per measurement (issue 20: the driver's CPU). The storage made here writes the same
operation (the same keys, values and order: ``tests/autotune/test_trials.py`` compares the
journal's operations and the trials read back) from what it remembers: the distributions'
JSON while the template names the same distribution objects in the same order as the
last one (the driver passes one dict of them per task: ``Driver._distributions``), and an
index of each distribution's choices (a dict lookup instead of a scan). Anything else, and
a template-less call, goes to Optuna's own ``create_new_trial``.

If Optuna's internals this relies on are not there, :func:`journal_storage` is a plain
``JournalStorage``.
"""

from __future__ import annotations

import functools
from datetime import UTC
from typing import Any

__all__ = ["journal_storage"]


def journal_storage(backend: Any) -> Any:
    """``optuna.storages.JournalStorage(backend)``, with the cheap trial creation (see the
    module doc) when this Optuna has what it needs."""
    from optuna.storages import JournalStorage
    from optuna.storages.journal import _storage

    storage = JournalStorage(backend)
    needs = ("_thread_lock", "_write_log", "_sync_with_backend", "_replay_result")
    if (all(hasattr(storage, n) for n in needs)
            and hasattr(_storage, "JournalOperation") and hasattr(_storage, "SNAPSHOT_INTERVAL")):
        storage.__class__ = _cheap_trials()
    return storage


@functools.cache
def _cheap_trials() -> type:
    from optuna.storages import JournalStorage

    class CheapTrials(JournalStorage):  # type: ignore[misc]
        """A ``JournalStorage`` whose templated trials are written from memo (module doc)."""

        _memo: _Set | None = None

        def create_new_trial(self, study_id: int, template_trial: Any = None) -> int:
            if template_trial is None or template_trial.datetime_start is None:
                return super().create_new_trial(study_id, template_trial)
            written = _written(self, template_trial)
            if written is None:
                return super().create_new_trial(study_id, template_trial)
            from optuna.storages.journal import _storage

            t = template_trial
            log: dict[str, Any] = {"study_id": study_id,
                                   "datetime_start": None, "state": t.state}
            if t.values is not None and len(t.values) > 1:
                log["value"] = None
                log["values"] = t.values
            else:
                log["value"] = t.value
                log["values"] = None
            log["datetime_start"] = t.datetime_start.astimezone(UTC).isoformat(
                timespec="microseconds")
            if t.datetime_complete:
                log["datetime_complete"] = t.datetime_complete.astimezone(
                    UTC).isoformat(timespec="microseconds")
            log["distributions"], log["params"] = written
            log["user_attrs"] = t.user_attrs
            log["system_attrs"] = t.system_attrs
            log["intermediate_values"] = t.intermediate_values
            with self._thread_lock:
                self._write_log(_storage.JournalOperation.CREATE_TRIAL, log)
                self._sync_with_backend()
                trial_id: int = self._replay_result._last_created_trial_id_by_this_process
                if (isinstance(self._backend, _storage.BaseJournalSnapshot) and trial_id != 0
                        and trial_id % _storage.SNAPSHOT_INTERVAL == 0):
                    import pickle

                    self._backend.save_snapshot(pickle.dumps(self._replay_result))
            return trial_id

    return CheapTrials


class _Set:
    """What is written of one set of distributions (names and objects, in order): their JSON
    and, per distribution, its choices' indices (the first of equal choices, as
    ``tuple.index`` finds it)."""

    def __init__(self, dists: dict[str, Any]) -> None:
        from optuna.distributions import CategoricalDistribution
        from optuna.storages.journal import _storage

        self.names = list(dists)
        self.objs = list(dists.values())  # keeps them alive: compared by identity
        self.jsons = {k: _storage.distribution_to_json(d) for k, d in dists.items()}
        self.maps: list[dict[Any, int]] | None = []
        for d in self.objs:
            first: dict[Any, int] = {}
            try:
                if type(d) is not CategoricalDistribution:
                    raise TypeError
                for i, c in enumerate(d.choices):
                    first.setdefault(c, i)
            except TypeError:  # another kind of distribution, or an unhashable choice
                self.maps = None
                break
            self.maps.append(first)

    def same(self, dists: dict[str, Any]) -> bool:
        # list == compares by identity first, in C: the same objects are equal at once
        return len(dists) == len(self.names) and list(dists.values()) == self.objs and (
            list(dists) == self.names)

    def internal(self, params: dict[str, Any]) -> dict[str, int] | None:
        """``{name: to_internal_repr(value)}`` (None: a value to leave to Optuna: not a
        choice found by lookup, such as a NaN that is not the choice's own object)."""
        if self.maps is None or list(params) != self.names:
            return None
        try:
            return dict(zip(self.names, map(dict.__getitem__, self.maps, params.values())))
        except (KeyError, TypeError):
            return None


def _written(storage: Any, t: Any) -> tuple[dict[str, str], dict[str, int]] | None:
    """The template's distributions and parameters as Optuna writes them, from the memo of
    its distribution set (made again when the set changes); None: Optuna's call does it."""
    held = storage._memo
    if held is None or not held.same(t.distributions):
        held = storage._memo = _Set(t.distributions)
    params = held.internal(t.params)
    return None if params is None else (held.jsons, params)
