"""A small real PyTorch training on synthetic data, instrumented with the Tornasole hook.

``broken=True`` uses a learning rate far too high: within a few steps the
loss grows by orders of magnitude, then the weights and gradients overflow to
inf/NaN and the ReLUs die, which is what the recommended
rule set exists to catch. Everything is seeded, so both runs are reproducible.

Like a real training loop it validates after each epoch (EVAL mode), and its
network has a ReLU block and a tanh block: every rule of the recommended set
then has the tensors it reads (Overfit the validation loss, SaturatedActivation
the tanh inputs, SlowConvergence the batches' accuracy, which the loop saves in
the ``metrics`` collection, OscillatingAccuracy the epoch's training accuracy,
which it saves once per epoch at the epoch's last step in an ``epoch_end``
collection saved whenever it is given a tensor), so each one gives a verdict
instead of "nothing evaluated".
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass

__all__ = ["TrainingSettings", "train"]


@dataclass(frozen=True)
class TrainingSettings:
    steps: int = 60
    epoch_steps: int = 20  # training steps between validation passes
    eval_batches: int = 5
    batch_size: int = 64
    save_interval: int = 5
    healthy_lr: float = 0.05
    broken_lr: float = 10.0
    seed: int = 7


def _model():
    import torch
    from torch import nn

    def block(n_in: int, n_out: int, name: str, activation: nn.Module) -> nn.Sequential:
        return nn.Sequential(OrderedDict([("fc", nn.Linear(n_in, n_out)), (name, activation)]))

    class Net(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.block1 = block(20, 64, "tanh", nn.Tanh())
            self.block2 = block(64, 64, "relu", nn.ReLU())
            self.head = nn.Linear(64, 4)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.head(self.block2(self.block1(x)))

    return Net()


def _data(seed: int, n: int):
    """Four Gaussian clusters in 20 dimensions: learnable in a few dozen steps."""
    import torch

    g = torch.Generator().manual_seed(seed)
    centers = torch.randn(4, 20, generator=g) * 2.0
    labels = torch.randint(0, 4, (n,), generator=g)
    features = centers[labels] + torch.randn(n, 20, generator=g)
    return features, labels


def train(out_dir: str, *, broken: bool, settings: TrainingSettings = TrainingSettings()) -> list[float]:
    """Train and save tensors to ``out_dir`` (local or s3://); returns the loss per step."""
    import torch
    from torch import nn

    from tornasole import SaveConfig, modes
    from tornasole.pytorch import Hook

    torch.manual_seed(settings.seed)
    model = _model()
    loss_fn = nn.CrossEntropyLoss()
    lr = settings.broken_lr if broken else settings.healthy_lr
    optimizer = torch.optim.SGD(model.parameters(), lr=lr)
    n_train = settings.steps * settings.batch_size
    features, labels = _data(settings.seed, n_train + settings.eval_batches * settings.batch_size)
    val_features, val_labels = features[n_train:], labels[n_train:]  # held out, same distribution

    hook = Hook(
        out_dir=out_dir,
        save_config=SaveConfig(save_interval=settings.save_interval),
        include_collections=["weights", "gradients", "losses", "relu_activations", "tanh_inputs"],
        stop_check_interval=None,
    )
    hook.get_collection("relu_activations").include(".*relu_output")
    hook.get_collection("tanh_inputs").include(".*tanh_input")
    hook.get_collection("epoch_end").save_config = SaveConfig(save_interval=1)
    hook.register_module(model)
    hook.register_loss(loss_fn)
    losses = []
    correct = 0
    try:
        for step in range(settings.steps):
            if step % settings.epoch_steps == 0:
                hook.set_mode(modes.TRAIN)
                model.train()
                correct = 0
            lo, hi = step * settings.batch_size, (step + 1) * settings.batch_size
            optimizer.zero_grad()
            logits = model(features[lo:hi])
            loss = loss_fn(logits, labels[lo:hi])
            accuracy = _accuracy(logits, labels[lo:hi])
            hook.save_tensor("accuracy", accuracy, "metrics")
            correct += float(accuracy) * settings.batch_size
            if (step + 1) % settings.epoch_steps == 0:  # the epoch's training accuracy, as Keras logs it
                epoch_accuracy = correct / (settings.epoch_steps * settings.batch_size)
                hook.save_tensor("epoch_accuracy", torch.tensor(epoch_accuracy), "epoch_end")
            loss.backward()
            optimizer.step()
            losses.append(float(loss.detach()))
            if (step + 1) % settings.epoch_steps == 0:
                _validate(hook, model, loss_fn, val_features, val_labels, settings.batch_size)
    finally:
        hook.close()
    return losses


def _validate(hook, model, loss_fn, features, labels, batch_size: int) -> None:
    """One validation pass in EVAL mode (the hook saves its losses there)."""
    import torch

    from tornasole import modes

    hook.set_mode(modes.EVAL)
    model.eval()
    with torch.no_grad():
        for lo in range(0, len(features), batch_size):
            logits = model(features[lo : lo + batch_size])
            loss_fn(logits, labels[lo : lo + batch_size])
            hook.save_tensor("accuracy", _accuracy(logits, labels[lo : lo + batch_size]), "metrics")


def _accuracy(logits, labels):
    """The batch's accuracy, as a training loop that logs it computes it (SlowConvergence reads it)."""
    return (logits.argmax(dim=1) == labels).float().mean().detach()
