"""The one plotting style of analysis/ (issue 27): figures sized for a two-column paper, saved as
vector PDF and 300-dpi PNG, a colour-blind-safe palette, labels from deck keys with units.

Every plotting script imports this module first (it selects matplotlib's headless Agg backend, so
it must precede ``matplotlib.pyplot``) and draws with:

* ``figure(columns=1 | 2, rows=..., cols=..., height=...)``: a figure 3.5 in (single column) or
  7 in (double column) wide, laid out by matplotlib's constrained layout, so the saved width is
  exactly the column's; a legend of all panels goes in a strip above them (``legend_rows``,
  ``figure_legend``), where the layout makes room;
* ``save(fig, path)``: ``<stem>.pdf`` (vector, fonts embedded as TrueType so the text stays text)
  and ``<stem>.png`` at 300 dpi; returns the PNG's path;
* ``colors()``: the Okabe-Ito palette (Okabe & Ito 2008, "Color Universal Design"), distinct
  under the common colour-vision deficiencies; ``SEQUENTIAL``: viridis for values along a scale
  (no near-white end, unlike diverging maps);
* ``deck_label(key)`` / ``deck_value(key, value)``: axis labels and legend entries from deck keys
  ("noise multiplier z", "z = 0.8"); ``units_label(name, units)`` from a dataset's ``long_name``
  and ``units`` attributes (docs/outputs.md);
* ``mean_band``: a mean line with a shaded ±1 std band, instead of a bundle of error bars.

Titles name what is plotted, never a command line or a path.
"""

import math
import os

import matplotlib

matplotlib.use("Agg")  # headless: must precede the pyplot import

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
from matplotlib.ticker import MaxNLocator  # noqa: E402

SINGLE_COLUMN = 3.5   # inches: one column of a two-column paper
DOUBLE_COLUMN = 7.0   # inches: the full text width
DPI = 300
EPS = "\u03b5"
DELTA = "\u03b4"

# Okabe-Ito, in the order that keeps the first colours apart in print and on screen; yellow,
# faint on white, comes last.
OKABE_ITO = ("#0072B2", "#D55E00", "#009E73", "#CC79A7", "#E69F00", "#56B4E9", "#000000",
             "#F0E442")
LINESTYLES = ("-", "--", "-.", ":")
MARKERS = ("o", "s", "^", "D", "v", "P", "X", "*")
SEQUENTIAL = "viridis"
NEUTRAL = "0.45"   # reference lines (y = x, zero)

# Deck keys that figures sweep: (name, symbol, units). Labels read "name symbol (units)",
# legend entries "symbol = value".
DECK_KEYS = {
    "ldp.epsilon": ("local DP", EPS, None),
    "privacy.noise_multiplier": ("noise multiplier", "z", None),
    "privacy.target_epsilon": ("target", EPS, None),
    "privacy.ratio": ("FeO2 ratio", "r", None),
    "privacy.mode": ("algorithm", None, None),
    "privacy.sampling_rate": ("client sampling rate", "q", None),
    "privacy.clip": ("clipping norm", "S", None),
    "privacy.opt_out_fraction": ("opt-out share", None, None),
    "personalization.lambda_private": ("Ditto weight", "\u03bb_p", None),
    "personalization.lambda_opt_out": ("Ditto weight", "\u03bb_np", None),
    "federation.rounds": ("rounds", "T", None),
    "federation.learning_rate": ("learning rate", "\u03b7", None),
    "federation.batch_size": ("batch size", "B", None),
    "federation.local_epochs": ("local epochs", "E", None),
    "partition.clients": ("clients", "N", None),
    "partition.alpha": ("Dirichlet concentration", "\u03b1", None),
    "model.type": ("model", None, None),
    "model.l2": ("L2 weight", "\u03bb", None),
    "lia.epsilon_train": ("training", f"{EPS}_train", None),
    "lia.epsilon_vote": ("vote", f"{EPS}_vote", None),
    "lia.corrupted_fraction": ("corrupted share", None, None),
    "seed": ("seed", None, None),
}
MODE_NAMES = {"none": "non-private", "dp-fedavg": "DP-FedAvg", "feo2": "FeO2"}
# data.source -> the name a figure gives the data set; files by their base name
DATASET_NAMES = {"fashion_mnist": "Fashion-MNIST", "synthetic": "synthetic data",
                 "credit_g": "German credit", "credit-g": "German credit", "adult": "Adult",
                 "acs": "ACS", "vote": "congressional votes"}


def apply():
    """The style's matplotlib settings (fonts sized for a 3.5 in column)."""
    plt.rcParams.update({
        "font.size": 8,
        "axes.titlesize": 8,
        "axes.labelsize": 8,
        "xtick.labelsize": 7,
        "ytick.labelsize": 7,
        "legend.fontsize": 7,
        "legend.title_fontsize": 7,
        "legend.frameon": False,
        "figure.titlesize": 9,
        "lines.linewidth": 1.2,
        "lines.markersize": 4,
        "axes.linewidth": 0.6,
        "axes.grid": True,
        "grid.alpha": 0.3,
        "grid.linewidth": 0.5,
        "axes.prop_cycle": matplotlib.cycler(color=OKABE_ITO),
        "image.cmap": SEQUENTIAL,
        "savefig.dpi": DPI,
        "pdf.fonttype": 42,   # TrueType: the PDF's text stays text
        "ps.fonttype": 42,
        "figure.constrained_layout.use": True,
    })


apply()


def colors():
    return list(OKABE_ITO)


def color(index):
    return OKABE_ITO[index % len(OKABE_ITO)]


def figure(columns=1, rows=1, cols=1, height=None, legend_rows=0, **subplots):
    """(fig, axes) of a rows x cols grid, 3.5 in (columns=1) or 7 in (columns=2) wide; height
    defaults to 4:3 panels. axes is 2-D (unless squeeze=True is passed). With legend_rows > 0 a
    strip of that many legend lines tops the figure for ``figure_legend`` (a legend over all
    panels that the constrained layout makes room for)."""
    width = SINGLE_COLUMN if columns == 1 else DOUBLE_COLUMN
    strip = 0.17 * legend_rows + 0.04 if legend_rows else 0.0
    if height is None:
        height = min(9.0, 0.75 * width / cols * rows + 0.3 + strip)
    subplots.setdefault("squeeze", False)
    if not legend_rows:
        return plt.subplots(rows, cols, figsize=(width, height), **subplots)
    fig = plt.figure(figsize=(width, height))
    outer = fig.add_gridspec(2, 1, height_ratios=[strip, height - strip])
    fig.legend_axes = fig.add_subplot(outer[0])
    fig.legend_axes.axis("off")
    axes = outer[1].subgridspec(rows, cols).subplots(**subplots)
    return fig, axes


def figure_legend(fig, handles, labels, columns=None, title=None):
    """The legend of all panels, in the strip ``figure(legend_rows=...)`` made. Scatter markers
    are drawn at a readable size there whatever their size in the panels."""
    if not handles:
        return None
    ncol = columns or min(len(labels), 4)
    return fig.legend_axes.legend(handles, labels, loc="center", ncol=ncol, title=title,
                                  borderaxespad=0.0, handlelength=1.8, columnspacing=1.0,
                                  scatterpoints=1, markerscale=_legend_marker_scale(handles))


def _legend_marker_scale(handles):
    """A factor that shows the smallest scatter marker at about 5 pt (30 pt^2) in the legend."""
    sizes = [float(np.min(h.get_sizes())) for h in handles
             if hasattr(h, "get_sizes") and len(h.get_sizes())]
    smallest = min(sizes) if sizes else 0.0
    return max(1.0, float(np.sqrt(30.0 / smallest))) if smallest > 0 else 1.0


def output_paths(path):
    """(pdf, png) beside each other for a path given with .png, .pdf or no extension."""
    stem, extension = os.path.splitext(path)
    if extension.lower() not in (".png", ".pdf"):
        stem = path
    return stem + ".pdf", stem + ".png"


def save(fig, path):
    """Writes <stem>.pdf and <stem>.png (300 dpi), creating the directory, and closes the
    figure; returns the PNG's path."""
    pdf, png = output_paths(path)
    os.makedirs(os.path.dirname(os.path.abspath(png)), exist_ok=True)
    try:
        fig.savefig(pdf)
        fig.savefig(png, dpi=DPI)
    finally:
        plt.close(fig)
    return png


def symbol(key):
    entry = DECK_KEYS.get(key)
    return entry[1] if entry and entry[1] else key.rsplit(".", 1)[-1]


def deck_label(key):
    """An axis or legend-title label for a deck key: 'noise multiplier z', with units if any."""
    name, sym, units = DECK_KEYS.get(key, (key.rsplit(".", 1)[-1].replace("_", " "), None, None))
    text = f"{name} {sym}" if sym else name
    return f"{text} ({units})" if units else text


def format_value(value):
    if isinstance(value, float):
        if math.isinf(value):
            return "\u221e"
        return f"{value:g}"
    return str(value)


def deck_value(key, value):
    """A legend entry naming a swept parameter's value: 'z = 0.8', 'DP-FedAvg'."""
    if key == "privacy.mode":
        return MODE_NAMES.get(str(value), str(value))
    if key == "model.type":
        return str(value)
    return f"{symbol(key)} = {format_value(value)}"


def deck_values(keys, values):
    """A legend entry for several swept keys: 'z = 0.8, r = 0.1'."""
    return ", ".join(deck_value(key, value) for key, value in zip(keys, values))


def sweep_labels(decks, fallbacks, keys=None):
    """Legend entries naming each run by the swept parameters' values: the deck keys (flattened
    decks, 'section.key') that differ between the runs, output.dir and seed aside unless they
    are all that differ; a run's fallback (e.g. its directory) when nothing differs."""
    if keys is None:
        every = sorted({key for deck in decks for key in deck if key != "output.dir"})
        keys = [key for key in every if len({repr(deck.get(key)) for deck in decks}) > 1]
        known = [key for key in keys if key in DECK_KEYS and key != "seed"]
        keys = known or keys
    if not keys or len(decks) < 2:
        return list(fallbacks)
    return [deck_values(*inert_keys_dropped(keys, deck)) for deck in decks]


def inert_keys_dropped(keys, deck):
    """(keys, values) of a run's label without the [privacy] keys of a non-private run, which
    do nothing there."""
    private = deck.get("privacy.mode", "none") != "none"
    kept = [key for key in keys if private or not key.startswith("privacy.")
            or key == "privacy.mode"]
    return kept, [deck.get(key, "?") for key in kept]


def units_label(name, units):
    """An axis label from a dataset's long_name and units attributes: 'test loss (nat)'; units
    '1' (dimensionless) are not shown."""
    return f"{name} ({units})" if units and units != "1" else name


def dataset_name(deck):
    """The data set a run used, for titles: from data.source, or a file's base name."""
    data = deck.get("data", {}) if isinstance(deck, dict) else {}
    source = str(data.get("source", "synthetic"))
    if source in DATASET_NAMES and source != "csv":
        return DATASET_NAMES[source]
    path = str(data.get("path", ""))
    base = os.path.basename(path).split(".")[0] if path else source
    return DATASET_NAMES.get(base, DATASET_NAMES.get(base.lower(), base))


def unique_legend_entries(axes):
    """(handles, labels) of the axes, each label once, in first-seen order."""
    handles, labels = [], []
    for ax in axes:
        for handle, label in zip(*ax.get_legend_handles_labels()):
            if label not in labels:
                handles.append(handle)
                labels.append(label)
    return handles, labels


def mean_band(ax, x, mean, spread, color, label=None, marker="o", linestyle="-", alpha=0.2):
    """A mean line with a ±spread band (NaN spreads draw no band)."""
    x, mean, spread = (np.asarray(v, dtype=float) for v in (x, mean, spread))
    line = ax.plot(x, mean, color=color, marker=marker, linestyle=linestyle, label=label)[0]
    finite = np.isfinite(spread) & np.isfinite(mean)
    if finite.any():
        ax.fill_between(x[finite], (mean - spread)[finite], (mean + spread)[finite],
                        color=color, alpha=alpha, linewidth=0)
    return line


def round_axis(ax, label="round"):
    """An x axis of rounds: integer ticks."""
    ax.set_xlabel(label)
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))


def reference_line(ax, value=0.0, horizontal=True):
    """A thin neutral line at y (or x) = value, under the data."""
    draw = ax.axhline if horizontal else ax.axvline
    draw(value, color=NEUTRAL, linewidth=0.7, zorder=0)
