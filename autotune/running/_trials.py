"""``journal_storage``: Optuna's ``JournalStorage`` whose trials with parameters are created cheaply.

The guided sampler creates each trial with all its parameters in one storage call
(``GuidedSampler.ask_queued``: ``create_new_trial`` with a template trial). Optuna's
journal then writes every parameter's distribution as JSON and its value's index in the
choices (``CategoricalDistribution.to_internal_repr``, a ``tuple.index``), one Python call
each: on BERT-base s128 b8 (~226 parameters a trial) about half of the call's CPU on the
driver's thread (issue 20: the driver's CPU per measurement). The storage made here writes
the same operation (the same keys, values and order: ``tests/autotune/test_trials.py``
compares the journal's operations and the trials read back) from what it keeps per study
and parameter name (:class:`_Known`: the distribution object, its JSON, a dict of its
choices' indices), with C-level maps over the trial's names: a trial's parameters are a
different subset of the space's on most trials (85 sets in 115 BERT-base trials), so
nothing is kept per set. Anything it cannot write the same way (a value not found by a
lookup, such as a NaN that is not the choice's own object; another kind of distribution),
and a template-less call, goes to Optuna's own ``create_new_trial``. On the tune's private
journal the created trial is not read back either: Optuna's replay makes it without the
two per-parameter maps (distributions from JSON, values from indices), set from the same
memo (:func:`_write_created`); a stock ``JournalStorage`` reads the same file the same way.

:class:`LineEncoder` makes the journal file's lines (``BufferedJournalFile._append``).
:func:`set_user_attrs` sets a trial's user attributes with one read-back.

If Optuna's internals this relies on are not there, :func:`journal_storage` is a plain
``JournalStorage``.
"""

from __future__ import annotations

import functools
import operator
from datetime import UTC
from typing import Any

__all__ = ["journal_storage", "set_user_attrs"]


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

        _memo: dict[int, _Known] | None = None  # by study

        def create_new_trial(self, study_id: int, template_trial: Any = None) -> int:
            if template_trial is None or template_trial.datetime_start is None:
                return super().create_new_trial(study_id, template_trial)
            from optuna.storages.journal import _storage

            with self._thread_lock:  # the memo read and replayed under one lock
                written = _written(self, study_id, template_trial)
                if written is not None:
                    return self._create_written(study_id, template_trial, written, _storage)
            return super().create_new_trial(study_id, template_trial)

        def _create_written(self, study_id: int, t: Any, written: Any, _storage: Any) -> int:
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
            _write_created(self, log)
            trial_id: int = self._replay_result._last_created_trial_id_by_this_process
            if (isinstance(self._backend, _storage.BaseJournalSnapshot) and trial_id != 0
                    and trial_id % _storage.SNAPSHOT_INTERVAL == 0):
                import pickle

                self._backend.save_snapshot(pickle.dumps(self._replay_result))
            return trial_id

        def set_trial_user_attrs(self, trial_id: int, attrs: dict[str, Any]) -> None:
            """``set_trial_user_attr`` of each of ``attrs`` in order (the same operations),
            read back once (:func:`set_user_attrs`)."""
            from optuna.storages.journal import _storage

            with self._thread_lock:
                for key, value in attrs.items():
                    self._write_log(_storage.JournalOperation.SET_TRIAL_USER_ATTR,
                                    {"trial_id": trial_id, "user_attr": {key: value}})
                self._sync_with_backend()

    return CheapTrials


def set_user_attrs(trial: Any, attrs: dict[str, Any], storage: Any = None,
                   trial_id: int | None = None) -> None:
    """``trial.set_user_attr(key, value)`` for each of ``attrs`` (``trial`` None: on
    ``storage``'s trial ``trial_id``). On this module's storage the operations are written
    as Optuna writes them, one each, but read back once: every read-back cost the driver's
    thread a journal read, a replay and the trial's copy (~0.01 ms; a measurement's record
    sets four, issue 20)."""
    if trial is not None:
        storage, trial_id = trial.storage, trial._trial_id
    many = getattr(storage, "set_trial_user_attrs", None)
    if many is None or (trial is not None and not hasattr(trial, "_cached_frozen_trial")):
        for key, value in attrs.items():
            if trial is not None:
                trial.set_user_attr(key, value)
            else:
                storage.set_trial_user_attr(trial_id, key, value)
        return
    many(trial_id, attrs)
    if trial is not None:  # what Trial.set_user_attr keeps of it
        trial._cached_frozen_trial.user_attrs.update(attrs)


class _Known:
    """What was written of a study's distributions, by parameter name: the distribution
    object (compared by identity), its JSON and its choices' indices (the first of equal
    choices, as ``tuple.index`` finds it; None: not a categorical of hashable choices).

    A trial's parameters are a different subset of the space's on most trials (a
    schedule's parameters depend on its choices), so this is kept per name, and a trial
    is written with C-level maps over its names, not a Python loop over them.
    """

    def __init__(self) -> None:
        self.dist: dict[str, Any] = {}
        self.json: dict[str, str] = {}
        self.index: dict[str, dict[Any, int] | None] = {}
        # what Optuna's replay of the JSON makes (``json_to_distribution``), and its choices
        self.read: dict[str, Any] = {}
        self.choices: dict[str, tuple[Any, ...]] = {}

    def learn(self, dists: dict[str, Any]) -> None:
        # Optuna's own conversion, not the journal module's memo of it (_journal._register):
        # each (name, object) is converted once here, so the memo would only keep a copy
        from optuna.distributions import CategoricalDistribution, distribution_to_json
        from optuna.storages.journal import _storage

        if len(self.dist) > 65536:
            self.__init__()  # type: ignore[misc]
        for k, d in dists.items():
            if self.dist.get(k) is d:
                continue
            first: dict[Any, int] | None = {}
            try:
                if type(d) is not CategoricalDistribution:
                    raise TypeError
                for i, c in enumerate(d.choices):
                    first.setdefault(c, i)  # type: ignore[union-attr]
            except TypeError:  # another kind of distribution, or an unhashable choice
                first = None
            self.dist[k], self.json[k], self.index[k] = d, distribution_to_json(d), first
            if first is not None:
                self.read[k] = r = _storage.json_to_distribution(self.json[k])
                self.choices[k] = r.choices

    def replayed(self, params: dict[str, int]) -> tuple[dict[str, Any], dict[str, Any]]:
        """The distributions and parameters Optuna's replay reads from a created trial's
        operation (``json_to_distribution`` of each JSON, ``to_external_repr`` of each
        index: the choice at it), for ``params`` as :meth:`written` made them."""
        names = list(params)
        return (dict(zip(names, map(self.read.__getitem__, names))),
                dict(zip(names, map(operator.getitem, map(self.choices.__getitem__, names),
                                    params.values()))))

    def written(self, t: Any) -> tuple[dict[str, str], dict[str, int]] | None:
        """The template's distributions and parameters as Optuna writes them (None: a value
        to leave to Optuna: not found by lookup, such as a NaN not the choice's object)."""
        dists = t.distributions
        names = list(dists)
        # by identity, in C (list == falls back to value equality: (False, True) == (0, 1))
        if not all(map(operator.is_, map(self.dist.get, names), dists.values())):
            self.learn(dists)
        if list(t.params) != names:
            return None
        try:
            get: Any = dict.__getitem__  # on None (no index) a TypeError, as wanted
            params = dict(zip(names, map(get, map(self.index.__getitem__, names),
                                         t.params.values())))
        except (KeyError, TypeError):  # not found, unhashable, or no index (None)
            return None
        return dict(zip(names, map(self.json.__getitem__, names))), params


def _write_created(storage: Any, log: dict[str, Any]) -> None:
    """Write a created trial's operation (``log``, as Optuna's ``create_new_trial`` makes
    it; its distributions and parameters from :meth:`_Known.written`) and read it into the
    storage's replay, under the storage's lock.

    Optuna reads its own operation back from the backend and replays it: every
    parameter's distribution from its JSON and its value from its index, a Python call
    each (~226 a BERT-base trial). On the tune's private journal
    (:class:`autotune.running._journal.BufferedJournalFile`, one writer: its
    ``op_count`` is the replay's count before the write and one more after) the trial is
    replayed by Optuna's own ``_apply_create_trial`` without the two maps, which are then
    set from what :class:`_Known` kept (:meth:`_Known.replayed`: C-level maps). The
    operation written is the same; anything else: Optuna's read-back.
    """
    from optuna.storages.journal import _storage

    replay = storage._replay_result
    count = getattr(storage._backend, "op_count", None)
    if count is not None and count() != replay.log_number_read:
        storage._sync_with_backend()  # (none unread on a private journal)
    storage._write_log(_storage.JournalOperation.CREATE_TRIAL, log)
    if (count is None or count() != replay.log_number_read + 1
            or not hasattr(replay, "_apply_create_trial")):
        storage._sync_with_backend()
        return
    op = {"op_code": _storage.JournalOperation.CREATE_TRIAL, "worker_id": replay.worker_id,
          **log}
    del op["distributions"], op["params"]
    trial_id = len(replay._trials)
    replay.log_number_read += 1
    replay._apply_create_trial(op)  # raises KeyError (no such study) as Optuna's read-back
    trial = replay._trials[trial_id]
    trial._distributions, trial._params = storage._memo[log["study_id"]].replayed(log["params"])


def _written(storage: Any, study_id: int, t: Any) -> tuple[dict[str, str], dict[str, int]] | None:
    """The template's distributions and parameters as Optuna writes them, from what the
    storage knows of the study's distributions; None: Optuna's call does it."""
    memo = storage._memo
    if memo is None:
        memo = storage._memo = {}
    known = memo.get(study_id)
    if known is None:
        known = memo[study_id] = _Known()
    return known.written(t)


class LineEncoder:
    """An operation as the journal file's line: ``json.dumps(op, separators=(",", ":"))``,
    byte for byte (Optuna's ``JournalFileBackend.append_logs``), with a created trial's
    distributions (a few hundred ``"name":"{...JSON...}"`` pairs on a large model, the
    same on every trial of a task) joined from pieces kept per name: on BERT-base's 226
    parameters ~0.08 against ~0.19 ms of the journal writer's thread per trial."""

    _FROM = 8  # fewer distributions than this: json.dumps

    def __init__(self) -> None:
        import json

        self._dumps = json.JSONEncoder(separators=(",", ":")).encode
        self._text: dict[str, str] = {}  # name -> its distribution's JSON (a str)
        self._piece: dict[str, str] = {}  # name -> '"name":"...escaped JSON..."'

    def __call__(self, op: dict[str, Any]) -> str:
        dumps = self._dumps
        d = op.get("distributions")
        if (type(d) is not dict or len(d) < self._FROM
                or not all(type(k) is str for k in op)):
            return dumps(op)
        # the same str objects on every trial (the memo): list == compares identity first
        if list(map(self._text.get, d)) != list(d.values()):
            if not all(type(k) is str and type(v) is str for k, v in d.items()):
                return dumps(op)
            if len(self._text) > 65536:
                self._text.clear()
                self._piece.clear()
            for k, v in d.items():
                if self._text.get(k) != v:
                    self._text[k] = v
                    self._piece[k] = f"{dumps(k)}:{dumps(v)}"
        parts = [f'"distributions":{{{",".join(map(self._piece.__getitem__, d))}}}'
                 if k == "distributions" else f"{dumps(k)}:{dumps(v)}" for k, v in op.items()]
        return "{" + ",".join(parts) + "}"
