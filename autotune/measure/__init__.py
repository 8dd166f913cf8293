"""Measuring a candidate: the ``Measurer`` protocol, the simulator's, the delayed one, plugins.

Owns: :mod:`._measurer` (``Measurer``, ``SimMeasurer``), :mod:`._delayed`
(``DelayedMeasurer``, a slow board stand-in), :mod:`._plugins` (a measurer by
``module:Class`` or by ``graphtune.measurers`` entry point), :mod:`._slots` (several
measurement slots in one worker process: :func:`waiting` around a measurer's wait).

May import: ``compiler``, ``sim``, ``logs``; of ``autotune`` nothing.
"""

from autotune.measure._slots import waiting

__all__ = ["waiting"]
