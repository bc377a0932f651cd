"""Worker identity for TensorFlow jobs: Horovod, then ``TF_CONFIG`` (MultiWorkerMirroredStrategy).

``TF_CONFIG`` names a cluster (``chief``, ``worker``, ``ps``, ``evaluator`` task
lists) and this process's task. Ranks follow the usual convention: the chief,
when there is one, is rank 0 and ``worker`` *i* is rank *i + 1*; without a
chief ``worker`` *i* is rank *i*. Parameter servers and evaluators are not
training workers: they get a rank after the training workers and never count
in the world size. Horovod (``horovod.tensorflow`` already imported and
initialized, or its launcher's variables) comes first, then ``TF_CONFIG``, then
the generic launcher variables of :func:`tornasole.hooks.workers.detect_worker`.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Mapping

from tornasole.exceptions import ConfigurationError
from tornasole.hooks.workers import WorkerInfo, detect_worker

__all__ = ["detect_keras_worker", "worker_from_tf_config"]

_TRAINING_TASKS = ("chief", "worker")


def worker_from_tf_config(raw: str) -> WorkerInfo:
    """Rank and world size of the task a ``TF_CONFIG`` value describes (see the module docstring).

    Examples
    --------
    >>> cfg = '{"cluster": {"worker": ["a:1", "b:2"]}, "task": {"type": "worker", "index": 1}}'
    >>> worker_from_tf_config(cfg)
    WorkerInfo(rank=1, world_size=2, source='TF_CONFIG')
    """
    try:
        doc = json.loads(raw)
        cluster: Mapping[str, list[str]] = doc.get("cluster") or {}
        task = doc.get("task") or {}
        kind = str(task.get("type", "worker"))
        index = int(task.get("index", 0))
    except (ValueError, TypeError, AttributeError) as exc:
        raise ConfigurationError(f"TF_CONFIG is not a valid cluster description: {exc}") from exc
    counts = {k: len(cluster.get(k) or []) for k in _TRAINING_TASKS}
    world = counts["chief"] + counts["worker"]
    if world == 0:
        return WorkerInfo(0, 1, "TF_CONFIG")
    if kind == "chief":
        rank = index
    elif kind == "worker":
        rank = counts["chief"] + index
    else:
        return WorkerInfo(world + index, world, "TF_CONFIG")  # ps/evaluator: not a training worker
    if not 0 <= rank < world:
        raise ConfigurationError(f"TF_CONFIG task {kind}:{index} is not in its cluster ({world} workers)")
    return WorkerInfo(rank, world, "TF_CONFIG")


def _from_horovod() -> WorkerInfo | None:
    for mod in ("horovod.tensorflow", "horovod.tensorflow.keras"):
        hvd = sys.modules.get(mod)
        if hvd is None:
            continue
        try:
            if hvd.is_initialized():
                return WorkerInfo(hvd.rank(), hvd.size(), "horovod")
        except (ValueError, AttributeError, RuntimeError):
            return None
    return None


def detect_keras_worker(env: Mapping[str, str] | None = None) -> WorkerInfo:
    """This process's worker: Horovod, ``HOROVOD_RANK``, ``TF_CONFIG``, then the generic variables."""
    env = os.environ if env is None else env
    found = _from_horovod()
    if found is not None:
        return found
    if env.get("HOROVOD_RANK") is None and env.get("OMPI_COMM_WORLD_RANK") is None and env.get("TF_CONFIG"):
        return worker_from_tf_config(env["TF_CONFIG"])
    return detect_worker(env)
