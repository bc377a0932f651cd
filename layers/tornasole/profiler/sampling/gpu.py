"""GPU utilisation and memory through NVML (``pynvml``, from the optional ``nvidia-ml-py``).

Imported lazily: without the package, or without an NVIDIA driver or device, :func:`open_nvml` answers
None, logs why once, and the sampler records the host metrics alone.
"""

from __future__ import annotations

import logging
from typing import Any

from tornasole.profiler.format import system_records as sr
from tornasole.profiler.format.system_records import SystemRecord

__all__ = ["NvmlSampler", "open_nvml"]

logger = logging.getLogger(__name__)


class NvmlSampler:
    """Per GPU: percent of time a kernel ran and percent of its memory in use, each sample."""

    def __init__(self, nvml: Any, node_id: str) -> None:
        self._nvml = nvml
        self.node_id = node_id
        count = nvml.nvmlDeviceGetCount()
        self._handles = [nvml.nvmlDeviceGetHandleByIndex(i) for i in range(count)]

    @property
    def device_count(self) -> int:
        return len(self._handles)

    def sample(self, now: float) -> list[SystemRecord]:
        records = []
        for index, handle in enumerate(self._handles):
            rates = self._nvml.nvmlDeviceGetUtilizationRates(handle)
            memory = self._nvml.nvmlDeviceGetMemoryInfo(handle)
            used = 100.0 * memory.used / memory.total if memory.total else 0.0
            name = f"gpu{index}"
            records.append(SystemRecord("gpu", name, sr.GPU_UTILIZATION, float(rates.gpu), self.node_id, now))
            records.append(
                SystemRecord("gpu", name, sr.GPU_MEMORY_UTILIZATION, round(used, 4), self.node_id, now)
            )
        return records

    def close(self) -> None:
        try:
            self._nvml.nvmlShutdown()
        except Exception:  # noqa: BLE001 - shutting NVML down is best effort
            logger.debug("Tornasole profiler: nvmlShutdown failed", exc_info=True)


def open_nvml(node_id: str) -> NvmlSampler | None:
    """An :class:`NvmlSampler` over every visible GPU, or None (why is logged at INFO, once per call)."""
    try:
        import pynvml
    except ImportError:
        logger.info(
            "Tornasole profiler: no GPU metrics (nvidia-ml-py is not installed: pip install 'tornasole[gpu]')"
        )
        return None
    try:
        pynvml.nvmlInit()
        sampler = NvmlSampler(pynvml, node_id)
    except Exception as error:  # noqa: BLE001 - NVMLError has many subclasses; any means "no GPU metrics"
        logger.info("Tornasole profiler: no GPU metrics (NVML: %s)", error)
        return None
    if sampler.device_count == 0:
        sampler.close()
        logger.info("Tornasole profiler: no GPU metrics (NVML sees no GPU)")
        return None
    return sampler
