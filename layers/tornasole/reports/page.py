"""The report as one HTML page: inline CSS, inline SVG, no script and nothing fetched at view time.

Every text that comes from a user (job, rule, tensor and collection names, StatusDetails, paths,
profiler node ids, file names in problems) goes through :func:`html.escape` here or in
:mod:`~tornasole.reports.charts`; the page sets a Content-Security-Policy that allows no script and no
fetch, so even a missed escape could not run code or call out. Elements a person (or the browser
test) looks for carry stable ids: ``job-summary``, ``rule-verdicts``, ``loss-chart``, ``layer-stats``,
``profiler``, ``utilisation-chart``, ``step-time-histogram``, ``step-outliers``, ``phase-breakdown``,
``profiler-rules``.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Sequence
from html import escape

from tornasole.reports.charts import Line, histogram, line_chart, stacked_bar
from tornasole.reports.debugger_data import DebuggerData
from tornasole.reports.profiler_data import ProfilerData, StepTime
from tornasole.reports.verdicts import JobInfo, Verdict

__all__ = ["OUTLIER_SIGMA", "render_page", "step_outliers"]

#: A step is an outlier above mean + OUTLIER_SIGMA standard deviations of its mode's step times (the
#: default ``stddev`` of SageMaker's StepOutlier rule is 3).
OUTLIER_SIGMA = 3.0
MAX_OUTLIERS_LISTED = 20

_CSS = """
body{font:14px/1.45 system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:0;color:#222;background:#f6f7f9}
header{background:#232f3e;color:#fff;padding:16px 24px}header h1{margin:0;font-size:20px}
header p{margin:4px 0 0;color:#c8d0da}main{padding:8px 24px 32px;max-width:1100px}
section{background:#fff;border:1px solid #dde1e6;border-radius:6px;padding:12px 16px;margin:16px 0}
h2{font-size:18px;margin:4px 0 8px}h3{font-size:15px;margin:14px 0 6px}
table{border-collapse:collapse;width:100%}th,td{border-bottom:1px solid #eee;padding:4px 6px;text-align:left;
vertical-align:top}th{background:#fafbfc}td.num{text-align:right;font-variant-numeric:tabular-nums}
.status{font-weight:600;white-space:nowrap}.IssuesFound{color:#b3261e}.Error{color:#8a5300}
.NoIssuesFound{color:#1e7b34}.NothingEvaluated{color:#5f6b7a}.InProgress,.Stopped,.Stopping{color:#3d5a80}
figure{margin:8px 0}figcaption{font-size:12px;color:#555}.key{margin-left:10px;white-space:nowrap}
.key i{display:inline-block;width:10px;height:10px;margin-right:4px}.tick{font-size:10px;fill:#555}
.axis{font-size:11px;fill:#333}.empty,.note{color:#5f6b7a}code{font-size:12px;word-break:break-all}
dl{display:grid;grid-template-columns:max-content 1fr;gap:2px 12px;margin:0}dt{color:#5f6b7a}dd{margin:0}
.advice{margin:2px 0 0;font-size:13px}
"""
_CSP = "default-src 'none'; style-src 'unsafe-inline'; img-src data:"


def _when(ms: int | None) -> str:
    if not ms:
        return "-"
    return time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(ms / 1000))


def _duration(ms: float) -> str:
    s = ms / 1000
    if s < 120:
        return f"{s:.1f} s"
    if s < 7200:
        return f"{s / 60:.1f} min"
    return f"{s / 3600:.2f} h"


def _job_section(job: JobInfo, debugger: DebuggerData | None) -> str:
    rows = [
        ("job", job.name or "(no registered job: a trial evaluated locally)"),
        ("status", job.status),
        ("trial", job.trial_path),
    ]
    if job.creation_ms:
        rows.append(("registered", _when(job.creation_ms)))
    if job.start_ms:
        rows.append(("started", _when(job.start_ms)))
    if job.end_ms:
        rows.append(("ended", _when(job.end_ms)))
        if job.start_ms:
            rows.append(("duration", _duration(job.end_ms - job.start_ms)))
    if job.failure_reason:
        rows.append(("failure reason", job.failure_reason))
    if debugger is not None:
        span = "-" if debugger.first_step is None else f"{debugger.first_step} .. {debugger.last_step}"
        rows.append(("steps saved", f"{debugger.steps} (global {span})"))
        rows.append(("workers", ", ".join(debugger.workers) or "-"))
        rows.append(("training ended", "yes (end marker present)" if debugger.training_ended else "no"))
    body = "".join(f"<dt>{escape(k)}</dt><dd>{escape(str(v))}</dd>" for k, v in rows)
    notes = "".join(f'<p class="note">{escape(n)}</p>' for n in job.notes)
    return f'<section id="job-summary"><h2>Job</h2><dl>{body}</dl>{notes}</section>'


def _verdict_rows(verdicts: Sequence[Verdict]) -> str:
    rows = []
    for v in verdicts:
        cause, fix = v.cause_and_fix
        advice = ""
        if cause:
            advice += f'<p class="advice"><b>Likely cause:</b> {escape(cause)}</p>'
        if fix:
            advice += f'<p class="advice"><b>Suggested fix:</b> {escape(fix)}</p>'
        if v.fired_count:
            listed = ", ".join(str(s) for s in v.fired_steps)
            more = "" if v.fired_count <= len(v.fired_steps) else f" ... ({v.fired_count} in all)"
            steps = f"{v.fired_count}: {listed}{more}"
        else:
            steps = "-"
        rule = escape(v.name) + ("" if v.rule == v.name else f' <span class="note">({escape(v.rule)})</span>')
        rows.append(
            f'<tr class="verdict" data-status="{escape(v.verdict)}"><td>{rule}</td>'
            f'<td class="status {escape(v.verdict)}">{escape(v.verdict)}</td>'
            f"<td>{escape(steps)}</td><td>{escape(v.finding)}{advice}</td></tr>"
        )
    return "".join(rows)


def _verdict_table(table_id: str, verdicts: Sequence[Verdict], empty: str) -> str:
    if not verdicts:
        return f'<p class="empty" id="{table_id}">{escape(empty)}</p>'
    head = "<tr><th>rule</th><th>verdict</th><th>fired at steps</th><th>finding and what to do</th></tr>"
    return f'<table id="{table_id}">{head}{_verdict_rows(verdicts)}</table>'


def _debugger_section(debugger: DebuggerData | None, verdicts: Sequence[Verdict]) -> str:
    fired = sorted({s for v in verdicts for s in v.fired_steps})
    parts = ['<section id="debugger"><h2>Debugger</h2>', "<h3>Rule verdicts</h3>"]
    parts.append(_verdict_table("rule-verdicts", verdicts, "no rules were evaluated"))
    if debugger is None:
        parts.append('<p class="note">The trial could not be opened: no tensors to draw.</p></section>')
        return "".join(parts)
    parts.append("<h3>Loss</h3>")
    if debugger.losses:
        lines = [Line(s.label, s.steps, s.values) for s in debugger.losses]
        parts.append(
            line_chart(
                "loss-chart",
                "loss by global step (red ticks: steps where a rule fired)",
                lines,
                markers=fired,
            )
        )
    else:
        parts.append(
            '<p class="empty" id="loss-chart">No tensor of the <code>losses</code> collection was saved.</p>'
        )
    parts.append('<div id="layer-stats"><h3>Per-layer statistics</h3>')
    if not debugger.norms:
        parts.append('<p class="empty">No <code>weights</code> or <code>gradients</code> were saved.</p>')
    for coll, series in debugger.norms.items():
        lines = [Line(s.label, s.steps, s.values) for s in series]
        parts.append(line_chart(f"norms-{escape(coll)}", f"L2 norm of each saved tensor of {coll}", lines))
        left = debugger.layers_left_out.get(coll, 0)
        if left:
            parts.append(f'<p class="note">{left} more tensors of {escape(coll)} are not drawn.</p>')
        rows = "".join(
            f"<tr><td><code>{escape(s.label)}</code></td><td class=num>{s.steps[0]}</td>"
            f"<td class=num>{s.values[0]:.4g}</td><td class=num>{s.steps[-1]}</td>"
            f"<td class=num>{s.values[-1]:.4g}</td></tr>"
            for s in series
        )
        parts.append(
            f'<table class="layer-table"><tr><th>{escape(coll)}</th><th>first step</th><th>L2 norm</th>'
            f"<th>last step</th><th>L2 norm</th></tr>{rows}</table>"
        )
    parts.append("</div></section>")
    return "".join(parts)


def step_outliers(steps: Sequence[StepTime], sigma: float = OUTLIER_SIGMA) -> list[StepTime]:
    """Steps slower than their mode's mean + ``sigma`` standard deviations, slowest first."""
    by_mode: dict[str, list[StepTime]] = {}
    for s in steps:
        by_mode.setdefault(s.mode, []).append(s)
    out = []
    for group in by_mode.values():
        if len(group) < 3:
            continue
        d = [s.duration_ms for s in group]
        limit = statistics.fmean(d) + sigma * statistics.pstdev(d)
        out.extend(s for s in group if s.duration_ms > limit)
    return sorted(out, key=lambda s: -s.duration_ms)


def _profiler_section(profiler: ProfilerData, verdicts: Sequence[Verdict]) -> str:
    parts = ['<section id="profiler"><h2>Profiler</h2>']
    parts.append(
        f'<p class="note">{profiler.system_files} system-metric files and {profiler.framework_files} '
        f"framework trace files read from <code>{escape(profiler.root)}</code>.</p>"
    )
    if profiler.files_left_out:
        parts.append(
            f'<p class="note">{profiler.files_left_out} more files were not read (limit reached).</p>'
        )
    parts.append("<h3>Utilisation over time</h3>")
    if profiler.utilisation:
        t0 = min(p[0] for pts in profiler.utilisation.values() for p in pts)
        lines = [Line(k, [t - t0 for t, _ in v], [y for _, y in v]) for k, v in profiler.utilisation.items()]
        parts.append(
            line_chart(
                "utilisation-chart",
                "utilisation (%)",
                lines,
                x_label="seconds since start",
                log_y=False,
                y_range=(0, 100),
            )
        )
    else:
        parts.append('<p class="empty" id="utilisation-chart">No system metrics were recorded.</p>')
    parts.append("<h3>Step time</h3>")
    durations = [s.duration_ms for s in profiler.steps]
    parts.append(histogram("step-time-histogram", "step duration (ms), all modes and nodes", durations, "ms"))
    if durations:
        q = statistics.quantiles(durations, n=20) if len(durations) > 1 else [durations[0]] * 19
        parts.append(
            f'<p id="step-stats">{len(durations)} steps: median {statistics.median(durations):.1f} ms, '
            f"p95 {q[18]:.1f} ms, max {max(durations):.1f} ms.</p>"
        )
    outliers = step_outliers(profiler.steps)
    if outliers:
        rows = "".join(
            f"<tr><td class=num>{s.step}</td><td>{escape(s.mode)}</td><td>{escape(s.node)}</td>"
            f"<td class=num>{s.duration_ms:.1f}</td></tr>"
            for s in outliers[:MAX_OUTLIERS_LISTED]
        )
        more = (
            ""
            if len(outliers) <= MAX_OUTLIERS_LISTED
            else f"<p class=note>{len(outliers)} outliers in all.</p>"
        )
        parts.append(
            f'<table id="step-outliers"><caption>Outliers: slower than mean + {OUTLIER_SIGMA:g} standard '
            f"deviations of their mode</caption><tr><th>step</th><th>mode</th><th>node</th><th>ms</th></tr>"
            f"{rows}</table>{more}"
        )
    else:
        parts.append(
            f'<p id="step-outliers" class="note">No step slower than mean + {OUTLIER_SIGMA:g} '
            "standard deviations.</p>"
        )
    parts.append("<h3>Phase breakdown</h3>")
    parts.append(
        stacked_bar("phase-breakdown", "time in each phase, all steps", list(profiler.phase_ms.items()))
    )
    parts.append("<h3>Profiler rules</h3>")
    parts.append(_verdict_table("profiler-rules", verdicts, "no profiler rule was configured for this job"))
    if profiler.problems:
        items = "".join(f"<li><code>{escape(p)}</code></li>" for p in profiler.problems)
        parts.append(f'<h3>Files not read</h3><ul id="profiler-problems">{items}</ul>')
    parts.append("</section>")
    return "".join(parts)


def render_page(
    job: JobInfo,
    verdicts: Sequence[Verdict],
    debugger: DebuggerData | None,
    profiler: ProfilerData | None,
    generated_s: float | None = None,
) -> str:
    """The whole report page."""
    tensor_rules = [v for v in verdicts if not v.is_profiler]
    profiler_rules = [v for v in verdicts if v.is_profiler]
    title = f"Tornasole report: {job.name or job.trial_path}"
    issues = sum(v.verdict == "IssuesFound" for v in verdicts)
    generated = _when(int((generated_s or time.time()) * 1000))
    summary = f"{job.status} · {len(verdicts)} rules, {issues} found issues · generated {generated}"
    body = [_job_section(job, debugger), _debugger_section(debugger, tensor_rules)]
    if profiler is not None:
        body.append(_profiler_section(profiler, profiler_rules))
    elif profiler_rules:
        body.append(
            '<section id="profiler"><h2>Profiler</h2><p class="note">No profiler-output/ in the trial.</p>'
            + _verdict_table("profiler-rules", profiler_rules, "")
            + "</section>"
        )
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        f'<meta http-equiv="Content-Security-Policy" content="{_CSP}">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>{escape(title)}</title><style>{_CSS}</style></head>"
        f'<body><div id="report"><header><h1>{escape(title)}</h1><p>{escape(summary)}</p></header>'
        f"<main>{''.join(body)}</main></div></body></html>\n"
    )
