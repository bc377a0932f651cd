"""The families' models. Activation modules are named ``<layer>_<fn>`` (``fc1_relu``, ``out_sigmoid``) so the
PyTorch hook saves ``fc1_relu_output_0`` and ``out_sigmoid_input_0``, the names the activation rules read.
``hidden_act`` replaces the hidden activation (a DeepFD mutation); ``depth`` repeats the hidden block.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

ACTS = {
    "relu": nn.ReLU,
    "tanh": nn.Tanh,
    "sigmoid": nn.Sigmoid,
    "gelu": nn.GELU,
    "silu": nn.SiLU,
    "elu": nn.ELU,
}


class Mlp(nn.Module):
    """Linear blocks (optional LayerNorm/BatchNorm, dropout) then an output layer; ``out_act`` is an output
    activation module (``sigmoid`` for a BCE classifier, ``sigmoid`` for an autoencoder's pixels)."""

    def __init__(
        self,
        sizes: list[int],
        act: str,
        norm: str = "",
        dropout: float = 0.0,
        out_act: str = "",
    ) -> None:
        super().__init__()
        self.blocks: list[tuple[str, ...]] = []
        for i, (a, b) in enumerate(zip(sizes[:-2], sizes[1:-1]), start=1):
            names = [f"fc{i}"]
            setattr(self, f"fc{i}", nn.Linear(a, b))
            if norm:
                setattr(self, f"fc{i}_norm", nn.LayerNorm(b) if norm == "layer" else nn.BatchNorm1d(b))
                names.append(f"fc{i}_norm")
            setattr(self, f"fc{i}_{act}", ACTS[act]())
            names.append(f"fc{i}_{act}")
            if dropout:
                setattr(self, f"fc{i}_drop", nn.Dropout(dropout))
                names.append(f"fc{i}_drop")
            self.blocks.append(tuple(names))
        self.out = nn.Linear(sizes[-2], sizes[-1])
        self.out_act = f"out_{out_act}" if out_act else ""
        if out_act:
            setattr(self, self.out_act, ACTS[out_act]())

    def forward(self, x: Any) -> Any:
        for names in self.blocks:
            for n in names:
                x = getattr(self, n)(x)
        x = self.out(x)
        return getattr(self, self.out_act)(x) if self.out_act else x


class ResMlp(nn.Module):
    """A modern residual MLP classifier (pre-LayerNorm residual blocks, as in a transformer's feed-forward
    half): an input layer ``stem`` to ``d``, then ``depth`` blocks
    ``x + block<i>_fc2(block<i>_drop(block<i>_<act>(block<i>_fc1(block<i>_norm(x)))))`` expanding to
    ``hidden``, a final LayerNorm ``norm`` and the output layer ``out``. The layers are flat attributes (as
    in :class:`Mlp`) so the hook's names are ``block1_gelu_output_0``, ``block1_sigmoid_input_0``."""

    def __init__(
        self,
        in_dim: int = 64,
        classes: int = 10,
        d: int = 64,
        hidden: int = 128,
        depth: int = 3,
        act: str = "gelu",
        dropout: float = 0.1,
    ) -> None:
        super().__init__()
        self.stem = nn.Linear(in_dim, d)
        self.blocks: list[tuple[str, ...]] = []
        for i in range(1, depth + 1):
            names = (f"block{i}_norm", f"block{i}_fc1", f"block{i}_{act}", f"block{i}_drop", f"block{i}_fc2")
            setattr(self, names[0], nn.LayerNorm(d))
            setattr(self, names[1], nn.Linear(d, hidden))
            setattr(self, names[2], ACTS[act]())
            setattr(self, names[3], nn.Dropout(dropout))
            setattr(self, names[4], nn.Linear(hidden, d))
            self.blocks.append(names)
        self.norm = nn.LayerNorm(d)
        self.out = nn.Linear(d, classes)

    def forward(self, x: Any) -> Any:
        x = self.stem(x)
        for names in self.blocks:
            h = x
            for n in names:
                h = getattr(self, n)(h)
            x = x + h
        return self.out(self.norm(x))


class ConvNet(nn.Module):
    """Two 3x3 convolutions on 8x8 images, each followed by BatchNorm (the convolutions keep their bias, as
    much user code does: a bias feeding a BatchNorm gets a zero gradient), then a linear classifier."""

    def __init__(self, act: str = "relu", width: int = 8, depth: int = 2) -> None:
        super().__init__()
        self.layers: list[str] = []
        c = 1
        for i in range(1, depth + 1):
            setattr(self, f"conv{i}", nn.Conv2d(c, width * i, 3, padding=1))
            setattr(self, f"conv{i}_bn", nn.BatchNorm2d(width * i))
            setattr(self, f"conv{i}_{act}", ACTS[act]())
            self.layers += [f"conv{i}", f"conv{i}_bn", f"conv{i}_{act}"]
            c = width * i
        self.pool = nn.AdaptiveAvgPool2d(2)
        self.out = nn.Linear(c * 4, 10)

    def forward(self, x: Any) -> Any:
        for n in self.layers:
            x = getattr(self, n)(x)
        return self.out(torch.flatten(self.pool(x), 1))


class GruNet(nn.Module):
    """A one-layer GRU over the sequence, its last hidden state to a linear classifier."""

    def __init__(self, hidden: int = 24, classes: int = 3) -> None:
        super().__init__()
        self.gru = nn.GRU(3, hidden, batch_first=True)
        self.out = nn.Linear(hidden, classes)

    def forward(self, x: Any) -> Any:
        h, _ = self.gru(x)
        return self.out(h[:, -1])


class TinyTransformer(nn.Module):
    """Token and learned position embeddings, one pre-norm encoder layer (2 heads, d=32, dropout 0.1), mean
    pooling, a linear classifier."""

    def __init__(
        self, vocab: int = 6, length: int = 8, d: int = 32, classes: int = 6, layers: int = 1
    ) -> None:
        super().__init__()
        self.embed = nn.Embedding(vocab, d)
        self.pos = nn.Parameter(torch.randn(1, length, d) * 0.1)
        layer = nn.TransformerEncoderLayer(d, 2, 64, dropout=0.1, batch_first=True, norm_first=True)
        self.encoder = nn.TransformerEncoder(layer, layers, enable_nested_tensor=False)
        self.norm = nn.LayerNorm(d)
        self.out = nn.Linear(d, classes)

    def forward(self, x: Any) -> Any:
        h = self.encoder(self.embed(x) + self.pos)
        return self.out(self.norm(h).mean(dim=1))


class Conv1dNet(nn.Module):
    """A 1-D convolutional classifier over a (N, 1, length) sequence: ``conv1`` (``width`` channels, kernel
    5) -> ``conv1_bn`` (BatchNorm1d) -> ``conv1_<act>``, then ``depth - 1`` blocks ``conv<i>`` (``2 * width``
    channels, kernel 5) -> ``conv<i>_<act>`` without a norm, a global average pool over time and the output
    layer ``out``. ``depth`` 6 with ``act`` sigmoid is the deep sigmoid mutation applied to the convs."""

    def __init__(self, act: str = "relu", width: int = 16, depth: int = 2, classes: int = 3) -> None:
        super().__init__()
        self.layers: list[str] = ["conv1", "conv1_bn", f"conv1_{act}"]
        self.conv1 = nn.Conv1d(1, width, 5, padding=2)
        self.conv1_bn = nn.BatchNorm1d(width)
        setattr(self, f"conv1_{act}", ACTS[act]())
        c = width
        for i in range(2, depth + 1):
            setattr(self, f"conv{i}", nn.Conv1d(c, 2 * width, 5, padding=2))
            setattr(self, f"conv{i}_{act}", ACTS[act]())
            self.layers += [f"conv{i}", f"conv{i}_{act}"]
            c = 2 * width
        self.pool = nn.AdaptiveAvgPool1d(1)
        self.out = nn.Linear(c, classes)

    def forward(self, x: Any) -> Any:
        for n in self.layers:
            x = getattr(self, n)(x)
        return self.out(torch.flatten(self.pool(x), 1))


class LstmNet(nn.Module):
    """A one-layer LSTM over a (N, steps, channels) sequence, its last hidden state through ``drop`` (dropout)
    to the output layer ``out`` (logits)."""

    def __init__(self, in_dim: int = 2, hidden: int = 32, classes: int = 4, dropout: float = 0.2) -> None:
        super().__init__()
        self.lstm = nn.LSTM(in_dim, hidden, batch_first=True)
        self.drop = nn.Dropout(dropout)
        self.out = nn.Linear(hidden, classes)

    def forward(self, x: Any) -> Any:
        h, _ = self.lstm(x)
        return self.out(self.drop(h[:, -1]))


class BiGruRows(nn.Module):
    """A one-layer bidirectional GRU over a (N, steps, features) sequence (the digits' rows); the forward
    direction's state after the last step and the backward direction's after the first (each has read the
    whole sequence), concatenated, to the output layer ``out`` (logits)."""

    def __init__(self, in_dim: int = 8, hidden: int = 48, classes: int = 10) -> None:
        super().__init__()
        self.gru = nn.GRU(in_dim, hidden, batch_first=True, bidirectional=True)
        self.out = nn.Linear(2 * hidden, classes)

    def forward(self, x: Any) -> Any:
        h, _ = self.gru(x)
        hidden = self.gru.hidden_size
        return self.out(torch.cat([h[:, -1, :hidden], h[:, 0, hidden:]], dim=1))


class StackedGru(nn.Module):
    """A two-layer GRU (one ``nn.GRU`` module of ``layers`` stacked layers, ``hidden`` units each) over a
    (N, steps, features) sequence, the top layer's state after the last step to the output layer ``out``
    (logits)."""

    def __init__(self, in_dim: int = 7, hidden: int = 48, classes: int = 6, layers: int = 2) -> None:
        super().__init__()
        self.gru = nn.GRU(in_dim, hidden, num_layers=layers, batch_first=True)
        self.out = nn.Linear(hidden, classes)

    def forward(self, x: Any) -> Any:
        h, _ = self.gru(x)
        return self.out(h[:, -1])


class AttentionOnly(nn.Module):
    """A tiny attention-only transformer: token and learned position embeddings (``embed``, ``pos``: both
    ``nn.Embedding``, the token embedding first), ``layers`` pre-norm causal self-attention blocks
    ``h + attn<i>(attn<i>_norm(h))`` (``heads`` heads, no MLP, no dropout), a final LayerNorm ``norm`` and the
    output layer ``out`` read at the last position only (logits)."""

    def __init__(
        self,
        vocab: int = 10,
        length: int = 16,
        d: int = 32,
        heads: int = 2,
        layers: int = 2,
        classes: int = 10,
    ) -> None:
        super().__init__()
        self.embed = nn.Embedding(vocab, d)
        self.pos = nn.Embedding(length, d)
        self.blocks: list[tuple[str, str]] = []
        for i in range(1, layers + 1):
            setattr(self, f"attn{i}_norm", nn.LayerNorm(d))
            setattr(self, f"attn{i}", nn.MultiheadAttention(d, heads, batch_first=True))
            self.blocks.append((f"attn{i}_norm", f"attn{i}"))
        self.norm = nn.LayerNorm(d)
        self.out = nn.Linear(d, classes)
        self.register_buffer("causal", torch.triu(torch.ones(length, length, dtype=torch.bool), diagonal=1))

    def forward(self, x: Any) -> Any:
        steps = x.shape[1]
        h = self.embed(x) + self.pos(torch.arange(steps, device=x.device))
        mask = self.causal[:steps, :steps]
        for norm, attn in self.blocks:
            q = getattr(self, norm)(h)
            a, _ = getattr(self, attn)(q, q, q, attn_mask=mask, need_weights=False)
            h = h + a
        return self.out(self.norm(h[:, -1]))


class ConvAutoencoder(nn.Module):
    """A convolutional denoising autoencoder on (N, 1, 8, 8) images. Encoder: ``conv1`` (3x3, ``width``
    channels) -> ``conv1_gn`` (GroupNorm, 4 groups) -> ``conv1_<act>``, ``conv2`` (3x3, stride 2: 8x8 to
    4x4, ``2 * width`` channels) -> ``conv2_gn`` -> ``conv2_<act>``, then ``depth - 2`` blocks ``conv<i>``
    (3x3 at 4x4, ``2 * width`` channels) with their own GroupNorm and activation; decoder: ``up1``
    (ConvTranspose2d, kernel 4, stride 2: back to 8x8, ``width`` channels) -> ``up1_gn`` -> ``up1_<act>``,
    then ``out`` (3x3 to one channel) -> ``out_sigmoid`` (pixels in [0, 1]). ``depth`` 6 with ``act``
    sigmoid is the deep sigmoid mutation applied to the convolutions (as conv1d's and convbn's)."""

    def __init__(self, act: str = "silu", width: int = 16, depth: int = 2) -> None:
        super().__init__()
        self.layers: list[str] = []
        c_in = 1
        for i in range(1, max(2, depth) + 1):
            c_out = width if i == 1 else 2 * width
            setattr(self, f"conv{i}", nn.Conv2d(c_in, c_out, 3, stride=2 if i == 2 else 1, padding=1))
            setattr(self, f"conv{i}_gn", nn.GroupNorm(4, c_out))
            setattr(self, f"conv{i}_{act}", ACTS[act]())
            self.layers += [f"conv{i}", f"conv{i}_gn", f"conv{i}_{act}"]
            c_in = c_out
        self.up1 = nn.ConvTranspose2d(c_in, width, 4, stride=2, padding=1)
        self.up1_gn = nn.GroupNorm(4, width)
        setattr(self, f"up1_{act}", ACTS[act]())
        self.layers += ["up1", "up1_gn", f"up1_{act}"]
        self.out = nn.Conv2d(width, 1, 3, padding=1)
        self.out_sigmoid = nn.Sigmoid()

    def forward(self, x: Any) -> Any:
        for n in self.layers:
            x = getattr(self, n)(x)
        return self.out_sigmoid(self.out(x))


class Vae(nn.Module):
    """A variational autoencoder of 64-vectors in [0, 1] (Kingma & Welling, ICLR 2014). Encoder: ``depth``
    blocks ``fc<i>`` (Linear to ``width``) -> ``fc<i>_<act>``, then two heads ``mu`` and ``logvar`` (Linear
    to ``latent``: the posterior's mean and log-variance); the reparameterisation trick ``z = mu + eps *
    exp(logvar / 2)`` while training, the posterior mean ``z = mu`` in eval mode; decoder: ``depth`` blocks
    ``dec<i>`` (Linear to ``width``) -> ``dec<i>_<act>``, then ``out`` (Linear to 64) -> ``out_sigmoid``.
    ``forward`` returns ``(reconstruction, mu, logvar)``, what :class:`ElboLoss` takes. ``depth`` 6 with
    ``act`` sigmoid is the deep sigmoid mutation (six sigmoid blocks each side)."""

    def __init__(self, in_dim: int = 64, act: str = "relu", width: int = 64, depth: int = 2, latent: int = 8):
        super().__init__()
        self.encoder, c = self._blocks("fc", in_dim, width, depth, act)
        self.mu = nn.Linear(c, latent)
        self.logvar = nn.Linear(c, latent)
        self.decoder, c = self._blocks("dec", latent, width, depth, act)
        self.out = nn.Linear(c, in_dim)
        self.out_sigmoid = nn.Sigmoid()

    def _blocks(self, prefix: str, c: int, width: int, depth: int, act: str) -> tuple[list[str], int]:
        """``depth`` blocks ``<prefix><i>`` (Linear from ``c`` to ``width``) -> ``<prefix><i>_<act>``,
        registered in order (the parameters' order, so their seeded initialisation, is the run's); their
        names and the width that comes out."""
        names: list[str] = []
        for i in range(1, depth + 1):
            setattr(self, f"{prefix}{i}", nn.Linear(c, width))
            setattr(self, f"{prefix}{i}_{act}", ACTS[act]())
            names += [f"{prefix}{i}", f"{prefix}{i}_{act}"]
            c = width
        return names, c

    def forward(self, x: Any) -> tuple[Any, Any, Any]:
        h = x
        for n in self.encoder:
            h = getattr(self, n)(h)
        mu, logvar = self.mu(h), self.logvar(h)
        z = mu + torch.randn_like(mu) * torch.exp(0.5 * logvar) if self.training else mu
        for n in self.decoder:
            z = getattr(self, n)(z)
        return self.out_sigmoid(self.out(z)), mu, logvar


class ElboLoss(nn.Module):
    """The negative evidence lower bound of :class:`Vae`, a user's own loss module: the reconstruction's
    binary cross-entropy summed over the pixels, plus ``beta`` times the KL divergence of the posterior
    ``N(mu, exp(logvar))`` from ``N(0, 1)`` summed over the latent units, both averaged over the batch.
    ``beta`` is set by the training loop: KL annealing (Bowman et al., CoNLL 2016) raises it linearly from 0
    to 1 over the first epochs, so the total can rise while the model learns. Called as
    ``loss(reconstruction, target, mu, logvar)``."""

    def __init__(self) -> None:
        super().__init__()
        self.beta = 1.0

    def forward(self, recon: Any, target: Any, mu: Any, logvar: Any) -> Any:
        n = recon.shape[0]
        # the binary cross-entropy written out, each log clamped at -100 as ``F.binary_cross_entropy`` clamps
        # it (the same values), so that a diverged decoder's NaN pixels give a NaN loss and the run goes on:
        # ``F.binary_cross_entropy`` raises on them ("all elements of input should be between 0 and 1")
        log_p = torch.log(recon).clamp_min(-100.0)
        log_q = torch.log1p(-recon).clamp_min(-100.0)
        bce = -torch.sum(target * log_p + (1 - target) * log_q) / n
        kl = -0.5 * torch.sum(1 + logvar - mu.pow(2) - logvar.exp()) / n
        return bce + self.beta * kl


class MixupCnn(nn.Module):
    """A small CNN of (N, 1, 8, 8) images: ``conv1`` (3x3, ``width`` channels) -> ``conv1_bn`` ->
    ``conv1_<act>``, ``conv2`` (3x3, ``2 * width``) -> ``conv2_bn`` -> ``conv2_<act>`` -> ``pool`` (max 2x2:
    4x4), then ``depth - 2`` blocks ``conv<i>`` (3x3 at 4x4, ``2 * width``) with their own BatchNorm and
    activation; a global average pool and the output layer ``out`` (logits). ``depth`` 6 with ``act`` sigmoid
    is the deep sigmoid mutation applied to the convolutions (as conv1d's, convbn's and conv_ae's)."""

    def __init__(self, act: str = "relu", width: int = 16, depth: int = 2, classes: int = 10) -> None:
        super().__init__()
        self.layers: list[str] = []
        c_in = 1
        for i in range(1, max(2, depth) + 1):
            c_out = width if i == 1 else 2 * width
            setattr(self, f"conv{i}", nn.Conv2d(c_in, c_out, 3, padding=1))
            setattr(self, f"conv{i}_bn", nn.BatchNorm2d(c_out))
            setattr(self, f"conv{i}_{act}", ACTS[act]())
            self.layers += [f"conv{i}", f"conv{i}_bn", f"conv{i}_{act}"]
            if i == 2:
                self.pool = nn.MaxPool2d(2)
                self.layers.append("pool")
            c_in = c_out
        self.gap = nn.AdaptiveAvgPool2d(1)
        self.out = nn.Linear(c_in, classes)

    def forward(self, x: Any) -> Any:
        for n in self.layers:
            x = getattr(self, n)(x)
        return self.out(torch.flatten(self.gap(x), 1))


class AmpCnn(MixupCnn):
    """The ``amp_cnn`` family's CNN (trained under automatic mixed precision): :class:`MixupCnn`'s layers
    (conv-BatchNorm-activation blocks, ``width`` then ``2 * width`` channels, max pooling after the second,
    ``depth - 2`` more blocks at 4x4, global average pooling, the output layer ``out``), a class of its own so
    the hook names its input ``AmpCnn_input_0``."""


class DistillLoss(nn.Module):
    """Knowledge distillation's loss (Hinton, Vinyals & Dean 2015), a user's own loss module: ``alpha`` times
    the KL divergence of the student's softened distribution from the teacher's, both at temperature ``T``
    (``softmax(logits / T)``), scaled by ``T ** 2`` so its gradients keep their size as ``T`` changes, plus
    ``1 - alpha`` times the cross-entropy of the student's logits against the hard labels; the KL term
    averaged over the batch (``reduction="batchmean"``, the divergence's own definition). Called as
    ``loss(student_logits, labels, teacher_logits)``: the hook saves the student's logits as ``_input_0`` and
    the labels as ``_input_1``, as it saves any classifier's loss inputs."""

    def __init__(self, temperature: float = 4.0, alpha: float = 0.9) -> None:
        super().__init__()
        self.temperature = temperature
        self.alpha = alpha

    def forward(self, student: Any, target: Any, teacher: Any) -> Any:
        t = self.temperature
        soft = nn.functional.kl_div(
            nn.functional.log_softmax(student / t, dim=1),
            nn.functional.softmax(teacher / t, dim=1),
            reduction="batchmean",
        )
        hard = nn.functional.cross_entropy(student, target)
        return self.alpha * soft * t * t + (1.0 - self.alpha) * hard
