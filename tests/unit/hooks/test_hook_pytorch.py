"""The PyTorch hook: FORMAT.md 2.4 names, step counting, values as they were, dtypes, per-step hooks."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from torch import nn

import tornasole.pytorch as ts
from tornasole import modes
from tornasole.trials import create_trial


class Net(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc1 = nn.Linear(4, 3)
        self.relu = nn.ReLU()
        self.fc2 = nn.Linear(3, 2)

    def forward(self, x):
        return self.fc2(self.relu(self.fc1(x)))


def _setup(out: Path, **kwargs):
    torch.manual_seed(0)
    model, loss_fn = Net(), nn.CrossEntropyLoss()
    hook = ts.Hook(str(out), **kwargs)
    hook.register_module(model)
    hook.register_loss(loss_fn)
    return model, loss_fn, hook


def _batch(i: int):
    g = torch.Generator().manual_seed(i)
    return torch.randn(5, 4, generator=g), torch.randint(0, 2, (5,), generator=g)


def test_names_values_and_steps_match_what_training_saw(tmp_path: Path):
    model, loss_fn, hook = _setup(
        tmp_path,
        save_config=ts.SaveConfig(save_interval=2),
        include_collections=["weights", "biases", "gradients", "losses", "relu_out"],
    )
    hook.get_collection("relu_out").add_module_tensors(model.relu, outputs=True)
    hook.get_collection("relu_out").include("relu_output_")
    opt = torch.optim.SGD(model.parameters(), lr=0.5)
    expected = {}
    hook.set_mode(modes.TRAIN)
    for step in range(4):
        x, y = _batch(step)
        before = {n: p.detach().clone() for n, p in model.named_parameters()}
        opt.zero_grad()
        loss = loss_fn(model(x), y)
        loss.backward()
        expected[step] = (
            before,
            {n: p.grad.clone() for n, p in model.named_parameters()},
            loss.item(),
            torch.relu(model.fc1(x)).detach(),
        )
        opt.step()
    hook.close()
    trial = create_trial(str(tmp_path))
    assert trial.steps() == [0, 2]
    assert set(trial.tensor_names()) == {
        "Net_fc1.weight",
        "Net_fc1.bias",
        "Net_fc2.weight",
        "Net_fc2.bias",
        "gradient/Net_fc1.weight",
        "gradient/Net_fc1.bias",
        "gradient/Net_fc2.weight",
        "gradient/Net_fc2.bias",
        "CrossEntropyLoss_output_0",
        "relu_output_0",
    }
    for step in (0, 2):
        before, grads, loss, relu = expected[step]
        for name in before:
            np.testing.assert_allclose(trial.tensor(f"Net_{name}").value(step), before[name].numpy())
            np.testing.assert_allclose(trial.tensor(f"gradient/Net_{name}").value(step), grads[name].numpy())
        loss_value = trial.tensor("CrossEntropyLoss_output_0").value(step)
        assert loss_value.shape == ()
        assert float(loss_value) == pytest.approx(loss)
        np.testing.assert_allclose(trial.tensor("relu_output_0").value(step), relu.numpy(), rtol=1e-6)
    coll = trial.collection("gradients")
    assert sorted(coll.tensor_names) == sorted(n for n in trial.tensor_names() if n.startswith("gradient/"))


def test_default_configuration_saves_only_losses(tmp_path: Path):
    model, loss_fn, hook = _setup(tmp_path, save_config=ts.SaveConfig(save_interval=1))
    for step in range(2):
        x, y = _batch(step)
        loss_fn(model(x), y).backward()
    hook.close()
    trial = create_trial(str(tmp_path))
    assert trial.tensor_names() == ["CrossEntropyLoss_output_0"]
    assert trial.steps() == [0, 1]


def test_global_step_counts_every_forward_and_eval_never_saves_gradients(tmp_path: Path):
    model, loss_fn, hook = _setup(
        tmp_path, save_config=ts.SaveConfig(save_interval=1), include_collections=["gradients", "weights"]
    )
    hook.set_mode(modes.TRAIN)
    for i in range(2):
        x, y = _batch(i)
        loss_fn(model(x), y).backward()
    hook.set_mode(modes.EVAL)
    for i in range(2):
        x, y = _batch(i)
        loss_fn(model(x), y).backward()  # gradients computed in EVAL must still not be saved
    hook.close()
    trial = create_trial(str(tmp_path))
    assert trial.steps() == [0, 1, 2, 3]
    assert trial.steps(mode=modes.EVAL) == [0, 1]
    assert trial.tensor("gradient/Net_fc1.weight").steps() == [0, 1]
    assert trial.tensor("Net_fc1.weight").steps() == [0, 1, 2, 3]


def test_unsaved_steps_run_without_per_module_hooks(tmp_path: Path):
    model, loss_fn, hook = _setup(
        tmp_path, save_config=ts.SaveConfig(save_interval=3), include_collections=["gradients", "outputs"]
    )
    counts = []
    for i in range(4):
        x, y = _batch(i)
        out = model(x)
        counts.append((len(model.fc1._forward_hooks), len(loss_fn._forward_hooks)))
        loss_fn(out, y).backward()
    hook.close()
    assert counts == [(1, 1), (0, 0), (0, 0), (1, 1)]
    assert len(model._forward_pre_hooks) == 0  # close() unregisters
    trial = create_trial(str(tmp_path))
    assert trial.steps() == [0, 3]
    assert "fc1_output_0" in trial.tensor_names()
    assert "Net_output_0" in trial.tensor_names()


@pytest.mark.parametrize(("dtype", "saved"), [(torch.bfloat16, np.float32), (torch.float16, np.float16)])
def test_half_precision_models(tmp_path: Path, dtype, saved):
    model, loss_fn, hook = _setup(
        tmp_path,
        save_config=ts.SaveConfig(save_interval=1),
        include_collections=["weights", "gradients", "norms"],
    )
    norms = hook.get_collection("norms")
    norms.include("^gradient/.*weight")
    norms.reduction_config = ts.ReductionConfig(norms=["l2"], reductions=["max"])
    model.to(dtype)
    x, y = _batch(0)
    loss_fn(model(x.to(dtype)), y).backward()
    hook.close()
    trial = create_trial(str(tmp_path))
    w = trial.tensor("Net_fc1.weight").value(0)
    assert w.dtype == saved
    np.testing.assert_array_equal(w, model.fc1.weight.detach().float().numpy().astype(saved))
    g = model.fc1.weight.grad.float()
    assert trial.tensor("gradient/Net_fc1.weight").reduction_value(0, "l2") == pytest.approx(
        float(torch.linalg.vector_norm(g)), rel=1e-2
    )


def test_sequential_names_inputs_regex_and_functional_losses(tmp_path: Path):
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 3), nn.ReLU(), nn.Linear(3, 2))
    hook = ts.Hook(
        str(tmp_path),
        save_config=ts.SaveConfig(save_interval=1),
        include_regex=["^Sequential_0"],
        include_collections=["inputs", "losses"],
    )
    hook.register_module(model)
    x = torch.randn(2, 4)
    out = model(x)
    hook.record_tensor_value("mse_loss", F.mse_loss(out, torch.zeros_like(out)))
    hook.save_tensor("extra", torch.arange(3), "extras")
    hook.close()
    trial = create_trial(str(tmp_path))
    names = set(trial.tensor_names())
    assert {
        "Sequential_0.weight",
        "Sequential_0.bias",
        "0_input_0",
        "2_input_0",
        "mse_loss_output_0",
        "extra",
    } <= names
    assert "Sequential_2.weight" not in names
    np.testing.assert_array_equal(trial.tensor("0_input_0").value(0), x.numpy())
    np.testing.assert_array_equal(trial.tensor("extra").value(0), np.arange(3))


def test_scalars_follow_the_step_that_is_running(tmp_path: Path):
    model, loss_fn, hook = _setup(tmp_path, save_config=ts.SaveConfig(save_interval=100))
    hook.get_collection("scalars").save_config = ts.SaveConfig(save_interval=1)
    hook.set_mode(modes.TRAIN)
    for i in range(3):
        x, y = _batch(i)
        loss = loss_fn(model(x), y)
        hook.save_scalar("loss_item", loss.item())
        hook.save_scalar("loss_tensor", loss)
    hook.set_mode(modes.EVAL)
    hook.save_scalar("before_first_eval_forward", 1.0)
    model(_batch(9)[0])
    hook.close()
    trial = create_trial(str(tmp_path))
    assert trial.tensor("scalar/loss_item").steps(mode=modes.TRAIN) == [0, 1, 2]
    assert trial.tensor("scalar/loss_tensor").value(2).shape == ()
    assert trial.tensor("scalar/before_first_eval_forward").steps(mode=modes.EVAL) == [0]
    assert trial.global_step(modes.EVAL, 0) == 3


def test_raise_on_stop_ends_the_training_loop_cleanly(tmp_path: Path):
    model, loss_fn, hook = _setup(
        tmp_path, save_config=ts.SaveConfig(save_interval=1), raise_on_stop=True, stop_check_interval=0.05
    )
    steps_run = 0

    def train() -> None:
        nonlocal steps_run
        for i in range(1000):
            if i == 2:
                (tmp_path / "tornasole_stop_training.json").write_text("{}")
                assert hook._stop_poller.wait(2.0)
            x, y = _batch(i)
            loss_fn(model(x), y).backward()
            steps_run += 1

    with hook, pytest.raises(ts.TrainingStopRequested):
        train()
    assert steps_run == 2
    assert (tmp_path / "training_job_end.ts").exists()
    assert create_trial(str(tmp_path)).steps() == [0, 1]


def test_capture_is_a_snapshot_and_reductions_follow_torch_semantics():
    from tornasole.pytorch.capture import TorchCapture

    tc = TorchCapture()
    t = torch.tensor([1.0, 2.0, 3.0, 6.0])
    snap = tc.capture(t)
    t.mul_(10)  # an in-place update after saving (optimizer.step, p.grad /= n) must not leak in
    std = tc.reduce(t / 10, "std", False)
    bf = tc.capture(torch.tensor([1.5, -2.25], dtype=torch.bfloat16))
    records = tc.materializer()(
        [("t", "a", snap, 0.0), ("t", "s", std, 0.0), ("t", "b", bf, 0.0), ("s", "a", (4,))]
    )
    np.testing.assert_array_equal(records[0][2], [1.0, 2.0, 3.0, 6.0])
    assert records[1][2].shape == ()
    assert float(records[1][2]) == pytest.approx(
        np.std([1.0, 2.0, 3.0, 6.0], ddof=1)
    )  # unbiased, as smdebug's hook
    assert records[2][2].dtype == np.float32
    np.testing.assert_array_equal(records[2][2], [1.5, -2.25])
    assert records[3] == ("s", "a", (4,))
    half = tc.materializer()([("t", "h", tc.reduce(torch.ones(3, dtype=torch.float16), "l1", True), 0.0)])
    assert half[0][2].dtype == np.float16
    assert float(half[0][2]) == 3.0


def test_model_can_be_pickled_and_copied_while_the_hook_is_attached(tmp_path: Path):
    import copy
    import io

    model, loss_fn, hook = _setup(
        tmp_path, save_config=ts.SaveConfig(save_interval=1), include_collections=["outputs", "gradients"]
    )
    x, y = _batch(0)
    out = model(x)  # a saved step: per-step hooks are attached right now
    buf = io.BytesIO()
    torch.save(model, buf)
    loss_fn(out, y).backward()
    clone = copy.deepcopy(model)
    clone(x)  # a copy of the model does not drive this hook's steps
    assert hook.step == 0
    buf.seek(0)
    restored = torch.load(buf, weights_only=False)
    np.testing.assert_array_equal(restored(x).detach().numpy(), out.detach().numpy())
    hook.close()
    assert create_trial(str(tmp_path)).steps() == [0]


def test_a_failing_hook_is_reported_once_and_training_continues(tmp_path: Path, caplog):
    model, loss_fn, hook = _setup(
        tmp_path, save_config=ts.SaveConfig(save_interval=1), include_collections=["weights"]
    )
    hook.register_module(model)  # a second registration is ignored (steps are not counted twice)

    def broken_capture(value):
        raise RuntimeError("capture bug")

    hook._capture = broken_capture
    for i in range(3):
        x, y = _batch(i)
        loss_fn(model(x), y).backward()  # no exception reaches the training loop
    hook.close()
    failures = [r for r in caplog.records if "PyTorch hook failed" in r.getMessage()]
    assert len(failures) == 1
    assert "capture bug" in failures[0].exc_text
    assert hook.step == 0
