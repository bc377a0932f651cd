"""Issue 29's three targets, family by family, from the numbers ``score.py --json`` wrote: one markdown table.

Usage::

    python bench/detection/families/targets_table.py out.json [held.json ...] --held-out conv1d,multilabel

Each family is scored as the one left out (``score.py``); this prints, per family, worst first:

* recall on the runs built broken, counting only firings quiet on the run's healthy twin (target >= 0.95),
  and the same on the built-broken runs that did harm (DeepFD's killed mutants, :mod:`families.counting`);
* alarms on the runs built healthy (target <= 5 %);
* the median first firing from the labels' onset, in TRAIN steps, and the share within one save interval
  (target: the median within one save interval, :data:`SAVE_INTERVAL` TRAIN steps).

Why a table of its own: the targets are per family and the headline is the worst family, never a mean, so
the current figures are this table and the worst row of each column, printed from the saved numbers rather
than copied by hand. Several files merge in order (a later file's family replaces an earlier one's: a
re-scoring of held-out families). ``--held-out`` marks the families no rule or parameter was designed on.
Reads JSON only: imports neither PyTorch nor scikit-learn.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

#: TRAIN steps between two saved steps in every family (``families.training.SAVE_INTERVAL``, not imported:
#: that module imports PyTorch).
SAVE_INTERVAL = 4
RECALL_TARGET = 0.95
ALARM_TARGET = 0.05


def load_numbers(paths: list[Path], set_name: str) -> dict[str, dict]:
    """The per-family numbers of ``set_name`` in each of ``paths`` (``score.py --json`` files), merged in
    order. Raises ValueError naming the file that holds no such numbers."""
    per: dict[str, dict] = {}
    for path in paths:
        try:
            numbers = json.loads(path.read_text())["numbers"][set_name]
        except (OSError, ValueError, KeyError, TypeError) as e:
            raise ValueError(f"{path}: no per-family numbers of the set {set_name!r} ({e!r})") from None
        per.update(numbers)
    return per


def _share(hits: int, total: int) -> float | None:
    return hits / total if total else None


def targets_met(m: dict) -> dict[str, bool]:
    """Which of the three targets family numbers ``m`` meet (a column with nothing to count meets it).

    >>> targets_met({"built_broken_detected_twin_quiet": 15, "built_broken": 16, "built_healthy_alarms": 2,
    ...              "built_healthy": 24, "median_latency_train_steps": 4})
    {'recall': False, 'alarms': False, 'latency': True}
    """
    recall = _share(m["built_broken_detected_twin_quiet"], m["built_broken"])
    alarms = _share(m["built_healthy_alarms"], m["built_healthy"])
    latency = m.get("median_latency_train_steps")
    return {
        "recall": recall is None or recall >= RECALL_TARGET,
        "alarms": alarms is None or alarms <= ALARM_TARGET,
        "latency": latency is None or latency <= SAVE_INTERVAL,
    }


def _order(item: tuple[str, dict]) -> tuple:
    """Worst first: more targets missed, then more alarms (share), then lower recall, then the name."""
    family, m = item
    missed = sum(not ok for ok in targets_met(m).values())
    alarms = _share(m["built_healthy_alarms"], m["built_healthy"]) or 0.0
    recall = _share(m["built_broken_detected_twin_quiet"], m["built_broken"])
    return (-missed, -alarms, 1.0 if recall is None else recall, family)


def _cell(hits: int, total: int, bold: bool) -> str:
    text = f"{hits}/{total}" if total else "-"
    return f"**{text}**" if bold and total else text


def table(per: dict[str, dict], held_out: set[str]) -> str:
    """The markdown table, worst family first, a family that misses a target in bold in that column."""
    rows = [
        "| family | recall (built, twin-quiet) | recall (harmful) | alarms on built-healthy | median latency "
        "| within 1 save interval |",
        "|---|---|---|---|---|---|",
    ]
    for family, m in sorted(per.items(), key=_order):
        met = targets_met(m)
        latency = m.get("median_latency_train_steps")
        within = m.get("within_one_save_interval")
        name = f"{family} (held out)" if family in held_out else family
        recall = _cell(m["built_broken_detected_twin_quiet"], m["built_broken"], not met["recall"])
        rows.append(
            f"| {name} | {recall} "
            f"| {_cell(m['built_harmful_detected_twin_quiet'], m['built_harmful'], False)} "
            f"| {_cell(m['built_healthy_alarms'], m['built_healthy'], not met['alarms'])} "
            f"| {'-' if latency is None else f'{latency:g}'} "
            f"| {'-' if within is None else f'{100 * within:.0f} %'} |"
        )
    return "\n".join(rows)


def summary(per: dict[str, dict]) -> list[str]:
    """One line per target: how many families meet it and the worst family's figure; then the totals."""
    n = len(per)
    lines = []
    for target, label in (
        ("recall", f"recall (built, twin-quiet) >= {RECALL_TARGET}"),
        ("alarms", f"alarms on built-healthy runs <= {ALARM_TARGET:.0%}"),
        ("latency", f"median first firing within one save interval ({SAVE_INTERVAL} TRAIN steps)"),
    ):
        met = [f for f, m in per.items() if targets_met(m)[target]]
        lines.append(f"- {label}: met in {len(met)} of {n} families")
    recall = min(
        (m["built_broken_detected_twin_quiet"] / m["built_broken"], f)
        for f, m in per.items()
        if m["built_broken"]
    )
    harmful = [
        (m["built_harmful_detected_twin_quiet"] / m["built_harmful"], f)
        for f, m in per.items()
        if m["built_harmful"]
    ]
    alarms = max(
        (m["built_healthy_alarms"] / m["built_healthy"], f) for f, m in per.items() if m["built_healthy"]
    )
    lines.append(
        f"- worst recall (built, twin-quiet): {recall[1]} {recall[0]:.2f}; worst recall (harmful): "
        + (f"{min(harmful)[1]} {min(harmful)[0]:.2f}" if harmful else "-")
        + f"; most alarms: {alarms[1]} {alarms[0]:.0%}"
    )
    fired = sum(m["built_healthy_alarms"] for m in per.values())
    healthy = sum(m["built_healthy"] for m in per.values())
    harmful_hits = sum(m["built_harmful_detected_twin_quiet"] for m in per.values())
    harmful_all = sum(m["built_harmful"] for m in per.values())
    lines.append(
        f"- in all: alarms on {fired} of {healthy} built-healthy runs ({fired / healthy:.1%}); "
        f"{harmful_hits} of {harmful_all} harmful runs caught; {sum(m['runs'] for m in per.values())} runs"
    )
    fell = [(f, case) for f, m in per.items() for case in m.get("built_healthy_collapsed_cases", [])]
    if fell:
        lines.append(
            "- built healthy but collapsed (final score no better than the input-independent baseline; "
            "counted apart, neither as a healthy run nor as a floor for harm): "
            + "; ".join(case for _, case in fell)
        )
    return lines


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("json", nargs="+", type=Path, help="score.py --json files, merged in order")
    ap.add_argument("--set", default="recommended", help="the rule set's numbers (default: recommended)")
    ap.add_argument("--held-out", default="", help="comma-separated families no rule was designed on")
    args = ap.parse_args(argv)
    try:
        per = load_numbers(args.json, args.set)
    except ValueError as e:
        ap.error(str(e))
    if not per:
        ap.error(f"{', '.join(map(str, args.json))}: no family scored")
    held_out = {f for f in args.held_out.split(",") if f}
    unknown = sorted(held_out - set(per))
    if unknown:
        ap.error(f"--held-out: {', '.join(unknown)} not among the scored families ({', '.join(sorted(per))})")
    print(table(per, held_out))
    print()
    print("\n".join(summary(per)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
