"""``autotune.running._trials.set_user_attrs``: a record's user attributes, one read-back.

The journal gets the operations ``Trial.set_user_attr`` writes, one per attribute in
order; the trial (and the ``Trial`` object's own copy) reads back the same.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

optuna = pytest.importorskip("optuna")

from optuna.storages import JournalStorage  # noqa: E402

from autotune.running._journal import BufferedJournalFile  # noqa: E402
from autotune.running._trials import journal_storage, set_user_attrs  # noqa: E402

ATTRS: dict[str, Any] = {"latency_us": 12.5, "status": "ok", "ratio": None, "x": [1, "a"]}


def _run(tmp_path: Path, cheap: bool) -> tuple[list[dict[str, Any]], list[Any], int]:
    journal = BufferedJournalFile(str(tmp_path / f"{cheap}.journal"))
    storage = journal_storage(journal) if cheap else JournalStorage(journal)  # type: ignore[arg-type]
    study = optuna.create_study(storage=storage, study_name="s")
    trial = study.ask()
    other = study.ask()  # a trial set by its id (the driver's placeholder of a claim)
    syncs = 0
    if cheap:
        assert hasattr(storage, "set_trial_user_attrs")
        real = storage._sync_with_backend

        def counted() -> None:
            nonlocal syncs
            syncs += 1
            real()

        storage._sync_with_backend = counted
        set_user_attrs(trial, ATTRS)
        set_user_attrs(None, {"b": 2, "a": 1}, storage, other._trial_id)
        storage._sync_with_backend = real
    else:
        for key, value in ATTRS.items():
            trial.set_user_attr(key, value)
        for key, value in {"b": 2, "a": 1}.items():
            storage.set_trial_user_attr(other._trial_id, key, value)
    assert trial.user_attrs == ATTRS  # the Trial's own copy too
    study.tell(trial, 1.0)
    ops = [{k: v for k, v in op.items() if k not in ("worker_id", "datetime_start",
                                                    "datetime_complete")}
           for op in journal.read_logs(0)]
    trials = [(t.number, t.state, t.value, t.user_attrs)
              for t in optuna.load_study(storage=storage, study_name="s").get_trials()]
    journal.close()
    return ops, trials, syncs


def test_the_attributes_write_what_set_user_attr_does_with_one_read_back(
        tmp_path: Path) -> None:
    want_ops, want_trials, _ = _run(tmp_path, cheap=False)
    got_ops, got_trials, syncs = _run(tmp_path, cheap=True)
    assert got_ops == want_ops and len(want_ops) == 1 + 2 + len(ATTRS) + 2 + 1
    assert got_trials == want_trials
    assert list(want_trials[0][3]) == list(ATTRS) and want_trials[1][3] == {"b": 2, "a": 1}
    assert syncs == 2  # once per call


def test_another_storage_sets_them_one_by_one(tmp_path: Path) -> None:
    journal = BufferedJournalFile(str(tmp_path / "plain.journal"))
    study = optuna.create_study(storage=JournalStorage(journal), study_name="s")  # type: ignore[arg-type]
    trial = study.ask()
    set_user_attrs(trial, ATTRS)
    assert trial.user_attrs == ATTRS
    assert study.trials[0].user_attrs == ATTRS
    journal.close()
