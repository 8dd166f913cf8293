"""The driver's per-trial costs outside the decoder (issue 20): what each cut keeps."""

from __future__ import annotations

from pathlib import Path

from optuna.distributions import CategoricalDistribution


class _Counted(CategoricalDistribution):
    """A categorical distribution that counts the hashes and comparisons of its value."""

    compared = 0

    def __eq__(self, other: object) -> bool:
        type(self).compared += 1
        return super().__eq__(other)

    def __hash__(self) -> int:
        type(self).compared += 1
        return super().__hash__()


def test_the_journal_converts_a_distribution_object_it_saw_without_comparing_values(
        tmp_path: Path) -> None:
    """Optuna's journal turns every parameter's distribution of every new trial into
    JSON; the memo finds the driver's own distribution objects by identity (no hash or
    ``==`` over their choices: each walks the whole tuple) and gives the same text as Optuna's function."""
    from optuna.distributions import distribution_to_json as optuna_to_json
    from optuna.storages.journal import _storage

    from autotune.running._journal import open_storage

    open_storage(None, str(tmp_path / "t.jsonl")).close()  # installs the memo
    to_json = _storage.distribution_to_json
    d = _Counted(list(range(40)))
    first = to_json(d)
    assert first == optuna_to_json(d)
    _Counted.compared = 0
    for _ in range(100):
        assert to_json(d) is first
    assert _Counted.compared == 0
    other = CategoricalDistribution(list(range(40)))  # equal value, another object
    assert to_json(other) == optuna_to_json(other)
    changed = CategoricalDistribution([*range(39), 99])
    assert to_json(changed) == optuna_to_json(changed) != first

