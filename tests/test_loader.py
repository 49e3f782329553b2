"""The PyTorch loader over the cpu device: labels from folders, layouts, pixels equal to an
independent decode + resize, batching, sharding, shuffling, errors, buffer reuse, the thread's
lifetime and the progress bar."""

import threading
import time
from pathlib import Path

import numpy as np
import pytest
import torch
from PIL import Image

from dlforge.host.jpeg import loader as loader_module
from dlforge.host.jpeg.decode_service import DecoderService
from dlforge.host.jpeg.loader import Batch, DecodeFailed, JpegBatches, loader, resize_image

import libjpeg_c
from jpeg_files import encode, photo


def _small(name, width):
    img = Image.fromarray(photo(name))
    height = round(img.height * width / img.width)
    return np.asarray(img.resize((width, height), Image.Resampling.LANCZOS))


@pytest.fixture(scope="module")
def tree(tmp_path_factory):
    """Three class folders of real photos (one nested, one .JPG), a corrupt x.jpg, a
    progressive file, a grey file, and a file that is not a JPEG."""
    root = tmp_path_factory.mktemp("photos")
    files = {
        "cat/chelsea.jpg": encode(photo("chelsea"), quality=90, subsampling=0),
        "cat/nested/small.jpg": encode(_small("chelsea", 160), quality=75, subsampling=2),
        "cat/astronaut.JPG": encode(_small("astronaut", 256), quality=50, subsampling=1),
        "cup/coffee.jpeg": encode(_small("coffee", 300), quality=85),
        "cup/progressive.jpg": encode(_small("coffee", 240), quality=80, progressive=True),
        "cup/grey.jpg": encode(_small("camera", 200), quality=80),
        "rocket/rocket.jpg": encode(_small("rocket", 320), quality=70),
        "rocket/tall.jpg": encode(_small("rocket", 320).transpose(1, 0, 2).copy(), quality=90),
        "rocket/wide.jpg": encode(_small("astronaut", 96)[:40], quality=92),
        "rocket/x.jpg": encode(_small("rocket", 100), quality=80)[:700],      # truncated
    }
    for name, data in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
    (root / "cup" / "notes.txt").write_text("not a picture")
    (root / "cup" / "coffee.png").write_bytes(b"\x89PNG not a jpeg")
    return root


GOOD = 9                                           # files that decode


def _all(ds):
    return [(b.images.clone(), b.labels.clone(), list(b.names), list(b.status)) for b in ds]


def _loader_threads():
    return [t for t in threading.enumerate() if t.name == "dlforge-loader"]


def _reference(path, size, resize):
    """An independent decode (libjpeg-turbo's C build, not the cpu device's simplejpeg) and an
    independent resize (Pillow's bilinear, which antialiases as the loader's does, in 8-bit
    integer arithmetic instead of float32), then the centre crop: (size, size, 3) uint8."""
    pixels = libjpeg_c.decode(path)
    h, w = pixels.shape[:2]
    if resize == "stretch":
        nh = nw = size
    else:                   # the shorter side to size, the longer as torchvision's Resize
        nh, nw = (size, int(size * w / h)) if h <= w else (int(size * h / w), size)
    image = Image.fromarray(pixels)
    if (nh, nw) != (h, w):
        image = image.resize((nw, nh), Image.Resampling.BILINEAR)
    top, left = int(round((nh - size) / 2.0)), int(round((nw - size) / 2.0))   # CenterCrop
    return np.asarray(image)[top:top + size, left:left + size]


def _assert_close(image, reference, name):
    """The loader's float32 resize and Pillow's integer one round apart by at most 1, on a
    minority of samples (measured: up to 18 %); a wrong size, crop, channel order or decode
    is far off."""
    got = image.permute(1, 2, 0).numpy().astype(int) if image.shape[0] == 3 else \
        image.numpy().astype(int)
    assert got.shape == reference.shape, (name, got.shape, reference.shape)
    diff = np.abs(got - reference.astype(int))
    assert diff.max() <= 1 and (diff > 0).mean() < 0.25, (name, diff.max(), (diff > 0).mean())


# ---- the files ---------------------------------------------------------------------------------

def test_classes_and_labels_follow_the_folders(tree):
    ds = JpegBatches(tree, 4, device="cpu")
    assert ds.classes == ["cat", "cup", "rocket"]
    assert ds.class_to_idx == {"cat": 0, "cup": 1, "rocket": 2}
    rel = [str(Path(f).relative_to(tree)) for f in ds.files]
    assert rel == ["cat/astronaut.JPG", "cat/chelsea.jpg", "cat/nested/small.jpg",
                   "cup/coffee.jpeg", "cup/grey.jpg", "cup/progressive.jpg",
                   "rocket/rocket.jpg", "rocket/tall.jpg", "rocket/wide.jpg", "rocket/x.jpg"]
    assert ds.labels == [0, 0, 0, 1, 1, 1, 2, 2, 2, 2]
    labels = {name: int(label) for b in ds for name, label in zip(b.names, b.labels)}
    assert {str(Path(n).relative_to(tree)): v for n, v in labels.items()} == \
        {r: ds.labels[i] for i, r in enumerate(rel) if r != "rocket/x.jpg"}


def test_flat_folders_and_lists_have_label_minus_one(tree, tmp_path):
    for name in ("b.jpg", "a.jpeg"):
        (tmp_path / name).write_bytes((tree / "cat" / "chelsea.jpg").read_bytes())
    flat = JpegBatches(tmp_path, 2, device="cpu")
    assert flat.classes == [] and flat.labels == [-1, -1]
    assert [Path(f).name for f in flat.files] == ["a.jpeg", "b.jpg"]

    paths = [tree / "cup" / "coffee.jpeg", str(tree / "cat" / "chelsea.jpg")]
    listed = JpegBatches(paths, 2, device="cpu", size=32)
    assert listed.labels == [-1, -1]
    assert next(iter(listed)).labels.tolist() == [-1, -1]
    pairs = JpegBatches([(p, 7) for p in paths], 2, device="cpu", size=32)
    assert next(iter(pairs)).labels.tolist() == [7, 7]

    empty = tmp_path / "empty"
    (empty / "class").mkdir(parents=True)
    with pytest.raises(FileNotFoundError, match="no JPEG files"):
        JpegBatches(empty, 2, device="cpu")
    with pytest.raises(NotADirectoryError):
        JpegBatches(tmp_path / "a.jpeg", 2, device="cpu")


# ---- what a batch holds ------------------------------------------------------------------------

def test_layouts_shapes_and_dtypes(tree):
    nchw = _all(JpegBatches(tree, 4, size=48, device="cpu", layout="NCHW"))
    nhwc = _all(JpegBatches(tree, 4, size=48, device="cpu", layout="NHWC"))
    assert [x.shape for x, *_ in nchw] == [(4, 3, 48, 48), (4, 3, 48, 48), (1, 3, 48, 48)]
    assert [x.shape for x, *_ in nhwc] == [(4, 48, 48, 3), (4, 48, 48, 3), (1, 48, 48, 3)]
    for (a, la, na, sa), (b, lb, nb, sb) in zip(nchw, nhwc):
        assert a.dtype == b.dtype == torch.uint8
        assert la.dtype == lb.dtype == torch.int64 and la.shape == (len(na),)
        assert torch.equal(a.permute(0, 2, 3, 1), b) and torch.equal(la, lb)
        assert na == nb and sa == sb
    batch = next(iter(JpegBatches(tree, 2, size=16, device="cpu")))
    assert isinstance(batch, Batch)
    images, labels, names, status = batch                  # a NamedTuple
    assert images.shape == (2, 3, 16, 16) and len(names) == len(status) == 2


@pytest.mark.parametrize("resize", ["shorter-crop", "stretch"])
def test_pixels_equal_an_independent_decode_and_resize(tree, resize):
    ds = JpegBatches(tree, 3, size=64, resize=resize, device="cpu")
    seen = 0
    for batch in ds:
        for image, name, status in zip(batch.images, batch.names, batch.status):
            assert status in ("ok", "fallback")
            _assert_close(image, _reference(name, 64, resize), name)
            seen += 1
    assert seen == GOOD


def test_resize_image_matches_the_reference_on_odd_crops():
    # 239 x 320 -> 224 x 299: a crop offset of 37.5 (round half to even: 38)
    pixels = _small("astronaut", 320)[:239]
    resized = resize_image(pixels, 224, "shorter-crop")
    want = np.asarray(Image.fromarray(pixels).resize((299, 224), Image.Resampling.BILINEAR))
    _assert_close(resized, want[:, 38:262], "astronaut 239x320")
    # one column off is far off: the tolerance above does not hide a crop error
    off = np.abs(resized.permute(1, 2, 0).numpy().astype(int) - want[:, 37:261].astype(int))
    assert off.max() > 8
    assert resize_image(pixels, None).shape == (3, 239, 320)


def test_progressive_and_grey_files_decode(tree):
    files = [tree / "cup" / "progressive.jpg", tree / "cup" / "grey.jpg"]
    for path in files:
        batch = next(iter(JpegBatches([path], 1, size=None, device="cpu", layout="NHWC")))
        assert batch.status[0] in ("ok", "fallback")       # progressive: the host's libjpeg
        assert np.array_equal(batch.images[0].numpy(), libjpeg_c.decode(path))


def test_no_resize_needs_one_shape_per_batch(tree):
    same = [tree / "cat" / "chelsea.jpg"] * 3
    batches = _all(JpegBatches(same, 2, size=None, device="cpu"))
    expect = libjpeg_c.decode(same[0])
    assert [x.shape for x, *_ in batches] == [(2, 3, 300, 451), (1, 3, 300, 451)]
    assert np.array_equal(batches[1][0][0].permute(1, 2, 0).numpy(), expect)
    mixed = [tree / "cat" / "chelsea.jpg", tree / "cup" / "coffee.jpeg"]
    with pytest.raises(ValueError, match=r"coffee\.jpeg is .* give size="):
        _all(JpegBatches(mixed, 2, size=None, device="cpu"))


# ---- batching, sharding, shuffling -------------------------------------------------------------

def test_batch_count_short_last_batch_and_drop_last(tree):
    ds = JpegBatches(tree, 4, size=16, device="cpu")
    assert len(ds) == 3                                    # 10 files: an upper bound
    assert [len(n) for _, _, n, _ in _all(ds)] == [4, 4, 1]
    assert ds.stats["batches"] == 3 and ds.stats["images"] == GOOD
    dropped = JpegBatches(tree, 4, size=16, device="cpu", drop_last=True)
    assert len(dropped) == 2
    assert [len(n) for _, _, n, _ in _all(dropped)] == [4, 4]
    assert dropped.stats["dropped"] == 1 and dropped.stats["images"] == 8
    exact = JpegBatches(tree, 3, size=16, device="cpu", drop_last=True)
    assert [len(n) for _, _, n, _ in _all(exact)] == [3, 3, 3]


@pytest.mark.parametrize("shuffle", [False, True])
def test_ranks_get_disjoint_shards_that_cover_the_files(tree, shuffle):
    ranks = [JpegBatches(tree, 2, size=16, device="cpu", rank=r, world_size=2,
                         shuffle=shuffle, seed=5) for r in range(2)]
    shards = [[p for p, _ in ds.shard()] for ds in ranks]
    assert set(shards[0]).isdisjoint(shards[1])
    assert sorted(shards[0] + shards[1]) == sorted(ranks[0].files)
    assert [len(s) for s in shards] == [5, 5]
    names = [[n for _, _, batch_names, _ in _all(ds) for n in batch_names] for ds in ranks]
    assert names[0] == [p for p in shards[0] if not p.endswith("x.jpg")]
    assert set(names[0]).isdisjoint(names[1])
    assert len(names[0]) + len(names[1]) == GOOD
    with pytest.raises(ValueError, match="rank 2"):
        JpegBatches(tree, 2, device="cpu", rank=2, world_size=2).shard()


def test_set_epoch_shuffles_deterministically(tree):
    ds = JpegBatches(tree, 4, size=16, device="cpu", shuffle=True, seed=1)
    order0 = [p for p, _ in ds.shard()]
    assert sorted(order0) == sorted(ds.files) and order0 != ds.files
    ds.set_epoch(1)
    order1 = [p for p, _ in ds.shard()]
    assert order1 != order0 and sorted(order1) == sorted(order0)
    ds.set_epoch(0)
    assert [p for p, _ in ds.shard()] == order0
    again = JpegBatches(tree, 4, size=16, device="cpu", shuffle=True, seed=1, epoch=1)
    assert [p for p, _ in again.shard()] == order1
    other_seed = JpegBatches(tree, 4, size=16, device="cpu", shuffle=True, seed=2)
    assert [p for p, _ in other_seed.shard()] != order0
    # the batches come in the shard's order, labels following their files
    ds.set_epoch(1)
    got = [(n, int(label)) for _, labels, names, _ in _all(ds) for n, label in zip(names, labels)]
    expect = [(p, label) for p, label in ds.shard() if not p.endswith("x.jpg")]
    assert got == expect


def test_dataloader_workers_share_the_files(tree, monkeypatch):
    class Worker:
        def __init__(self, id):
            self.id, self.num_workers = id, 2

    ds = JpegBatches(tree, 2, size=16, device="cpu", rank=1, world_size=2)
    rank_files = [p for p, _ in ds.shard()]
    seen = []
    for wid in range(2):
        monkeypatch.setattr(loader_module, "get_worker_info", lambda wid=wid: Worker(wid))
        assert [p for p, _ in ds.shard()] == rank_files[wid::2]
        seen += [n for _, _, names, _ in _all(ds) for n in names]
        assert ds._pool.n == 0                             # fresh tensors in a worker
    monkeypatch.undo()
    assert sorted(seen) == sorted(p for p in rank_files if not p.endswith("x.jpg"))


@pytest.mark.filterwarnings("ignore:This process .* is multi-threaded:DeprecationWarning")
def test_in_a_dataloader_with_worker_processes(tree):
    ds = JpegBatches(tree, 5, size=16, device="cpu")
    dl = torch.utils.data.DataLoader(ds, batch_size=None, num_workers=2)
    names = [n for batch in dl for n in batch.names]
    assert sorted(names) == sorted(p for p in ds.files if not p.endswith("x.jpg"))


def test_in_a_dataloader_without_workers(tree):
    ds = loader(tree, 4, size=16, device="cpu")
    dl = torch.utils.data.DataLoader(ds, batch_size=None)
    batches = list(dl)
    assert len(batches) == len(dl) == 3
    assert isinstance(batches[0], Batch) and batches[0].images.shape == (4, 3, 16, 16)


# ---- failures ----------------------------------------------------------------------------------

def test_errors_are_skipped_and_reported(tree):
    ds = JpegBatches(tree, 4, size=16, device="cpu")
    names = [n for _, _, batch_names, _ in _all(ds) for n in batch_names]
    assert not any(n.endswith("x.jpg") for n in names)
    assert ds.stats["error"] == 1 and ds.stats["ok"] + ds.stats["fallback"] == GOOD
    assert len(ds.errors) == 1
    skipped = ds.errors[0]
    assert skipped.name == str(tree / "rocket" / "x.jpg") and skipped.error


def test_errors_raise_when_not_skipped(tree):
    ds = JpegBatches(tree, 4, size=16, device="cpu", skip_errors=False)
    with pytest.raises(DecodeFailed, match=r"x\.jpg: ") as info:
        _all(ds)
    assert info.value.name.endswith("x.jpg") and info.value.reason
    assert ds.stats["error"] == 1 and ds.stats["batches"] == 2   # those before it came first
    assert not _loader_threads()


def test_bad_arguments_are_refused(tree):
    with pytest.raises(ValueError, match="buffers"):
        JpegBatches(tree, 4, device="cpu", buffers=3, prefetch=2)
    with pytest.raises(ValueError, match="layout"):
        JpegBatches(tree, 4, device="cpu", layout="CHW")
    with pytest.raises(ValueError, match="resize"):
        JpegBatches(tree, 4, device="cpu", resize="crop")
    with pytest.raises(ValueError, match="batch_size"):
        JpegBatches(tree, 0, device="cpu")


# ---- buffers and the thread --------------------------------------------------------------------

def test_buffers_are_reused_and_stay_valid_while_kept(tree):
    ds = JpegBatches(tree, 1, size=24, device="cpu", buffers=4, prefetch=1, pin_memory=False)
    assert ds.keep == 2
    received, pointers = [], []
    for batch in ds:
        assert not batch.images.is_pinned()
        received.append((batch, batch.images.clone(), batch.labels.clone()))
        pointers.append(batch.images.data_ptr())
        for kept, images, labels in received[-(ds.keep + 1):]:      # the guarantee
            assert torch.equal(kept.images, images) and torch.equal(kept.labels, labels)
    assert len(pointers) == GOOD and len(set(pointers)) == 4         # the pool wrapped
    # a new pass reuses the same buffers
    assert {b.images.data_ptr() for b in ds} == set(pointers)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="pinned memory needs CUDA")
def test_pinned_buffers(tree):
    batch = next(iter(JpegBatches(tree, 2, size=16, device="cpu", pin_memory=True)))
    assert batch.images.is_pinned() and batch.labels.is_pinned()


@pytest.mark.skipif(torch.cuda.is_available(), reason="CUDA is there")
def test_pinning_without_cuda_is_refused(tree):
    with pytest.raises(ValueError, match="pin_memory=True needs a CUDA device"):
        JpegBatches(tree, 2, device="cpu", pin_memory=True)
    assert JpegBatches(tree, 2, device="cpu").pin_memory is False


def test_leaving_early_stops_the_thread(tree):
    start = threading.active_count()
    ds = JpegBatches(tree, 1, size=16, device="cpu", buffers=3, prefetch=1)
    for _ in ds:
        break                                      # the producer is blocked on buffers
    assert threading.active_count() == start and not _loader_threads()
    it = iter(ds)
    next(it)
    assert _loader_threads()
    second = iter(ds)                              # a new pass stops the old one
    assert it.closed and len(_loader_threads()) == 1
    assert len([b for b in second]) == GOOD
    assert threading.active_count() == start
    with iter(ds) as third:
        next(third)
    assert threading.active_count() == start and next(third, None) is None


def test_a_shared_service_serves_one_pass_at_a_time(tree):
    with DecoderService("cpu") as service:
        a = JpegBatches(tree, 4, size=16, service=service)
        b = JpegBatches(tree, 4, size=16, service=service)
        assert len(_all(a)) == len(_all(b)) == 3
        it = iter(a)
        next(it)
        with pytest.raises(RuntimeError, match="another loader"):
            iter(b)
        it.close()
        assert len(_all(b)) == 3
        a.close()                                  # not the loader's to close
        assert len(_all(b)) == 3
        assert service.counts["ok"] + service.counts["fallback"] >= 4 * GOOD


def test_stats_and_progress(tree, capsys):
    ds = JpegBatches(tree, 4, size=16, device="cpu", progress=True)
    start = time.perf_counter()
    _all(ds)
    wall = time.perf_counter() - start
    s = ds.stats
    assert (s["images"], s["batches"], s["error"], s["dropped"]) == (GOOD, 3, 1, 0)
    assert s["ok"] + s["fallback"] == GOOD and s["device_cycles"] == 0
    # seconds, within the loop's own: the consumer waited on the decode for part of it
    assert 0 < s["host_cpu_s"] and 0 < s["decode_wait_s"] <= wall
    err = capsys.readouterr().err
    assert "10/10" in err and "error=1" in err and "img" in err


# ---- torchvision's pipelines ------------------------------------------------------------------

def _pillow_decoded(path):
    with Image.open(path) as image:
        return image.convert("RGB")


#: The simulated board over its DMA link: a Verilator build of the default board.
SIM_BOARD = [pytest.mark.verilator, pytest.mark.xdist_group("sim_board")]


@pytest.mark.parametrize("device,size", [("cpu", 224), ("cpu", 64),
                                         pytest.param("sim:dma", 224, marks=SIM_BOARD),
                                         pytest.param("sim:dma", 64, marks=SIM_BOARD)])
def test_eval_transform_equals_torchvision_on_pillow(tree, device, size):
    """``transform="eval"``: ``Resize(256)`` then ``CenterCrop(224)`` (at 64: 73 then 64),
    each image equal to Pillow's decode through torchvision's rules written out here; on
    the simulated board the cores' resamplers do it (64: a shrink beyond their 7 taps for
    the largest photo, which the host resizes instead)."""
    from dlforge.host.jpeg.loader import JpegBatches as Batches
    resize_to = 256 if size == 224 else round(size * 256 / 224)
    ds = Batches(tree, 4, size=size, device=device, transform="eval", layout="NHWC")
    batches = _all(ds)
    # (on the board: all but the progressive file, which the CPU decodes; at 64 also not
    # the two photos that shrink by more than 3, beyond 7 taps: the host resizes them)
    assert ds.stats["device_resized"] == (0 if device == "cpu" else
                                          GOOD - 1 if size == 224 else GOOD - 3)
    names = [n for _, _, ns, _ in batches for n in ns]
    assert len(names) == GOOD
    for images, _, ns, _ in batches:
        for image, name in zip(images, ns):
            im = _pillow_decoded(name)
            w, h = im.size
            new = (resize_to, int(resize_to * h / w)) if w <= h else \
                (int(resize_to * w / h), resize_to)
            if new != im.size:
                im = im.resize(new, Image.Resampling.BILINEAR)
            top, left = int(round((new[1] - size) / 2.0)), int(round((new[0] - size) / 2.0))
            want = np.asarray(im.crop((left, top, left + size, top + size)))
            assert np.array_equal(image.numpy(), want), name


@pytest.mark.parametrize("device", ["cpu", pytest.param("sim:dma", marks=SIM_BOARD)])
def test_train_transform_draws_per_file_as_torchvision(tree, device):
    """``transform="train"``: each file's ``RandomResizedCrop`` and flip come from its own
    generator (seed, epoch, name): the same pixels in any order or shard, others next epoch;
    on the simulated board its cores crop and resize."""
    from dlforge.host.jpeg.loader import train_generator
    from test_transforms import _reference_params
    ds = JpegBatches(tree, 3, size=96, device=device, transform="train", seed=5, layout="NHWC")
    got = {n: img.numpy() for images, _, ns, _ in _all(ds) for img, n in zip(images, ns)}
    assert len(got) == GOOD
    # (the progressive file is the CPU's; crops that shrink by more than 3 the host's)
    assert (ds.stats["device_resized"] == 0) == (device == "cpu")
    for name, image in got.items():
        im = _pillow_decoded(name)
        torch.manual_seed(train_generator(5, 0, name).initial_seed())
        top, left, h, w = _reference_params(*im.size)
        want = np.asarray(im.crop((left, top, left + w, top + h)).resize(
            (96, 96), Image.Resampling.BILINEAR))
        if bool(torch.rand(1) < 0.5):
            want = want[:, ::-1]
        assert np.array_equal(image, want), name
    shuffled = JpegBatches(tree, 2, size=96, device=device, transform="train", seed=5,
                           shuffle=True, layout="NHWC")
    again = {n: img.numpy() for images, _, ns, _ in _all(shuffled) for img, n in zip(images, ns)}
    assert all(np.array_equal(again[n], got[n]) for n in got)
    shuffled.set_epoch(1)
    later = {n: img.numpy() for images, _, ns, _ in _all(shuffled) for img, n in zip(images, ns)}
    assert sum(np.array_equal(later[n], got[n]) for n in got) < GOOD


def test_train_seeds_are_the_generators():
    """The loader hands each file's seed to the draws (no generator): the same one."""
    from dlforge.host.jpeg.loader import train_generator, train_seed
    for name in ("a.jpg", "dir/b.jpeg", "#3"):
        assert train_seed(5, 2, name) == train_generator(5, 2, name).initial_seed()
    assert train_seed(5, 2, "a.jpg") != train_seed(5, 3, "a.jpg")


def test_transform_parameters_are_checked(tree):
    with pytest.raises(ValueError, match="transform must be one of eval, train"):
        JpegBatches(tree, 2, device="cpu", transform="test")
    with pytest.raises(ValueError, match="needs size="):
        JpegBatches(tree, 2, device="cpu", transform="eval", size=None)
