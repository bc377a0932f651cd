"""DataReplay: after a resume the data loader replays batches the run already trained on.

The published failure (issue 30): a job resumed from a checkpoint that restored the model, the optimiser
and the scheduler but not the data loader's position starts its epoch over and trains again on data it
has seen, or replays the same shuffled order; one public report lost 40% of a run to it. PyTorch's
``DataLoader`` keeps no position, which is why ``torchdata``'s ``StatefulDataLoader`` exists (its
``state_dict()``/``load_state_dict()`` resume "from where it left off"), and Megatron-LM checkpoints the
number of consumed samples for the same reason (``args.consumed_train_samples``, from which its
``MegatronPretrainingSampler`` resumes). Nothing in the weights, gradients or loss shows a replay; the
batches themselves do.

The rule reads the fingerprints :func:`tornasole.pytorch.record_batch` saves (``batch_fingerprint/<input>``:
a 48-bit hash of the step's batch and the epoch). It fires when the last ``min_run`` saved steps trained on
the batches of ``min_run`` earlier consecutive saved steps, in the same order, in the same epoch. Why a
run and the same epoch: an epoch shows every batch once, so a batch seen twice in one epoch was replayed;
a single repeat may be a duplicate in the data set itself (``min_run`` 1 fires on it), but ``min_run``
batches in the same order are the loader's sequence played again. When the loop does not record the
epoch, every earlier step counts: an epoch that repeats the previous one's order (no shuffling) is then a
replay too, unless ``epoch_steps`` says how many steps an epoch has (repeats a whole number of epochs
apart are then the data set's own).

Reach: ``window`` earlier saved steps offline (``invoke_rule``); the serverless evaluator loads at most
``MAX_HISTORY_STEPS`` (64) earlier saved steps for any rule, so there a replay of batches more than 64 saved
steps back is not seen.
"""

from __future__ import annotations

from tornasole.core.batch_fingerprint import NO_EPOCH
from tornasole.core.llm_signals import BATCH_FINGERPRINT, signal_regex
from tornasole.rules.builtin.base import BuiltinRule
from tornasole.rules.builtin.series import names_matching
from tornasole.rules.params import Param

__all__ = ["DataReplay"]


class DataReplay(BuiltinRule):
    """Fires when the last ``min_run`` saved steps replay the batches of earlier steps of the same epoch.

    Examples
    --------
    >>> # invoke_rule(DataReplay(trial, min_run="3"))
    """

    LIKELY_CAUSE = (
        "the data of {tensor} is being replayed: the job resumed from a checkpoint without the data loader's "
        "position (sampler, epoch, consumed samples), so it trains again on batches it has seen"
    )
    SUGGESTED_FIX = (
        "checkpoint and restore the loader's state (torchdata's StatefulDataLoader state_dict, the sampler's "
        "epoch and the consumed-sample count) with the model, or skip the consumed batches on resume"
    )

    PARAMETERS = (
        Param("min_run", "int", "3", "consecutive saved steps that must repeat earlier batches in order"),
        Param(
            "epoch_steps",
            "int",
            "0",
            "steps in one epoch, for fingerprints saved without an epoch: repeats a whole number of epochs "
            "apart are not replays (0: unknown)",
        ),
        Param("window", "int", "1000", "earlier saved steps compared with (the evaluator loads them)"),
    )

    def check_params(self) -> None:
        self.require_at_least(1, "min_run", "window")
        self.require_at_least(0, "epoch_steps")
        if self.window < self.min_run:
            raise self.param_error("window", f"value {self.window} must be >= min_run ({self.min_run})")

    def history_steps(self) -> int | None:
        return self.window

    def _records(self, name: str, steps: list[int]) -> list[tuple[int, int] | None]:
        out: list[tuple[int, int] | None] = []
        for s in steps:
            v = self.value(name, s)
            if v is None or v.size < 1:
                out.append(None)
                continue
            flat = v.reshape(-1)
            epoch = int(flat[1]) if flat.size > 1 else NO_EPOCH
            out.append((int(flat[0]), epoch))
        return out

    def invoke_at_step(self, step: int) -> bool:
        pattern = signal_regex(BATCH_FINGERPRINT, any_suffix=True)
        for name in names_matching(self, step, pattern):
            steps = self.same_mode_steps(name, step)[-(self.window + 1) :]
            if len(steps) <= self.min_run or steps[-1] != step:
                continue
            if self._judge(name, steps, self._records(name, steps)):
                return True
        return False

    def _judge(self, name: str, steps: list[int], records: list[tuple[int, int] | None]) -> bool:
        last = len(steps) - 1
        now = records[last]
        if now is None:
            return False
        for i in range(last - 1, -1, -1):  # the most recent earlier occurrence first
            if records[i] != now:
                continue
            offset = last - i
            run = [(last - j, i - j) for j in range(self.min_run)]
            if run[-1][1] < 0:
                continue
            if not all(records[a] is not None and records[a] == records[b] for a, b in run):
                continue
            if now[1] == NO_EPOCH and self.epoch_steps and (steps[last] - steps[i]) % self.epoch_steps == 0:
                continue
            first_now, first_then = steps[last - self.min_run + 1], steps[i - self.min_run + 1]
            epoch = "" if now[1] == NO_EPOCH else f" (epoch {now[1]})"
            self.report_issue(
                f"{name}: steps {first_now}..{steps[last]} trained on the batches of steps "
                f"{first_then}..{steps[i]}{epoch}, in the same order ({self.min_run} consecutive saved "
                f"steps, {offset} saved steps apart): data replayed",
                tensor=name,
                replayed_step=steps[i],
                offset=offset,
            )
            return True
        return False
