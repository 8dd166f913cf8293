"""The driver's per-trial costs outside the decoder (issue 20): what each cut keeps."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from optuna.distributions import CategoricalDistribution

from tests.autotune.test_tune_units import FakeRanker, tiny_space  # noqa: F401 - a fixture


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



def test_a_breeding_request_carries_what_was_seen_since_its_base(
        tiny_space: Any, monkeypatch: pytest.MonkeyPatch) -> None:  # noqa: F811
    """Invariant: base | since | pending is every candidate seen, and the base is one
    object over requests until ``REBASE_AFTER`` more were seen (what a pool sends once)."""
    from autotune.sampling import _guided
    from autotune.sampling._guided import GuidedSampler

    monkeypatch.setattr(_guided, "REBASE_AFTER", 5)
    s = GuidedSampler(space=tiny_space, ranker=FakeRanker(tiny_space), seed=0)
    bases = []
    for k in range(40):
        s._see(f"c{k}")
        s._see(f"c{k // 2}")  # seen twice: once in the log
        base, since = s._seen_parts({"p"})
        assert base | since == {f"c{j}" for j in range(k + 1)} | {"p"}
        assert len(since) <= 5 + 1
        bases.append(base)
    assert len({id(b) for b in bases}) == len({b for b in bases}) < 10  # kept, then rebased


def test_breeding_skips_the_base_as_it_skips_the_seen_set(tiny_space: Any) -> None:  # noqa: F811
    """The same request bred with its seen ids as the base or as ``seen`` picks the same
    candidates, and none of them (the base is not ignored)."""
    import dataclasses

    from autotune.sampling._breed import RankerScorer, breed
    from autotune.sampling._guided import GuidedSampler

    s = GuidedSampler(space=tiny_space, ranker=FakeRanker(tiny_space), seed=0)
    req = s.breed_request()
    first = breed(tiny_space, RankerScorer(s.ranker), req)
    taken = frozenset(p.cid for p in first.picks)
    assert taken
    as_seen = breed(tiny_space, RankerScorer(s.ranker),
                    dataclasses.replace(req, seen=req.seen | taken))
    as_base = breed(tiny_space, RankerScorer(s.ranker),
                    dataclasses.replace(req, seen_base=taken | req.seen_base))
    assert [p.cid for p in as_base.picks] == [p.cid for p in as_seen.picks]
    assert not taken & {p.cid for p in as_base.picks}
    again = breed(tiny_space, RankerScorer(s.ranker), req)  # nothing excluded: the same
    assert {p.cid for p in again.picks} == taken
