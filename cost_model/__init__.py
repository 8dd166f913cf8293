"""XGBoost cost model over candidate schedules.

Filled by the cost-model issue; features come from ``compiler.Graph`` and
``compiler.GraphSchedule``, labels from ``logs`` records.
"""

__all__: list[str] = []
