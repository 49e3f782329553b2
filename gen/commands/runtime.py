"""The commands that run work through a device: ``decode``, ``conv``, ``stream`` and
``sim-board`` (the simulated board they connect to).  Every one takes the same device strings
(:data:`dlforge.host.device.open.DEVICE_HELP`)."""

import json
import time
from pathlib import Path

from dlforge.host.device.open import DEVICE_HELP
from dlforge.host.jpeg.host_decode import ON_DAMAGE

from .options import scale

__all__ = ["add_commands", "cmd_conv", "cmd_decode", "cmd_sim_board", "cmd_stream",
           "stream_report"]

ON_DAMAGE_HELP = ("a damaged file (one libjpeg decodes only with a warning): decoded as Pillow "
                  "decodes it, with what was tolerated in its verdict (pillow, the default), "
                  "or an error (error)")


def _decode_resize(args):
    """The resize a ``dlforge decode`` asks for, per file: (index, name, width, height) ->
    a Resize, or None for the decoded image as it is."""
    from dlforge.host.jpeg.loader import train_seed
    from dlforge.host.jpeg.resize_request import Resize
    from dlforge.host.jpeg.transforms import eval_request, resize_size, train_request
    if args.transform and (args.resize or args.crop):
        raise ValueError("--transform is a resize and a crop already: not with "
                         "--resize/--crop")
    for name in ("resize", "crop", "size"):
        value = getattr(args, name)
        if value is not None and value < 1:
            raise ValueError(f"--{name} must be positive, not {value}")
    flips = {}
    if args.transform == "eval":
        size = args.size or 224
        resize_to = 256 if size == 224 else round(size * 256 / 224)
        return (lambda index, name, width, height:
                eval_request(width, height, resize_to, size)), flips
    if args.transform == "train":
        def train(index, name, width, height):
            request, flips[index] = train_request(
                width, height, train_seed(args.seed, args.epoch, name), args.size or 224)
            return request
        return train, flips
    if not (args.resize or args.crop):
        return None, flips

    def explicit(index, name, width, height):
        size = resize_size(width, height, args.resize) if args.resize else (width, height)
        window = None
        if args.crop:
            # torchvision's CenterCrop offsets; a crop larger than the image is refused
            left = int(round((size[0] - args.crop) / 2.0))
            top = int(round((size[1] - args.crop) / 2.0))
            window = (left, top, left + args.crop, top + args.crop)
        return Resize((0, 0, width, height), size, window)
    return explicit, flips


def cmd_decode(args):
    """Decode files on a device (cropped and resized as asked: on the device where its cores
    have resamplers); write <stem>.npy (or .png) per file; JSON or a table.  The device's
    results as a user gets them, without writing Python; exit 1 if a file failed."""
    import numpy as np
    from dlforge.host.jpeg.decode_service import DecoderService
    missing = [f for f in args.files if not Path(f).is_file()]
    if missing:
        raise ValueError(f"no such file: {missing[0]}")
    resize, flips = _decode_resize(args)
    with DecoderService(args.device, args.upsample, on_damage=args.on_damage) as service:
        results = list(service.decode(args.files, resize=resize, scale=args.scale))
        name = service.device.name
    for r in results:
        if r.pixels is not None and flips.get(r.index):
            r.pixels = np.ascontiguousarray(r.pixels[:, ::-1])      # the train flip
    if args.out:
        out = Path(args.out)
        out.mkdir(parents=True, exist_ok=True)
        for r in results:
            if r.pixels is None:
                continue
            stem = Path(r.name).stem + (f"-train{args.seed}" if args.transform == "train"
                                        else "-eval" if args.transform == "eval" else "") \
                + (f"-s{args.scale}" if args.scale > 1 else "")
            if args.format == "png":
                from PIL import Image
                Image.fromarray(r.pixels).save(out / f"{stem}.png")
            else:
                np.save(out / f"{stem}.npy", r.pixels)
    if args.json:
        print(json.dumps({"device": name, "upsample": args.upsample,
                          "transform": args.transform, "resize": args.resize,
                          "crop": args.crop, "scale": f"1/{args.scale}",
                          "files": [r.as_dict() for r in results]}, indent=2))
    else:
        for r in results:
            size = f"{r.width}x{r.height}" if r.width else "-"
            cycles = f"{r.cycles} cycles" if r.cycles is not None else ""
            by = f" resized on the {r.resized}" if r.resized else ""
            print(f"{r.status:<8} {size:>11} {cycles:>14}  {r.name}{by}"
                  + (f"  ({r.error})" if r.error else "")
                  + (f"  [{r.damage}]" if r.damage and r.status != "error" else ""))
    return 1 if any(r.status == "error" for r in results) else 0


def cmd_conv(args):
    """Run one quantised convolution layer (int8 tensors from .npy files) on a device and
    write Y.npy: the engine used from the shell, its cycles and utilisation beside."""
    import numpy as np
    from dlforge.host.conv.run import run_conv
    from dlforge.rtl.conv.config import EngineConfig

    def load(path, what):
        if path is None:
            return None
        try:
            return np.load(path)
        except (OSError, ValueError) as exc:
            raise ValueError(f"cannot read {what} {path}: {exc}") from None

    fields = ("rows", "cols", "simd", "weight_depth", "input_depth", "psum_depth", "link_bytes")
    given = {f: getattr(args, f) for f in fields if getattr(args, f) is not None}
    if given and args.device != "sim":
        raise ValueError("engine parameters choose the simulated board's engine (--device sim); "
                         f"{args.device} reports its own")
    config = EngineConfig(**given) if given else None
    y, info = run_conv(load(args.input, "input"), load(args.weight, "weights"),
                       load(args.bias, "bias"), load(args.multiplier, "multiplier"),
                       load(args.shift, "shift"), stride=args.stride, padding=args.padding,
                       groups=args.groups, relu=args.relu, pool=args.pool == "max2",
                       residual=load(args.residual, "residual"), device=args.device,
                       config=config)
    np.save(args.out, y)
    info = {"out": args.out, "shape": list(y.shape), "dtype": str(y.dtype)} | info
    if args.json:
        print(json.dumps(info, indent=2))
    else:
        extra = (f", {info['cycles']} cycles (predicted {info['predicted_cycles']}), "
                 f"utilisation {info['utilization']:.1%}" if "cycles" in info else "")
        print(f"wrote {args.out}: {tuple(y.shape)} {y.dtype} on {info['device']}{extra}")
    return 0


def stream_report(loader, wall_s, cpu_s):
    """The figures ``dlforge stream`` prints."""
    s = loader.stats
    images = s["images"]
    on_device = s["ok"]
    return {"images": images, "ok": s["ok"], "fallback": s["fallback"], "error": s["error"],
            "damaged": s["damaged"], "batches": s["batches"],
            "images_per_s": round(images / wall_s, 3) if wall_s else None,
            "host_cpu_s_per_image": round(cpu_s / images, 6) if images else None,
            "device_cycles_per_image": round(s["device_cycles"] / on_device)
            if on_device and s["device_cycles"] else None,
            "resized_on_device": s["device_resized"]}


def cmd_stream(args):
    """Stream batches of images through a device into tensors (the PyTorch loader) and print
    the loader's figures: images per second, host CPU and device cycles per image; exit 1 if
    an image failed."""
    try:
        from dlforge.host.jpeg.loader import JpegBatches
    except ImportError as exc:
        raise RuntimeError(f"dlforge stream needs PyTorch ({exc}): pip install torch, or "
                           "the dlforge[torch] extra") from None
    source = args.images[0] if len(args.images) == 1 and Path(args.images[0]).is_dir() \
        else args.images
    if isinstance(source, list):
        missing = [f for f in source if not Path(f).is_file()]
        if missing:
            raise ValueError(f"no such file or folder: {missing[0]}")
    if args.transform and not args.size:
        raise ValueError(f"--transform {args.transform} needs --size (the crop's side)")
    transform, size, eval_resize = args.transform, args.size or None, None
    if args.resize or args.crop:
        # (a batch needs one shape: the resize comes with its centre crop)
        if not (args.resize and args.crop) or args.transform:
            raise ValueError("--resize N and --crop C go together, without --transform")
        transform, size, eval_resize = "eval", args.crop, args.resize
    loader = JpegBatches(source, args.batch, size=size, layout=args.layout,
                         device=args.device, upsample=args.upsample,
                         progress=args.progress and not args.json, transform=transform,
                         seed=args.seed, eval_resize=eval_resize, scale=args.scale,
                         on_damage=args.on_damage)
    wall, cpu = time.perf_counter(), time.process_time()
    shapes = set()
    for batch in loader:
        shapes.add(tuple(batch.images.shape[1:]))
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    report = {"device": args.device, "batch": args.batch, "size": size,
              "layout": args.layout, "transform": transform, "resize": args.resize,
              "crop": args.crop, "scale": f"1/{args.scale}"} \
        | stream_report(loader, wall, cpu)
    report["errors"] = [{"file": name, "error": why} for name, why in loader.errors]
    if args.json:
        print(json.dumps(report, indent=2))
    else:
        print(f"{report['images']} images in {report['batches']} batches of up to {args.batch} "
              f"({args.layout}, {args.size or 'native'} px) on {args.device}: "
              f"{report['ok']} ok, {report['fallback']} fallback, {report['error']} error "
              f"({report['damaged']} damaged)")
        print(f"{report['images_per_s']} images/s, host CPU {report['host_cpu_s_per_image']} "
              f"s/image, device {report['device_cycles_per_image']} cycles/image")
        for e in report["errors"]:
            print(f"  error: {e['file']}: {e['error']}")
    return 1 if report["error"] else 0


def cmd_sim_board(args):
    """Build and run the simulated board in the foreground, printing the device string that
    every other command can connect to (:func:`dlforge.sim.board.cli.run_command`)."""
    from dlforge.sim.board.cli import run_command
    return run_command(args)


SCALE_HELP = ("decode at 1/2, 1/4 or 1/8 first (libjpeg-turbo's DCT-domain downscale, "
              "Pillow's Image.draft; on the host: the cores do not scale yet), then resize "
              "and crop the scaled image")


def add_commands(sub):
    """Register ``decode``, ``conv``, ``stream`` and ``sim-board`` on the ``dlforge``
    subparsers ``sub``."""
    decode = sub.add_parser("decode", help="decode JPEG files on a device")
    decode.add_argument("files", nargs="+", metavar="FILE")
    decode.add_argument("--device", default="sim", help=DEVICE_HELP)
    decode.add_argument("--upsample", choices=("fancy", "fast"), default="fancy")
    decode.add_argument("--out", default=None, help="write <file stem>.npy (or .png) here")
    decode.add_argument("--format", choices=("npy", "png"), default="npy")
    decode.add_argument("--resize", type=int, default=None, metavar="N",
                        help="the shorter side to N (torchvision's Resize(N): Pillow's "
                             "bilinear resize, bit-exact)")
    decode.add_argument("--crop", type=int, default=None, metavar="C",
                        help="then the centre CxC (torchvision's CenterCrop(C))")
    decode.add_argument("--transform", choices=("eval", "train"), default=None,
                        help="torchvision's pipelines: eval = Resize(256), CenterCrop(224); "
                             "train = RandomResizedCrop(224) and the flip (--size, --seed)")
    decode.add_argument("--size", type=int, default=None,
                        help="the --transform's output side (224)")
    decode.add_argument("--scale", type=scale, default=1, metavar="1/2|1/4|1/8",
                        help=SCALE_HELP)
    decode.add_argument("--seed", type=int, default=0, help="the train draws' seed")
    decode.add_argument("--epoch", type=int, default=0, help="the train draws' epoch")
    decode.add_argument("--on-damage", choices=ON_DAMAGE, default="pillow",
                        help=ON_DAMAGE_HELP)
    decode.add_argument("--json", action="store_true")
    decode.set_defaults(func=cmd_decode)

    conv = sub.add_parser("conv", help="run one convolution layer on a device")
    conv.add_argument("--device", default="sim", help=DEVICE_HELP)
    conv.add_argument("--input", required=True, help="X.npy: int8 (N, C, H, W) or (C, H, W)")
    conv.add_argument("--weight", required=True, help="W.npy: int8 (OC, C/groups, KH, KW)")
    conv.add_argument("--bias", default=None, help="B.npy: int32 (OC,)")
    conv.add_argument("--multiplier", default=None, help="M.npy: (OC,), 0 < m < 2**31")
    conv.add_argument("--shift", default=None, help="S.npy: (OC,), 1 <= s <= 62")
    conv.add_argument("--stride", type=int, default=1)
    conv.add_argument("--padding", type=int, default=0)
    conv.add_argument("--groups", type=int, default=1)
    conv.add_argument("--relu", action="store_true")
    conv.add_argument("--pool", choices=("max2",), default=None, help="fused 2x2 max pool")
    conv.add_argument("--residual", default=None,
                      help="R.npy: int8, the output's shape before pooling, added before the clamp")
    conv.add_argument("--out", required=True, help="Y.npy")
    conv.add_argument("--json", action="store_true")
    for name in ("rows", "cols", "simd", "weight_depth", "input_depth", "psum_depth",
                 "link_bytes"):
        conv.add_argument(f"--{name.replace('_', '-')}", type=int, default=None, dest=name,
                          help="engine parameter of the simulated board (--device sim)")
    conv.set_defaults(func=cmd_conv)

    stream = sub.add_parser("stream", help="stream batches of JPEG images through a device")
    stream.add_argument("--device", default="sim", help=DEVICE_HELP)
    stream.add_argument("--images", nargs="+", required=True, metavar="DIR|FILE",
                        help="a folder (labels from its subfolders) or files")
    stream.add_argument("--batch", type=int, default=32)
    stream.add_argument("--size", type=int, default=224,
                        help="resize the shorter side and centre-crop to SIZE (0: native size)")
    stream.add_argument("--layout", choices=("NCHW", "NHWC"), default="NCHW")
    stream.add_argument("--upsample", choices=("fancy", "fast"), default="fancy")
    stream.add_argument("--transform", choices=("eval", "train"), default=None,
                        help="torchvision's pipeline instead of the plain resize, bit-exact to "
                             "torchvision on Pillow: eval = Resize(SIZE*8/7) and "
                             "CenterCrop(SIZE); train = RandomResizedCrop(SIZE) and the flip "
                             "(cropped and resized by the device's cores where they can)")
    stream.add_argument("--resize", type=int, default=None, metavar="N",
                        help="the shorter side to N, then the centre --crop (torchvision's "
                             "Resize(N), CenterCrop(C): the eval transform with these sizes)")
    stream.add_argument("--crop", type=int, default=None, metavar="C",
                        help="with --resize: the centre CxC")
    stream.add_argument("--scale", type=scale, default=1, metavar="1/2|1/4|1/8",
                        help=SCALE_HELP)
    stream.add_argument("--seed", type=int, default=0, help="train: the draws' seed")
    stream.add_argument("--progress", action="store_true", help="a progress bar on stderr")
    stream.add_argument("--on-damage", choices=ON_DAMAGE, default="pillow",
                        help=ON_DAMAGE_HELP)
    stream.add_argument("--json", action="store_true")
    stream.set_defaults(func=cmd_stream)

    board = sub.add_parser("sim-board", help="start the simulated board and print the device "
                                             "string to connect to")
    from dlforge.sim.board.cli import add_arguments
    add_arguments(board)
    board.set_defaults(func=cmd_sim_board)
