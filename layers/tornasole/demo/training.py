"""A small real PyTorch training on synthetic data, instrumented with the Tornasole hook.

``broken=True`` uses a learning rate far too high: within a few steps the
loss grows by orders of magnitude, then the weights and gradients overflow to
inf/NaN and the ReLUs die, which is what the default
rule set exists to catch. Everything is seeded, so both runs are reproducible.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass

__all__ = ["TrainingSettings", "train"]


@dataclass(frozen=True)
class TrainingSettings:
    steps: int = 60
    batch_size: int = 64
    save_interval: int = 5
    healthy_lr: float = 0.05
    broken_lr: float = 3.0
    seed: int = 7


def _model():
    import torch
    from torch import nn

    def block(n_in: int, n_out: int) -> nn.Sequential:
        return nn.Sequential(OrderedDict(fc=nn.Linear(n_in, n_out), relu=nn.ReLU()))

    class Net(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.block1 = block(20, 64)
            self.block2 = block(64, 64)
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
    features, labels = _data(settings.seed, settings.steps * settings.batch_size)

    hook = Hook(
        out_dir=out_dir,
        save_config=SaveConfig(save_interval=settings.save_interval),
        include_collections=["weights", "gradients", "losses", "relu_activations"],
        stop_check_interval=None,
    )
    hook.get_collection("relu_activations").include(".*relu_output")
    hook.register_module(model)
    hook.register_loss(loss_fn)
    hook.set_mode(modes.TRAIN)
    losses = []
    try:
        for step in range(settings.steps):
            lo, hi = step * settings.batch_size, (step + 1) * settings.batch_size
            optimizer.zero_grad()
            loss = loss_fn(model(features[lo:hi]), labels[lo:hi])
            loss.backward()
            optimizer.step()
            losses.append(float(loss.detach()))
    finally:
        hook.close()
    return losses
