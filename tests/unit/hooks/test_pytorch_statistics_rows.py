"""A step's statistics reach the writer as rows of the one captured tensor: one numpy conversion a step,
no tensor per value, and each row the exact value (a 0-d array the fast encoder takes)."""

from __future__ import annotations

import numpy as np
import torch

from tornasole.pytorch.capture import HostRow, TorchCapture, host_rows


class CountingHost:
    """Stands for a captured tensor and counts its conversions to numpy."""

    def __init__(self, values: torch.Tensor) -> None:
        self.values, self.conversions = values, 0
        self.shape = values.shape

    def numpy(self) -> np.ndarray:
        self.conversions += 1
        return self.values.numpy()


def test_rows_convert_the_step_once_and_give_each_exact_value():
    values = torch.randn(352)
    host = CountingHost(values)
    rows = host_rows(host)
    got = [r.numpy() for r in rows]
    assert host.conversions == 1
    assert all(type(g) is np.ndarray and g.shape == () for g in got)
    assert np.array_equal(np.array([float(g) for g in got], dtype=np.float32), values.numpy())


def test_the_writer_thread_materialises_rows_and_tensors_alike():
    capture = TorchCapture()
    host = capture.capture(torch.tensor([1.5, -2.0]))
    records = [("t", "a", row, 1.0) for row in host_rows(host)] + [("t", "b", torch.tensor(3.0), 1.0)]
    out = capture.materializer()(records)
    assert [float(r[2]) for r in out] == [1.5, -2.0, 3.0]
    assert not any(isinstance(r[2], (HostRow, torch.Tensor)) for r in out)
