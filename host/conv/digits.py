"""A small CNN trained in seconds on real labelled images: scikit-learn's ``load_digits``
(1,797 scanned handwritten digits, 8x8, 17 grey levels), the network the tests and
``make demo`` quantise and run on the engine.

The split is fixed by a seed (1,400 for training, the rest held out), and so is the training
(Adam, 15 epochs of batches of 64, single-threaded), so a run gives the same model each time on
one machine.  Pixels are scaled to 0..1 (the data's 0..16 over 16).
"""

import numpy as np
import torch
import torch.nn as nn

__all__ = ["digits_data", "digits_cnn", "train_digits_cnn", "top1", "write_digit_jpegs",
           "digit_label"]


def digits_data(seed=0, train=1400):
    """(x_train, y_train, x_test, y_test): float32 (N, 1, 8, 8) images and int64 labels."""
    from sklearn.datasets import load_digits
    data = load_digits()
    x = (data.images / 16.0).astype(np.float32)[:, None]
    y = data.target.astype(np.int64)
    order = np.random.default_rng(seed).permutation(len(x))
    return x[order[:train]], y[order[:train]], x[order[train:]], y[order[train:]]


def digits_cnn():
    """Two 3x3 convolutions (one with a batch norm, one with a 2x2 pool), two linear layers."""
    return nn.Sequential(
        nn.Conv2d(1, 16, 3, padding=1), nn.BatchNorm2d(16), nn.ReLU(),
        nn.Conv2d(16, 32, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
        nn.Flatten(), nn.Linear(512, 64), nn.ReLU(), nn.Linear(64, 10))


def train_digits_cnn(seed=0, epochs=15):
    """The trained model (eval mode) and its data split (:func:`digits_data`)."""
    x_train, y_train, x_test, y_test = digits_data(seed)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        torch.manual_seed(seed)
        model = digits_cnn()
        opt = torch.optim.Adam(model.parameters(), 1e-2)
        xt, yt = torch.as_tensor(x_train), torch.as_tensor(y_train)
        gen = torch.Generator().manual_seed(seed)
        for _ in range(epochs):
            order = torch.randperm(len(xt), generator=gen)
            for i in range(0, len(xt), 64):
                batch = order[i:i + 64]
                opt.zero_grad()
                nn.functional.cross_entropy(model(xt[batch]), yt[batch]).backward()
                opt.step()
    finally:
        torch.set_num_threads(threads)
    return model.eval(), (x_train, y_train, x_test, y_test)


def top1(logits, labels):
    """Top-1 accuracy of (N, classes) logits."""
    logits = logits.detach().numpy() if hasattr(logits, "detach") else np.asarray(logits)
    return float((logits.argmax(axis=1) == np.asarray(labels)).mean())


def write_digit_jpegs(folder, x, labels, size=32, quality=90):
    """Digits (N, 1, 8, 8) in 0..1 as greyscale JPEG files written by Pillow (libjpeg),
    enlarged to ``size`` x ``size`` (bilinear) so that reading them back takes a real
    decode and resize: ``NNNN-L.jpg``, ``L`` the label (:func:`digit_label`)."""
    from pathlib import Path
    from PIL import Image
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    paths = []
    for i, (image, label) in enumerate(zip(x, labels)):
        grey = Image.fromarray(np.round(image[0] * 255).astype(np.uint8), "L")
        path = folder / f"{i:04d}-{int(label)}.jpg"
        grey.resize((size, size), Image.Resampling.BILINEAR).save(path, quality=quality)
        paths.append(path)
    return paths


def digit_label(path):
    """The label in a name written by :func:`write_digit_jpegs`."""
    from pathlib import Path
    return int(Path(path).stem.rsplit("-", 1)[1])
