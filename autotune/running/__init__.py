"""Running a job: the driver loop, measure pools (in-process, Ray), study storage, claims.

Owns: :mod:`._driver` (propose -> measure -> record loop), :mod:`._pool`
(``MeasurePool``, ``InProcessPool``), :mod:`._ray_pool` (``RayPool``; the actor body
``_Worker`` in :mod:`._ray_worker`, one or several measurement slots a process),
:mod:`._journal` (Optuna storages), :mod:`._claims` (a candidate claimed once per
shared study), :mod:`._reconcile` (studies agree with the log after a crash).

May import: ``compiler``, ``search_space``, ``cost_model``, ``sim``, ``logs`` and
``autotune.job``, ``autotune.sampling``, ``autotune.measure``.
"""
