"""ExpertImbalance: a mixture-of-experts layer has a dead expert, or one expert takes most tokens.

Reads ``router/<layer>/expert_load`` (:mod:`tornasole.core.llm_signals`), the fraction of the step's
tokens routed to each expert, saved by :func:`tornasole.pytorch.save_router_stats`. With ``E`` experts
the fair share is ``1/E``. NeMo/Megatron-Core log the same per-expert token counts
(``megatron/core/transformer/moe/moe_utils.py``, ``track_moe_metrics``) for a user to read; this rule
judges them:

* **dead**: an expert's share stayed below ``dead_fraction`` of the fair share at ``num_steps``
  consecutive saved steps of the mode. A healthy router leaves experts idle for a while early in
  training, until the load-balancing loss has acted: in the families benchmark (issue 29) such stretches
  lasted up to 36 steps (a Switch top-1 router over 8 and 16 experts) and 12 (top-2 over 4 and 8), and the
  first default of 5 steps alarmed on 10 of 16 and 18 of 18 healthy runs of two held-out MoE families. 50
  saved steps is above every healthy stretch seen; a collapsed router (no balancing loss, a router learning
  rate too high, gates detached from the graph) starves its experts for hundreds of steps. The price: a
  dead expert is reported ``num_steps`` saved steps after it died;
* **overloaded**: an expert's share stayed above ``overload_factor`` times the fair share over the
  same steps (with capacity-limited routing the excess tokens are dropped).

Each layer is judged alone; the finding names the layer and the expert's index.
"""

from __future__ import annotations

import re

import numpy as np

from tornasole.core.llm_signals import EXPERT_LOAD, ROUTER
from tornasole.rules.builtin.base import BuiltinRule
from tornasole.rules.builtin.series import names_matching
from tornasole.rules.params import Param

__all__ = ["ExpertImbalance"]

_LOAD = re.compile(rf"^(?:scalar/)?{ROUTER}/(?P<layer>.+)/{EXPERT_LOAD}$")


class ExpertImbalance(BuiltinRule):
    """Fires on an expert whose share of tokens stays below ``dead_fraction`` or above ``overload_factor``
    of the fair share for ``num_steps`` saved steps.

    Examples
    --------
    >>> # invoke_rule(ExpertImbalance(trial, num_steps="50", dead_fraction="0.1", overload_factor="3"))
    """

    LIKELY_CAUSE = (
        "the router of {tensor} collapsed onto few experts (no or too weak load-balancing loss, a router "
        "learning rate too high, or an expert whose weights went bad), so some experts never train"
    )
    SUGGESTED_FIX = (
        "add or raise the load-balancing auxiliary loss (e.g. 0.01), add router z-loss or jitter, lower "
        "the router's learning rate, or re-initialise the dead expert"
    )

    PARAMETERS = (
        Param("dead_fraction", "float", "0.1", "share below this fraction of 1/E counts as dead"),
        Param(
            "overload_factor", "float", "3", "share above this multiple of 1/E counts as overloaded (0: off)"
        ),
        Param(
            "num_steps",
            "int",
            "50",
            "consecutive saved steps the condition must hold (above a healthy router's early idle spell)",
        ),
    )

    def check_params(self) -> None:
        self.require_at_least(0, "dead_fraction", "overload_factor")
        self.require_at_least(1, "num_steps")

    def history_steps(self) -> int | None:
        return self.num_steps

    def invoke_at_step(self, step: int) -> bool:
        return any(self._judge(name, step) for name in names_matching(self, step, _LOAD))

    def _judge(self, name: str, step: int) -> bool:
        steps = self.same_mode_steps(name, step)[-self.num_steps :]
        if len(steps) < self.num_steps or steps[-1] != step:
            return False
        loads = [self.value(name, s) for s in steps]
        if any(v is None for v in loads) or len({v.size for v in loads}) != 1 or loads[0].size < 2:
            return False
        shares = np.stack([v.astype(np.float64).ravel() for v in loads])
        sums = shares.sum(axis=1, keepdims=True)
        shares = np.divide(shares, sums, out=np.zeros_like(shares), where=sums > 0)
        experts = shares.shape[1]
        fair = 1.0 / experts
        layer = _LOAD.match(name).group("layer")
        dead = np.where((shares < self.dead_fraction * fair).all(axis=0))[0]
        if dead.size:
            e = int(dead[0])
            self.report_issue(
                f"{layer}: expert {e} of {experts} received {self.fmt(shares[-1, e])} of the tokens at "
                f"step {step} and under {self.fmt(self.dead_fraction * fair)} (dead_fraction x 1/{experts}) "
                f"at each of the last {len(steps)} saved steps (dead expert; {len(dead)} dead in all)",
                tensor=layer,
                expert=e,
                value=float(shares[-1, e]),
                criterion="dead",
            )
            return True
        if self.overload_factor:
            over = np.where((shares > self.overload_factor * fair).all(axis=0))[0]
            if over.size:
                e = int(over[0])
                self.report_issue(
                    f"{layer}: expert {e} of {experts} received {self.fmt(shares[-1, e])} of the tokens at "
                    f"step {step}, over {self.fmt(self.overload_factor * fair)} "
                    f"(overload_factor x 1/{experts}) at each of the last {len(steps)} "
                    f"saved steps (overloaded expert)",
                    tensor=layer,
                    expert=e,
                    value=float(shares[-1, e]),
                    criterion="overloaded",
                )
                return True
        return False
