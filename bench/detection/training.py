"""One benchmark run: a tiny PyTorch MLP trained with a validation pass per epoch, saved with the numpy
``tornasole.Hook``, labelled by :mod:`labels` while it trains.

Saved (collections as a PyTorch user would configure them): ``weights/fcK.weight``,
``gradients/fcK.{weight,bias}``, ``fcK_<act>_input`` (pre-activations), ``fcK_relu_output``, ``loss`` and
(from the sixth revision) ``accuracy``, the batch's accuracy in the ``metrics`` collection, as a training
loop that logs its accuracy saves it (Keras's hook saves its metrics by default), and (from the twelfth)
``epoch_accuracy``, the epoch's training accuracy (every training batch's predictions, as it trained: what
a Keras history calls ``accuracy``), saved once per epoch at the epoch's last TRAIN step in the
``epoch_end`` collection, which is saved at every step it is given a tensor (smdebug's Keras hook likewise
saves an epoch's logs at the epoch's end whatever the interval), and (from issue 29's InputsNotNormalized)
``Mlp_input_0``, the batch the model is fed, in the ``model_input`` collection. TRAIN steps are saved every
``SAVE_INTERVAL`` steps, EVAL steps every step (one validation pass of a few batches per epoch).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from labels import Monitor

SAVE_INTERVAL = 4
EVAL_BATCH = 64
N_VAL = 256
#: The batch the model is fed, as the PyTorch hook names a registered model's input (InputsNotNormalized).
MODEL_INPUT = "Mlp_input_0"


@dataclass(frozen=True)
class Spec:
    """How one case trains; every field has the healthy default."""

    dataset: str = "blobs"  # blobs | circles | moons | xor | blobs4 | rings3 | spiral2 | sine2 | pent5
    #                         | pin3 | band3
    widths: tuple[int, ...] = (16, 16)
    act: str = "relu"  # relu | tanh | sigmoid
    opt: str = "adam"  # adam | sgd
    lr: float = 1e-2
    momentum: float = 0.0
    batch: int = 16
    epochs: int = 10
    n_train: int = 256
    noise: float = 1.0  # blob spread / circle noise
    label_noise: float = 0.0
    input_scale: float = 1.0
    weight_scale: float = 1.0  # multiplies the default init
    bias_init: float | None = None  # hidden biases
    naive_log_softmax: bool = False  # log(softmax(x)) without the log-sum-exp trick
    train_only_last: bool = False  # optimizer given only the last layer's parameters
    lr_zero_after_epoch: int | None = None  # a scheduler bug: lr becomes 0 after this epoch
    warmup_epochs: int = 0  # lr / 100 for these epochs (a slow start)


@dataclass
class RunResult:
    case: str
    seed: int
    path: str
    labels: dict[str, int]
    onset: int | None
    established: int | None = None  # labels.Monitor.established
    train_before: list[int] = field(default_factory=list)  # global step -> TRAIN steps done before it
    final_val_acc: float = float("nan")
    val_acc: list[float] = field(default_factory=list)  # per epoch
    train_acc: list[float] = field(default_factory=list)  # per epoch, as it trained


def make_data(spec: Spec, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray, int]:
    n = spec.n_train + N_VAL
    if spec.dataset == "blobs":
        centers = np.array([[0.0, 2.0], [2.0, -1.0], [-2.0, -1.0]])
        y = rng.integers(0, 3, size=n)
        x = centers[y] + rng.normal(scale=spec.noise, size=(n, 2))
        classes = 3
    elif spec.dataset == "moons":  # two interleaved half-circles, centred
        y = rng.integers(0, 2, size=n)
        t = rng.uniform(0, np.pi, size=n)
        x = np.where(
            (y == 0)[:, None],
            np.stack([np.cos(t), np.sin(t)], axis=1),
            np.stack([1.0 - np.cos(t), 0.5 - np.sin(t)], axis=1),
        )
        x = x - np.array([0.5, 0.25]) + rng.normal(scale=0.15 * spec.noise, size=(n, 2))
        classes = 2
    elif spec.dataset == "blobs4":  # four classes at the corners of a square (chance: 0.25)
        centers = np.array([[2.0, 2.0], [2.0, -2.0], [-2.0, -2.0], [-2.0, 2.0]])
        y = rng.integers(0, 4, size=n)
        x = centers[y] + rng.normal(scale=1.1 * spec.noise, size=(n, 2))
        classes = 4
    elif spec.dataset == "rings3":  # three concentric rings (radii 1, 2, 3), one class each
        y = rng.integers(0, 3, size=n)
        r = (y + 1.0) + rng.normal(scale=0.15 * spec.noise, size=n)
        t = rng.uniform(0, 2 * np.pi, size=n)
        x = np.stack([r * np.cos(t), r * np.sin(t)], axis=1) / 2.0
        classes = 3
    elif spec.dataset == "spiral2":  # two interleaved spirals of one and a quarter turns, one class each
        y = rng.integers(0, 2, size=n)
        t = rng.uniform(0.2, 1.0, size=n) * 2.5 * np.pi
        r = t / (2.5 * np.pi) * 2.0 + rng.normal(scale=0.1 * spec.noise, size=n)
        x = np.stack([r * np.cos(t + np.pi * y), r * np.sin(t + np.pi * y)], axis=1)
        classes = 2
    elif (
        spec.dataset == "sine2"
    ):  # points above or below one and a half periods of a sine wave, one class each
        y = rng.integers(0, 2, size=n)
        x1 = rng.uniform(-np.pi, np.pi, size=n)
        gap = np.abs(rng.normal(scale=0.4, size=n)) + 0.2
        x2 = np.sin(1.5 * x1) + np.where(y == 1, gap, -gap) + rng.normal(scale=0.1 * spec.noise, size=n)
        x = np.stack([x1 / 1.5, x2], axis=1)
        classes = 2
    elif spec.dataset == "pent5":  # five clusters at the corners of a pentagon (radius 2), one class each
        angles = np.pi / 2 + 2 * np.pi * np.arange(5) / 5
        centers = 2.0 * np.stack([np.cos(angles), np.sin(angles)], axis=1)
        y = rng.integers(0, 5, size=n)
        x = centers[y] + rng.normal(scale=0.8 * spec.noise, size=(n, 2))
        classes = 5
    elif spec.dataset == "pin3":  # a pinwheel: three arms curling out from the centre, one class each
        y = rng.integers(0, 3, size=n)
        r = rng.uniform(0.25, 2.0, size=n)
        t = 2 * np.pi * y / 3 + r  # each arm turns by one radian per unit of radius
        x = np.stack([r * np.cos(t), r * np.sin(t)], axis=1)
        x = x + rng.normal(scale=0.15 * spec.noise, size=(n, 2))
        classes = 3
    elif spec.dataset == "band3":  # three horizontal bands with wavy boundaries (gaps of 0.2), one class each
        y = rng.integers(0, 3, size=n)
        x1 = rng.uniform(-2.0, 2.0, size=n)
        x2 = (y - 1.0) + 0.4 * np.sin(2.0 * x1) + rng.uniform(-0.4, 0.4, size=n)
        x = np.stack([x1, x2 + rng.normal(scale=0.1 * spec.noise, size=n)], axis=1)
        classes = 3
    elif spec.dataset == "xor":  # four clusters at (+-1, +-1); the class is whether x and y share a sign
        corner = rng.choice(np.array([-1.0, 1.0]), size=(n, 2))
        y = (corner[:, 0] * corner[:, 1] > 0).astype(np.int64)
        x = corner + rng.normal(scale=0.35 * spec.noise, size=(n, 2))
        classes = 2
    else:  # circles
        y = rng.integers(0, 2, size=n)
        r = np.where(y == 0, 1.0, 2.0) + rng.normal(scale=0.15 * spec.noise, size=n)
        t = rng.uniform(0, 2 * np.pi, size=n)
        x = np.stack([r * np.cos(t), r * np.sin(t)], axis=1)
        classes = 2
    if spec.label_noise:
        flip = rng.random(n) < spec.label_noise
        y = np.where(flip, rng.integers(0, classes, size=n), y)
    return (x * spec.input_scale).astype(np.float32), y.astype(np.int64), classes


def run(case: str, spec: Spec, seed: int, out_dir: str) -> RunResult:
    import torch

    from tornasole import Hook, SaveConfig, SaveConfigMode, modes

    torch.set_num_threads(1)
    torch.manual_seed(seed)
    rng = np.random.default_rng(seed)
    x, y, classes = make_data(spec, rng)
    xt, yt = torch.from_numpy(x[: spec.n_train]), torch.from_numpy(y[: spec.n_train])
    xv, yv = torch.from_numpy(x[spec.n_train :]), torch.from_numpy(y[spec.n_train :])
    sizes = [2, *spec.widths, classes]
    layers = [torch.nn.Linear(a, b) for a, b in zip(sizes, sizes[1:])]
    with torch.no_grad():
        for i, layer in enumerate(layers):
            layer.weight.mul_(spec.weight_scale)
            if spec.bias_init is not None and i < len(layers) - 1:
                layer.bias.fill_(spec.bias_init)
    act = {"relu": torch.relu, "tanh": torch.tanh, "sigmoid": torch.sigmoid}[spec.act]
    params = [p for layer in (layers[-1:] if spec.train_only_last else layers) for p in layer.parameters()]
    if spec.opt == "adam":
        opt = torch.optim.Adam(params, lr=spec.lr)
    else:
        opt = torch.optim.SGD(params, lr=spec.lr, momentum=spec.momentum)

    def forward(xb: Any) -> tuple[Any, dict[str, Any], dict[str, Any]]:
        pre, post = {}, {}
        h = xb
        for i, layer in enumerate(layers[:-1], start=1):
            z = layer(h)
            h = act(z)
            pre[f"fc{i}_{spec.act}_input"] = z
            if spec.act == "relu":
                post[f"fc{i}_relu_output"] = h
        return layers[-1](h), pre, post

    def loss_fn(logits: Any, target: Any) -> Any:
        if spec.naive_log_softmax:
            p = torch.exp(logits) / torch.exp(logits).sum(dim=1, keepdim=True)
            return -torch.log(p[torch.arange(len(target)), target]).mean()
        return torch.nn.functional.cross_entropy(logits, target)

    save = SaveConfig(
        mode_save_configs={
            modes.TRAIN: SaveConfigMode(save_interval=SAVE_INTERVAL),
            modes.EVAL: SaveConfigMode(save_interval=1),
        }
    )
    monitor = Monitor(epochs=spec.epochs)
    result = RunResult(case, seed, out_dir, {}, None)
    hook = Hook(out_dir, save_config=save, stop_check_interval=None)
    hook.get_collection("epoch_end").save_config = SaveConfig(save_interval=1)  # every step it is given
    step = 0
    train_done = 0

    def np_(t: Any) -> np.ndarray:
        return t.detach().numpy().copy()

    for epoch in range(spec.epochs):
        lr_now = spec.lr / 100 if epoch < spec.warmup_epochs else spec.lr
        if spec.lr_zero_after_epoch is not None and epoch > spec.lr_zero_after_epoch:
            lr_now = 0.0
        for group in opt.param_groups:
            group["lr"] = lr_now
        hook.set_mode(modes.TRAIN)
        order = rng.permutation(spec.n_train)
        losses, train_correct = [], 0
        for b in range(0, spec.n_train, spec.batch):
            idx = torch.from_numpy(order[b : b + spec.batch])
            opt.zero_grad()
            logits, pre, post = forward(xt[idx])
            loss = loss_fn(logits, yt[idx])
            for t in (*pre.values(), *post.values()):
                t.retain_grad()
            loss.backward()
            lv = float(loss.item())
            losses.append(lv)
            batch_correct = int((logits.argmax(dim=1) == yt[idx]).sum())
            train_correct += batch_correct
            grads = {}
            for i, layer in enumerate(layers, start=1):
                g = layer.weight.grad
                grads[f"fc{i}"] = np_(g) if g is not None else np.zeros(tuple(layer.weight.shape), np.float32)
            weights = {f"fc{i}": np_(layer.weight) for i, layer in enumerate(layers, start=1)}
            all_grads = dict(grads)  # every layer's kernel and bias gradients (AUTOTRAINER's zero ratio)
            for i, layer in enumerate(layers, start=1):
                if layer.bias.grad is not None:
                    all_grads[f"fc{i}.bias"] = np_(layer.bias.grad)
            monitor.train_step(step, lv, grads, weights, all_grads, {})
            hook.save_tensor(MODEL_INPUT, np_(xt[idx]), "model_input")
            hook.save_tensor("loss", np.float32(lv), "losses")
            hook.save_tensor("accuracy", np.float32(batch_correct / len(idx)), "metrics")
            if b + len(idx) >= spec.n_train:  # the epoch's training accuracy, once, at its last batch
                hook.save_tensor("epoch_accuracy", np.float32(train_correct / spec.n_train), "epoch_end")
            for i, layer in enumerate(layers, start=1):
                hook.save_tensor(f"weights/fc{i}.weight", weights[f"fc{i}"], "weights")
                hook.save_tensor(f"gradients/fc{i}.weight", grads[f"fc{i}"], "gradients")
                gb = layer.bias.grad
                if gb is not None:
                    hook.save_tensor(f"gradients/fc{i}.bias", np_(gb), "gradients")
            for name, t in pre.items():
                hook.save_tensor(name, np_(t), "relu_input" if spec.act == "relu" else "activations")
            for name, t in post.items():
                hook.save_tensor(name, np_(t), "relu_output")
            opt.step()
            result.train_before.append(train_done)
            hook.next_step()
            step += 1
            train_done += 1
        last_train = step - 1
        hook.set_mode(modes.EVAL)
        val_losses, correct, acts = [], 0, {}
        with torch.no_grad():
            for b in range(0, N_VAL, EVAL_BATCH):
                logits, pre, post = forward(xv[b : b + EVAL_BATCH])
                lv = float(loss_fn(logits, yv[b : b + EVAL_BATCH]).item())
                val_losses.append(lv)
                batch_correct = int((logits.argmax(dim=1) == yv[b : b + EVAL_BATCH]).sum())
                correct += batch_correct
                hook.save_tensor(MODEL_INPUT, np_(xv[b : b + EVAL_BATCH]), "model_input")
                hook.save_tensor("loss", np.float32(lv), "losses")
                hook.save_tensor("accuracy", np.float32(batch_correct / EVAL_BATCH), "metrics")
                for name, t in pre.items():
                    hook.save_tensor(name, np_(t), "relu_input" if spec.act == "relu" else "activations")
                    acts.setdefault(name, []).append(np_(t))
                for name, t in post.items():
                    hook.save_tensor(name, np_(t), "relu_output")
                result.train_before.append(train_done)
                hook.next_step()
                step += 1
        acc = correct / N_VAL
        vl = float(np.mean(val_losses))
        tl = float(np.mean(losses))
        monitor.epoch_end(
            epoch,
            last_train,
            tl,
            vl if math.isfinite(vl) else float("inf"),
            acc,
            {k: np.concatenate(v) for k, v in acts.items()},
            train_correct / spec.n_train,
        )
        result.final_val_acc = acc
    hook.close()
    result.labels = dict(monitor.labels)
    result.onset = monitor.onset
    result.established = monitor.established
    result.val_acc, result.train_acc = list(monitor.val_acc), list(monitor.train_acc)
    return result
