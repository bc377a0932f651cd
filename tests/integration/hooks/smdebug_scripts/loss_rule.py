"""An smdebug custom rule file, as users wrote them."""

from smdebug.rules.rule import Rule


class LossAboveThreshold(Rule):
    def __init__(self, base_trial, threshold=100.0):
        super().__init__(base_trial)
        self.threshold = float(threshold)

    def invoke_at_step(self, step):
        for tname in self.base_trial.tensor_names(collection="losses"):
            if self.base_trial.tensor(tname).value(step) > self.threshold:
                return True
        return False
