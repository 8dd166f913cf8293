"""``GuidedSampler``: graphtune's own Optuna sampler (evolution + cost model).

Each round it breeds a population (the best measured schedules, their
mutations and crossovers, and uniform random samples of the space) for a few
generations, selecting parents by the cost model's predicted speed; it then
proposes the best-predicted new candidates that pass the capacity pre-check,
plus an ``eps`` share of random ones (Ansor's evolutionary search with a
learned cost model). The cost model is retrained as measurements arrive.

It is an ordinary :class:`optuna.samplers.BaseSampler`: ``study.ask()`` picks a
queued candidate in :meth:`before_trial`, and the driver's
``space.suggest(trial)`` receives its parameters one by one through
:meth:`sample_independent`. Enqueued trials (seeds, re-queued trials) keep
their fixed parameters and do not consume a proposal.

**Two islands when the tune borrows** (a sweep's warm start: the best schedules of
other targets, :meth:`GuidedSampler.borrow`, or a ranker trained on their
measurements, one whose ``borrows`` is true). Then every other round breeds only
from the task's *own line*: the best measured candidates that neither are a
borrowed seed nor were bred in a round whose parents could include one (O0-O3,
the plans and the own line's children are in it), ranked as a cold tune ranks
(the ranker's ``cold_round`` is set for the round:
:class:`autotune.sampling._warm.WarmRanker`). The other rounds breed from the
best of everything, as without borrowing. So half of the proposals are a cold
tune's search, kept beside the borrowed one: measured on MobileNetV2 b16, L1 384K / DDR 13,
the seeds (the 512K variant's best, 2,169 µs) were the only parents of every round,
and 450 measurements bred around them never left their basin (2,166 µs) while a
cold tune reached 1,934 µs (``bench/results/sweep.md``, 2026-11-26). The line of
each proposal (and of each warm seed, by :func:`autotune.sampling._warm.enqueue_warm`) is
written as the trial's user attribute ``graphtune_line``, so a resumed tune keeps the
islands apart, whatever seeds it is given. (Win-stay, lose-shift, a line keeping the rounds
while each moves the best by 0.5 %, was measured worse: 10 of 16 sweep variants >= 0.99x
their cold tune against 13 of 16 for this alternation; ``bench/results/sweep.md``, fifth pass.)

**The end game** (:mod:`autotune.sampling._polish`): once the best stalls, rounds polish
it (its one-move neighbours, ranked by the cost model, best first: a hill climb).

A round (:mod:`autotune.sampling._breed`) can run elsewhere: the tuning driver asks for
a :meth:`GuidedSampler.breed_request` for a share of a round (with ``W`` workers,
``1/W`` of the population and of the proposals), has a worker breed it, and hands
it back through :meth:`GuidedSampler.bred`, whose picks are queued at once; up to
one share per worker is out at a time, so no worker waits for another's share and
the driver never decodes. Used on its own, the sampler breeds a whole round in
:meth:`before_trial` when its queue is empty.
"""

from __future__ import annotations

import bisect
import heapq
import logging
from collections import deque
from collections.abc import Iterable, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
from optuna.samplers import BaseSampler
from optuna.trial import TrialState

from autotune.sampling._breed import Bred, BreedRequest, RankerScorer, Scorer, breed
from autotune.sampling._polish import DEEP, POLISH_ATTR, PolishState, is_deep, ring_of
from autotune.sampling._ranker import Ranker
from autotune.sampling._studies import candidate_id, vector_of

if TYPE_CHECKING:
    from optuna.distributions import BaseDistribution
    from optuna.study import Study
    from optuna.trial import FrozenTrial, Trial

    from compiler.schedule import GraphSchedule
    from search_space import Space

__all__ = ["GuidedOptions", "GuidedSampler"]

log = logging.getLogger("autotune.guided")

# A breeding request carries the candidates seen since its base set (see
# GuidedSampler._seen_parts); the base is made anew once more than this many more were seen.
REBASE_AFTER = 256

# breed_budget weighs the median of this many last reports of a measurement's and of a
# bred child's wall time (see _recent).
REPORTS = 8


@dataclass(frozen=True)
class GuidedOptions:
    """Knobs of the guided sampler.

    Attributes:
        population: Candidates bred per generation.
        generations: Generations of model-guided evolution per round.
        proposals: Candidates proposed per round (more when the measurers hold more at
            once, up to ``population``: see :attr:`GuidedSampler.demand`).
        parents: Best measured schedules that seed the population.
        random_share: Share of the initial population drawn uniformly from the space.
        crossover: Probability that a child is a crossover rather than a mutation.
        eps: Share of each round's proposals picked at random among the bred candidates
            the model did not choose (exploration).
        retrain_every: Retrain the cost model when this many new measurements arrived...
        retrain_growth: ...and they are at least this share of the data it was last trained
            on: a training costs time in proportion to the data, so retraining on a
            geometric schedule keeps its cost per measurement flat however long the study.
            Under ``breed_budget``, also at least as many as take ``1 / breed_budget``
            times the last training's time to measure; with ``background_fit``, also
            at least half of what the measurers hold at once, all of it past 256
            (``GuidedSampler.demand``: a new model only steers what is bred after the
            candidates already out), but at most 4x the rows the last model was trained on
            (``GuidedSampler._fit_window``).
        breed_budget: None (the fixed effort), or how long breeding may take per proposed
            candidate, as a share of measuring one (wall seconds, each the median of the
            last :data:`REPORTS` reports of the workers): a round proposes more of what it
            ranked, then breeds fewer generations, to stay within it (:meth:`GuidedSampler._effort`);
            ``tune`` keeps it with workers when given (by default it sets ``screen``).
            Under it a faster decoder buys more screening, not more measurements.
        screen: None, or how many candidates a round may decode per candidate it proposes:
            the breeding budget counted in candidates screened per measurement instead of
            in seconds, so that the search is the same whatever a decode or a measurement
            costs (the compiled and the Python decoder, a loaded or a quiet machine) and a
            faster decoder shows as more measurements per second. A round proposes more of
            what it ranked, then breeds fewer generations, to stay within it
            (:meth:`GuidedSampler._effort`; never below the fixed effort). It takes the
            place of ``breed_budget`` for breeding; retraining then follows the counts
            (``retrain_every``, ``retrain_growth``, the background window). ``tune`` sets
            it with workers (``autotune._tune.SCREEN``).
        fit_budget: None, or how long a retraining may take as a share of measuring the
            measurements between two (wall seconds, the workers' median report per
            measured candidate): a retraining waits for at least as many as take
            ``1 / fit_budget`` times the last one's time to measure (:meth:`GuidedSampler._fit_wait`;
            under ``breed_budget`` without ``screen``, that share). Where measuring is cheap
            (gpt1: ~1.5 ms a candidate, a fit ~47 ms at 300 rows) retraining every
            ``retrain_every`` cost more CPU than measuring; ``tune`` sets it with workers
            (``autotune._tune.FIT_BUDGET``).
        rescan_s: Read the whole study again this often (seconds), for trials another
            driver on the same storage finished; between rescans the sampler learns from
            the trials this process tells (a full read is O(trials)).
        background_fit: Retrain the cost model on a thread while the driver goes on
            proposing with the previous model (XGBoost releases the GIL, so training
            uses another core instead of stalling every worker). Off by default, since
            when the new model arrives depends on timing; ``tune`` turns it on when Ray
            workers measure (``workers >= 1``), keeping in-process runs reproducible.
        polish_after, polish_limit, polish_window: The end game (see
            :class:`autotune.sampling._polish.PolishState`; ``polish_after < 0``: never).
            Under ``screen`` a polish round's window grows by ``screen`` per proposal
            (at most ``polish_window``: :meth:`GuidedSampler._polish_step`).
        polish_kick, kick_limit: Its iterated local search once the best is polished
            (``PolishState``'s ``kick`` and ``kick_limit``; 0, the default: none): at
            most every other round is a kick or a kicked climb's, the others evolve. Off
            by default: with 4, MobileNetV2 b16 ended better in-process (seeds 0 and 1)
            but not with 2 workers (six pairs against main, ``bench/results/tuning.md``).
        polish_deep: Proposals per polished schedule from its second ring
            (``PolishState``'s ``deep``, :mod:`autotune.sampling._deep`: a group
            boundary moved with its group's parameters, or a new one together with a
            shape of its own), polished after the one-move neighbourhood (0: never).
            Measured with 2 workers on MobileNetV2 b16, where tunes stalled at
            1,507-1,516 µs (``bench/results/tuning.md``, 2026-11-27, h82).
        apart: 0 (the default: evolution breeds from the best), or a restart elsewhere:
            evolution's parents are the best measured candidates that differ from the
            incumbent (the best measured when this sampler first breeds) in at least this
            many parameters, so its lines leave the incumbent's basin (a sweep's stalled
            variant: :func:`autotune.whatif._budget.restart_guided`). ``tune`` never sets it.
        polish_tol: ``PolishState``'s ``tol``: a measurement is the polish's new best when
            faster by more than this share of the best (:func:`autotune.sampling._polish.beats`).
            0 (the default, ``tune``'s and a sweep's: with
            :data:`~autotune.sampling._polish.STALL_TOL` a 300-trial BERT-base tune's log
            changes at its 86th record, and the sweep did no better: ``bench/results/sweep.md``,
            twenty-fourth pass).
    """

    population: int = 96
    generations: int = 2
    proposals: int = 16
    parents: int = 8
    random_share: float = 0.25
    crossover: float = 0.15
    eps: float = 0.1
    retrain_every: int = 16
    retrain_growth: float = 0.25
    rescan_s: float = 30.0
    background_fit: bool = False
    breed_budget: float | None = None
    screen: float | None = None
    fit_budget: float | None = None
    polish_after: int = 64
    polish_limit: int | None = 48
    polish_window: int = 256
    polish_kick: int = 0
    kick_limit: int | None = 32
    polish_deep: int = 48
    apart: int = 0
    polish_tol: float = 0.0


@dataclass
class _Proposal:
    cid: str
    params: dict[str, Any]
    ranked_by: str
    schedule: GraphSchedule
    vector: np.ndarray
    features: np.ndarray
    borrowed: bool = False  # bred from parents that may descend from a borrowed seed
    polish_of: str = ""  # a polish proposal: the candidate id of the schedule polished
    json: dict[str, Any] | None = None  # the schedule's JSON, if its breeder made it


# Past this many candidates held by the measurers at once, a background retraining waits
# for the whole demand, not half of it (GuidedSampler._fit_window).
_WHOLE_WINDOW_FROM = 256
_YOUNG_GROWTH = 4  # a background retraining waits at most 4x the last model's rows

LINE_ATTR = "graphtune_line"
"""Trial user attribute of a proposal bred in the borrowed seeds' island (value "borrowed")."""


class GuidedSampler(BaseSampler):
    """Proposals from evolution around the best schedules, ranked by a cost model.

    Args:
        space: The task's search space.
        ranker: The cost model (see :mod:`autotune.sampling._ranker`).
        objective: ``"latency"`` (minimise) or ``"throughput"`` (maximise).
        seed: Randomness (the same seed and history give the same proposals).
        options: See :class:`GuidedOptions`.
    """

    def __init__(self, *, space: Space, ranker: Ranker, objective: str = "latency",
                 seed: int | None = None, options: GuidedOptions | None = None) -> None:
        self.space = space
        self.ranker = ranker
        self.objective = objective
        self.options = options or GuidedOptions()
        self._rng = np.random.default_rng(seed)
        self._queue: deque[_Proposal] = deque()
        self._seen: set[str] = set()  # measured, queued or handed out
        # ... in the order seen, and the part of it a breeding request sends whole (see
        # _seen_parts): requests carry what was seen since, not the whole set each time.
        self._seen_log: list[str] = []
        self._seen_base: frozenset[str] = frozenset()
        self._base_at = 0  # len(_seen_log) when _seen_base was made
        self._synced: set[int] = set()  # trial numbers already learned from
        self._vectors: dict[str, np.ndarray] = {}  # measured candidate -> vector
        self._scores: dict[str, float] = {}  # measured ok candidate -> y (higher = faster)
        # the best ``options.parents`` of them as (-y, arrival, cid), kept sorted as they
        # arrive: what heapq.nlargest over all of them would give, without the O(n) per round
        self._top: list[tuple[float, int, str]] = []
        # the islands (see the module doc): the borrowed seeds and their island's proposals,
        # the best of the others (the own line), and the island of each request not back yet
        self._borrowed: set[str] = set()
        self._own_top: list[tuple[float, int, str]] = []
        self._incumbent: np.ndarray | None = None  # options.apart's reference (_apart)
        self._islands: deque[bool] = deque()
        o = self.options
        self.polish = PolishState(o.polish_after, o.polish_limit,
                                  o.polish_window or o.population, o.polish_kick, o.kick_limit,
                                  o.polish_deep, o.polish_tol)
        self._searched = False  # the last request was a kick or a kicked climb's
        self._x: list[np.ndarray] = []
        self._y: list[float] = []
        self._trained_at = 0
        self._by_trial: dict[int, _Proposal] = {}
        self._told: list[tuple[int, dict[str, Any], float | None]] = []  # since the last sync
        self._scanned_at: float | None = None  # monotonic time of the last full read
        self._fitting: Future[None] | None = None  # a background retraining
        self._fitter: ThreadPoolExecutor | None = None
        self._handed: dict[int, _Proposal] = {}  # finished trial -> its proposal, until synced
        self._snapshot: tuple[str, Scorer] | None = None
        self.rounds = 0
        self.breeding = 0  # breeding requests (breed_request) not back yet
        self.told = 0  # trials finished through this sampler
        self._told_at_request = 0  # ... when the last breeding request was made
        self.dry = 0  # requests in a row whose picks brought nothing new
        self._taking: _Proposal | None = None  # the proposal ask_queued is making a trial of
        self._dry_ask = False  # ask_queued just bred a round that brought nothing
        # Candidates the measurers hold at once (set by the driver): a round proposes at
        # least this many (up to ``population``), so a round's breeding, whose cost does not
        # depend on how many it proposes, is spread over as many measurements as many
        # workers take. With two workers this is the default ``proposals``.
        self.demand = 0
        # For breed_budget: wall seconds per measured candidate, and per candidate decoded
        # while breeding (None until the first report of each): the median of the last
        # REPORTS reports of each (see _recent).
        self._measure_s: float | None = None
        self._child_s: float | None = None
        self._measure_reports: deque[float] = deque(maxlen=REPORTS)
        self._child_reports: deque[float] = deque(maxlen=REPORTS)
        self._fit_s: float | None = None  # wall seconds of the last retraining
        self.fit_cpu_s = 0.0  # CPU seconds of all retrainings (on whichever thread ran them)
        self.last_proposals = 0  # what the last breeding request asked for
        # what the rounds cost, for benches: candidates decoded by breeding (all requests
        # back so far), retrainings started
        self.decoded = 0
        self.decoded_polish = 0  # ...of them in polish rounds (the end game's windows)
        self.fits = 0

    # ---- Optuna's sampler interface ------------------------------------------------------
    def infer_relative_search_space(self, study: Study, trial: FrozenTrial
                                    ) -> dict[str, BaseDistribution]:
        return {}

    def sample_relative(self, study: Study, trial: FrozenTrial,
                        search_space: dict[str, BaseDistribution]) -> dict[str, Any]:
        return {}

    def before_trial(self, study: Study, trial: FrozenTrial) -> None:
        if self._taking is not None:  # ask_queued made this trial for this proposal
            self._by_trial[trial.number], self._taking = self._taking, None
            return
        if "fixed_params" in trial.system_attrs:
            return
        self.sync(study)
        dry, self._dry_ask = self._dry_ask, False
        if not self._queue and not dry:
            self._refill()
        if self._queue:
            chosen = self._by_trial[trial.number] = self._queue.popleft()
            if chosen.borrowed:
                study._storage.set_trial_user_attr(trial._trial_id, LINE_ATTR, "borrowed")
            if chosen.polish_of:
                study._storage.set_trial_user_attr(trial._trial_id, POLISH_ATTR, chosen.polish_of)

    def sample_independent(self, study: Study, trial: FrozenTrial, param_name: str,
                           param_distribution: BaseDistribution) -> Any:
        chosen = self._by_trial.get(trial.number)
        if chosen is not None and param_name in chosen.params:
            return chosen.params[param_name]
        choices = param_distribution.choices  # type: ignore[attr-defined]
        return choices[int(self._rng.integers(len(choices)))]

    def after_trial(self, study: Study, trial: FrozenTrial, state: TrialState,
                    values: Sequence[float] | None) -> None:
        chosen = self._by_trial.pop(trial.number, None)
        if state in (TrialState.COMPLETE, TrialState.FAIL):
            self.told += 1
            if chosen is not None and chosen.params == trial.params:
                self._handed[trial.number] = chosen
            value = values[0] if state == TrialState.COMPLETE and values else None
            self._told.append((trial.number, dict(trial.params), value))

    def reseed_rng(self) -> None:
        self._rng = np.random.default_rng()

    # ---- what the driver asks ------------------------------------------------------------
    def ask_queued(self, study: Study, distributions: Mapping[str, BaseDistribution],
                   user_attrs: Mapping[str, Any] | None = None,
                   cid_attr: str | None = None) -> Trial | None:
        """``study.ask()`` for the next queued proposal, its parameters already set.

        The trial is created with its parameters (their ``distributions``) and
        ``user_attrs`` (and ``cid_attr``, if given, set to the candidate's id) in one
        storage write, instead of one write per parameter through ``suggest_*`` (80 on
        ResNet-50: most of the driver's time per candidate, and a round trip each on a
        database). With nothing queued, a round is bred here first, as ``study.ask()``
        would. Call ``study.ask()`` instead while the study has enqueued trials. None when
        the round brought nothing new (``study.ask()`` then samples at random).
        """
        import datetime

        import optuna

        self.sync(study)
        if not self._queue:
            self._refill()
        if not self._queue:
            self._dry_ask = True  # the study.ask() that follows does not breed again
            return None
        chosen = self._queue.popleft()
        template = optuna.trial.FrozenTrial(
            number=0, state=TrialState.RUNNING, value=None,
            datetime_start=datetime.datetime.now(), datetime_complete=None,
            params=dict(chosen.params),
            distributions={name: distributions[name] for name in chosen.params},
            user_attrs={**(user_attrs or {}), **({cid_attr: chosen.cid} if cid_attr else {}),
                        **({LINE_ATTR: "borrowed"} if chosen.borrowed else {}),
                        **({POLISH_ATTR: chosen.polish_of} if chosen.polish_of else {})},
            system_attrs={}, intermediate_values={},
            trial_id=0)
        trial_id = study._storage.create_new_trial(study._study_id, template_trial=template)
        self._taking = chosen
        try:
            return optuna.Trial(study, trial_id)  # its before_trial takes ``chosen``
        finally:
            self._taking = None

    def candidate_of(self, number: int) -> str:
        """The candidate id of trial ``number``'s proposal ("" for enqueued trials)."""
        chosen = self._by_trial.get(number)
        return chosen.cid if chosen is not None else ""

    def proposal(self, number: int) -> tuple[GraphSchedule, dict[str, Any]] | None:
        """The schedule and parameters chosen for trial ``number`` (None for enqueued trials).

        The driver measures this schedule instead of decoding the trial's parameters again.
        """
        chosen = self._by_trial.get(number)
        return (chosen.schedule, chosen.params) if chosen is not None else None

    def json_of(self, number: int) -> dict[str, Any] | None:
        """The JSON of trial ``number``'s schedule, if its breeder made it (None for enqueued
        trials and rounds bred here): what the driver sends and logs instead of writing it."""
        chosen = self._by_trial.get(number)
        return chosen.json if chosen is not None else None

    def vector_of(self, number: int) -> np.ndarray | None:
        """The space vector of trial ``number``'s proposal (None for enqueued trials): a
        measurer worker decodes it again instead of parsing the schedule's JSON."""
        chosen = self._by_trial.get(number)
        return chosen.vector if chosen is not None else None

    def polish_of(self, number: int) -> str:
        """The schedule whose polish proposed trial ``number`` ("" when none did)."""
        chosen = self._by_trial.get(number)
        return chosen.polish_of if chosen is not None else ""

    def ranked_by(self, number: int) -> str:
        """The cost model that ranked trial ``number``'s candidate ("" when none did)."""
        chosen = self._by_trial.get(number)
        return chosen.ranked_by if chosen is not None else ""

    def sync(self, study: Study) -> None:
        """Learn from finished trials not seen yet; retrain the model when enough arrived.

        The first call (and one every ``rescan_s``) reads the whole study; the others
        only the trials told through this sampler since (O(new), not O(trials)).
        """
        import time

        new: list[tuple[str, GraphSchedule | None, np.ndarray | None, float]] = []
        lined: set[int] = set()  # trials of the borrowed seeds' island (a full read)
        polish_of: dict[int, str] = {}  # polish trials -> the schedule polished (a full read)
        now = time.monotonic()
        if self._scanned_at is None or now - self._scanned_at >= self.options.rescan_s:
            self._scanned_at = now
            self._told.clear()
            finished = study.get_trials(deepcopy=False,
                                        states=(TrialState.COMPLETE, TrialState.FAIL))
            told = [(t.number, t.params, t.value if t.state == TrialState.COMPLETE else None)
                    for t in finished]
            lined = {t.number for t in finished if t.user_attrs.get(LINE_ATTR) == "borrowed"}
            polish_of = {t.number: str(t.user_attrs[POLISH_ATTR]) for t in finished
                         if t.user_attrs.get(POLISH_ATTR)}
        else:
            told, self._told = self._told, []
            lined = set()
        told.sort(key=lambda x: x[0])  # the same order either way: the same model
        for number, params, value in told:
            if number in self._synced:
                continue
            self._synced.add(number)
            mine = self._handed.pop(number, None)
            s: GraphSchedule | None = None
            row: np.ndarray | None = None
            if mine is not None:  # bred here: its vector and features came with it
                cid, vec, row = mine.cid, mine.vector, mine.features
                if mine.polish_of:
                    polish_of[number] = mine.polish_of
            else:
                found = vector_of(self.space, params) if params else None
                if found is None:
                    continue
                vec = found
                s = self.space.decode(vec)
                cid = candidate_id(s)
            self._see(cid)
            if number in lined:
                self._borrowed.add(cid)
            if cid not in self._scores:
                y = self._label(value) if value is not None else None
                self.polish.measured(cid, y, polish_of.get(number, ""), inherited=mine is None)
                if y is not None:
                    self._vectors[cid] = vec
                    self._scores[cid] = y
                    self._keep_top(cid, y)
                    new.append((cid, s, row, y))
        if new:
            todo = [s for _, s, row, _ in new if row is None and s is not None]
            rows = (np.asarray(self.ranker.features(todo), dtype=np.float32) if todo
                    else np.zeros((0, 0), dtype=np.float32))
            computed = iter(rows)
            self._x.extend(row if row is not None else next(computed) for _, _, row, _ in new)
            self._y.extend(y for _, _, _, y in new)
        o = self.options
        if self._fitting is not None:
            if not self._fitting.done():
                return  # the previous retraining is still running: keep its data growing
            fitting, self._fitting = self._fitting, None
            fitting.result()  # an error in training surfaces here
        grown = len(self._y) - self._trained_at
        if grown >= max(o.retrain_every, o.retrain_growth * self._trained_at,
                        self._fit_wait(), self._fit_window()) or (
            self._trained_at == 0 and self._y and len(self._y) >= o.retrain_every // 2
        ):
            xs, ys = np.stack(self._x), np.asarray(self._y)
            self._trained_at = len(self._y)
            self.fits += 1
            if o.background_fit:
                if self._fitter is None:
                    self._fitter = ThreadPoolExecutor(1, thread_name_prefix="graphtune-fit")
                self._fitting = self._fitter.submit(self._fit, xs, ys)
            else:
                self._fit(xs, ys)

    def _fit(self, xs: np.ndarray, ys: np.ndarray) -> None:
        import time

        t0, c0 = time.perf_counter(), time.thread_time()
        self.ranker.fit(xs, ys)
        self._fit_s = time.perf_counter() - t0
        self.fit_cpu_s += time.thread_time() - c0

    def _fit_wait(self) -> float:
        """Measurements to wait for between retrainings under ``fit_budget`` (or
        ``breed_budget`` without ``screen``): as many as take ``1 / budget`` times the
        last retraining's time to measure, so that training costs at most the budget's
        share of measuring (0: no budget, or no report yet)."""
        o, m = self.options, self._measure_s
        share = o.fit_budget if o.fit_budget is not None else (
            o.breed_budget if o.screen is None else None)
        if share is None or share <= 0 or not m or self._fit_s is None:
            return 0.0
        return self._fit_s / (share * m)

    def _fit_window(self) -> float:
        """Measurements to wait for between background retrainings: half of what the
        measurers hold at once (:attr:`demand`; 0 when the driver retrains in line).

        A new model steers only the proposals bred after it, which are measured behind
        the ``demand`` candidates already out; retraining more often than every half of
        that window steers little more and costs the driver's host a training each time
        (a training costs ~0.25 s of CPU whatever its size on tiny_cnn: 64 workers holding
        512 candidates retrained ~20 times in 1,536 measurements, ~6 ms of CPU per
        measurement; issue 20, ``bench/driver_scale.py``). With up to 4 workers (batches
        of 4) the window is at most ``retrain_every``: nothing changes there.

        At scale (more than :data:`_WHOLE_WINDOW_FROM` held at once: over 32 workers at
        batches of 4) the window is the whole demand: what a model steers is measured
        only after that many, and half of it still retrained 6 times in 1,536
        measurements at 64 workers, 2.1 ms of the driver host's CPU per measurement.

        A young model does not wait that long: the first one is trained on
        ``retrain_every // 2`` rows, and at 64 workers a window of 512 would steer a tune
        shorter than ~520 measurements (or cut by a time budget) with that model
        throughout (review). The window is at most :data:`_YOUNG_GROWTH` times the rows
        the last model was trained on (8, 40, 200, then every ``demand``).
        """
        if not self.options.background_fit:
            return 0.0
        window = float(self.demand) if self.demand > _WHOLE_WINDOW_FROM else self.demand / 2
        if self._trained_at:  # a young model waits at most _YOUNG_GROWTH times its rows
            window = min(window, _YOUNG_GROWTH * self._trained_at)
        return window

    def _label(self, value: float) -> float | None:
        """The cost model's target: speed, higher = faster (1/latency or throughput)."""
        if not np.isfinite(value) or value <= 0:
            return None
        return float(1.0 / value if self.objective == "latency" else value)

    # ---- a round -------------------------------------------------------------------------
    @property
    def queued(self) -> int:
        """Proposals bred and not handed out yet."""
        return len(self._queue)

    def snapshot(self) -> Scorer | None:
        """The cost model as it is now, to breed elsewhere (None: the ranker cannot travel)."""
        snap = getattr(self.ranker, "snapshot", None)
        if snap is None:
            return None
        label = self.ranker.label  # a new label: a new model (each training renames it)
        if self._snapshot is None or self._snapshot[0] != label:
            self._snapshot = (label, snap())
        return self._snapshot[1]

    def breed_request(self, study: Study | None = None, share: int = 1,
                      pending: Iterable[str] = ()) -> BreedRequest:
        """The next breeding, for :func:`autotune.sampling._breed.breed` to run anywhere.

        Learns from ``study`` first (its new trials are parents and training data).
        ``share``: the request is ``1/share`` of a round (of its population and of its
        proposals), with its own seed, so that ``share`` workers breed a round's worth
        at once, each handing its picks back through :meth:`bred` as soon as it is
        done; without parents it is a whole round (parts would each evolve around the
        best of their own random samples: islands, each ``share`` times shallower).
        ``pending``: candidate ids being measured that this sampler did not propose
        (seeds), not to be proposed again.
        """
        if study is not None:
            self.sync(study)
        o = self.options
        self.rounds += 1
        self.breeding += 1
        self._told_at_request = self.told
        n_prop = min(max(o.proposals, self.demand), max(o.population, o.proposals))
        polish, kind = self.polish.due()
        kicking = kind == "kick" or (kind == "polish" and polish != self.polish.best)
        if kicking and self._searched:  # the iterated local search: every other round
            polish = ""
        self._searched = kicking and bool(polish)
        if polish and ring_of(polish) in self._vectors:  # the end game: a hill climb
            n = 1 if kind == "kick" else -(-n_prop // max(1, share))
            if kind == "polish" and kicking and share > 1 and o.kick_limit:
                # a climb's step waits for its round to come back from a worker and for
                # its measurements: with workers, one round proposes the step's limit (a
                # kick round proposes one kick, whatever the share: review finding)
                n = max(n, o.kick_limit)
            room = self.polish.room(polish)
            return self._polish_request(polish, n if room is None else max(1, min(n, room)),
                                        pending, kind)
        # borrowing (seeds, or a ranker trained on other targets' rows), every other round is
        # the own line's, ranked as a cold tune ranks (see the module doc)
        islands = bool(self._borrowed) or bool(getattr(self.ranker, "borrows", False))
        own = islands and self.rounds % 2 == 0
        self._islands.append(islands and not own)
        if hasattr(self.ranker, "cold_round"):
            self.ranker.cold_round = own  # until the next request: scores, snapshot
        best = (self._apart(o.parents, own) if o.apart > 0
                else self._own_best(o.parents) if own else self._best(o.parents))
        parents = tuple(best)
        base, seen = self._seen_parts(pending)
        share = max(1, share) if parents else 1
        n_prop = -(-n_prop // share)
        population = -(-o.population // share)
        n_prop, generations = self._effort(n_prop, population, len(parents))
        self.last_proposals = n_prop
        return BreedRequest(
            batch=self.space.batch, parents=parents, seed=int(self._rng.integers(2**63 - 1)),
            proposals=n_prop, eps=round(n_prop * o.eps), seen=seen,
            population=population, generations=generations,
            random_share=o.random_share, crossover=o.crossover, seen_base=base)

    def _polish_request(self, polish: str, n_prop: int, pending: Iterable[str],
                        kind: str = "polish") -> BreedRequest:
        """A polish or kick round of ``polish`` (see :mod:`autotune.sampling._polish`)."""
        o = self.options
        window = self.polish.start(polish, kind, self._polish_step(n_prop))
        self._islands.append(ring_of(polish) in self._borrowed)  # the best's line
        if hasattr(self.ranker, "cold_round"):
            self.ranker.cold_round = False
        base, seen = self._seen_parts(pending)
        self.last_proposals = n_prop
        return BreedRequest(
            batch=self.space.batch, parents=(self._vectors[ring_of(polish)],),
            seed=int(self._rng.integers(2**63 - 1)), proposals=n_prop, eps=0, seen=seen,
            population=o.population, generations=0, random_share=o.random_share,
            crossover=o.crossover, seen_base=base, polish=window, polish_of=polish,
            kick=o.polish_kick if kind == "kick" else DEEP if kind == "deep" else 0,
            climb=kind == "polish" and polish != self.polish.best)

    def _polish_step(self, n_prop: int) -> int | None:
        """How many more neighbours a polish round proposing ``n_prop`` ranks than the
        last round of its schedule: under ``screen``, ``screen`` per proposal (at most
        ``polish_window``), so the end game screens what evolution does; else (None)
        ``polish_window``. The window stays cumulative (what was decoded and not
        proposed is ranked again with the new), so the climb still proposes the model's
        best of everything it decoded. Why: with 2 workers a round of 8 proposals decoded
        256 neighbours, and on gpt1 the polish rounds were 2.8-3.6 of the 6.4-7.4
        candidates decoded per measurement (``bench/results/tuning.md``, h86)."""
        o = self.options
        if o.screen is None:
            return None
        return max(1, min(o.polish_window or o.population, int(np.ceil(o.screen * n_prop))))

    def _see(self, cid: str) -> None:
        if cid not in self._seen:
            self._seen.add(cid)
            self._seen_log.append(cid)

    def _seen_parts(self, pending: Iterable[str]) -> tuple[frozenset[str], frozenset[str]]:
        """``(base, since)``: every candidate seen is in one of them, with ``pending``.

        ``base`` is the same object from request to request until more than
        :data:`REBASE_AFTER` more were seen, so a pool sends it to a worker once
        (:meth:`autotune.running._ray_pool.RayPool.submit_breed`) and a request carries
        only what was seen since: building and pickling the whole set per request cost the
        driver 1.88 ms (and the worker 1.37 ms) at 10,000 candidates
        (``bench/results/driver_scale.md``).
        """
        if len(self._seen_log) - self._base_at > REBASE_AFTER:
            self._seen_base = frozenset(self._seen)
            self._base_at = len(self._seen_log)
        return self._seen_base, frozenset(self._seen_log[self._base_at:]).union(pending)

    def note_measured(self, seconds: float, count: int) -> None:
        """A worker measured ``count`` of this task's candidates in ``seconds`` (wall)."""
        if count > 0 and seconds > 0:
            self._measure_s = _recent(self._measure_reports, seconds / count)

    @property
    def effort(self) -> tuple[float | None, float | None]:
        """Wall seconds per measured candidate and per bred candidate, as the sampler
        knows them now (None: no report yet)."""
        return self._measure_s, self._child_s

    def _effort(self, n_prop: int, population: int, parents: int) -> tuple[int, int]:
        """``(proposals, generations)`` of a request under ``screen`` or ``breed_budget``.

        A request decodes about ``parents + random share + generations * population``
        candidates at a cost ``c`` each; proposing ``n`` spends ``c * decoded / n`` per
        measurement, which must stay within the budget (:meth:`_budget`): ``n`` grows
        until it does (up to every decoded candidate), then ``generations`` falls to one.
        Never below the fixed effort.
        """
        o = self.options
        costs = self._budget()
        if costs is None or not parents:
            return n_prop, o.generations
        c, budget = costs
        generations = o.generations
        initial = parents + max(1, int(population * o.random_share))
        if c * (initial + generations * population) <= budget * n_prop:
            return n_prop, generations  # the fixed effort is within the budget
        while True:
            decoded = initial + generations * population
            need = int(np.ceil(c * decoded / budget))
            if need <= decoded or generations <= 1:
                return max(n_prop, min(need, decoded)), generations
            generations -= 1

    def _budget(self) -> tuple[float, float] | None:
        """``(cost of a decode, budget per proposal)``: under ``screen`` counted in
        candidates (1 each, ``screen`` per proposal); under ``breed_budget`` in wall
        seconds (``c`` per decode, ``breed_budget * m`` per proposal: the medians of the
        workers' reports). None: the fixed effort."""
        o = self.options
        if o.screen is not None:
            return 1.0, max(1.0, float(o.screen))
        m, c = self._measure_s, self._child_s
        if o.breed_budget is None or m is None or c is None:
            return None
        return c, o.breed_budget * m

    @property
    def news(self) -> int:
        """Trials finished since the last breeding request (what a new one would learn
        that the last could not)."""
        return self.told - self._told_at_request

    def bred(self, part: Bred | None) -> int:
        """Queue the picks of a request (in its order) not seen since it was made.

        None: the request was lost (its worker died) and another will be made. Returns
        how many were queued; :attr:`dry` counts the requests in a row that queued none.
        """
        self.breeding = max(0, self.breeding - 1)
        # parts come back in the order requested except when a worker is slow or dies: then
        # a part may take another's island (a proposal's line is a search heuristic only)
        borrowed = self._islands.popleft() if self._islands else False
        if part is None:
            self.polish.lost()  # (if it was the polish round: else one more may go out)
            return 0
        self.decoded += part.decoded
        if part.polish_of:
            self.decoded_polish += part.decoded
        if part.decoded and part.wall_s > 0:
            self._child_s = _recent(self._child_reports, part.wall_s / part.decoded)
        n = 0
        queued: list[str] = []
        # a kick's or a kicked climb's proposals go before the queued evolution's: each step
        # of it waits for the measurements of the last (in-process the queue is empty here)
        front: list[_Proposal] = []
        # a round of the second ring (its request's ``kick`` is DEEP) is booked as a polish
        kick = part.kick and not is_deep(part.polish_of)
        for p in part.picks:
            if p.cid in self._seen:  # picked by another request bred at the same time
                continue
            self._see(p.cid)
            queued.append(p.cid)
            made = _Proposal(p.cid, p.params, p.ranked_by, p.schedule, p.vector, p.features,
                             borrowed, part.polish_of, p.json)
            if kick or self.polish.climbing(part.polish_of):
                front.append(made)
            else:
                self._queue.append(made)
            if borrowed:
                self._borrowed.add(p.cid)
            n += 1
        self._queue.extendleft(reversed(front))
        if kick:
            self.polish.kicked(part.polish_of, queued)
            log.debug("kick round of %s: %d proposed", part.polish_of[:12], n)
            return n
        if part.polish_of:
            self.polish.back(part.polish_of, n, part.neighbourhood, part.window)
            log.debug("polish round of %s (window %d of %d): %d proposed, %d measured since "
                      "the best improved", part.polish_of[:17], part.window, part.neighbourhood,
                      n, self.polish.since_best)
            if not n:
                return 0  # an exhausted neighbourhood is not a dry round: evolution follows
        self.dry = 0 if n else self.dry + 1
        log.debug("breeding request %d: %d candidates ranked, %d proposed in %.2f s of CPU",
                  self.rounds, part.ranked, n, part.cpu_s)
        return n

    def _refill(self) -> None:
        """Breed, rank and queue a whole round of proposals here (a polish round that
        proposes nothing widens its window or ends, and another round is bred)."""
        while True:
            req = self.breed_request()
            if self.bred(breed(self.space, RankerScorer(self.ranker), req)) or not req.polish:
                return

    def _keep_top(self, cid: str, y: float) -> None:
        entry = (-y, len(self._scores), cid)
        k = self.options.parents
        for top in (self._top, None if cid in self._borrowed else self._own_top):
            if top is not None and (len(top) < k or entry < top[-1]):
                bisect.insort(top, entry)
                del top[k:]

    def borrow(self, cids: Iterable[str]) -> None:
        """Mark candidates as borrowed (other targets' best schedules, measured as seeds):
        from now on every other round breeds from the own line only (see the module doc)."""
        # (a ranker that borrows turns the islands on by itself: see breed_request)
        new = set(cids) - self._borrowed
        if not new:
            return
        self._borrowed |= new
        mine = [(-y, i + 1, c) for i, (c, y) in enumerate(self._scores.items())
                if c not in self._borrowed]
        self._own_top = sorted(mine)[:self.options.parents]

    def _apart(self, k: int, own: bool) -> list[np.ndarray]:
        """The vectors of the ``k`` best measured candidates (of the own line if ``own``) that
        differ from the incumbent in at least ``options.apart`` parameters, best first (the
        incumbent: the best measured when first asked, kept for this sampler's life)."""
        if self._incumbent is None and self._top:
            self._incumbent = self._vectors[self._top[0][2]]
        ref = self._incumbent
        order = sorted(((-y, i, c) for i, (c, y) in enumerate(self._scores.items())
                        if not (own and c in self._borrowed)))
        out: list[np.ndarray] = []
        for _, _, c in order:
            v = self._vectors[c]
            if ref is None or int(np.count_nonzero(v != ref)) >= self.options.apart:
                out.append(v)
                if len(out) >= k:
                    break
        return out

    def _own_best(self, k: int) -> list[np.ndarray]:
        """The vectors of the ``k`` best measured candidates of the own line, best first."""
        return [self._vectors[c] for _, _, c in self._own_top[:k]]

    def _best(self, k: int) -> list[np.ndarray]:
        """The vectors of the ``k`` best measured candidates, best first (ties: the first
        measured first), as ``heapq.nlargest`` over all of them would order them."""
        if k <= self.options.parents:
            order = [c for _, _, c in self._top[:k]]
        else:
            order = heapq.nlargest(k, self._scores, key=self._scores.__getitem__)
        return [self._vectors[c] for c in order]


def _recent(reports: deque[float], new: float) -> float:
    """The median of the last :data:`REPORTS` reports, ``new`` included.

    Not a running mean: a worker's first batch and first breeding request carry its cold
    start (imports, the graph's tables, the space built: 128 ms per measurement against
    ~5 ms after it, in a loaded 2-worker ResNet-50 b16 tune), which a running mean
    weighting the last report by 1/4 took ~12 reports to forget, all of them bred at
    the fixed effort (8 proposals per 108 decoded children); the median forgets it once
    most reports are warm, and a load spike on one batch moves it no more than one
    report's rank.
    """
    reports.append(new)
    return float(np.median(reports))
