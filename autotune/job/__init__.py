"""The tuning job's model: its tasks, their state, and which task to tune next.

Owns: :mod:`._tasks` (``Task``, ``extract_tasks``: models -> weighted unique
subgraphs), :mod:`._state` (``JobState``/``TaskState``: what a job knows as it runs),
:mod:`._scheduler` (``GradientScheduler``: the next task by expected gain).

May import: ``compiler``, ``search_space``; nothing else of ``autotune``.
"""
