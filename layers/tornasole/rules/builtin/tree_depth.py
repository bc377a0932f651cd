"""TreeDepth (XGBoost): the trees stay shallower than expected.

SageMaker's guide: XGBoost rejects splits that do not improve the loss, so a
tree "might not grow as deep as defined by the depth parameter"; depth is
the base-2 logarithm of the largest node id. Chosen reading: at a step the
node ids are read from tensors whose name ends in ``trees/Node`` (or ``/nid``;
smdebug's XGBoost hook saves the columns of ``trees_to_dataframe`` under the
``trees`` collection), depth = floor(log2(max node id + 1)), and the rule fires
when that depth is below ``depth``.
"""

from __future__ import annotations

import math
import re

from tornasole.rules.builtin.base import BuiltinRule
from tornasole.rules.params import Param

__all__ = ["TreeDepth"]

_NODE = re.compile(r"(^|.*/)(trees/Node|trees/nid)$")


class TreeDepth(BuiltinRule):
    """Fires when the deepest tree (log2 of the largest node id) is shallower than ``depth``.

    Examples
    --------
    >>> # invoke_rule(TreeDepth(trial, depth="4"))
    """

    LIKELY_CAUSE = "the trees grow deeper than expected (overfitting risk)"
    SUGGESTED_FIX = "lower max_depth or raise min_child_weight"

    READS_EARLIER_STEPS = False
    PARAMETERS = (Param("depth", "int", "4", "expected tree depth"),)

    def invoke_at_step(self, step: int) -> bool:
        for name in self.names_at(step, regex=_NODE):
            v = self.value(name, step)
            if v is None or v.size == 0:
                continue
            largest = int(v.max())
            observed = int(math.floor(math.log2(largest + 1))) if largest >= 0 else 0
            if observed < self.depth:
                self.report_issue(
                    f"tree depth {observed} (largest node id {largest}) < depth {self.depth}",
                    tensor=name,
                    value=observed,
                    threshold=self.depth,
                )
                return True
        return False
