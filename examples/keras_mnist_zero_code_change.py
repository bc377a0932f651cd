"""Keras MNIST-shaped training whose debugging is configured from outside the script.

The hook comes from a SageMaker DebugHookConfig JSON file named by
``TORNASOLE_CONFIG_FILE_PATH`` (or ``SMDEBUG_CONFIG_FILE_PATH``, or SageMaker's
``/opt/ml/input/config/debughookconfig.json``): what to save, how often and
where is decided by that file, not by this script. Without a file the script
trains exactly the same, with no hook. The data is synthetic (random 28x28
images, labels from a fixed random projection), so the example needs no download.

Run::

    TORNASOLE_CONFIG_FILE_PATH=hook.json python examples/keras_mnist_zero_code_change.py --epochs 1
"""

from __future__ import annotations

import argparse
import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import keras  # noqa: E402
import numpy as np  # noqa: E402

from tornasole.keras import get_hook  # noqa: E402


def synthetic_mnist(n: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """``n`` 28x28x1 float images in [0, 1] and labels 0..9 that depend on the pixels."""
    rng = np.random.default_rng(seed)
    x = rng.random((n, 28, 28, 1), dtype=np.float32)
    projection = rng.standard_normal((28 * 28, 10)).astype(np.float32)
    y = np.argmax(x.reshape(n, -1) @ projection, axis=1).astype(np.int64)
    return x, y


def build_model() -> keras.Model:
    model = keras.Sequential(
        [
            keras.Input((28, 28, 1)),
            keras.layers.Conv2D(4, 3, activation="relu", name="conv"),
            keras.layers.MaxPooling2D(2, name="pool"),
            keras.layers.Flatten(name="flatten"),
            keras.layers.Dense(16, activation="relu", name="hidden"),
            keras.layers.Dense(10, activation="softmax", name="probs"),
        ],
        name="mnist",
    )
    model.compile(
        optimizer=keras.optimizers.Adam(1e-3), loss="sparse_categorical_crossentropy", metrics=["accuracy"]
    )
    return model


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--epochs", type=int, default=1)
    parser.add_argument("--samples", type=int, default=256)
    parser.add_argument("--batch-size", type=int, default=32)
    args = parser.parse_args()

    keras.utils.set_random_seed(0)
    x, y = synthetic_mnist(args.samples)
    model = build_model()
    # The only debugger line: None when no DebugHookConfig file is present.
    hook = get_hook(create_if_not_exists=True)
    callbacks = [hook] if hook is not None else []
    model.fit(
        x,
        y,
        batch_size=args.batch_size,
        epochs=args.epochs,
        verbose=0,
        validation_split=0.25,
        callbacks=callbacks,
    )
    loss, acc = model.evaluate(x, y, batch_size=args.batch_size, verbose=0, callbacks=callbacks)
    if hook is not None:
        hook.close()
    print(f"loss={loss:.4f} accuracy={acc:.3f} hook={'on: ' + hook.out_dir if hook else 'off'}")


if __name__ == "__main__":
    main()
