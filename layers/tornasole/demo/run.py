"""``tornasole demo``: local mode in-process, two jobs, two real trainings, the verdicts and a plot.

Nothing runs outside this process and nothing reaches the network: the moto
server listens on 127.0.0.1, the hook writes to its S3, the dispatcher hands
each step to the same handlers Lambda runs, and the events the evaluator
puts on the bus arrive through an SQS target, where they are printed.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from tornasole.demo.training import TrainingSettings, train
from tornasole.jobs import format_event, format_job
from tornasole.rules import recommended_rules

__all__ = ["DEFAULT_RULES", "EXPECTED", "DemoResult", "run_demo"]

# The demo registers no rules by name: both jobs get the recommended set, as a user's first job does.
DEFAULT_RULES = tuple(r["RuleConfigurationName"] for r in recommended_rules())
JOBS = {"tornasole-demo-healthy": False, "tornasole-demo-broken": True}
# What the demo must end with: the healthy run clean; in the diverged run the loss turns NaN
# (ExplodingTensor), the ReLUs die (DeadRelu), the tanh inputs saturate (SaturatedActivation) and the
# first update is 10^5 times the weights (WeightUpdateRatio), and from then on neither the validation nor
# the training accuracy moves (SlowConvergence); NonFiniteOrigin names the first saved tensor that went
# non-finite; the loss's jump from 1.2 to 2e9 at the first saved step after it is a spike (LossSpike,
# Megatron-LM's 10x the largest seen). LossNotDecreasing stays quiet: a NaN loss is ExplodingTensor's.
EXPECTED = {
    "tornasole-demo-healthy": dict.fromkeys(DEFAULT_RULES, "NoIssuesFound"),
    "tornasole-demo-broken": {
        **dict.fromkeys(DEFAULT_RULES, "NoIssuesFound"),
        "ExplodingTensor": "IssuesFound",
        "DeadRelu": "IssuesFound",
        "SaturatedActivation": "IssuesFound",
        "WeightUpdateRatio": "IssuesFound",
        "SlowConvergence": "IssuesFound",
        "NonFiniteOrigin": "IssuesFound",
        "LossSpike": "IssuesFound",
    },
}


@dataclass
class DemoResult:
    statuses: dict[str, dict[str, str]] = field(default_factory=dict)  # job -> rule -> status
    job_statuses: dict[str, str] = field(default_factory=dict)
    events: list[dict[str, Any]] = field(default_factory=list)
    plot: str = ""
    seconds: float = 0.0

    @property
    def ok(self) -> bool:
        return self.statuses == EXPECTED and all(s == "Completed" for s in self.job_statuses.values())


def _final_status(name: str, out: Callable[[str], None]) -> tuple[str, dict[str, str]]:
    from tornasole.jobs import describe

    description = describe(name)
    out(format_job(description))
    return description["TrainingJobStatus"], {
        s["RuleConfigurationName"]: s["RuleEvaluationStatus"]
        for s in description.get("DebugRuleEvaluationStatuses", [])
    }


def run_demo(
    output_dir: str = "demo-output",
    settings: TrainingSettings | None = None,
    out: Callable[[str], None] = print,
    timeout: float = 100.0,
) -> DemoResult:
    """Run the whole demo; returns the statuses, the events seen and the plot's path."""
    from tornasole.analysis.plot import plot_trial
    from tornasole.jobs import register_job
    from tornasole.jobs.listing import fired_steps
    from tornasole.local import LocalMode, LocalSettings
    from tornasole.trials import create_trial

    settings = settings or TrainingSettings()
    started = time.monotonic()
    result = DemoResult()
    os.makedirs(output_dir, exist_ok=True)
    with LocalMode(LocalSettings(port=0, schedule_seconds=10)) as local:
        assert local.dispatcher is not None
        out(f"local mode up at {local.endpoint} (moto; nothing leaves this machine)")

        def on_event(event: dict[str, Any]) -> None:
            result.events.append(event)
            out("  event  " + format_event(event))

        local.dispatcher.event_subscribers.append(on_event)
        for job in JOBS:
            register_job(job, f"{local.trial_root}{job}")  # no rules named: the recommended set
            out(f"registered {job} with the recommended rules: {', '.join(DEFAULT_RULES)}")
        for job, broken in JOBS.items():
            lr = settings.broken_lr if broken else settings.healthy_lr
            out(f"\ntraining {job}: {settings.steps} steps, lr={lr} ({'far too high' if broken else 'sane'})")
            losses = train(f"{local.trial_root}{job}", broken=broken, settings=settings)
            out(f"  loss: first {losses[0]:.3f}, last {losses[-1]:.3f}")
        out(f"\nwaiting (at most {timeout:.0f} s) for the evaluator to finish every step ...")
        deadline = time.monotonic() + timeout
        pending = list(JOBS)
        while time.monotonic() < deadline:
            local.drain(timeout=5)
            from tornasole.jobs import describe

            pending = [j for j in JOBS if describe(j)["TrainingJobStatus"] == "InProgress"]
            if not pending:
                break
            local.dispatcher.run_scheduled_check()
        if pending:
            out(f"gave up waiting after {timeout:.0f} s: still InProgress: {', '.join(pending)}")
        local.drain(timeout=10)  # the last events still travel bus -> SQS target
        out("")
        for job in JOBS:
            result.job_statuses[job], result.statuses[job] = _final_status(job, out)
            out("")
        broken_job = next(j for j, b in JOBS.items() if b)
        trial = create_trial(f"{local.trial_root}{broken_job}")
        names = [
            *trial.tensor_names(collection="losses"),
            *sorted(trial.tensor_names(regex=r"^gradient/.*weight")),
        ]
        result.plot = os.path.join(output_dir, "broken_run.png")
        plot_trial(
            trial,
            names,
            result.plot,
            abs_=True,
            fired=fired_steps(broken_job),
            title=f"{broken_job}: where rules fired",
        )
        if local.dispatcher.errors:
            out("dispatcher errors: " + "; ".join(local.dispatcher.errors))
    kinds: dict[str, int] = {}
    for e in result.events:
        kinds[e.get("detail-type", "?")] = kinds.get(e.get("detail-type", "?"), 0) + 1
    out(
        f"{len(result.events)} events went to the local EventBridge bus 'tornasole' and reached its "
        "SQS target (tornasole-local-events): " + ", ".join(f"{n} x {k}" for k, n in sorted(kinds.items()))
    )
    out(f"plot of the broken run with the firing steps marked: {result.plot}")
    result.seconds = time.monotonic() - started
    out(f"demo {'passed' if result.ok else 'FAILED'} in {result.seconds:.0f} s")
    return result
