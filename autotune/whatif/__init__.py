"""Hardware what-if sweeps (the room `whatif`): tune models on variants of a chip and tabulate each design.

Owns the variants (``--set key=v1,v2``, :mod:`._targets`), the sweep job
(:mod:`._sweep`: a capacity check, then a warm-started ``tune`` per variant into one
log; :mod:`._budget`: a probe per variant, the rest to the variants still improving;
:mod:`._repair`: another variant's best schedule made to fit as a seed),
its rows and outputs (:mod:`._rows`, :mod:`._out`: CSV/JSON table, PNG plots).
May import autotune's top (``tune``) and the rooms job, sampling, measure, running
and report; nothing imports it but the commands (ARCHITECTURE.md).
"""

from autotune.whatif._rows import SweepResult, SweepRow
from autotune.whatif._sweep import infeasible_reason, sweep, sweep_table
from autotune.whatif._targets import Variant, make_variants, parse_set

__all__ = ["SweepResult", "SweepRow", "Variant", "infeasible_reason", "make_variants", "parse_set",
           "sweep", "sweep_table"]
