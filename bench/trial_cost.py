"""The study storage's cost per trial on the driver's thread, as a tune makes them.

``--trials`` templated trials (the guided sampler's ``create_new_trial`` with a template:
``--params`` of ``--space`` categorical parameters a trial, a different subset each time,
as BERT-base s128 b8's ~226 of ~400), four user attributes and a completed state each,
the journal flushed every ``--flush`` trials: through the storage a tune opens
(``autotune.running._journal.open_storage``). Prints the CPU ms a trial. ``--attrs each``
sets the attributes one read-back each (as before ``_trials.set_user_attrs``).

Under ``valgrind --tool=callgrind``, two runs at different ``--trials`` give the
instructions a trial (the slope; load-independent). At h125's da643b9 it had a
``--replay`` option comparing a created trial read into the replay by C-level maps with
Optuna's reading: no gain (``bench/results/tuning.md``), dropped.

Run: ``python bench/trial_cost.py [--trials 300] [--attrs one|each]``
"""

from __future__ import annotations

import argparse
import datetime
import random
import tempfile
import time
from pathlib import Path


def run(trials: int, space: int, params: int, flush: int, one: bool = True) -> float:
    """CPU seconds of ``trials`` trials (see the module doc)."""
    import optuna
    from optuna.distributions import CategoricalDistribution
    from optuna.trial import FrozenTrial, TrialState

    from autotune.running._journal import open_storage
    from autotune.running._trials import set_user_attrs

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    rng = random.Random(0)
    dists = {f"p{i}": CategoricalDistribution(tuple(range(2 + i % 19))) for i in range(space)}
    names = list(dists)
    with tempfile.TemporaryDirectory() as d:
        handle = open_storage(None, str(Path(d) / "t.jsonl"))
        storage = handle.storage
        study = optuna.create_study(storage=storage, study_name="s")
        sid = study._study_id
        c0 = time.process_time()
        for n in range(trials):
            chosen = sorted(rng.sample(range(space), params))
            ds = {names[i]: dists[names[i]] for i in chosen}
            ps = {k: rng.choice(v.choices) for k, v in ds.items()}
            t = FrozenTrial(number=n, state=TrialState.RUNNING, value=None,
                            datetime_start=datetime.datetime.now(), datetime_complete=None,
                            params=ps, distributions=ds, user_attrs={"graphtune_cid": f"c{n}"},
                            system_attrs={}, intermediate_values={}, trial_id=n)
            tid = storage.create_new_trial(sid, template_trial=t)
            attrs = {"status": "ok", "latency_us": 1.5 * n, "throughput": 2.0, "bound": 0.5}
            if one:  # as the driver sets them (one read-back)
                set_user_attrs(None, attrs, storage, tid)
            else:
                for key, v in attrs.items():
                    storage.set_trial_user_attr(tid, key, v)
            storage.set_trial_state_values(tid, TrialState.COMPLETE, [1.5 * n])
            if n % flush == flush - 1:
                handle.flush(wait=False)
        cpu = time.process_time() - c0
        got = study.get_trials(deepcopy=False)
        assert len(got) == trials and all(len(g.params) == params for g in got)
        handle.close()
    return cpu


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trials", type=int, default=300)
    ap.add_argument("--space", type=int, default=400)
    ap.add_argument("--params", type=int, default=226)
    ap.add_argument("--flush", type=int, default=40)
    ap.add_argument("--attrs", choices=("one", "each"), default="one",
                    help="the user attributes with one read-back (as the driver: "
                         "_trials.set_user_attrs) or one each (Optuna's set_trial_user_attr)")
    args = ap.parse_args()
    cpu = run(args.trials, args.space, args.params, args.flush, args.attrs == "one")
    print(f"{args.trials} trials: {1e3 * cpu / args.trials:.3f} CPU ms a trial (the main "
          "thread and the journal writer's)")


if __name__ == "__main__":
    main()
