"""The seeds' pictures of a positional-encoding table, in one figure (``fastpe plot``).

Four panels, each a picture the tutorials use to explain the encoding:

(a) the table as a heatmap (positions down, dimensions across) with a colour bar;
(b) the seeds' ``plotSinusoid``: for a few positions k, the sine columns
    ``P[k, 2i] = sin(k / n**(2i/d))`` against i -- a different wave per position;
(c) the encoding vectors of a few positions (0, 10, 25) as lines across all columns;
(d) the position-by-position dot products ``P @ P.T``: near positions are alike.

matplotlib is an optional dependency (``pip install 'fastpe[plot]'``) and is
imported only when a figure is made.  The figure is drawn on matplotlib's Agg
canvas directly (``matplotlib.figure.Figure``, no pyplot), so this works without
a display and never changes the caller's matplotlib backend or global state.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from ._api import sinusoidal
from ._validate import as_base, as_int

if TYPE_CHECKING:  # pragma: no cover
    from matplotlib.figure import Figure

MATPLOTLIB_MISSING = "matplotlib is required for `fastpe plot`: pip install 'fastpe[plot]'"

#: Defaults of the seeds: lines for positions 0, 10, 25 (seed 004) and the
#: sinusoids of positions 0, 4, 8, 12 over the first 100 sine columns (seed 003).
DEFAULT_POSITIONS = (0, 10, 25)
DEFAULT_WAVE_POSITIONS = (0, 4, 8, 12)
WAVE_COLUMNS = 100
#: The similarity panel is seq_len x seq_len; beyond this many positions it shows the first ones.
MAX_SIMILARITY_POSITIONS = 1000


def _require_matplotlib() -> None:
    try:
        import matplotlib  # noqa: F401
    except ImportError as exc:
        raise ImportError(MATPLOTLIB_MISSING) from exc


def _positions(
    values: Sequence[int] | None, seq_len: int, name: str, default: Sequence[int] = ()
) -> list[int]:
    if values is None:
        # The seeds' positions that fit in the table, and the last one if only one fits.
        values = [k for k in default if k < seq_len]
        if len(values) < 2 and seq_len - 1 not in values:
            values.append(seq_len - 1)
    out = []
    for v in values:
        k = as_int(v, name)
        if not 0 <= k < seq_len:
            raise ValueError(f"{name} must lie in [0, seq_len={seq_len}), got {k}")
        out.append(k)
    if not out:
        raise ValueError(f"{name} must name at least one position")
    return out


def encoding_figure(
    seq_len: int,
    d_model: int,
    *,
    base: float = 10000.0,
    positions: Sequence[int] | None = None,
    wave_positions: Sequence[int] | None = None,
) -> Figure:
    """The four-panel figure of the ``(seq_len, d_model)`` table (interleaved layout).

    Parameters
    ----------
    seq_len : int
        Number of positions, >= 1.
    d_model : int
        Width of the encoding, >= 2 (one sine and one cosine column at least).
    base : float, keyword-only
        The wavelength base ``n``.
    positions : sequence of int, optional, keyword-only
        Positions whose encoding vectors are drawn as lines in panel (c); each in
        ``[0, seq_len)``.  Default: those of 0, 10, 25 that are below ``seq_len``.
    wave_positions : sequence of int, optional, keyword-only
        Positions whose sine columns are drawn in panel (b); each in ``[0, seq_len)``.
        Default: those of 0, 4, 8, 12 that are below ``seq_len``.

    Returns
    -------
    matplotlib.figure.Figure
        The figure, drawn on an Agg canvas (save it with ``fig.savefig``).

    Raises
    ------
    ImportError
        matplotlib is not installed.
    ValueError, TypeError
        Invalid sizes, base or positions.
    """
    seq_len = as_int(seq_len, "seq_len", minimum=1)
    d_model = as_int(d_model, "d_model", minimum=2)
    base = as_base(base)
    positions = _positions(positions, seq_len, "positions", DEFAULT_POSITIONS)
    wave_positions = _positions(wave_positions, seq_len, "wave_positions", DEFAULT_WAVE_POSITIONS)
    _require_matplotlib()
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    # float64 so that the pictures show the exact table (float32 would look identical,
    # but the dot products in (d) are sums of d_model terms).
    P = sinusoidal(seq_len, d_model, base=base, dtype=np.float64)

    fig = Figure(figsize=(14, 10), layout="constrained")
    FigureCanvasAgg(fig)
    (ax_heat, ax_wave), (ax_vec, ax_sim) = fig.subplots(2, 2)
    fig.suptitle(
        f"Sinusoidal positional encoding  P[k, 2i] = sin(k / n^(2i/d)),  "
        f"P[k, 2i+1] = cos(k / n^(2i/d))      seq_len = {seq_len},  d = {d_model},  n = {base:g}",
        fontsize=13,
    )

    # (a) heatmap, the seeds' matshow(P) with its colour bar.
    im = ax_heat.imshow(P, aspect="auto", cmap="viridis", vmin=-1, vmax=1, origin="upper")
    fig.colorbar(im, ax=ax_heat, label="P[k, j]")
    ax_heat.set_title("(a) The encoding matrix P")
    ax_heat.set_xlabel("dimension j (column)")
    ax_heat.set_ylabel("position k (row)")

    # (b) plotSinusoid: y = sin(k / n^(2x/d)) for x in 0..99 -- the table's sine columns.
    n_sin = (d_model + 1) // 2
    x = np.arange(min(WAVE_COLUMNS, n_sin))
    # A sequential palette (k grows): keeps (b)'s colours apart from (c)'s.
    from matplotlib import colormaps

    shades = colormaps["plasma"](np.linspace(0.0, 0.8, len(wave_positions)))
    for k, colour in zip(wave_positions, shades, strict=False):
        ax_wave.plot(x, P[k, 2 * x], color=colour, lw=1.6, label=f"k = {k}")
    ax_wave.set_title(f"(b) Sine wave of each position across dimensions, i = 0..{x.size - 1}")
    ax_wave.set_xlabel("i  (sine column 2i)")
    ax_wave.set_ylabel("P[k, 2i] = sin(k / n^(2i/d))")
    ax_wave.set_ylim(-1.1, 1.1)
    ax_wave.axhline(0, color="0.6", lw=0.6, zorder=0)
    ax_wave.legend(loc="lower right", title="position")
    ax_wave.grid(alpha=0.3)

    # (c) encoding vectors of a few positions as lines (seed 004).  Drawn as two
    # curves per position, the sine columns (2i, solid) and the cosine columns
    # (2i+1, dashed), against i: a zigzag through interleaved columns is unreadable.
    i_sin = np.arange(n_sin)
    i_cos = np.arange(d_model // 2)
    for n, k in enumerate(positions):
        colour = f"C{n % 10}"
        ax_vec.plot(i_sin, P[k, 0::2], color=colour, lw=1.4, label=f"position {k}")
        ax_vec.plot(i_cos, P[k, 1::2], color=colour, lw=1.4, ls="--")
    ax_vec.plot([], [], color="0.3", lw=1.4, label="sin: column 2i")
    ax_vec.plot([], [], color="0.3", lw=1.4, ls="--", label="cos: column 2i+1")
    ax_vec.set_title("(c) Encoding vectors of a few positions")
    ax_vec.set_xlabel("frequency index i  (columns 2i, 2i+1)")
    ax_vec.set_ylabel("P[k, j]")
    ax_vec.set_xlim(0, max(n_sin - 1, 1))
    ax_vec.set_ylim(-1.1, 1.1)
    ax_vec.legend(loc="lower right", fontsize=9)
    ax_vec.grid(alpha=0.3)

    # (d) dot products P[k] . P[k']: largest on the diagonal (d/2 for even d),
    # falling off with |k - k'| -- near positions have similar encodings.
    m = min(seq_len, MAX_SIMILARITY_POSITIONS)
    S = P[:m] @ P[:m].T
    im = ax_sim.imshow(S, aspect="auto", cmap="magma", origin="upper")
    fig.colorbar(im, ax=ax_sim, label="P[k] · P[k']")
    shown = "" if m == seq_len else f" (first {m})"
    ax_sim.set_title(f"(d) Similarity of positions: dot product P[k] · P[k']{shown}")
    ax_sim.set_xlabel("position k'")
    ax_sim.set_ylabel("position k")
    return fig


def plot_encoding(
    seq_len: int,
    d_model: int,
    *,
    base: float = 10000.0,
    positions: Sequence[int] | None = None,
    wave_positions: Sequence[int] | None = None,
    dpi: float = 100,
    path: str | os.PathLike[str],
    **savefig_kwargs: Any,
) -> str:
    """Draw :func:`encoding_figure` and save it to ``path`` (format from the suffix).

    Returns the path written, as a string.  Extra keyword arguments go to
    ``Figure.savefig``.
    """
    if not (isinstance(dpi, (int, float)) and np.isfinite(dpi) and 10 <= dpi <= 1000):
        raise ValueError(f"dpi must be a number in [10, 1000], got {dpi!r}")
    fig = encoding_figure(
        seq_len, d_model, base=base, positions=positions, wave_positions=wave_positions
    )
    path = os.fspath(path)
    fig.savefig(path, dpi=dpi, **savefig_kwargs)
    return path
