"""Search space of graph schedules (Graph + Target + batch -> candidate GraphSchedules).

Filled by the search-space issue; the base it stands on is ``compiler.GraphSchedule``,
``compiler.Graph``, ``compiler.Target`` and ``sim.simulate``.
"""

__all__: list[str] = []
