"""Self-contained HTML reports of conformance runs.

* :func:`write_report` writes one run's page (``specverify check ... --report PATH``, and the pytest
  plugin's ``--specverify-html``); :func:`render_report` returns it as a string.
* :func:`build_index` writes a page per run and an index comparing them, sampler by check family
  (``specverify report A.json B.json -o reports/index.html``).
* :class:`Evidence` is the schema of a result's ``evidence`` (docs/report.md); :func:`unknown_keys`
  names what a record holds beyond it.
* :func:`reproducible` is a run's JSON without what differs from run to run by nature (durations,
  timings, versions, the platform, worker counts): what a rerun of one seed must reproduce.

A page loads nothing at view time (styles, script and plots are inline, and its Content-Security-
Policy forbids fetching), reads in light and dark mode, and shows everything that comes from the
sampler as escaped text.
"""

from __future__ import annotations

from .._record.evidence import Evidence, unknown_keys
from .._record.info import reproducible
from ._index import build_index
from ._page import render_report, write_report

__all__ = ["Evidence", "build_index", "render_report", "reproducible", "unknown_keys", "write_report"]
