"""``--plot FILE.png``: a bench's figures as a picture (matplotlib, the Agg backend: no
display needed).

* ``bench jpeg`` and ``bench device``: pixels per clock per file, coloured by chroma layout;
* ``bench conv`` (and ``bench conv --device sim``): the engine's utilisation per layer;
* ``synth``: Fmax per block against the target clock.

matplotlib is an optional extra (``pip install 'dlforge[plot]'``), imported only here.
"""

__all__ = ["plot_report", "file_rates", "layer_utilisation", "LAYOUT_COLOURS"]

#: chroma layout -> colour (matplotlib's tab10)
LAYOUT_COLOURS = {"420": "tab:blue", "422": "tab:orange", "440": "tab:purple",
                  "444": "tab:green", "gray": "tab:gray", "-": "tab:red"}
LAYOUT_NAMES = {"420": "4:2:0", "422": "4:2:2", "440": "4:4:0", "444": "4:4:4",
                "gray": "greyscale", "-": "not decoded"}


def _pyplot():
    try:
        import matplotlib
    except ImportError:
        raise RuntimeError("--plot needs matplotlib, which is not installed: "
                           "pip install 'dlforge[plot]' (or pip install matplotlib)") from None
    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt
    return plt


def file_rates(report):
    """(file, layout, pixels per clock) of each decoded file of a ``bench jpeg`` or ``bench
    device`` report, and the y axis's label."""
    if report.get("benchmark") == "device":
        rows = []
        for r in report["files"]:
            cycles = r.get("core_cycles_in_device")
            if r.get("status") == "OK" and cycles:
                rows.append((r["file"], r.get("layout", "-"), r["width"] * r["height"] / cycles))
        return rows, "pixels per clock (each file's core, in the device)"
    if "per_file" in report:
        rows = [(r["file"] + (f" ({r['mode']})" if r.get("mode", "fancy") != "fancy" else ""),
                 r.get("layout", "-"), r["pixels_per_clock"])
                for r in report["per_file"] if r.get("pixels_per_clock")]
        return rows, "pixels per clock (the core's own counters)"
    raise ValueError("not a per-file report (bench jpeg or bench device)")


def layer_utilisation(report):
    """{series name: [utilisation per layer]} and the layer names of a ``bench conv`` (or
    ``bench conv --device sim``) report."""
    layers = report["layers"]
    if layers and "utilization_device" in layers[0]:
        names = [r["layer"] for r in layers]
        series = {"fed directly (cycle model)": [r["utilization_fed_directly"] for r in layers],
                  "engine (its counter)": [r["utilization_engine"] for r in layers],
                  "device (link span)": [r["utilization_device"] for r in layers]}
    else:
        names = [r["name"] for r in layers]
        series = {"engine (its counter)": [r["utilization"] for r in layers]}
    return names, series


def _title(report, what):
    checked = report.get("checked")
    note = "checked bit-exact in this run" if checked else "NOT checked"
    return f"{what}\n({note})"


def plot_report(report, path, kind=None):
    """Draw ``report`` into ``path`` (PNG); ``kind``: "files", "layers" or "fmax" (default:
    from the report).  Returns the kind drawn."""
    if kind is None:
        if report.get("benchmark") == "device" or "per_file" in report:
            kind = "files"
        elif "layers" in report:
            kind = "layers"
        elif "fmax_mhz" in report or "blocks" in report:
            kind = "fmax"
        else:
            raise ValueError("this bench's report has nothing --plot can draw (per-file "
                             "pixels per clock, per-layer utilisation or Fmax)")
    plt = _pyplot()
    if kind == "files":
        fig = _files(plt, report)
    elif kind == "layers":
        fig = _layers(plt, report)
    elif kind == "fmax":
        fig = _fmax(plt, report)
    else:
        raise ValueError(f"unknown plot kind {kind!r}")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return kind


def _files(plt, report):
    rows, ylabel = file_rates(report)
    if not rows:
        raise ValueError("no decoded file to plot")
    order = sorted(rows, key=lambda r: (list(LAYOUT_COLOURS).index(r[1])
                                        if r[1] in LAYOUT_COLOURS else 99, -r[2]))
    fig, ax = plt.subplots(figsize=(max(6.0, 0.18 * len(order) + 2), 4.2))
    x = range(len(order))
    ax.bar(x, [r[2] for r in order], color=[LAYOUT_COLOURS.get(r[1], "black") for r in order])
    for layout in dict.fromkeys(r[1] for r in order):
        rates = sorted(r[2] for r in order if r[1] == layout)
        median = rates[len(rates) // 2] if len(rates) % 2 else \
            (rates[len(rates) // 2 - 1] + rates[len(rates) // 2]) / 2
        ax.bar([0], [0], color=LAYOUT_COLOURS.get(layout, "black"),
               label=f"{LAYOUT_NAMES.get(layout, layout)}: {len(rates)} files, "
                     f"median {median:.2f}")
    if len(order) <= 40:
        ax.set_xticks(list(x), [r[0] for r in order], rotation=75, fontsize=6, ha="right")
    else:
        ax.set_xticks([])
        ax.set_xlabel(f"{len(order)} files, by layout, fastest first")
    ax.set_ylabel(ylabel)
    if report.get("benchmark") == "device":
        c = report["config"]
        what = (f"dlforge bench device: {report['images']} files, {c['cores']} cores, "
                f"{c['link_bytes']}-byte link; device {report['pixels_per_clock']:.2f} "
                f"pixels/clock")
    else:
        what = (f"dlforge bench jpeg: {report.get('files')} files, "
                f"{report.get('aggregate_pixels_per_clock', 0):.2f} pixels/clock in all")
    ax.set_title(_title(report, what), fontsize=9)
    ax.legend(fontsize=7, loc="lower left")
    ax.grid(axis="y", alpha=0.3)
    return fig


def _layers(plt, report):
    names, series = layer_utilisation(report)
    fig, ax = plt.subplots(figsize=(max(6.0, 0.45 * len(names) + 2), 4.2))
    width = 0.8 / len(series)
    for k, (label, values) in enumerate(series.items()):
        ax.bar([i + (k - (len(series) - 1) / 2) * width for i in range(len(names))],
               [v or 0 for v in values], width, label=label)
    ax.set_xticks(range(len(names)), names, rotation=60, fontsize=7, ha="right")
    ax.set_ylim(0, 1.05)
    ax.set_ylabel("utilisation (MACs / (MACs per clock x cycles))")
    cfg = report.get("config") or {}
    shape = "x".join(str(cfg[k]) for k in ("rows", "cols", "simd") if k in cfg)
    ax.set_title(_title(report, f"dlforge bench conv: {len(names)} layers"
                                + (f", engine {shape}" if shape else "")), fontsize=9)
    ax.legend(fontsize=7, loc="lower right")
    ax.grid(axis="y", alpha=0.3)
    return fig


def _fmax(plt, report):
    blocks = report.get("blocks") or [report]
    fig, ax = plt.subplots(figsize=(max(4.0, 1.0 * len(blocks) + 2), 4.0))
    names = [b.get("top", "?") for b in blocks]
    fmax = [b.get("fmax_mhz") or 0 for b in blocks]
    ax.bar(range(len(blocks)), fmax,
           color=["tab:green" if b.get("meets_timing") else "tab:red" for b in blocks])
    for k, b in enumerate(blocks):
        if b.get("target_mhz"):
            ax.hlines(b["target_mhz"], k - 0.4, k + 0.4, colors="black", linestyles="dashed")
    ax.set_xticks(range(len(blocks)), names, rotation=30, fontsize=8, ha="right")
    ax.set_ylabel("Fmax (MHz); dashed: the target")
    devices = sorted({b.get("device", "?") for b in blocks})
    ax.set_title(f"dlforge synth: Fmax per block on {', '.join(devices)}", fontsize=9)
    ax.grid(axis="y", alpha=0.3)
    return fig
