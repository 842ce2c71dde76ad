"""Shared parts of the report scripts (fldp_report.py, whatif_report.py,
feo2_report.py): the table model and its plain-text / GitHub-markdown
rendering, number formatting, messages on stderr, reading results files,
writing figures and the common command-line options.

The scripts import this module from their own directory; importing it
applies analysis/style.py (the one plotting style, which selects
matplotlib's headless Agg backend), so import it before
``matplotlib.pyplot``.
"""

import math
import os
import sys
import textwrap
import warnings
from dataclasses import dataclass
from typing import List, Tuple

import style  # first: the plotting style and the headless Agg backend

import h5py  # noqa: E402
import numpy as np  # noqa: E402

EPS = "\u03b5"
DELTA = "\u0394"
FOOTNOTE_WIDTH = 100
RESULTS_FILE = "results.h5"
EXIT_ERROR = 2
# what a parser raises on a results file with an unexpected layout
LAYOUT_ERRORS = (KeyError, ValueError, IndexError, TypeError)


# --------------------------------------------------------------------------
# Messages
# --------------------------------------------------------------------------


def note(prog, message):
    """A note for the user on stderr: '<prog>: <message>'."""
    print(f"{prog}: {message}", file=sys.stderr)


def error(prog, message):
    """'<prog>: error: <message>' on stderr; returns the exit status 2."""
    print(f"{prog}: error: {message}", file=sys.stderr)
    return EXIT_ERROR


def load_results_root(prog, root, load, expected):
    """Runs `load(root)` (RuntimeWarnings silenced: empty or NaN results are
    expected in partial runs) and returns (runs, 0); (None, 2) after an error
    message when ROOT is not a directory or holds no runs. `expected` says
    what the results tree should look like."""
    if not os.path.isdir(root):
        return None, error(prog, f"{root}: no such directory")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", category=RuntimeWarning)
        runs = load(root)
    if not runs:
        return None, error(prog, f"no results under {root} (expected {expected})")
    return runs, 0


# --------------------------------------------------------------------------
# Reading results files
# --------------------------------------------------------------------------


class ResultsError(Exception):
    """A results file that cannot be used; the message is for the user."""


def decode(value):
    """Return an HDF5 string (attribute or dataset value) as ``str``."""
    if isinstance(value, np.ndarray):
        if value.size != 1:
            return str(value)
        value = value.reshape(-1)[0]
    if isinstance(value, (bytes, np.bytes_)):
        return value.decode("utf-8", errors="replace")
    return str(value)


def scalar(h5, name, default=math.nan):
    """A scalar dataset as a float, or ``default`` when absent."""
    if name not in h5:
        return default
    return float(np.asarray(h5[name][()]).reshape(-1)[0])


def deck_settings(h5):
    """The resolved deck (root attribute ``deck``) as a dict, or {}."""
    text = decode(h5.attrs.get("deck", ""))
    try:
        import tomllib  # Python >= 3.11
    except ImportError:  # pragma: no cover - older Python: no deck details
        return {}
    try:
        return tomllib.loads(text)
    except (tomllib.TOMLDecodeError, ValueError):
        return {}


def results_file(prog, directory):
    """``directory/results.h5``, or None when it is not there (with a note
    when the directory exists: a run not finished yet)."""
    path = os.path.join(directory, RESULTS_FILE)
    if os.path.isfile(path):
        return path
    if os.path.isdir(directory):
        note(prog, f"skipped: {directory}: no {RESULTS_FILE} "
                   "(run unfinished?)")
    return None


def read_results(path, parse):
    """``parse(h5)`` of the open HDF5 file ``path``; ResultsError when the
    file is not HDF5, cannot be read or has an unexpected layout."""
    try:
        if not h5py.is_hdf5(path):
            raise ResultsError(f"{path}: not an HDF5 file")
        with h5py.File(path, "r") as h5:
            return parse(h5)
    except OSError as err:  # truncated or unreadable HDF5 file
        raise ResultsError(f"{path}: cannot read HDF5 file ({err})") from err
    except LAYOUT_ERRORS as err:
        raise ResultsError(f"{path}: unexpected layout ({err})") from err


def read_run_directories(prog, directories, parse):
    """``parse(h5)`` of each ``directory/results.h5``, in the order given:
    (runs, 0), or (None, 2) after an error message naming the first
    directory without a usable results file."""
    runs = []
    for directory in directories:
        path = os.path.join(directory, RESULTS_FILE)
        if not os.path.isfile(path):
            return None, error(prog, f"{directory}: no {RESULTS_FILE}")
        try:
            runs.append(read_results(path, parse))
        except ResultsError as err:
            return None, error(prog, str(err))
    return runs, 0


def run_labels(directories):
    """The run directories without their common leading path."""
    paths = [os.path.normpath(d) for d in directories]
    if len(paths) == 1:
        return [os.path.basename(paths[0])]
    common = os.path.commonpath(paths)
    return [os.path.relpath(p, common) for p in paths]


def load_results(prog, path, parse):
    """read_results, or None with a note 'skipped: ...' on stderr."""
    try:
        return read_results(path, parse)
    except ResultsError as err:
        note(prog, f"skipped: {err}")
        return None


# --------------------------------------------------------------------------
# Number formatting
# --------------------------------------------------------------------------


def finite(value):
    """True for a finite number (False for None, NaN and infinities)."""
    return value is not None and math.isfinite(value)


def fmt_pct(fraction, decimals=1):
    """A fraction in percent with ``decimals`` decimals, or '-' when it is
    not finite."""
    return f"{100 * fraction:.{decimals}f}" if finite(fraction) else "-"


def fmt_num(value, digits=3, smallest=1e-4):
    """A number with ``digits`` significant digits, or '-' when NaN: fixed
    decimals for ``smallest`` <= |value| < 1e4, else exponent notation."""
    if not finite(value):
        return "-"
    if value == 0:
        return "0"
    magnitude = abs(value)
    if smallest <= magnitude < 1e4:
        decimals = max(0, digits - 1 - int(math.floor(math.log10(magnitude))))
        return f"{value:.{decimals}f}"
    return f"{value:.{digits - 1}e}"


# --------------------------------------------------------------------------
# Tables
# --------------------------------------------------------------------------


@dataclass
class Table:
    """Key columns, then column groups (a title over its columns)."""

    title: str
    keys: List[str]
    groups: List[Tuple[str, List[str]]]   # (group title, column names)
    rows: List[List[str]]
    footnote: str = ""

    def header(self):
        return self.keys + [c for _, columns in self.groups for c in columns]


def column_widths(table):
    """Widths of the columns, widened so each group title fits its span."""
    header = table.header()
    widths = [len(h) for h in header]
    for row in table.rows:
        for j, cell in enumerate(row):
            widths[j] = max(widths[j], len(cell))
    start = len(table.keys)
    for title, columns in table.groups:
        span = range(start, start + len(columns))
        total = sum(widths[j] for j in span) + 2 * (len(columns) - 1)
        if columns and len(title) > total:
            widths[span[-1]] += len(title) - total
        start += len(columns)
    return widths


def group_line(table, widths, untitled=" "):
    """The line of group titles centred in a rule of '-' over their
    columns; an untitled group gets ``untitled`` all over its span."""
    nkeys = len(table.keys)
    parts = [" " * sum(widths[:nkeys]) + "  " * (nkeys - 1)]
    start = nkeys
    for title, columns in table.groups:
        span = widths[start:start + len(columns)]
        total = sum(span) + 2 * (len(columns) - 1)
        parts.append(title.center(total, "-") if title
                     else untitled * total)
        start += len(columns)
    return "  ".join(parts).rstrip()


def render_plain(table, untitled=" "):
    """An aligned plain-text table (keys left, numbers right aligned); the
    group line, when a group has a title, as in group_line."""
    widths = column_widths(table)
    nkeys = len(table.keys)

    def line(cells):
        return "  ".join(cell.ljust(widths[j]) if j < nkeys
                         else cell.rjust(widths[j])
                         for j, cell in enumerate(cells)).rstrip()

    lines = [table.title, "=" * len(table.title)]
    if any(title for title, _ in table.groups):
        lines.append(group_line(table, widths, untitled))
    lines.append(line(table.header()))
    lines.append("  ".join("-" * w for w in widths))
    lines.extend(line(row) for row in table.rows)
    if table.footnote:
        lines.extend(textwrap.wrap(table.footnote, FOOTNOTE_WIDTH))
    return "\n".join(lines)


def render_markdown(table, header=None, intro=""):
    """A GitHub markdown table; columns named '<group> <column>' unless
    ``header`` names them; ``intro``: a paragraph above the table."""
    if header is None:
        header = list(table.keys)
        for title, columns in table.groups:
            header.extend(f"{title} {c}".strip() for c in columns)
    lines = [f"### {table.title}", ""]
    if intro:
        lines += [intro, ""]
    lines.append("| " + " | ".join(header) + " |")
    lines.append("| " + " | ".join("---" if j < len(table.keys) else "---:"
                                   for j in range(len(header))) + " |")
    for row in table.rows:
        lines.append("| " + " | ".join(cell.replace("|", "\\|")
                                       for cell in row) + " |")
    if table.footnote:
        lines += ["", table.footnote]
    return "\n".join(lines)


# --------------------------------------------------------------------------
# Figures
# --------------------------------------------------------------------------


def color_cycle():
    """The style's colour-blind-safe palette (Okabe-Ito)."""
    return style.colors()


def legend_entries(axes):
    """(handles, labels) of the axes, each label once, in first-seen order."""
    handles, labels = [], []
    for ax in axes:
        for h, lab in zip(*ax.get_legend_handles_labels()):
            if lab not in labels:
                handles.append(h)
                labels.append(lab)
    return handles, labels


def finish_roc_axes(ax, fontsize="small"):
    """Log-log ROC axes (the low false-positive rates are where membership and audit attacks
    differ) with their labels and the legend."""
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("false-positive rate")
    ax.set_ylabel("true-positive rate")
    ax.legend(loc="lower right", fontsize=fontsize)


def save(fig, path):
    """Write a figure as vector PDF and 300-dpi PNG beside it (style.save,
    creating the directory) and close it; returns the PNG's path."""
    return style.save(fig, path)


def write_figures(prog, directory, figures):
    """Create ``directory`` and write the figures into it: ``figures`` are
    (make, file name) pairs, ``make(path)`` returns the path written or None
    (with its own note).  Notes each written file; returns the exit status:
    0, or 2 with an error message when the figures cannot be written."""
    try:
        os.makedirs(directory, exist_ok=True)
        for make, name in figures:
            written = make(os.path.join(directory, name))
            if written:
                note(prog, f"wrote {written}")
    except OSError as err:
        return error(prog, f"cannot write figures to {directory}: {err}")
    return 0


# --------------------------------------------------------------------------
# Command line
# --------------------------------------------------------------------------


def add_markdown_option(parser, text="GitHub markdown tables instead of "
                                     "aligned plain text"):
    """--markdown (``text``: its help)."""
    parser.add_argument("--markdown", action="store_true", help=text)


def add_figure_options(parser, default, what="the figures (PDF and PNG)"):
    """--figures DIR (``default``: the default directory, for the help)
    and --no-figures."""
    parser.add_argument("--figures", metavar="DIR",
                        help=f"directory for {what} (default: {default})")
    parser.add_argument("--no-figures", action="store_true",
                        help="print the tables only")
