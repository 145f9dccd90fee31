"""The C API's small and large calls, timed from C, next to the Python API.

    python bench/capi_calls.py

Builds bench/capi_timer.c against the installed fastpe (needs a C compiler),
then prints medians of interleaved rounds: one 1x512 float32 row through the
capsule (fastpe_fill_f32, and a compiled spec), 512x512 float32 on one thread,
and a float32 RoPE cos/sin cache of 4096 positions, beside the Python API's out=
calls of the same work.
"""

import os
import subprocess
import sys
import sysconfig
import tempfile
import time

import numpy as np

import fastpe

HERE = os.path.dirname(os.path.abspath(__file__))
SETUP = """
from setuptools import Extension, setup
import fastpe
setup(name="fastpe-capi-timer", script_args=["build_ext", "--inplace"],
      ext_modules=[Extension("fastpe_capi_timer", ["capi_timer.c"],
                             include_dirs=[fastpe.get_include()],
                             extra_compile_args=[] if __import__("sys").platform == "win32"
                             else ["-O2"])])
"""


def build(work):
    with (
        open(os.path.join(HERE, "capi_timer.c")) as f,
        open(os.path.join(work, "capi_timer.c"), "w") as g,
    ):
        g.write(f.read())
    with open(os.path.join(work, "setup.py"), "w") as f:
        f.write(SETUP)
    subprocess.run([sys.executable, "setup.py"], cwd=work, check=True, capture_output=True)
    sys.path.insert(0, work)
    import fastpe_capi_timer

    return fastpe_capi_timer


def python_out(seq_len, d_model, offset, iters, num_threads):
    out = np.empty((seq_len, d_model), np.float32)
    fastpe.sinusoidal(seq_len, d_model, offset=offset, out=out, num_threads=num_threads)
    t0 = time.perf_counter()
    for _ in range(iters):
        fastpe.sinusoidal(seq_len, d_model, offset=offset, out=out, num_threads=num_threads)
    return (time.perf_counter() - t0) / iters


def python_rope(n, iters):
    out = (np.empty((n, 128), np.float32), np.empty((n, 128), np.float32))
    fastpe.rope_cache(128, seq_len=n, out=out)
    t0 = time.perf_counter()
    for _ in range(iters):
        fastpe.rope_cache(128, seq_len=n, out=out)
    return (time.perf_counter() - t0) / iters


def main():
    if sysconfig.get_config_var("EXT_SUFFIX") is None:
        sys.exit("no extension suffix: cannot build the timer")
    with tempfile.TemporaryDirectory() as work:
        timer = build(work)
        cases = {
            "C fastpe_fill_f32 1x512, offset 1000": lambda: timer.time_fill(
                1, 512, 1000, 2000, 1, None
            ),
            "C spec_fill_f32 (vaswani) 1x512": lambda: timer.time_fill(
                1, 512, 1000, 2000, 1, "vaswani"
            ),
            "C spec_fill_f32 (fairseq) 1x512": lambda: timer.time_fill(
                1, 512, 1000, 2000, 1, "fairseq"
            ),
            "Python sinusoidal(1, 512, out=)": lambda: python_out(1, 512, 1000, 2000, 1),
            "C fastpe_fill_f32 512x512, 1 thread": lambda: timer.time_fill(
                512, 512, 0, 50, 1, None
            ),
            "Python sinusoidal(512, 512, out=), 1 thread": lambda: python_out(512, 512, 0, 50, 1),
            "C rope_cache_f32 4096 x 128, 1 thread": lambda: timer.time_rope_cache(4096, 20, 1),
            "C rope_cache_f32 4096 x 128, all threads": lambda: timer.time_rope_cache(4096, 20, 0),
            "Python rope_cache(128, seq_len=4096, out=)": lambda: python_rope(4096, 20),
        }
        times = {name: [] for name in cases}
        for _ in range(21):
            for name, fn in cases.items():
                times[name].append(fn())
        med = {name: float(np.median(t)) for name, t in times.items()}
    print(
        f"fastpe {fastpe.__version__}, C API {fastpe.kernel.C_API_VERSION}; medians of 21 "
        "interleaved rounds"
    )
    for name, t in med.items():
        print(f"  {name:<46} {t * 1e6:9.2f} us")
    ratio = (
        med["C fastpe_fill_f32 512x512, 1 thread"]
        / med["Python sinusoidal(512, 512, out=), 1 thread"]
    )
    print(f"  512x512 on one thread, C / Python out=: {ratio:.2f} (target <= 1.1)")
    print(
        "  one 1x512 row through the capsule: "
        f"{med['C fastpe_fill_f32 1x512, offset 1000'] * 1e6:.2f} us "
        "(target <= 1.0)"
    )


if __name__ == "__main__":
    main()
