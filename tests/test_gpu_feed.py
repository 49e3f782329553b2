"""The data feed on CPU (the same code as on CUDA, without streams): layouts, normalisation,
the crop/resize/flip arithmetic, crop boxes in torchvision's ranges, how far ahead it reads,
its spans, and JpegBatches as a source."""

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from dlforge.host.sched.gpu_feed import MEAN, STD, Augment, GpuFeed, crop_boxes
from dlforge.host.jpeg.loader import JpegBatches
from dlforge.host.sched.trace import Timeline

from jpeg_files import encode, photo
from stand_in_cuda import StandInCuda

torch.set_num_threads(1)


def _images(n=2, size=8, seed=0):
    return torch.randint(0, 256, (n, 3, size, size), dtype=torch.uint8,
                         generator=torch.Generator().manual_seed(seed))


def _expected(images):
    mean = torch.tensor(MEAN).view(1, 3, 1, 1)
    std = torch.tensor(STD).view(1, 3, 1, 1)
    return (images.float() / 255 - mean) / std


def test_normalises_and_passes_labels_for_both_layouts():
    images, labels = _images(), torch.tensor([3, 4])
    nchw, = GpuFeed([(images, labels)], "cpu")
    nhwc, = GpuFeed([(images.permute(0, 2, 3, 1).contiguous(), labels)], "cpu")
    torch.testing.assert_close(nchw[0], _expected(images))
    assert torch.equal(nchw[0], nhwc[0]) and torch.equal(nchw[1], labels)
    bare, = GpuFeed([images], "cpu", layout="NCHW")
    assert bare[1] is None and torch.equal(bare[0], nchw[0])


def test_whole_image_crop_is_a_bilinear_resize_and_flip_mirrors():
    images = _images(size=12).float()
    augment = Augment(size=20)
    boxes = torch.tensor([[0, 0, 12, 12]] * 2)
    theta = augment.theta(2, 12, 12, boxes, torch.tensor([False, True]))
    grid = F.affine_grid(theta, (2, 3, 20, 20), align_corners=False)
    out = F.grid_sample(images, grid, mode="bilinear", padding_mode="border",
                        align_corners=False)
    resized = F.interpolate(images, size=20, mode="bilinear", align_corners=False)
    torch.testing.assert_close(out[0], resized[0], rtol=0, atol=1e-3)
    torch.testing.assert_close(out[1], resized[1].flip(-1), rtol=0, atol=1e-3)


def test_a_crop_box_picks_its_pixels():
    images = _images(1, size=16).float()
    theta = Augment(size=4).theta(1, 16, 16, torch.tensor([[8, 4, 4, 4]]),
                                  torch.tensor([False]))
    grid = F.affine_grid(theta, (1, 3, 4, 4), align_corners=False)
    out = F.grid_sample(images, grid, mode="bilinear", align_corners=False)
    torch.testing.assert_close(out, images[:, :, 8:12, 4:8], rtol=0, atol=1e-3)


def test_crop_boxes_in_torchvisions_ranges():
    boxes = crop_boxes(2000, 60, 90, torch.Generator().manual_seed(1))
    top, left, h, w = boxes.unbind(1)
    assert (top >= 0).all() and (left >= 0).all()
    assert (top + h <= 60).all() and (left + w <= 90).all()
    area = (h * w).float() / (60 * 90)
    assert area.min() >= 0.07 and area.max() <= 1
    assert 0.3 < area.mean() < 0.7             # uniform in [0.08, 1], less the misfits
    aspect = w.float() / h.float()
    assert aspect.min() > 0.7 and aspect.max() < 1.4


def test_augmented_batch_shape_and_repeatability():
    images = _images(4, size=32)
    a, = GpuFeed([images], "cpu", augment=Augment(size=16, seed=3))
    b, = GpuFeed([images], "cpu", augment=Augment(size=16, seed=3))
    c, = GpuFeed([images], "cpu", augment=Augment(size=16, seed=4))
    assert a[0].shape == (4, 3, 16, 16) and a[0].dtype == torch.float32
    assert torch.equal(a[0], b[0]) and not torch.equal(a[0], c[0])


def test_flip_only():
    images = _images(3)
    out, = GpuFeed([images], "cpu", augment=Augment(flip=1.0))
    assert torch.equal(out[0], Augment(flip=0.0)(images.flip(-1)))
    torch.testing.assert_close(out[0], _expected(images).flip(-1))


@pytest.mark.parametrize("ahead", [1, 3])
def test_reads_ahead_of_the_consumer(ahead):
    pulled = []

    def source():
        for i in range(6):
            pulled.append(i)
            yield _images(1, seed=i), torch.tensor([i])

    feed = iter(GpuFeed(source(), "cpu", ahead=ahead))
    images, labels = next(feed)
    assert labels.item() == 0 and len(pulled) == 1 + ahead
    assert [y.item() for _, y in feed] == [1, 2, 3, 4, 5]
    with pytest.raises(ValueError):
        GpuFeed([], "cpu", ahead=0)


def test_spans():
    timeline = Timeline()
    list(GpuFeed([_images(), _images()], "cpu", augment=Augment(size=4), timeline=timeline))
    kinds = [s.kind for s in timeline.spans]
    assert kinds.count("copy") == 2 and kinds.count("augment") == 2
    assert kinds.count("data_wait") == 3                    # the last finds the end


def test_jpeg_batches_as_source(tmp_path):
    for i, name in enumerate(["astronaut", "coffee", "chelsea"]):
        (tmp_path / f"{i}.jpg").write_bytes(encode(np.ascontiguousarray(photo(name)[:96, :96]),
                                                   quality=90))
    source = JpegBatches(tmp_path, 2, size=48, layout="NHWC", device="cpu")
    batches = list(GpuFeed(source, "cpu", augment=Augment(size=32)))
    assert [b[0].shape for b in batches] == [(2, 3, 32, 32), (1, 3, 32, 32)]
    assert all(-3 < b[0].min() and b[0].max() < 3 for b in batches)


def test_cuda_stream_protocol_with_stand_in_streams(monkeypatch):
    """The CUDA branch on stand-in streams: copies and augmentation on the copy stream, the
    consumer's stream waits on each batch's event and keeps its tensors; unpinned batches
    go through a reused pinned buffer."""
    cuda = StandInCuda().install(monkeypatch)
    empty = torch.empty
    monkeypatch.setattr(torch, "empty", lambda *a, pin_memory=False, **k: empty(*a, **k))
    monkeypatch.setattr(torch.Tensor, "pin_memory", lambda t: t)
    data = [(_images(2, 16, seed=i), torch.tensor([i, i])) for i in range(4)]
    timeline = Timeline()
    feed = GpuFeed(data, "cpu", augment=Augment(size=8, seed=1), timeline=timeline)
    feed.is_cuda, feed.stream, feed.track = True, torch.cuda.Stream(), "copy stream"
    got = list(feed)
    expected = list(GpuFeed(data, "cpu", augment=Augment(size=8, seed=1)))
    for (a, y), (b, z) in zip(got, expected):
        assert torch.equal(a, b) and torch.equal(y, z)
    copy_stream = feed.stream.name
    assert cuda.calls("wait_event") == [("main", copy_stream)] * 4
    kept = [c for c in cuda.calls("record_stream") if c[0] == "main"]
    assert kept == [("main", (2, 3, 8, 8)), ("main", (2,))] * 4
    assert len(feed._staging) == 1                       # one pinned buffer, reused
    timeline.resolve()
    assert {s.track for s in timeline.spans if s.kind in ("copy", "augment")} == {"copy stream"}
