"""``fastpe plot`` and fastpe._plot: a valid image of sensible size, the right panels.

Skipped as a whole when matplotlib is not installed (it is the optional ``plot``
extra); test_cli.py checks what the command says then.
"""

import struct
import subprocess
import sys

import numpy as np
import pytest

pytest.importorskip("matplotlib")

import fastpe
from fastpe import _plot
from fastpe._cli import main

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def png_size(path):
    """(width, height) from the PNG signature and IHDR chunk, with plain Python."""
    with open(path, "rb") as f:
        head = f.read(33)
    assert head[:8] == PNG_SIGNATURE, "not a PNG file"
    length, kind = struct.unpack(">I4s", head[8:16])
    assert kind == b"IHDR" and length == 13, "first chunk is not IHDR"
    width, height = struct.unpack(">II", head[16:24])
    return width, height


def test_cli_plot_writes_a_valid_png(tmp_path):
    path = tmp_path / "pe.png"
    r = subprocess.run(
        [sys.executable, "-m", "fastpe", "plot", "100", "512", "-o", str(path)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert r.returncode == 0, r.stderr
    assert str(path) in r.stdout
    width, height = png_size(path)
    assert (width, height) == (1400, 1000)  # 14 x 10 inches at the default 100 dpi
    assert path.stat().st_size > 50_000  # four panels, not an empty canvas

    import matplotlib.image

    img = matplotlib.image.imread(path)  # decodes the whole file
    assert img.shape[:2] == (height, width)
    assert img[..., :3].std() > 0.1  # not blank


def test_cli_plot_options(tmp_path, capsys):
    path = tmp_path / "pe.png"
    argv = [
        "plot",
        "40",
        "31",
        "--base",
        "100",
        "--positions",
        "0, 5,39",
        "--wave-positions",
        "1,2",
        "--dpi",
        "60",
        "-o",
        str(path),
    ]
    assert main(argv) == 0
    assert png_size(path) == (840, 600)


def test_cli_plot_small_table_uses_positions_that_fit(tmp_path):
    path = tmp_path / "pe.png"
    assert main(["plot", "5", "2", "-q", "-o", str(path)]) == 0  # default 10, 25 do not fit
    assert png_size(path)[0] > 600


@pytest.mark.parametrize(
    "args, message",
    [
        (["100", "64", "--positions", "0,100"], "positions must lie in [0, seq_len=100), got 100"),
        (["100", "64", "--wave-positions", "-1"], "wave_positions must lie in [0, seq_len=100)"),
        (["0", "64"], "seq_len must be an integer >= 1"),
        (["10", "1"], "d_model must be an integer >= 2"),
        (["10", "8", "--dpi", "0"], "dpi must be a number in [10, 1000]"),
        (["10", "8", "--base", "0"], "base must be finite and > 0"),
    ],
)
def test_cli_plot_bad_values_exit_2(tmp_path, capsys, args, message):
    path = tmp_path / "pe.png"
    assert main(["plot", *args, "-o", str(path)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("fastpe plot: error: ") and message in err
    assert not path.exists()


@pytest.mark.parametrize("argv", [["--positions", "a,b"], ["--positions", ","]])
def test_cli_plot_bad_position_syntax_exit_2(tmp_path, capsys, argv):
    assert main(["plot", "10", "8", *argv, "-o", str(tmp_path / "pe.png")]) == 2
    assert "--positions" in capsys.readouterr().err


def test_cli_plot_unknown_suffix_exit_2(tmp_path, capsys):
    assert main(["plot", "10", "8", "-o", str(tmp_path / "pe.jpeg")]) == 2
    assert "cannot tell the image format" in capsys.readouterr().err


def test_figure_shows_the_table():
    """The panels draw the table's own numbers: the heatmap is P, the sinusoids are
    P's sine columns, the lines are P's rows, the similarity matrix is P @ P.T."""
    fig = _plot.encoding_figure(60, 16, base=100.0, positions=[0, 10, 25], wave_positions=[4])
    P = fastpe.sinusoidal(60, 16, base=100.0, dtype=np.float64)
    heat, wave, vec, sim = fig.axes[:4]
    np.testing.assert_array_equal(heat.images[0].get_array(), P)
    np.testing.assert_array_equal(wave.lines[0].get_ydata(), P[4, 0::2])
    np.testing.assert_array_equal(vec.lines[2].get_ydata(), P[10, 0::2])  # sine columns
    np.testing.assert_array_equal(vec.lines[3].get_ydata(), P[10, 1::2])  # cosine columns
    S = np.asarray(sim.images[0].get_array())
    np.testing.assert_allclose(S, P @ P.T)
    # near positions are alike: each row of S peaks on the diagonal (d/2 for even d)
    np.testing.assert_allclose(np.diag(S), 8.0)
    assert (S.argmax(axis=1) == np.arange(60)).all()
    assert len(fig.axes) == 6  # four panels + two colour bars


def test_similarity_panel_is_capped():
    fig = _plot.encoding_figure(_plot.MAX_SIMILARITY_POSITIONS + 5, 8)
    sim = fig.axes[3]
    n = _plot.MAX_SIMILARITY_POSITIONS
    assert sim.images[0].get_array().shape == (n, n)
    assert f"first {n}" in sim.get_title()


def test_plot_does_not_change_the_pyplot_backend():
    code = (
        "import matplotlib; matplotlib.use('svg'); from fastpe import _plot; "
        "_plot.encoding_figure(10, 8); assert matplotlib.get_backend() == 'svg'; "
        "import sys; sys.exit('matplotlib.pyplot' in sys.modules)"
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
