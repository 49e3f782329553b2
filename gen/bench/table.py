"""A bench report (the dict its ``--json`` prints) as a readable table: the headline figures
first, one aligned ``name  value`` line each, then the other figures, then each list of
records (files, layers, jobs) as aligned columns."""

__all__ = ["format_report", "format_value", "format_rows"]


def _scalar(value):
    return value is None or isinstance(value, (bool, int, float, str))


def format_value(value):
    """A figure as the table shows it: 4 significant digits, large numbers whole."""
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        if value != value:                     # NaN
            return "nan"
        if abs(value) >= 1e5:
            return f"{value:,.0f}"
        return f"{value:.4g}"
    if isinstance(value, int):
        return f"{value:,}" if abs(value) >= 1e5 else str(value)
    return str(value)


def _label(key):
    return str(key).replace("_", " ")


def _inline(value, depth=0):
    """A nested dict or a list of scalars on one line."""
    if isinstance(value, dict):
        return ", ".join(f"{_label(k)} {_inline(v, depth + 1)}" if depth < 2 or _scalar(v)
                         else f"{_label(k)} ..." for k, v in value.items())
    if isinstance(value, (list, tuple)):
        shown = ", ".join(_inline(v, depth + 1) for v in value[:12])
        return shown + (f", ... ({len(value)} in all)" if len(value) > 12 else "")
    return format_value(value)


def format_rows(rows, columns=None):
    """Records (dicts) as aligned columns: ``columns`` or every key with plain values."""
    if columns is None:
        columns = []
        for row in rows:
            for key, value in row.items():
                if key not in columns and _scalar(value):
                    columns.append(key)
        columns = [c for c in columns if any(row.get(c) is not None for row in rows)]
    cells = [[format_value(row.get(c)) for c in columns] for row in rows]
    widths = [max(len(str(c)), *(len(r[i]) for r in cells)) if cells else len(str(c))
              for i, c in enumerate(columns)]

    # figures right-aligned (a column of numbers, its header too), text left
    right = [bool(cells) and all(_numeric(r[i]) or r[i] == "-" for r in cells)
             for i in range(len(columns))]

    def line(values):
        return "  ".join(v.rjust(w) if r else v.ljust(w)
                         for v, w, r in zip(values, widths, right)).rstrip()
    return "\n".join([line([str(c) for c in columns]), line(["-" * w for w in widths])]
                     + [line(r) for r in cells])


def _numeric(text):
    return text.replace(",", "").replace(".", "", 1).replace("-", "", 1).replace(
        "e+", "").replace("e-", "").isdigit()


def format_report(report, title=None, headline=(), skip=(), tables=None):
    """``report`` as text: ``title``, then the ``headline`` keys, then every other plain
    figure and nested dict (``skip``: keys left out), then each list of records as columns
    (``tables``: {key: columns}, to choose the columns of some)."""
    tables = tables or {}
    lines = [title] if title else []
    pairs, blocks = [], []
    keys = [k for k in headline if k in report] + [k for k in report if k not in headline]
    for key in keys:
        if key in skip:
            continue
        value = report[key]
        if isinstance(value, (list, tuple)) and value and all(isinstance(v, dict)
                                                              for v in value):
            blocks.append(f"{_label(key)} ({len(value)}):\n"
                          + format_rows(value, tables.get(key)))
        elif _scalar(value):
            pairs.append((_label(key), format_value(value)))
        else:
            pairs.append((_label(key), _inline(value)))
    width = max((len(k) for k, _ in pairs), default=0)
    lines += [f"{k.ljust(width)}  {v}" for k, v in pairs]
    for block in blocks:
        lines += ["", block]
    return "\n".join(lines)
