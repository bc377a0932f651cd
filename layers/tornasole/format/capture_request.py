"""A capture request: the evaluator asks a training job to save full tensors for its next N steps.

When a rule with a ``capture`` action first fires, the evaluator writes one
request per rule under ``<trial>/tornasole_capture/`` (next to the job's output,
as it writes the stop signal: a request is scoped to the job by where it lives).
The hook lists that folder on its poller thread, reads each new request, and
saves the full tensors of the requested collections at its next ``Steps``
training steps on top of its own save config (``tornasole.hooks.capture_window``).

The file is written by the evaluator but lives in a bucket the training job
(and whoever controls it) can also write, so the hook treats it as hostile:
:meth:`CaptureRequest.decode` bounds its size, its step count
(:data:`MAX_CAPTURE_STEPS`) and its collections (:data:`CAPTURE_COLLECTIONS`),
and raises :class:`CaptureRequestError` naming the file and the field; the hook
logs that once and goes on training.

Why these bounds: every captured step copies whole tensors (the bf16 gradients
of a 7B model are 14 GB, at least 0.2 s of PCIe per copy), so a request is a
burst of evidence, never a new save config; 100 steps is enough to see a
divergence develop and small enough that a misconfigured action cannot fill a
bucket. The collections are the built-in ones a hook fills by itself
(``all`` and ``default`` are refused: ``all`` of a large model is every
activation of every layer).

File body (JSON, keys in SageMaker's spelling, as the stop signal's):
``{"Version": 1, "RequestId": ..., "TrainingJobName": ..., "RuleConfigurationName": ...,
"Step": <the firing step>, "Steps": 20, "Collections": ["gradients", "weights"]}``.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from tornasole.exceptions import TornasoleError
from tornasole.stack_spec import CAPTURE_REQUESTS_DIR

__all__ = [
    "CAPTURE_COLLECTIONS",
    "CAPTURE_REQUESTS_DIR",
    "CaptureRequest",
    "CaptureRequestError",
    "DEFAULT_CAPTURE_COLLECTIONS",
    "DEFAULT_CAPTURE_STEPS",
    "MAX_CAPTURE_STEPS",
    "MAX_REQUEST_BYTES",
    "capture_request_file_name",
    "is_capture_request_key",
    "parse_collections",
    "parse_steps",
]

#: Collections a request may name: the built-in ones the hooks fill by themselves.
CAPTURE_COLLECTIONS = (
    "weights",
    "biases",
    "gradients",
    "losses",
    "outputs",
    "inputs",
    "layers",
    "optimizer_variables",
)
#: What a ``capture`` action saves when it names no collections.
DEFAULT_CAPTURE_COLLECTIONS = ("gradients", "weights")
#: How many steps a ``capture`` action saves when it gives no ``steps``.
DEFAULT_CAPTURE_STEPS = 10
#: The most steps one request may ask for (module docstring: why).
MAX_CAPTURE_STEPS = 100
#: A request file larger than this is refused unread (a real one is a few hundred bytes).
MAX_REQUEST_BYTES = 4096
_VERSION = 1


class CaptureRequestError(TornasoleError, ValueError):
    """A capture request (an action's parameters, or a request file) that cannot be used."""


def parse_steps(value: Any, where: str = "capture") -> int:
    """``steps`` as an int from 1 to :data:`MAX_CAPTURE_STEPS` (a SageMaker-style string is accepted).

    Examples
    --------
    >>> parse_steps("20")
    20
    """
    if value is None or value == "":
        return DEFAULT_CAPTURE_STEPS
    ok = not isinstance(value, bool) and isinstance(value, (int, str))
    try:
        steps = int(str(value).strip()) if ok else 0
    except ValueError:
        steps = 0
    if not 1 <= steps <= MAX_CAPTURE_STEPS:
        raise CaptureRequestError(
            f"{where}: steps {str(value)[:40]!r} must be a whole number from 1 to {MAX_CAPTURE_STEPS}"
        )
    return steps


def parse_collections(value: Any, where: str = "capture") -> tuple[str, ...]:
    """Collection names from ``"gradients,weights"`` or a list: known (:data:`CAPTURE_COLLECTIONS`),
    deduplicated, sorted; none given means :data:`DEFAULT_CAPTURE_COLLECTIONS`.

    Examples
    --------
    >>> parse_collections("weights, gradients")
    ('gradients', 'weights')
    """
    if value is None or value == "":
        return DEFAULT_CAPTURE_COLLECTIONS
    if isinstance(value, str):
        items: Iterable[Any] = value.split(",")
    elif isinstance(value, (list, tuple)) and len(value) <= len(CAPTURE_COLLECTIONS) * 2:
        items = value
    else:
        raise CaptureRequestError(f"{where}: collections must be a comma-separated string or a short list")
    names = set()
    for item in items:
        name = str(item).strip().lower() if isinstance(item, str) else None
        if name not in CAPTURE_COLLECTIONS:
            raise CaptureRequestError(
                f"{where}: unknown collection {str(item)[:40]!r}; allowed: {', '.join(CAPTURE_COLLECTIONS)}"
            )
        names.add(name)
    return tuple(sorted(names))


def capture_request_file_name(rule_name: str) -> str:
    """The request's key relative to the trial: one per rule, named by a digest (a rule name may hold any
    character; the file holds the name).

    Examples
    --------
    >>> capture_request_file_name("LossSpike")
    'tornasole_capture/36a6e9945fb3b4f7.json'
    """
    digest = hashlib.sha256(rule_name.encode()).hexdigest()[:16]
    return f"{CAPTURE_REQUESTS_DIR}/{digest}.json"


def is_capture_request_key(key: str) -> bool:
    """Whether an object key is a capture request (the evaluator wrote it; it ignores its own files)."""
    parent, _, name = key.rpartition("/")
    return parent.rsplit("/", 1)[-1] == CAPTURE_REQUESTS_DIR and name.endswith(".json")


@dataclass(frozen=True)
class CaptureRequest:
    """One request: save full tensors of ``collections`` for the next ``steps`` training steps.

    ``request_id`` is unique per rule firing that asked (the hook serves each id once: a request seen
    again is ignored, a new one while a capture runs extends it to at most ``steps`` steps ahead).

    Examples
    --------
    >>> r = CaptureRequest("job:1:capture/R", 20, ("gradients",), rule="R", job="job", step=7)
    >>> CaptureRequest.decode(r.encode(), "x.json") == r
    True
    """

    request_id: str
    steps: int
    collections: tuple[str, ...]
    rule: str = ""
    job: str = ""
    step: int | None = None

    def to_body(self) -> dict[str, Any]:
        return {
            "Version": _VERSION,
            "RequestId": self.request_id,
            "TrainingJobName": self.job,
            "RuleConfigurationName": self.rule,
            "Step": self.step,
            "Steps": self.steps,
            "Collections": list(self.collections),
        }

    def encode(self) -> bytes:
        return json.dumps(self.to_body(), sort_keys=True).encode()

    @classmethod
    def decode(cls, data: bytes, where: str) -> CaptureRequest:
        """Parse and validate a request file's bytes; ``where`` (its path) names it in every error."""
        if len(data) > MAX_REQUEST_BYTES:
            raise CaptureRequestError(
                f"{where}: {len(data)} bytes; a capture request is at most {MAX_REQUEST_BYTES}"
            )
        try:
            body = json.loads(data.decode("utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise CaptureRequestError(f"{where}: not a JSON capture request ({exc})") from exc
        if not isinstance(body, dict):
            raise CaptureRequestError(f"{where}: a capture request is a JSON object")
        if body.get("Version", _VERSION) != _VERSION:
            raise CaptureRequestError(f"{where}: unsupported Version {str(body.get('Version'))[:20]!r}")
        request_id = body.get("RequestId")
        if not isinstance(request_id, str) or not 0 < len(request_id) <= 512:
            raise CaptureRequestError(
                f"{where}: RequestId must be a non-empty string (at most 512 characters)"
            )
        step = body.get("Step")
        if step is not None and (isinstance(step, bool) or not isinstance(step, int)):
            raise CaptureRequestError(f"{where}: Step must be an integer or null")
        rule, job = body.get("RuleConfigurationName", ""), body.get("TrainingJobName", "")
        if not isinstance(rule, str) or not isinstance(job, str):
            raise CaptureRequestError(f"{where}: RuleConfigurationName and TrainingJobName must be strings")
        if "Steps" not in body or "Collections" not in body:
            raise CaptureRequestError(f"{where}: Steps and Collections are required")
        if isinstance(body["Steps"], str) or not body["Collections"]:
            raise CaptureRequestError(f"{where}: Steps must be a number and Collections a non-empty list")
        return cls(
            request_id=request_id,
            steps=parse_steps(body["Steps"], where),
            collections=parse_collections(body["Collections"], where),
            rule=rule[:256],
            job=job[:256],
            step=step,
        )
