"""The accuracy figures of docs/accuracy.md (and the README's accuracy line).

Max |error| against mpmath (40 digits) over a random sample of entries of the
(100000, 512) table, n = 10000, for fastpe and for the formulas people copy:
the NumPy float64 formula (fastpe.reference), the same formula in float32, and
the PyTorch tutorial's PositionalEncoding (float32).  Accuracy only: the speed
comparison is ``fastpe bench``.

    python docs/accuracy_figures.py          # needs mpmath; torch optional

Run it from the repository root with fastpe installed (it uses tests/truth.py).
"""

import sys
from pathlib import Path

import numpy as np

import fastpe

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from truth import abs_errors, exact_values

SEQ_LEN, D_MODEL, SAMPLES = 100_000, 512, 3000


def numpy_float32(seq_len, d_model):
    """The seeds' vectorised formula (seed 004) evaluated in float32."""
    pos = np.arange(seq_len, dtype=np.float32)[:, None]
    div = np.exp(
        np.arange(0, d_model, 2, dtype=np.float32) * np.float32(-np.log(10000.0) / d_model)
    )
    P = np.empty((seq_len, d_model), np.float32)
    P[:, 0::2] = np.sin(pos * div)
    P[:, 1::2] = np.cos(pos * div)
    return P


def torch_tutorial(seq_len, d_model):
    """pytorch/tutorials beginner_source/transformer_tutorial.py, PositionalEncoding."""
    import torch

    position = torch.arange(seq_len).unsqueeze(1)
    div_term = torch.exp(torch.arange(0, d_model, 2) * (-np.log(10000.0) / d_model))
    pe = torch.zeros(seq_len, d_model)
    pe[:, 0::2] = torch.sin(position * div_term)
    pe[:, 1::2] = torch.cos(position * div_term)
    return pe.numpy()


def main():
    rng = np.random.default_rng(1)
    rows = rng.integers(0, SEQ_LEN, SAMPLES)
    cols = rng.integers(0, D_MODEL, SAMPLES)
    exact = exact_values(rows, cols, D_MODEL)
    tables = {
        "fastpe float64": lambda: fastpe.sinusoidal(SEQ_LEN, D_MODEL, dtype=np.float64),
        "fastpe float32": lambda: fastpe.sinusoidal(SEQ_LEN, D_MODEL),
        "NumPy float64 formula (fastpe.reference)": lambda: fastpe.reference(SEQ_LEN, D_MODEL),
        "NumPy float32 formula": lambda: numpy_float32(SEQ_LEN, D_MODEL),
        "PyTorch tutorial (float32)": lambda: torch_tutorial(SEQ_LEN, D_MODEL),
    }
    print(f"max |error| vs mpmath, {SAMPLES} random entries of the ({SEQ_LEN}, {D_MODEL}) table")
    for name, make in tables.items():
        try:
            P = make()
        except ImportError as exc:
            print(f"{name:42s} skipped ({exc})")
            continue
        print(f"{name:42s} {abs_errors(P[rows, cols], exact).max():.2g}")


if __name__ == "__main__":
    main()
