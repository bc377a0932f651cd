"""Getting torch tensors off the training thread's critical path and into numpy.

On the training thread a saved tensor is only *copied*: a CPU tensor is cloned
(later in-place updates such as ``optimizer.step()`` or ``p.grad /= n`` must not
change what was saved); a CUDA tensor is copied with ``non_blocking=True`` into
pinned host memory, so the copy overlaps with the GPU work that follows and
the training thread never waits for it. When the step ends one CUDA event is
recorded on each stream that issued copies during the step (a model split over
two GPUs, or a loop running on a side stream, has more than one); the writer
thread waits on those events once per step (never per tensor, never on the
training thread) and only then turns the host copies into numpy arrays.

dtypes: bfloat16 has no numpy dtype and no smdebug encoding, so it is saved as
float32 (exact); float16 stays float16 (DT_HALF). Reductions are computed with
torch where the tensor lives, as smdebug's PyTorch hook does (``std`` and
``variance`` unbiased; norms of the flattened tensor), in float32 for 16-bit
types, and only their 0-d results are copied.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import torch

__all__ = ["TorchCapture"]

_HALF_TYPES = (torch.float16, torch.bfloat16)


class TorchCapture:
    """Per-hook tensor copier; tracks the CUDA streams on which this step queued asynchronous copies."""

    def __init__(self) -> None:
        self._streams: set[Any] = set()

    def capture(self, t: torch.Tensor | np.ndarray) -> torch.Tensor | np.ndarray:
        """A host tensor holding ``t``'s value at this moment (possibly still being copied).

        A numpy array (a CPU step's statistics, made for this step and handed over) is already that.
        """
        if isinstance(t, np.ndarray):
            return t
        t = t.detach()
        converted = False
        if t.dtype == torch.bfloat16:
            t = t.float()
            converted = True
        if t.device.type == "cpu":
            return t if converted else t.clone()
        if t.device.type == "cuda":
            buf = torch.empty(t.shape, dtype=t.dtype, pin_memory=True)
            buf.copy_(t, non_blocking=True)
            # The copy is queued on the current stream of the tensor's device: that is the stream to wait on.
            self._streams.add(torch.cuda.current_stream(t.device))
            return buf
        return t.to("cpu")  # other devices (mps, xla): a plain blocking copy

    def reduce(self, t: torch.Tensor, reduction: str, abs_: bool) -> torch.Tensor:
        """The 0-d reduction of ``t``, computed on its device, captured like a tensor."""
        with torch.no_grad():
            x = t.detach()
            src = x.dtype
            if src in _HALF_TYPES:
                x = x.float()
            elif not (x.is_floating_point() or x.is_complex()):
                x = x.to(torch.float64)
            if abs_:
                x = x.abs()
            if reduction in ("l1", "l2"):
                r = torch.linalg.vector_norm(x, ord=int(reduction[1]))
            elif reduction == "variance":
                r = x.var()
            elif reduction == "min":
                r = x.amin()
            elif reduction == "max":
                r = x.amax()
            else:  # mean, std, sum, prod
                r = getattr(x, reduction)()
            if src == torch.float16:
                r = r.to(torch.float16)
            return self.capture(r)

    def materializer(self) -> Callable[[list[tuple[Any, ...]]], list[tuple[Any, ...]]]:
        """Called when a step ends (training thread); returns the writer-thread conversion to numpy."""
        events = []
        for stream in self._streams:
            event = torch.cuda.Event()
            event.record(stream)
            events.append(event)
        self._streams = set()

        def to_numpy(records: list[tuple[Any, ...]]) -> list[tuple[Any, ...]]:
            for event in events:
                event.synchronize()  # once per stream and step, on the writer thread
            out = []
            for rec in records:
                if rec[0] != "s" and isinstance(rec[2], torch.Tensor):
                    rec = (rec[0], rec[1], rec[2].numpy(), rec[3])
                out.append(rec)
            return out

        return to_numpy
