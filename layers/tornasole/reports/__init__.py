"""Reports people look at: one self-contained HTML page per job (``tornasole report``, and the stack's
report written next to the trial when a job ends).

- :mod:`~tornasole.reports.build`: the entry points (:func:`job_report_html`,
  :func:`trial_report_html`, :class:`JobReportWriter`);
- :mod:`~tornasole.reports.verdicts`: a job's verdicts, or the recommended set evaluated on a trial;
- :mod:`~tornasole.reports.debugger_data` and :mod:`~tornasole.reports.profiler_data`: what is drawn,
  read from the trial and its ``profiler-output/`` (bounded for long jobs);
- :mod:`~tornasole.reports.page` and :mod:`~tornasole.reports.charts`: the page, its inline SVG charts.

Floor plan: on the alerts floor. Imported by the CLI (``tornasole report``) and by the evaluator's
wiring (``Evaluator.from_env`` and the local mode inject :class:`JobReportWriter` into completion);
imports rules (outcome, verdict, the recommended set), trials, profiler (its format and readers),
storage, modes and exceptions only.
"""

from __future__ import annotations

from tornasole.reports.build import (
    REPORT_FILE,
    JobReportWriter,
    job_report_html,
    report_location,
    trial_report_html,
)

__all__ = ["REPORT_FILE", "JobReportWriter", "job_report_html", "report_location", "trial_report_html"]
