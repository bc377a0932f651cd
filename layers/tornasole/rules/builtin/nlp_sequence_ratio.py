"""NLPSequenceRatio: too many padding/unknown tokens in the input sequences.

Choices: per step, per input tensor (``tensor_regex``), the share (%) of
entries equal to each of ``token_values`` is compared with the matching
``token_thresholds_percent`` entry; the rule fires when a share exceeds its
threshold. The two lists must have the same length (one threshold may be given
for all tokens).
"""

from __future__ import annotations

import numpy as np

from tornasole.rules.builtin.base import BuiltinRule
from tornasole.rules.params import Param

__all__ = ["NLPSequenceRatio"]


class NLPSequenceRatio(BuiltinRule):
    """Fires when the % of a given token id in the input sequences exceeds its threshold.

    Examples
    --------
    >>> # invoke_rule(NLPSequenceRatio(trial, token_values="0,1", token_thresholds_percent="50,10"))
    """

    LIKELY_CAUSE = "padding or unknown tokens make up much of the input sequences"
    SUGGESTED_FIX = "check the tokenizer and vocabulary; shorten the padded sequence length"

    READS_EARLIER_STEPS = False
    PARAMETERS = (
        Param("tensor_regex", "regex", ".*embedding0_input_0", "input sequence tensors (re.match)"),
        Param("token_values", "float_list", "0", "token ids to count (comma-separated)"),
        Param("token_thresholds_percent", "float_list", "50", "% per token above which the rule fires"),
    )
    COLLECTIONS = (("input_sequence", {"include_regex": ".*embedding0_input_0", "save_interval": "500"}),)

    def check_params(self) -> None:
        if len(self.token_thresholds_percent) == 1 and len(self.token_values) > 1:
            self.token_thresholds_percent = self.token_thresholds_percent * len(self.token_values)
        if len(self.token_values) != len(self.token_thresholds_percent):
            raise self.param_error(
                "token_thresholds_percent",
                f"has {len(self.token_thresholds_percent)} entries but token_values has "
                f"{len(self.token_values)}",
            )

    def invoke_at_step(self, step: int) -> bool:
        for name in self.names_at(step, regex=self.tensor_regex):
            v = self.value(name, step)
            if v is None or v.size == 0:
                continue
            for token, limit in zip(self.token_values, self.token_thresholds_percent):
                pct = float(np.count_nonzero(v == token) / v.size * 100.0)
                if pct > limit:
                    self.report_issue(
                        f"token {self.fmt(token)} is {self.fmt(pct)}% of {name} (> {self.fmt(limit)}%)",
                        tensor=name,
                        token=token,
                        value=pct,
                        threshold=limit,
                    )
                    return True
        return False
