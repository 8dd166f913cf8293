"""``autotune.running._trials.journal_storage``: trials created with their parameters write
what Optuna's ``JournalStorage.create_new_trial`` writes, and read back the same.

Two journals side by side, the same template trials into each: one through Optuna's own
``JournalStorage``, one through the storage a tune opens; their operations (but the
writer's random id) and the trials read back must be equal, whichever way a template
leaves the memo (the same distributions, a subset, another order, a value Optuna finds the
long way, a distribution that is not categorical).
"""

from __future__ import annotations

import datetime
import math
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

optuna = pytest.importorskip("optuna")

from optuna.distributions import CategoricalDistribution, FloatDistribution  # noqa: E402
from optuna.trial import FrozenTrial, TrialState  # noqa: E402

from autotune.running._journal import BufferedJournalFile, _register  # noqa: E402
from autotune.running._trials import journal_storage  # noqa: E402

NAN = float("nan")
DISTS: dict[str, Any] = {
    "a": CategoricalDistribution((0, 1, 2, 3)),
    "b": CategoricalDistribution(("x", "y", None)),
    "c": CategoricalDistribution((True, 1, 2.0)),  # 1 finds True's index, as tuple.index does
    "d": CategoricalDistribution((False, True)),
    "e": CategoricalDistribution((1.5, NAN, 3)),
    # enough parameters for the journal line's joined pieces (LineEncoder._FROM: 8 or more)
    **{f"g{i}": CategoricalDistribution(tuple(range(i + 2))) for i in range(6)},
}
G = {f"g{i}": i % (i + 2) for i in range(6)}


def _template(params: dict[str, Any], dists: dict[str, Any], **kw: Any) -> FrozenTrial:
    return FrozenTrial(number=0, state=kw.get("state", TrialState.RUNNING),
                       value=kw.get("value"),
                       datetime_start=datetime.datetime(2026, 11, 28, 11, 0, 0, 123456),
                       datetime_complete=kw.get("complete"), params=params,
                       distributions=dists, user_attrs=kw.get("user_attrs", {"cid": "c1"}),
                       system_attrs={}, intermediate_values={}, trial_id=0)


def _templates() -> list[FrozenTrial]:
    full = dict(DISTS)
    sub = {k: DISTS[k] for k in ("b", "a")}  # a subset, in another order
    other = {**full, "f": FloatDistribution(0.0, 1.0)}  # not categorical: Optuna's call
    return [
        _template({"a": 2, "b": None, "c": 1, "d": True, "e": 3, **G}, full),
        _template({"a": 0, "b": "y", "c": True, "d": False, "e": 1.5, **G}, dict(full)),
        _template({"b": "x", "a": 3}, sub),
        _template({"a": 1, "b": "x", "c": 2.0, "d": True, "e": NAN, **G}, full),  # a NaN
        _template({"a": 1, "b": "x", "c": 2, "d": True, "e": 3.0, **G}, full),  # 2 == 2.0
        _template({"a": 1, "b": "y", "c": True, "d": False, "e": 3, **G, "f": 0.25}, other),
        _template({"a": 3, "b": None, "c": 1, "d": True, "e": 1.5, **G}, full,
                  state=TrialState.COMPLETE, value=2.5,
                  complete=datetime.datetime(2026, 11, 28, 11, 0, 1)),
        _template({"a": 0, "b": "x", "c": True, "d": True, "e": 3, **G}, full, user_attrs={}),
    ]


def _run(tmp_path: Path, name: str, cheap: bool,
         monkeypatch: pytest.MonkeyPatch) -> tuple[list[dict[str, Any]], list[Any], str]:
    from optuna import distributions
    from optuna.storages import JournalStorage
    from optuna.storages.journal import _storage

    _register()
    # Optuna's own conversion on the plain side, not the journal module's memo of it
    # (`_journal._by_identity`, tested with it): the plain side is the reference, so it
    # writes each distribution's own JSON whatever this process's tunes converted before
    monkeypatch.setattr(_storage, "distribution_to_json", distributions.distribution_to_json)
    journal = BufferedJournalFile(str(tmp_path / f"{name}.journal"))
    storage = journal_storage(journal) if cheap else JournalStorage(journal)  # type: ignore[arg-type]
    study = optuna.create_study(storage=storage, study_name="s")
    for t in _templates():
        storage.create_new_trial(study._study_id, template_trial=t)
    storage.create_new_trial(study._study_id)  # no template: Optuna's call either way
    # the writer's random id differs; so does the start of the trial made without a template
    ops = [{k: v for k, v in op.items()
            if k != "worker_id" and (k != "datetime_start" or "state" in op)}
           for op in journal.read_logs(0)]
    trials = [(t.number, t.state, t.value, t.params, t.distributions, t.user_attrs,
               t.datetime_complete)
              for t in optuna.load_study(storage=storage, study_name="s").get_trials()]
    kind = type(storage).__name__
    journal.close()
    return ops, trials, kind


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b):
        return True
    if isinstance(a, dict) and isinstance(b, dict):
        return list(a) == list(b) and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return type(a) is type(b) and len(a) == len(b) and all(map(_same, a, b))
    return bool(type(a) is type(b) and a == b)


def test_the_cheap_trials_write_and_read_what_optuna_does(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    want_ops, want_trials, plain = _run(tmp_path, "optuna", False, monkeypatch)
    got_ops, got_trials, cheap = _run(tmp_path, "cheap", True, monkeypatch)
    assert plain == "JournalStorage" and cheap != plain  # the cheap path was taken
    assert len(got_ops) == len(want_ops) == 10
    for got, want in zip(got_ops, want_ops):
        assert _same(got, want), (got, want)
    assert _same(got_trials, want_trials)


def test_the_tune_storage_is_the_cheap_one(tmp_path: Path) -> None:
    from autotune.running._journal import open_storage

    handle = open_storage(None, str(tmp_path / "t.jsonl"))
    try:
        assert type(handle.storage).__name__ == "CheapTrials"
    finally:
        handle.close()


def _create_op(names: list[str], texts: list[str], **extra: Any) -> dict[str, Any]:
    return {"op_code": 4, "worker_id": "w-1", "study_id": 0, "datetime_start": "2026-11-28",
            "state": TrialState.RUNNING, "value": None, "values": None,
            "distributions": dict(zip(names, texts)),
            "params": {n: i for i, n in enumerate(names)}, **extra}


_TEXT = st.text(st.characters(codec="utf-8"), max_size=12)


@settings(max_examples=60, deadline=None)
@given(names=st.lists(_TEXT, min_size=0, max_size=20, unique=True),
       texts=st.lists(_TEXT, min_size=20, max_size=20),
       extra=st.dictionaries(_TEXT, st.one_of(st.none(), st.integers(), st.floats(),
                                              _TEXT, st.lists(st.integers(), max_size=3)),
                             max_size=3))
def test_a_line_is_optunas_line(names: list[str], texts: list[str],
                                extra: dict[str, Any]) -> None:
    import json

    from autotune.running._trials import LineEncoder

    enc = LineEncoder()
    texts = texts[:len(names)]
    for op in (_create_op(names, texts, **extra), _create_op(names, texts[::-1]),
               {"op_code": 5, "trial_id": 3, "user_attr": extra}):
        for _ in range(2):  # learnt, then from the pieces
            assert enc(op) == json.dumps(op, separators=(",", ":"))


def test_the_journal_file_is_the_one_optuna_writes(tmp_path: Path) -> None:
    """The same operations appended by Optuna's backend and by the tune's journal (its
    lines from :class:`LineEncoder`): the same bytes."""
    from optuna.storages.journal import JournalFileBackend

    names = [f"p{i}" for i in range(30)]
    texts = [f'{{"name":"CategoricalDistribution","attributes":{{"choices":[{i}, "a\\"b"]}}}}'
             for i in range(30)]
    ops = [_create_op(names, texts), _create_op(names[:12], texts[:12]),
           {"op_code": 5, "worker_id": "w", "trial_id": 0, "user_attr": {"k": "é"}},
           _create_op(names, texts[::-1], value=float("nan"))]
    plain = tmp_path / "optuna.journal"
    JournalFileBackend(str(plain)).append_logs(ops)
    ours = BufferedJournalFile(str(tmp_path / "ours.journal"))
    ours.append_logs(ops)
    ours.close()
    assert (tmp_path / "ours.journal").read_bytes() == plain.read_bytes()


def test_equal_distributions_of_other_types_write_their_own_json(tmp_path: Path) -> None:
    """(False, True) == (0, 1) as tuples: the journal's memo of the conversion must not
    answer one with the other's JSON (a by-value cache did: a bool parameter read back as
    an int after a resume)."""
    from optuna.storages.journal import _storage

    from autotune.running._journal import open_storage

    open_storage(None, str(tmp_path / "t.jsonl")).close()  # installs the memo
    ints = _storage.distribution_to_json(CategoricalDistribution((0, 1)))
    bools = _storage.distribution_to_json(CategoricalDistribution((False, True)))
    assert "[0, 1]" in ints and "[false, true]" in bools


def test_a_distribution_equal_to_one_learnt_is_written_as_itself() -> None:
    """(False, True) == (0, 1): a trial whose distribution equals (not is) the one learnt
    for its name is written with its own JSON and index, not the first one's."""
    import datetime

    from autotune.running._trials import _Known

    def trial(d: CategoricalDistribution, p: object) -> FrozenTrial:
        return FrozenTrial(number=0, state=TrialState.RUNNING, value=None,
                           datetime_start=datetime.datetime.now(), datetime_complete=None,
                           params={"a": p}, distributions={"a": d}, user_attrs={},
                           system_attrs={}, intermediate_values={}, trial_id=0)

    known = _Known()
    ints = known.written(trial(CategoricalDistribution((0, 1)), 1))
    bools = known.written(trial(CategoricalDistribution((False, True)), True))
    assert ints is not None and bools is not None
    assert "[0, 1]" in ints[0]["a"] and "[false, true]" in bools[0]["a"]
    assert ints[1] == bools[1] == {"a": 1}


def _ask_like(storage: Any, study: Any, n: int, seed: int) -> None:
    """``n`` templated trials as the guided sampler makes them (a different subset of the
    parameters each time, values equal to but not always the choice objects), each told."""
    import random

    rng = random.Random(seed)
    names = list(DISTS)
    for _ in range(n):
        keep = [k for k in names if rng.random() < 0.8 and k != "e"]
        ds = {k: DISTS[k] for k in keep}
        ps = {k: rng.choice(DISTS[k].choices) for k in keep}
        if "c" in ps and ps["c"] is True and rng.random() < 0.5:
            ps["c"] = 1  # equal to True: Optuna reads back the choice at its index, True
        tid = storage.create_new_trial(study._study_id, template_trial=_template(ps, ds))
        storage.set_trial_user_attr(tid, "k", tid)
        storage.set_trial_state_values(tid, TrialState.COMPLETE, [float(tid)])


def _read(storage: Any) -> list[Any]:
    return [(t.number, t.state, t.values, t.params, t.distributions, t.user_attrs,
             t.datetime_start, t.datetime_complete)
            for t in optuna.load_study(storage=storage, study_name="s").get_trials()]


def _spy_creates(monkeypatch: pytest.MonkeyPatch) -> list[bool]:
    """Optuna's replay of each created trial, noted: True when it read the trial's
    distributions (the read-back), False when the memo's path replayed it."""
    from optuna.storages.journal import _storage

    seen: list[bool] = []
    apply = _storage.JournalStorageReplayResult._apply_create_trial

    def spy(self: Any, log: dict[str, Any]) -> None:
        seen.append("distributions" in log)
        apply(self, log)

    monkeypatch.setattr(_storage.JournalStorageReplayResult, "_apply_create_trial", spy)
    return seen


def test_a_created_trial_is_replayed_without_reading_it_back(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The tune's storage replays its own created trials from what it kept (Optuna's
    ``_apply_create_trial`` sees no distributions or parameters), and reads what Optuna's
    replay of the same file reads: a stock ``JournalStorage`` loads the new journal."""
    from optuna.storages import JournalStorage
    from optuna.storages.journal import JournalFileBackend

    from autotune.running._journal import open_storage

    seen = _spy_creates(monkeypatch)
    handle = open_storage(None, str(tmp_path / "t.jsonl"))
    study = optuna.create_study(storage=handle.storage, study_name="s")
    _ask_like(handle.storage, study, 40, 1)
    assert seen == [False] * 40  # every one replayed from the memo
    ours = _read(handle.storage)
    handle.close()
    seen.clear()
    stock = _read(JournalStorage(JournalFileBackend(str(tmp_path / "t.journal"))))
    assert seen == [True] * 40  # stock Optuna reads the file
    assert _same(ours, stock)
    assert any(p.get("c") is True for _, _, _, p, *_ in ours)


def test_an_old_journal_resumes(tmp_path: Path) -> None:
    """A journal stock Optuna wrote is resumed by the tune's storage, which adds trials
    to it; stock Optuna reads the whole file as the tune's storage does."""
    from optuna.storages import JournalStorage
    from optuna.storages.journal import JournalFileBackend

    from autotune.running._journal import open_storage

    path = str(tmp_path / "t.journal")
    old = JournalStorage(JournalFileBackend(path))
    _ask_like(old, optuna.create_study(storage=old, study_name="s"), 15, 2)
    handle = open_storage(None, str(tmp_path / "t.jsonl"))
    assert type(handle.storage).__name__ == "CheapTrials"
    study = optuna.load_study(storage=handle.storage, study_name="s")
    _ask_like(handle.storage, study, 15, 3)
    ours = _read(handle.storage)
    handle.close()
    stock = _read(JournalStorage(JournalFileBackend(path)))
    assert len(ours) == 30 and _same(ours, stock)


def _replay_state(storage: Any) -> str:
    """Everything the storage's replay holds: every trial's fields (system attributes,
    intermediate values and ids included) and the replay's own bookkeeping."""
    r = storage._replay_result
    trials = {tid: dict(t.__dict__) for tid, t in r._trials.items()}
    return repr((r.log_number_read, trials, r._study_id_to_trial_ids, r._trial_id_to_study_id,
                 r._last_created_trial_id_by_this_process,
                 sorted(r._worker_id_to_owned_trial_id.values())))


def _mixed_trials(storage: Any, seed: int) -> list[Any]:
    """Templates of every state, naive and aware starts, system attributes and
    intermediate values, some into a study that does not exist (Optuna's KeyError)."""
    import random

    rng = random.Random(seed)
    study_id = storage.create_new_study([optuna.study.StudyDirection.MINIMIZE], "s")
    out: list[Any] = []
    for _ in range(40):
        keep = [k for k in DISTS if rng.random() < 0.85]
        params = {k: rng.choice(DISTS[k].choices) for k in keep}
        state = rng.choice([TrialState.RUNNING, TrialState.WAITING, TrialState.COMPLETE,
                            TrialState.FAIL])
        done = state == TrialState.COMPLETE
        tz = rng.choice([None, datetime.UTC,
                         datetime.timezone(datetime.timedelta(hours=5))])
        t = FrozenTrial(number=0, state=state, value=2.5 if done else None,
                        datetime_start=datetime.datetime(2026, 11, 28, 11, 0, 0, 123456,
                                                         tzinfo=tz),
                        datetime_complete=datetime.datetime(2026, 11, 28, 11, 0, 1) if done
                        else None, params=params, distributions={k: DISTS[k] for k in keep},
                        user_attrs={"cid": "c1"}, system_attrs={"s": {"k": 1}},
                        intermediate_values={1: 0.5} if rng.random() < 0.3 else {},
                        trial_id=0)
        try:
            tid = storage.create_new_trial(study_id if rng.random() > 0.05 else 99,
                                           template_trial=t)
        except KeyError:
            out.append(("KeyError", storage._replay_result.log_number_read))
            continue
        out.append(repr(storage.get_trial(tid).params))
    return out


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_the_replay_without_read_back_holds_what_the_read_back_holds(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, seed: int) -> None:
    """The same templates into two tune storages, one with the read-back forced (its
    journal's ``op_count`` taken away): every trial's whole state and the replay's
    bookkeeping are equal, and the first took the path without the read-back."""
    from autotune.running._journal import open_storage

    seen = _spy_creates(monkeypatch)
    states = []
    for forced in (False, True):
        handle = open_storage(None, str(tmp_path / f"{forced}.jsonl"))
        if forced:
            handle.journal.op_count = None  # type: ignore[method-assign]
        got = _mixed_trials(handle.storage, seed)
        states.append((got, _replay_state(handle.storage)))
        handle.close()
        if not forced:
            assert seen and not all(seen)  # the memo's path was taken
            seen.clear()
    assert all(seen)  # the forced storage read every trial back
    assert states[0] == states[1]
