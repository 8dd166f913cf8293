"""What a job reports: results, progress, the tuning curve, the bound analysis and its page.

Owns: :mod:`._result` (``TuneResult``, ``TaskResult``), :mod:`._progress` (the live
table), :mod:`._curve` (the tuning-curve PNG), :mod:`._report` (a log against the
lower bound), :mod:`._report_html` (the HTML page), :mod:`._timeline` (its timeline: legend
and chunk boundaries).

May import: ``compiler``, ``sim``, ``logs`` and ``autotune.job``.
"""
