"""The PyTorch hook on a CUDA device: values saved are the values training saw, whatever the stream or dtype.

On a GPU the hook never waits on the training thread: each saved tensor is
queued as a non-blocking copy into pinned host memory, and the writer thread
waits once per step on an event recorded on every stream that issued copies.
These tests train on the GPU and compare what the trial reads with clones taken
in the loop. The side-stream capture test queues a long sleep kernel ahead of
a copy: an event recorded on the default stream alone (as the hook did before
it tracked streams) completes at once, and the writer then reads a stale
pinned buffer; on an H200 that earlier code failed it, reading the block's
previous contents.

Run with ``make test-gpu`` on a machine with CUDA (``make test`` does not
collect this directory; see ``tests/conftest.py``).
"""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np
import pytest
import torch
from torch import nn

import tornasole.pytorch as ts
from tornasole import modes
from tornasole.exceptions import TensorUnavailableForStep
from tornasole.rules.generic import ExplodingTensor
from tornasole.rules.step_loop import invoke_rule
from tornasole.trials import create_trial

CUDA = torch.device("cuda")


@pytest.fixture(autouse=True, scope="module")
def _require_cuda() -> None:
    if not torch.cuda.is_available():
        pytest.fail("tests/gpu needs a CUDA device (torch.cuda.is_available() is False)", pytrace=False)


class Net(nn.Module):
    """Wide enough (1024 units) that each copy takes measurable device time."""

    def __init__(self, width: int = 1024) -> None:
        super().__init__()
        self.fc1 = nn.Linear(64, width)
        self.relu = nn.ReLU()
        self.fc2 = nn.Linear(width, 10)

    def forward(self, x):
        return self.fc2(self.relu(self.fc1(x)))


def _hook(out: Path, **kwargs) -> tuple[Net, nn.Module, ts.Hook]:
    torch.manual_seed(0)
    model, loss_fn = Net().to(CUDA), nn.CrossEntropyLoss()
    hook = ts.Hook(str(out), **kwargs)
    hook.register_module(model)
    hook.register_loss(loss_fn)
    return model, loss_fn, hook


def _batch(i: int, dtype=torch.float32):
    g = torch.Generator().manual_seed(i)
    x, y = torch.randn(32, 64, generator=g), torch.randint(0, 10, (32,), generator=g)
    return x.to(CUDA, dtype), y.to(CUDA)


def _cpu(t: torch.Tensor) -> np.ndarray:
    return t.detach().float().cpu().numpy()


def _clone(t: torch.Tensor) -> torch.Tensor:
    return t.detach().clone()  # on the device, queued on the current stream: no host synchronisation


def _train_and_record(model, loss_fn, steps: int, lr: float = 0.1, sleep_cycles: int = 0):
    """Trains ``steps`` SGD steps; returns device clones of what each step saw.

    Nothing here waits for the device after the batch is copied in. With ``sleep_cycles`` the last step
    starts with a long kernel, so the host runs ahead and that step's copies are still queued when the
    loop (and ``close()``) returns. The earlier steps leave the hook's pinned buffers cached and free
    (the host pauses for the writer), so the last step allocates none: a fresh pinned allocation would
    synchronise the device and hide a missing wait."""
    opt = torch.optim.SGD(model.parameters(), lr=lr)
    seen = {}
    for step in range(steps):
        x, y = _batch(step)
        if sleep_cycles and step == steps - 1:
            torch.cuda._sleep(sleep_cycles)  # device busy: everything queued after this waits
        elif sleep_cycles:
            time.sleep(0.2)  # host only: the writer drains and frees the earlier steps' buffers
        weights = {n: _clone(p) for n, p in model.named_parameters()}
        opt.zero_grad()
        loss = loss_fn(model(x), y)
        loss.backward()
        grads = {n: _clone(p.grad) for n, p in model.named_parameters()}
        seen[step] = (weights, grads, _clone(loss), _clone(torch.relu(model.fc1(x))))
        opt.step()  # in place, right after the save: must not leak into what was saved
    return seen


def _assert_trial_matches(path: Path, seen: dict, steps: list[int]) -> None:
    trial = create_trial(str(path))
    assert trial.steps() == steps
    for step in steps:
        weights, grads, loss, relu = seen[step]
        for name in weights:
            np.testing.assert_array_equal(trial.tensor(f"Net_{name}").value(step), _cpu(weights[name]))
            np.testing.assert_array_equal(trial.tensor(f"gradient/Net_{name}").value(step), _cpu(grads[name]))
        saved_loss = float(trial.tensor("CrossEntropyLoss_output_0").value(step))
        assert saved_loss == pytest.approx(float(loss), rel=1e-6)
        np.testing.assert_allclose(
            trial.tensor("relu_output_0").value(step), _cpu(relu), rtol=1e-5, atol=1e-6
        )


def _relu_collection(hook: ts.Hook, model: Net) -> None:
    hook.get_collection("relu_out").add_module_tensors(model.relu, outputs=True)
    hook.get_collection("relu_out").include("relu_output_")


_SAVED = ["weights", "biases", "gradients", "losses", "relu_out"]


def test_values_saved_from_the_gpu_are_the_values_training_saw(tmp_path: Path):
    model, loss_fn, hook = _hook(
        tmp_path, save_config=ts.SaveConfig(save_interval=2), include_collections=_SAVED
    )
    _relu_collection(hook, model)
    hook.set_mode(modes.TRAIN)
    seen = _train_and_record(model, loss_fn, steps=7)
    hook.close()
    _assert_trial_matches(tmp_path, seen, [0, 2, 4, 6])


def test_a_loop_on_a_side_stream_is_waited_for_on_that_stream(tmp_path: Path):
    """Training runs on a non-default stream and the hook is closed outside it, while the last step's
    copies wait behind a sleep kernel: every value still matches. (The hook path has more places that
    can happen to wait than TorchCapture alone; the test below pins the stream wait itself.)"""
    model, loss_fn, hook = _hook(
        tmp_path, save_config=ts.SaveConfig(save_interval=1), include_collections=_SAVED
    )
    _relu_collection(hook, model)
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        seen = _train_and_record(model, loss_fn, steps=4, sleep_cycles=1_000_000_000)
    hook.close()  # the host is ~0.5 s ahead of the side stream here
    torch.cuda.synchronize()
    _assert_trial_matches(tmp_path, seen, [0, 1, 2, 3])


def test_capture_waits_for_copies_queued_on_a_side_stream():
    """TorchCapture alone: a copy queued on a busy side stream, materialised from the default stream."""
    from tornasole.pytorch.capture import TorchCapture

    tc = TorchCapture()
    src = torch.arange(1 << 22, dtype=torch.float32, device=CUDA)
    warm = tc.capture(src)
    tc.materializer()([("t", "warm", warm, 0.0)])
    del warm  # its pinned block is now cached and free: the capture below reuses it without allocating
    # Kernels load lazily on first launch, and loading one waits for the device: launch each once first.
    src.mul_(1)
    src.add_(0)
    torch.cuda._sleep(1)
    torch.cuda.synchronize()
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        torch.cuda._sleep(1_000_000_000)
        src.mul_(2)
        saved = tc.capture(src)
        src.add_(1)  # after the capture: must not be seen
    busy = not side.query()
    records = tc.materializer()([("t", "x", saved, 0.0)])
    assert busy, "the side stream finished before the check: the sleep kernel was too short"
    np.testing.assert_array_equal(records[0][2], np.arange(1 << 22, dtype=np.float32) * 2)


@pytest.mark.parametrize(("dtype", "saved"), [(torch.bfloat16, np.float32), (torch.float16, np.float16)])
def test_half_precision_models_on_the_gpu(tmp_path: Path, dtype, saved):
    model, loss_fn, hook = _hook(
        tmp_path,
        save_config=ts.SaveConfig(save_interval=1),
        include_collections=["weights", "gradients", "norms"],
    )
    norms = hook.get_collection("norms")
    norms.include("^gradient/.*weight")
    norms.reduction_config = ts.ReductionConfig(norms=["l2"], reductions=["max", "mean"])
    model.to(dtype)
    x, y = _batch(0, dtype)
    loss_fn(model(x), y).backward()
    hook.close()
    trial = create_trial(str(tmp_path))
    w = trial.tensor("Net_fc1.weight").value(0)
    assert w.dtype == saved
    np.testing.assert_array_equal(w, model.fc1.weight.detach().float().cpu().numpy().astype(saved))
    g = model.fc1.weight.grad.float()
    gradient = trial.tensor("gradient/Net_fc1.weight")
    assert gradient.reduction_value(0, "l2") == pytest.approx(float(torch.linalg.vector_norm(g)), rel=1e-2)
    assert gradient.reduction_value(0, "max") == pytest.approx(float(g.max()), rel=1e-2)


def test_reductions_are_computed_on_the_device_with_torch_semantics(tmp_path: Path):
    model, loss_fn, hook = _hook(
        tmp_path, save_config=ts.SaveConfig(save_interval=1), include_collections=["red"]
    )
    red = hook.get_collection("red")
    red.include("^gradient/Net_fc1.weight$")
    red.reduction_config = ts.ReductionConfig(
        reductions=["mean", "std", "variance", "min", "max", "sum"],
        abs_reductions=["max", "mean"],
        norms=["l1", "l2"],
        abs_norms=["l2"],
    )
    x, y = _batch(0)
    loss_fn(model(x), y).backward()
    g = model.fc1.weight.grad.detach().double().cpu().numpy().ravel()
    hook.close()
    t = create_trial(str(tmp_path)).tensor("gradient/Net_fc1.weight")
    with pytest.raises(TensorUnavailableForStep):
        t.value(0)  # only the reductions were saved: each value below is the hook's, not recomputed here
    expected = {
        ("mean", False): g.mean(),
        ("std", False): g.std(ddof=1),
        ("variance", False): g.var(ddof=1),
        ("min", False): g.min(),
        ("max", False): g.max(),
        ("sum", False): g.sum(),
        ("max", True): np.abs(g).max(),
        ("mean", True): np.abs(g).mean(),
        ("l1", False): np.abs(g).sum(),
        ("l2", False): np.sqrt((g**2).sum()),
        ("l2", True): np.sqrt((g**2).sum()),
    }
    for (name, abs_), value in expected.items():
        got = t.reduction_value(0, name, abs=abs_)
        assert got == pytest.approx(value, rel=1e-4, abs=1e-9), (name, abs_)


def test_autocast_with_grad_scaler_saves_half_outputs_and_scaled_gradients(tmp_path: Path):
    model, loss_fn, hook = _hook(
        tmp_path,
        save_config=ts.SaveConfig(save_interval=1),
        include_collections=["outputs", "gradients", "losses"],
    )
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    scaler = torch.amp.GradScaler("cuda", init_scale=1024.0)
    seen = []
    for step in range(2):
        x, y = _batch(step)
        opt.zero_grad()
        with torch.autocast("cuda", dtype=torch.float16):
            logits = model(x)
            loss = loss_fn(logits, y)
        scaler.scale(loss).backward()
        seen.append((_cpu(logits), _cpu(model.fc2.weight.grad)))
        scaler.step(opt)
        scaler.update()
    hook.close()
    trial = create_trial(str(tmp_path))
    for step, (logits, grad) in enumerate(seen):
        out = trial.tensor("fc2_output_0").value(step)
        assert out.dtype == np.float16  # autocast's matmul output, saved as it was (DT_HALF)
        np.testing.assert_array_equal(out.astype(np.float32), logits)
        # Gradients are saved as backward produced them: scaled by GradScaler, as smdebug saves them.
        np.testing.assert_array_equal(trial.tensor("gradient/Net_fc2.weight").value(step), grad)
        assert np.isfinite(trial.tensor("CrossEntropyLoss_output_0").value(step))


def test_exploding_gpu_run_is_caught_by_the_rule(tmp_path: Path):
    model, loss_fn, hook = _hook(
        tmp_path, save_config=ts.SaveConfig(save_interval=1), include_collections=["gradients", "losses"]
    )
    opt = torch.optim.SGD(model.parameters(), lr=1e6)
    for step in range(6):
        x, y = _batch(step)
        opt.zero_grad()
        loss_fn(model(x) * 1e4, y).backward()
        opt.step()
    hook.close()
    trial = create_trial(str(tmp_path))
    summary = invoke_rule(ExplodingTensor(trial))
    assert summary.fired, "NaN/Inf produced on the GPU must reach the trial and the rule"
    first = summary.first_step
    saved = ["CrossEntropyLoss_output_0", *(n for n in trial.tensor_names() if n.startswith("gradient/"))]
    assert any(not np.all(np.isfinite(trial.tensor(n).value(first))) for n in saved)
