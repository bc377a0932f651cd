"""When a hook writes the end marker, and what it says about a path that already holds a finished trial.

Why not ``$TRAINING_JOB_NAME`` alone: smdebug skips the end marker on SageMaker because SageMaker's own
service tells its rule containers that the training job ended. Tornasole's evaluator outside SageMaker has
no such signal: the end marker is how it learns the end, and a user who sets ``TRAINING_JOB_NAME`` to get
SageMaker's path convention (``<S3OutputPath>/<job>/debug-output``) would leave the job InProgress. So the
hook skips the marker only where SageMaker really runs it: the variable is set *and* the resource
configuration SageMaker mounts into every training container (``/opt/ml/input/config/resourceconfig.json``)
is there. On SageMaker the stack settles the job from SageMaker's own state-change event instead
(``tornasole.evaluator.lifecycle``).
"""

from __future__ import annotations

import logging
import os
import warnings
from collections.abc import Mapping
from typing import Any

from tornasole.config import TRAINING_JOB_NAME
from tornasole.core.config_constants import DEFAULT_RESOURCE_CONFIG_FILE

__all__ = ["FinishedTrialWarning", "running_on_sagemaker", "warn_if_finished_trial"]

logger = logging.getLogger(__name__)


class FinishedTrialWarning(UserWarning):
    """The hook writes into a path whose earlier training already ended (its end marker is there)."""


#: The file SageMaker mounts into every training container (a test points this elsewhere).
RESOURCE_CONFIG_FILE = DEFAULT_RESOURCE_CONFIG_FILE


def running_on_sagemaker(
    environ: Mapping[str, str] | None = None, resource_config: str | None = None
) -> bool:
    """Whether this process is a SageMaker training container: ``TRAINING_JOB_NAME`` is set and the
    resource configuration file SageMaker mounts is there (neither alone is enough)."""
    env = os.environ if environ is None else environ
    return bool(env.get(TRAINING_JOB_NAME)) and os.path.isfile(resource_config or RESOURCE_CONFIG_FILE)


def warn_if_finished_trial(storage: Any, out_dir: str) -> bool:
    """Warn (``warnings`` and the log) when ``out_dir`` already holds an end marker: the new data overwrites
    a finished trial, and whatever verdict was given about it described the old run. True if warned.
    A path that cannot be checked (no permission, a network error) is not a reason to stop training."""
    from tornasole.format.paths import END_MARKER
    from tornasole.storage import join

    marker = join(out_dir, END_MARKER)
    try:
        finished = storage.exists(marker)
    except OSError as exc:
        logger.debug("Tornasole: could not check %s: %s", marker, exc)
        return False
    if not finished:
        return False
    message = (
        f"Tornasole: {out_dir} already holds a finished trial ({END_MARKER} is there); this run overwrites "
        "its files, and the evaluator reports the rewrite on the job (use a new output path per run)"
    )
    logger.warning(message)
    warnings.warn(message, FinishedTrialWarning, stacklevel=4)
    return True
