"""The digits set and CNN the network tests train: real scanned digits, a fixed split, and a
training that learns them."""

import numpy as np
import torch

from dlforge.host.conv.digits import digits_cnn, digits_data, top1, train_digits_cnn


def test_the_split_is_real_fixed_and_disjoint():
    x_train, y_train, x_test, y_test = digits_data()
    assert x_train.shape == (1400, 1, 8, 8) and x_test.shape == (397, 1, 8, 8)
    assert x_train.dtype == np.float32 and 0 <= x_train.min() and x_train.max() == 1
    assert set(np.unique(y_test)) == set(range(10))
    again = digits_data()
    assert np.array_equal(again[0], x_train) and np.array_equal(again[3], y_test)
    train = {row.tobytes() for row in x_train}
    assert sum(row.tobytes() in train for row in x_test) < 10     # a few duplicate scans


def test_training_is_reproducible_and_learns():
    model, (_, _, x_test, y_test) = train_digits_cnn(epochs=3)
    again, _ = train_digits_cnn(epochs=3)
    for a, b in zip(model.state_dict().values(), again.state_dict().values()):
        assert torch.equal(a, b)
    with torch.no_grad():
        assert top1(model(torch.as_tensor(x_test)), y_test) > 0.9
    assert digits_cnn()(torch.zeros(2, 1, 8, 8)).shape == (2, 10)
    assert top1(np.eye(3), [0, 1, 0]) == 2 / 3


def test_digits_as_jpeg_files_written_by_pillow(tmp_path):
    from PIL import Image
    from dlforge.host.conv.digits import digit_label, write_digit_jpegs
    x, y, *_ = digits_data()
    paths = write_digit_jpegs(tmp_path, x[:3], y[:3], size=24)
    assert [digit_label(p) for p in paths] == list(y[:3])
    for path, image in zip(paths, x):
        with Image.open(path) as im:
            assert im.format == "JPEG" and im.mode == "L" and im.size == (24, 24)
            small = np.asarray(im.resize((8, 8), Image.Resampling.BILINEAR), np.float32)
        assert np.abs(small / 255 - image[0]).mean() < 0.1      # still the digit
