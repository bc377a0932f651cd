"""A CPU step's statistics from one call of the compiled loop: the values of PyTorch's path, the totals in
float64, and PyTorch's path wherever the one call does not apply (NaN, devices, sharded tensors)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
from torch import nn

import tornasole.pytorch as ts
from tornasole.pytorch import fused_reductions
from tornasole.pytorch.fused_reductions import COLUMNS, STATISTIC_CODES
from tornasole.pytorch.statistics import STATISTICS, TensorStatistics
from tornasole.trials import create_trial

ALL = tuple(STATISTICS)


def _tensors() -> list[torch.Tensor]:
    g = torch.Generator().manual_seed(3)
    wide = torch.randn(40, 30, generator=g)
    return [
        torch.randn(5000, generator=g) * 0.02,
        torch.randn(1, generator=g),
        torch.zeros(64),
        1.0 + 1e-3 * torch.randn(128, generator=g),
        wide.t(),  # not contiguous: converted
        torch.randn(33, 9, generator=g).to(torch.bfloat16),  # converted
        torch.empty(0),
    ]


def _torch_statistics(tensors: list[torch.Tensor], statistics=ALL) -> torch.Tensor:
    reference = TensorStatistics(statistics, fused=None)
    return reference.finish(reference.parts(tensors))


def test_one_call_gives_the_statistics_of_pytorchs_path_and_float64_totals(reducer):
    tensors = _tensors()
    stats = TensorStatistics(ALL, fused=reducer)
    totals = [(0, 3), (3, len(tensors)), (2, 2)]
    flat = stats.cpu_statistics(tensors, len(ALL), totals)
    k = len(tensors)
    assert flat is not None
    assert flat.dtype == np.float32
    assert flat.shape == (k * len(ALL) + len(totals),)
    got = torch.from_numpy(flat[: k * len(ALL)].reshape(k, len(ALL)).copy())
    torch.testing.assert_close(got, _torch_statistics(tensors), rtol=2e-6, atol=1e-37, equal_nan=True)
    for (start, stop), total in zip(totals, flat[k * len(ALL) :]):
        exact = np.sqrt(sum(float((t.double() ** 2).sum()) for t in tensors[start:stop]))
        assert total == pytest.approx(exact, rel=1e-6)
    # the first columns only (a norm added for the totals is not written)
    two = stats.cpu_statistics(tensors, 2)
    np.testing.assert_array_equal(two, flat[: k * len(ALL)].reshape(k, -1)[:, :2].reshape(-1))


def _ieee_finish(parts: np.ndarray) -> np.ndarray:
    """The statistics of ``parts`` in IEEE float32 arithmetic (correctly rounded division and sqrt)."""
    n, mean, m2, norm, lo, hi, zeros, nonfinite = parts.T
    with np.errstate(divide="ignore", invalid="ignore"):
        columns = {
            "norm": norm,
            "max_abs": np.maximum(np.abs(lo), np.abs(hi)),
            "mean": mean,
            "std": np.sqrt(m2 / (n - np.float32(1))),
            "min": lo,
            "max": hi,
            "zero_fraction": zeros / n,
            "nonfinite_count": nonfinite,
        }
    return np.stack([columns[s] for s in ALL], axis=1)


def test_finish_in_the_loop_is_float32_arithmetic_bit_for_bit(reducer):
    g = torch.Generator().manual_seed(4)
    k = 200
    parts = torch.empty(k, len(COLUMNS))
    parts[:, 0] = torch.randint(0, 5000, (k,), generator=g).float()
    parts[:, 1] = torch.randn(k, generator=g)
    parts[:, 2] = torch.rand(k, generator=g) * 1e3
    parts[:, 3] = torch.rand(k, generator=g) * 50
    parts[:, 4] = -torch.rand(k, generator=g) * 7
    parts[:, 5] = torch.rand(k, generator=g) * 7
    parts[:, 6] = torch.randint(0, 50, (k,), generator=g).float()
    parts[:, 7] = 0.0
    parts[:3, 0] = torch.tensor([0.0, 1.0, 2.0])  # empty (0/0), one value (M2/0), two
    parts[3, 4], parts[4, 5] = float("nan"), float("nan")  # NaN in min, in max: max_abs NaN
    parts[5, 4], parts[5, 5] = -float("inf"), 2.0
    parts[6, 2], parts[7, 7] = float("inf"), 3.0
    parts[8, 4], parts[8, 5] = -0.0, 0.0
    fused = TensorStatistics(ALL, fused=reducer).finish(parts)
    assert fused.dtype == torch.float32
    expected = _ieee_finish(parts.numpy())
    np.testing.assert_array_equal(np.isnan(fused.numpy()), np.isnan(expected))
    same = ~np.isnan(expected)
    np.testing.assert_array_equal(fused.numpy()[same].view(np.int32), expected[same].view(np.int32))
    # PyTorch's vectorised sqrt can be 1 ulp off the correctly rounded one: equal within that
    reference = TensorStatistics(ALL, fused=None).finish(parts)
    torch.testing.assert_close(fused, reference, rtol=1.2e-7, atol=0.0, equal_nan=True)


def test_the_call_is_refused_what_it_cannot_read(reducer):
    with pytest.raises(ValueError, match=r"range \(0, 3\) is not within 2 rows"):
        reducer.statistics([0, 0], [0, 0], [0], [(0, 3)])
    with pytest.raises(ValueError, match="2 pointers but 1 sizes"):
        reducer.statistics([0, 0], [0], [0])
    with pytest.raises(ValueError, match="statistic codes"):
        reducer.finish(np.zeros((1, len(COLUMNS)), np.float32), [len(STATISTIC_CODES)])
    with pytest.raises(ValueError, match="expected parts"):
        reducer.finish(np.zeros((2, 3), np.float32), [0])
    with pytest.raises(ValueError, match=r"range \(1, 0\)"):
        TensorStatistics(ALL, fused=reducer).cpu_statistics([torch.zeros(3)], 1, [(1, 0)])


@pytest.mark.parametrize("bad", [float("nan"), float("inf")])
def test_a_non_finite_value_leaves_the_step_to_pytorch(reducer, bad):
    x = torch.randn(100)
    x[3] = bad
    assert TensorStatistics(ALL, fused=reducer).cpu_statistics([torch.ones(4), x], len(ALL)) is None


def test_tensors_that_are_not_plain_cpu_tensors_leave_the_step_to_pytorch(reducer):
    stats = TensorStatistics(ALL, fused=reducer)
    assert stats.cpu_statistics([torch.ones(4), torch.ones(4, device="meta")], 1) is None

    class Marked(torch.Tensor):  # a tensor subclass (as a DTensor is): not read through its pointer
        pass

    assert stats.cpu_statistics([torch.ones(4).as_subclass(Marked)], 1) is None
    assert TensorStatistics(ALL, fused=None).cpu_statistics([torch.ones(4)], 1) is None


def test_a_cpu_steps_statistics_take_one_call_and_no_torch_reduction(tmp_path: Path, monkeypatch, reducer):
    calls = []
    original = fused_reductions.FusedReducer.statistics

    def counting(self, *args, **kwargs):
        calls.append(len(args[0]))
        return original(self, *args, **kwargs)

    def refused(*_args, **_kwargs):
        raise AssertionError("a healthy CPU step was reduced by PyTorch's path")

    monkeypatch.setattr(fused_reductions.FusedReducer, "statistics", counting)
    monkeypatch.setattr(TensorStatistics, "parts", refused)
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(6, 8), nn.ReLU(), nn.Linear(8, 3))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    hook = ts.Hook(str(tmp_path), statistics=True)
    hook.register_module(model)
    hook.register_optimizer(opt)
    for _ in range(3):
        nn.functional.cross_entropy(model(torch.randn(5, 6)), torch.randint(0, 3, (5,))).backward()
        opt.step()
        opt.zero_grad()
    hook.close()
    assert calls == [8, 8, 8]  # 4 weights and 4 gradients, once a step
    assert create_trial(str(tmp_path)).steps() == [0, 1, 2]


def test_total_norms_past_float32s_squares_are_exact(tmp_path: Path, reducer):
    """Norms of 1e20 and 1e-25, whose float32 squares overflow and vanish: the compiled loop sums the
    totals in float64 (a float32 norm of the norms gave inf and 0). PyTorch's path cannot do better:
    its per-tensor norms are float32 sums of squares already."""
    for scale, name in ((1e20, "big"), (1e-25, "tiny")):
        model = nn.Linear(4, 2)
        with torch.no_grad():
            model.weight.fill_(scale)
            model.bias.fill_(scale)
        opt = torch.optim.SGD(model.parameters(), lr=0.0)
        out = tmp_path / name
        hook = ts.Hook(str(out), statistics=ts.StatisticsConfig(statistics=("norm",), gradients=False))
        hook.register_module(model)
        hook.register_optimizer(opt)
        model(torch.zeros(3, 4)).sum().backward()
        opt.step()
        hook.close()
        total = float(create_trial(str(out)).tensor("scalar/param_norm/total").value(0))
        assert total == pytest.approx(scale * np.sqrt(10), rel=1e-6), name


def test_statistics_a_step_writes_are_those_of_the_full_tensors(tmp_path: Path):
    """Through the hook (the one-call path), against numpy on clones of what the step used."""
    torch.manual_seed(1)
    model = nn.Sequential(nn.Linear(6, 8), nn.ReLU(), nn.Linear(8, 3))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    loss_fn = nn.CrossEntropyLoss()
    hook = ts.Hook(str(tmp_path), statistics=True)
    hook.register_module(model)
    hook.register_loss(loss_fn)
    hook.register_optimizer(opt)
    seen, losses = [], []
    for _ in range(2):
        weights = {n: p.detach().numpy().astype(np.float64) for n, p in model.named_parameters()}
        step_losses = []
        for _ in range(3):  # three micro-batches: the saved loss is their mean
            loss = loss_fn(model(torch.randn(5, 6)), torch.randint(0, 3, (5,)))
            (loss / 3).backward()
            step_losses.append(float(loss.detach()))
        grads = {n: p.grad.numpy().astype(np.float64) for n, p in model.named_parameters()}
        seen.append((weights, grads))
        losses.append(np.mean(step_losses))
        opt.step()
        opt.zero_grad()
    hook.close()
    trial = create_trial(str(tmp_path))
    for step, (weights, grads) in enumerate(seen):
        for prefix, arrays in (("Sequential_", weights), ("gradient/Sequential_", grads)):
            for n, a in arrays.items():
                tensor = trial.tensor(prefix + n)
                expected = {
                    ("l2", False): np.linalg.norm(a),
                    ("max", True): np.abs(a).max(),
                    ("mean", False): a.mean(),
                    ("std", False): a.std(ddof=1),
                    ("zero_fraction", False): np.mean(a == 0),
                    ("nonfinite_count", False): 0.0,
                }
                for (red, abs_), value in expected.items():
                    got = float(tensor.reduction_value(step, red, abs=abs_))
                    assert got == pytest.approx(value, rel=1e-5, abs=1e-7), (n, step, red)
        total = np.sqrt(sum(float((g**2).sum()) for g in grads.values()))
        assert float(trial.tensor("scalar/grad_norm/total").value(step)) == pytest.approx(total, rel=1e-6)
        assert float(trial.tensor("CrossEntropyLoss_output_0").value(step)) == pytest.approx(
            losses[step], rel=1e-6
        )


def _lr_record(tmp_path: Path, lr) -> np.ndarray:
    model = nn.Linear(3, 2)
    opt = torch.optim.SGD(model.parameters(), lr=lr)
    hook = ts.Hook(str(tmp_path), statistics=ts.StatisticsConfig(statistics=("norm",)))
    hook.register_module(model)
    hook.register_optimizer(opt)
    model(torch.randn(4, 3)).sum().backward()
    opt.step()
    hook.close()
    return np.asarray(create_trial(str(tmp_path)).tensor("scalar/lr/0").value(0))


def test_the_learning_rate_keeps_its_dtype_in_or_beside_the_block(tmp_path: Path):
    """A float learning rate is saved as float32 under the default dtype (inside the step's block) and
    as float64 under a float64 default (its own record, as ``torch.tensor(lr)`` was); a tensor one as
    float32."""
    value = _lr_record(tmp_path / "float", 0.1)
    assert value.dtype == np.float32
    assert float(value) == np.float32(0.1)
    assert _lr_record(tmp_path / "tensor", torch.tensor(0.25, dtype=torch.float64)).dtype == np.float32
    previous = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)
    try:
        wide = _lr_record(tmp_path / "wide", 0.1)
    finally:
        torch.set_default_dtype(previous)
    assert wide.dtype == np.float64
    assert float(wide) == 0.1


def test_a_device_steps_values_stay_on_the_device_with_the_hosts_floats_filled_in():
    """On a device the step's floats (learning rates) become device values by a fill, not a copy from
    the host (which would wait for the device's queue); the meta device checks the composition."""
    from tornasole.pytorch.step_statistics import _flat

    flat = _flat(torch.zeros(6, device="meta"), [torch.ones((), device="meta"), 0.5, torch.tensor(2.0)])
    assert flat.device.type == "meta"
    assert flat.shape == (9,)
    assert flat.dtype == torch.float32
    host = _flat(np.arange(3, dtype=np.float32), [0.5, torch.tensor(2.0, dtype=torch.float64)])
    assert isinstance(host, np.ndarray)
    np.testing.assert_array_equal(host, np.array([0, 1, 2, 0.5, 2.0], np.float32))
