"""Tornasole's exceptions: smdebug's public names, one root, structured fields.

Public names match ``smdebug.exceptions`` so user code and custom rules that
catch them port by changing the import root. Format and configuration errors
also subclass ``ValueError``; "not yet / never available" errors subclass
``LookupError``-free bases so ``except TornasoleError`` catches everything.
Every message names the file, step and tensor where they are known.
"""

from __future__ import annotations

from typing import Any

__all__ = [
    "TornasoleError",
    "TornasoleValueError",
    "FormatError",
    "ConfigurationError",
    "TensorUnavailableForStep",
    "TensorUnavailable",
    "StepUnavailable",
    "StepNotYetAvailable",
    "NoMoreData",
    "NoMoreProfilerData",
    "RuleEvaluationConditionMet",
    "MissingCollectionFiles",
    "IndexReaderException",
    "InvalidWorker",
    "InsufficientInformationForRuleInvocation",
    "RuleParameterError",
    "RuleLoadError",
    "InvalidJobConfiguration",
]


class TornasoleError(Exception):
    """Root of every error Tornasole raises on purpose."""


class TornasoleValueError(TornasoleError, ValueError):
    """Bad input: a value, a file or a configuration that cannot be used."""


class FormatError(TornasoleValueError):
    """A file does not follow the smdebug on-disk format.

    ``path`` is the file, ``offset`` the byte offset where known, ``step`` and
    ``tensor_name`` where known.
    """

    def __init__(
        self,
        message: str,
        *,
        path: str | None = None,
        offset: int | None = None,
        step: int | None = None,
        tensor_name: str | None = None,
    ) -> None:
        self.path = path
        self.offset = offset
        self.step = step
        self.tensor_name = tensor_name
        where = []
        if path is not None:
            where.append(str(path))
        if step is not None:
            where.append(f"step {step}")
        if tensor_name is not None:
            where.append(f"tensor {tensor_name!r}")
        if offset is not None:
            where.append(f"offset {offset}")
        prefix = ", ".join(where)
        super().__init__(f"{prefix}: {message}" if prefix else message)


class IndexReaderException(FormatError):
    """An index file is malformed, or points at data that is not there."""


class ConfigurationError(TornasoleValueError):
    """A missing or invalid setting (environment variable, config file, parameter)."""


class TensorUnavailableForStep(TornasoleError):
    """The tensor was not saved for this step (and never will be)."""

    def __init__(self, tname: str, step: int, mode: Any = None, has_reductions: bool = False) -> None:
        self.tensor = self.tensor_name = tname
        self.step = step
        self.mode = mode
        self.has_reductions = has_reductions
        msg = f"Value for tensor {tname} is not available for step {step}"
        if mode is not None:
            msg += f" with mode {getattr(mode, 'name', mode)}"
        msg += " as it was not saved."
        if has_reductions:
            msg += " This tensor has reductions saved for this step; use reduction_value()."
        super().__init__(msg)


class TensorUnavailable(TornasoleError):
    """No tensor of that name was saved in this trial."""

    def __init__(self, tname: str) -> None:
        self.tensor = self.tensor_name = tname
        super().__init__(f"Tensor {tname} was not saved.")


class StepUnavailable(TornasoleError):
    """The step was not saved, and training went past it: it never will be."""

    def __init__(self, step: int, mode: Any = None) -> None:
        self.step = step
        self.mode = mode
        m = f" for mode {getattr(mode, 'name', mode)}" if mode is not None else ""
        super().__init__(f"Step {step}{m} is not available: it was not saved.")


class StepNotYetAvailable(TornasoleError):
    """The step is not there yet, but may still arrive (training is going on)."""

    def __init__(self, step: int, mode: Any = None) -> None:
        self.step = step
        self.mode = mode
        m = f" for mode {getattr(mode, 'name', mode)}" if mode is not None else ""
        super().__init__(f"Step {step}{m} is not yet available.")


class NoMoreData(TornasoleError):
    """Training has ended (end marker seen) and there is nothing after this step."""


class NoMoreProfilerData(TornasoleError):
    """Training has ended and no profiler data will come after the asked time (smdebug's end of data)."""

    def __init__(self, timestamp_us: int | float | None = None) -> None:
        self.timestamp = timestamp_us
        super().__init__(
            "training has ended: no more profiler data"
            + (f" after {timestamp_us} us since the epoch" if timestamp_us is not None else "")
        )


class RuleEvaluationConditionMet(TornasoleError):
    """Raised by ``Rule.invoke`` when the rule's condition holds at ``step``."""

    def __init__(self, rule_name: str, step: int, last_step: bool = False) -> None:
        self.rule_name = rule_name
        self.step = step
        self.last_step = last_step
        super().__init__(
            f"Evaluation of the rule {rule_name} at step {step} resulted in the condition being met"
        )

    def __reduce__(self):  # keep picklable with positional args
        return (RuleEvaluationConditionMet, (self.rule_name, self.step, self.last_step))


class MissingCollectionFiles(TornasoleError):
    """Training ended and no collections file was ever written."""

    def __init__(self, path: str | None = None) -> None:
        self.path = path
        where = f" under {path}" if path else ""
        super().__init__(f"Training has ended and no collection files were found{where}.")


class InvalidWorker(TornasoleError):
    """The worker is not one of the trial's workers, or did not save the tensor at that step (as smdebug)."""

    def __init__(self, worker: str, known: Any = None, message: str | None = None) -> None:
        self.worker = worker
        k = f"; known workers: {sorted(known)}" if known is not None else ""
        super().__init__(message or f"Invalid worker {worker!r}{k}")


class InsufficientInformationForRuleInvocation(TornasoleError):
    """A rule cannot run at this step: required data is missing."""

    def __init__(self, rule_name: str, message: str) -> None:
        self.rule_name = rule_name
        super().__init__(f"Insufficient information to invoke rule {rule_name}: {message}")


class RuleParameterError(TornasoleValueError):
    """A rule parameter is unknown, missing or does not parse; names rule and parameter."""

    def __init__(self, rule_name: str, parameter: str | None, message: str) -> None:
        self.rule_name = rule_name
        self.parameter = parameter
        p = f" parameter {parameter!r}" if parameter else ""
        super().__init__(f"{rule_name}:{p} {message}")


class RuleLoadError(TornasoleValueError):
    """A custom rule file cannot be loaded (syntax error, missing class, bad import)."""


class InvalidJobConfiguration(ConfigurationError):
    """A job registration that cannot be accepted; nothing was written.

    ``problems`` lists every problem found (each names the rule, parameter or
    field and says what is valid), so one round trip fixes them all; the
    message is those problems, one per line.
    """

    def __init__(self, problems: list[str] | str, *, job: str | None = None) -> None:
        self.problems = [problems] if isinstance(problems, str) else list(problems)
        self.job = job
        head = f"cannot register job {job!r}: " if job else "invalid job configuration: "
        body = self.problems[0] if len(self.problems) == 1 else "\n  - " + "\n  - ".join(self.problems)
        super().__init__(head + body)
