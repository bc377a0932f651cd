"""Data of the families benchmark: scikit-learn's bundled data sets (they ship in the wheel; nothing
downloads) and three synthetic sequence tasks. Every loader returns standardised float32 inputs, targets,
the number of classes (0 for a real-valued target) and the validation size; the split is seeded.
"""

from __future__ import annotations

import math

import numpy as np


def _standardise(x: np.ndarray, n_train: int) -> np.ndarray:
    mu, sd = x[:n_train].mean(axis=0), x[:n_train].std(axis=0)
    return ((x - mu) / np.where(sd > 0, sd, 1.0)).astype(np.float32)


def _shuffle(rng: np.random.Generator, *arrays: np.ndarray) -> list[np.ndarray]:
    order = rng.permutation(len(arrays[0]))
    return [a[order] for a in arrays]


def digits(rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray, int, int]:
    """8x8 handwritten digits (1,797 images, 10 classes), pixels scaled to [0, 1], shape (N, 1, 8, 8)."""
    from sklearn.datasets import load_digits

    d = load_digits()
    x, y = _shuffle(rng, (d.images / 16.0).astype(np.float32)[:, None], d.target.astype(np.int64))
    return x, y, 10, 360


def digits_flat(rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray, int, int]:
    """The digits as 64-vectors in [0, 1] (the autoencoder's input and target)."""
    x, y, _, n_val = digits(rng)
    return x.reshape(len(x), 64), y, 0, n_val


def digits_flat_classes(rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray, int, int]:
    """The digits as 64-vectors in [0, 1] with their 10-class target (the residual MLP classifier's data)."""
    x, y, classes, n_val = digits(rng)
    return x.reshape(len(x), 64), y, classes, n_val


def digits_channels_last(rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray, int, int]:
    """The digits as Keras images: shape (N, 8, 8, 1), pixels in [0, 1], 10 classes."""
    x, y, classes, n_val = digits(rng)
    return np.ascontiguousarray(x.transpose(0, 2, 3, 1)), y, classes, n_val


def breast_cancer(rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray, int, int]:
    """569 tumours, 30 features, benign/malignant (a binary target, float for BCE)."""
    from sklearn.datasets import load_breast_cancer

    d = load_breast_cancer()
    x, y = _shuffle(rng, d.data, d.target.astype(np.float32)[:, None])
    return _standardise(x, len(x) - 128), y, 2, 128


def wine(rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray, int, int]:
    """178 wines, 13 features, 3 cultivars: a small validation set (48), its accuracy in steps of 2%."""
    from sklearn.datasets import load_wine

    d = load_wine()
    x, y = _shuffle(rng, d.data, d.target.astype(np.int64))
    return _standardise(x, len(x) - 48), y, 3, 48


def wine_stratified(rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray, int, int]:
    """The 178 wines (13 features, 3 cultivars) with a stratified, seeded split: 40 held out in the classes'
    proportions (13, 16, 11 of 59, 71, 48), standardised on the 138 training wines (the held-out ``wine``
    family's data; the ``softmax`` family's :func:`wine` split is a plain shuffle of 48)."""
    from sklearn.datasets import load_wine

    d = load_wine()
    y = d.target.astype(np.int64)
    train_idx, val_idx = _stratified_split(y, 40, rng)
    order = np.concatenate([train_idx, val_idx])
    x, y = d.data[order], y[order]
    return _standardise(x, len(train_idx)), y, 3, len(val_idx)


def iris(rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray, int, int]:
    """150 flowers, 4 features, 3 species: a tiny set whose 30-sample validation accuracy moves in steps of
    3.3%."""
    from sklearn.datasets import load_iris

    d = load_iris()
    x, y = _shuffle(rng, d.data, d.target.astype(np.int64))
    return _standardise(x, len(x) - 30), y, 3, 30


def diabetes(rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray, int, int]:
    """442 patients, 10 features, disease progression after a year (regression; target standardised)."""
    from sklearn.datasets import load_diabetes

    d = load_diabetes()
    x, y = _shuffle(rng, d.data, d.target)
    n_train = len(x) - 112
    y = ((y - y[:n_train].mean()) / y[:n_train].std()).astype(np.float32)[:, None]
    return _standardise(x, n_train), y, 0, 112


def sum_sequences(rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray, int, int]:
    """Synthetic: 1,200 sequences of 12 steps x 3 channels; the class is the channel with the largest sum."""
    n = 1200
    x = rng.normal(size=(n, 12, 3)).astype(np.float32)
    y = x.sum(axis=1).argmax(axis=1).astype(np.int64)
    return x, y, 3, 256


def first_token(rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray, int, int]:
    """Synthetic: 1,200 sequences of 8 tokens (vocabulary 6); the class is the most frequent token of the
    first four (ties to the smallest): a task that needs attention across positions."""
    n = 1200
    x = rng.integers(0, 6, size=(n, 8))
    counts = np.stack([(x[:, :4] == v).sum(axis=1) for v in range(6)], axis=1)
    return x.astype(np.int64), counts.argmax(axis=1).astype(np.int64), 6, 256


def noisy_sines(rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray, int, int]:
    """Synthetic: 1,200 sequences of 32 steps, 1 channel (shape (N, 1, 32), channels first for Conv1d),
    ``sin(2 pi f t / 32 + phase) + N(0, 0.5)``; the class is the frequency f in {1, 2, 3} (class f - 1),
    the phase uniform in [0, 2 pi)."""
    n, steps = 1200, 32
    y = rng.integers(0, 3, size=n).astype(np.int64)
    phase = rng.uniform(0.0, 2 * math.pi, size=(n, 1))
    t = np.arange(steps)[None, :]
    x = np.sin(2 * math.pi * (y[:, None] + 1) * t / steps + phase) + rng.normal(0.0, 0.5, size=(n, steps))
    return x.astype(np.float32)[:, None, :], y, 3, 256


def marked_signs(rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray, int, int]:
    """Synthetic, after Hochreiter & Schmidhuber's adding problem (Neural Computation 1997, experiment 4):
    1,200 sequences of 20 steps x 2 channels, channel 0 a value uniform in [-1, 1] at every step, channel 1
    a marker, 1 at two random steps (one in the first half, one in the second) and 0 elsewhere. The class is
    the signs of the two marked values in order (--, -+, +-, ++: classes 0-3): the first mark must be held
    across up to 19 steps of distractors, a task for a gated recurrent memory (the ``rnn`` family's
    :func:`sum_sequences` reads every step alike)."""
    n, steps = 1200, 20
    values = rng.uniform(-1.0, 1.0, size=(n, steps))
    first = rng.integers(0, steps // 2, size=n)
    second = rng.integers(steps // 2, steps, size=n)
    marks = np.zeros((n, steps))
    rows = np.arange(n)
    marks[rows, first] = 1.0
    marks[rows, second] = 1.0
    y = 2 * (values[rows, first] > 0) + (values[rows, second] > 0)
    return np.stack([values, marks], axis=2).astype(np.float32), y.astype(np.int64), 4, 256


def digits_flat_stratified(rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray, int, int]:
    """The 1,797 digits as 64-vectors in [0, 1] (pixels / 16, as a Keras user feeds them to a Dense layer)
    with a stratified, seeded split: 300 held out in the classes' proportions (29-31 of each digit), the other
    1,497 for training (the held-out ``digits`` Keras family's data; :func:`digits_flat_classes` is a plain
    shuffle with 360 held out and ``resmlp`` trains on 960)."""
    from sklearn.datasets import load_digits

    d = load_digits()
    y = d.target.astype(np.int64)
    train_idx, val_idx = _stratified_split(y, 300, rng)
    order = np.concatenate([train_idx, val_idx])
    x = (d.data[order] / 16.0).astype(np.float32)
    return x, y[order], 10, len(val_idx)


def digits_rows_stratified(rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray, int, int]:
    """The 1,797 digits read as sequences: 8 time steps (the rows, top to bottom) of 8 features (the row's
    pixels / 16, in [0, 1]), shape (N, 8, 8), 10 classes, with a stratified, seeded split: 360 held out in
    the classes' proportions (35-37 of each digit), the other 1,437 for training (the held-out
    ``digits_rows`` family's data; the digits have been images (cnn, convbn), 64-vectors (autoencoder,
    resmlp, digits_keras), never sequences)."""
    from sklearn.datasets import load_digits

    d = load_digits()
    y = d.target.astype(np.int64)
    train_idx, val_idx = _stratified_split(y, 360, rng)
    order = np.concatenate([train_idx, val_idx])
    x = (d.images[order] / 16.0).astype(np.float32)
    return np.ascontiguousarray(x), y[order], 10, len(val_idx)


def _stratified_split(y: np.ndarray, n_val: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """Training and validation indices, ``n_val`` held out in the classes' proportions, each side shuffled.

    The draws (one permutation per class, then one per side) are the ones the held-out families were
    first trained with, so a seed gives the same split as before this helper existed.
    """
    train, val = [], []
    for c in np.unique(y):
        members = rng.permutation(np.flatnonzero(y == c))
        k = int(round(n_val * len(members) / len(y)))
        val.append(members[:k])
        train.append(members[k:])
    return rng.permutation(np.concatenate(train)), rng.permutation(np.concatenate(val))


def delayed_recall(rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray, int, int]:
    """Synthetic delayed recall: 1,500 sequences of 20 steps, each step one of 6 symbols one-hot (channels
    0-5) and a marker channel (6) set at one step drawn uniformly from the first half; the class is the
    marked symbol (6 classes, chance 1/6). The symbol must be held across 10 to 19 later steps of
    distractors and read from the last state (the held-out ``recall_gru`` family's data; :func:`marked_signs`
    has real values and two marks, :func:`sum_sequences` no memory at all). 300 held out."""
    n, steps, k = 1500, 20, 6
    symbols = rng.integers(0, k, size=(n, steps))
    marked = rng.integers(0, steps // 2, size=n)
    rows = np.arange(n)
    x = np.zeros((n, steps, k + 1), dtype=np.float32)
    x[rows[:, None], np.arange(steps)[None, :], symbols] = 1.0
    x[rows, marked, k] = 1.0
    return x, symbols[rows, marked].astype(np.int64), k, 300


def induction_pairs(rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray, int, int]:
    """Synthetic induction (copy) task: 3,000 sequences of 16 tokens from a vocabulary of 10. A token A
    appears exactly twice, at a random position p in 0-13 and at the last position; the class is B, the
    token that followed A at p + 1 (every other token is drawn from the nine that are not A, so the answer
    is unique; chance 1/9). Solving it takes a previous-token step and a match-and-copy step (Olsson et al.
    2022, "In-context learning and induction heads"): the held-out ``induction_tf`` family's data; the
    ``transformer`` family's :func:`first_token` counts tokens. 300 held out."""
    n, steps, vocab = 3000, 16, 10
    a = rng.integers(0, vocab, size=n)
    x = rng.integers(0, vocab - 1, size=(n, steps))
    x = x + (x >= a[:, None])  # the nine tokens other than A
    rows = np.arange(n)
    p = rng.integers(0, steps - 2, size=n)
    y = x[rows, p + 1].copy()
    x[rows, p] = a
    x[:, -1] = a
    return x.astype(np.int64), y.astype(np.int64), vocab, 300


#: The four binary attributes of each digit the held-out ``multilabel`` family predicts (independent sigmoid
#: outputs): written down before any run, each a union of digit classes.
DIGIT_ATTRIBUTES: tuple[tuple[str, frozenset[int]], ...] = (
    ("even", frozenset({0, 2, 4, 6, 8})),
    ("at_least_5", frozenset({5, 6, 7, 8, 9})),
    ("closed_loop", frozenset({0, 6, 8, 9})),
    ("prime", frozenset({2, 3, 5, 7})),
)


def digit_attributes(rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray, int, int]:
    """The 1,797 digits as 64-vectors standardised on the training digits (the pixels' mean and standard
    deviation; constant pixels left at 0), each with the four binary attributes of :data:`DIGIT_ATTRIBUTES`
    as a float32 (N, 4) target (multi-label: any number of attributes may hold); a stratified, seeded split
    asked for 400 held out, 401 after each class's rounding (39-41 of each digit), 1,396 for training (the
    held-out ``multilabel`` family's data; attributes even, >= 5, loop, prime hold for 50, 50, 40 and 40 % of
    each side;
    ``digits_flat_stratified`` holds out 300, ``digits_rows_stratified`` 360). ``classes`` is 2: each output
    is a binary decision (what the label-noise case draws from)."""
    from sklearn.datasets import load_digits

    d = load_digits()
    y = d.target.astype(np.int64)
    train_idx, val_idx = _stratified_split(y, 400, rng)
    order = np.concatenate([train_idx, val_idx])
    digit = y[order]
    targets = np.stack([np.isin(digit, sorted(members)) for _, members in DIGIT_ATTRIBUTES], axis=1)
    return _standardise(d.data[order], len(train_idx)), targets.astype(np.float32), 2, len(val_idx)


def marker_order(rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray, int, int]:
    """Synthetic order task: 1,500 sequences of 16 steps, each step one of 8 tokens one-hot (channels 0-7).
    Tokens 0, 1 and 2 (the markers) appear exactly once each, at three distinct random steps; every other
    step is one of the distractors 3-7. The class is the order in which the three markers appear (one of the
    6 permutations of (0, 1, 2), in ``itertools.permutations`` order; chance 1/6): the net must keep which
    markers it has seen, and in which order, across distractors (the held-out ``gru_keras`` family's data;
    :func:`delayed_recall` holds one marked symbol, :func:`marked_signs` two signs). 300 held out."""
    import itertools

    n, steps, k = 1500, 16, 8
    tokens = rng.integers(3, k, size=(n, steps))
    positions = np.argsort(rng.random((n, steps)), axis=1)[:, :3]  # three distinct steps, a random order
    rows = np.arange(n)
    for marker in range(3):
        tokens[rows, positions[:, marker]] = marker
    order = np.argsort(positions, axis=1)  # the markers sorted by the step they appear at
    index = {p: i for i, p in enumerate(itertools.permutations(range(3)))}
    y = np.array([index[tuple(o)] for o in order], dtype=np.int64)
    x = np.zeros((n, steps, k), dtype=np.float32)
    x[rows[:, None], np.arange(steps)[None, :], tokens] = 1.0
    return x, y, 6, 300


#: The vocabulary of :func:`majority_token`'s sequences (candidates 0-3, distractors 4-9).
MAJORITY_VOCAB = 10


def majority_token(rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray, int, int]:
    """Synthetic counting task: 1,500 sequences of 24 tokens drawn uniformly from a vocabulary of 10; tokens
    0-3 are the candidates, 4-9 distractors. The class is the candidate that occurs most often (a sequence
    whose most frequent candidates tie is drawn again, so the answer is unique; 4 classes, chance 1/4): the
    net must count across the whole sequence (the held-out ``attention_keras`` family's data; the
    ``transformer`` family's :func:`first_token` counts the first four tokens only, :func:`marker_order`
    orders three markers). Token ids, shape (N, 24). 300 held out."""
    n, steps, vocab, k = 1500, 24, MAJORITY_VOCAB, 4
    x = rng.integers(0, vocab, size=(n, steps))
    while True:
        counts = np.stack([(x == c).sum(axis=1) for c in range(k)], axis=1)
        tied = (counts == counts.max(axis=1, keepdims=True)).sum(axis=1) > 1
        if not tied.any():
            break
        x[tied] = rng.integers(0, vocab, size=(int(tied.sum()), steps))
    return x.astype(np.int64), counts.argmax(axis=1).astype(np.int64), k, 300


#: The Gaussian noise (standard deviation, on pixels in [0, 1]) the held-out ``conv_ae`` family adds to its
#: input, never to its target; the noisy pixels are clipped to [0, 1].
DENOISE_SIGMA = 0.25


def digits_denoise(rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray, int, int]:
    """The 1,797 digits as (N, 1, 8, 8) images, pixels / 16 in [0, 1], clean (the held-out ``conv_ae``
    family's data: the target is the clean image; :mod:`families.training` adds fresh Gaussian noise of
    :data:`DENOISE_SIGMA` to each training batch's input and a fixed, seeded draw to the validation
    images). 360 held out, a plain seeded shuffle as :func:`digits`."""
    x, _, _, n_val = digits(rng)
    return x, x.copy(), 0, n_val


def add_noise(x: np.ndarray, rng: np.random.Generator, sigma: float = DENOISE_SIGMA) -> np.ndarray:
    """``x`` plus Gaussian noise of ``sigma`` drawn from ``rng``, clipped to [0, 1] (a denoising
    autoencoder's corrupted input, Vincent et al., ICML 2008: the corruption is drawn anew each time)."""
    return np.clip(x + rng.normal(0.0, sigma, size=x.shape), 0.0, 1.0).astype(np.float32)


def digits_vae(rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray, int, int]:
    """The 1,797 digits as 64-vectors, pixels / 16 in [0, 1], input and target the same clean pixels (the
    held-out ``vae`` family's data: a Bernoulli decoder's targets must stay in [0, 1], so the inputs x100
    fault scales the encoder's input only, as ``conv_ae``'s). 360 held out, a plain seeded shuffle as
    :func:`digits_flat`."""
    x, _, _, n_val = digits_flat(rng)
    return x, x.copy(), 0, n_val
