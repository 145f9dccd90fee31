"""fastpe.h's functions are macros that call through the capsule's table: the
slot's typedef still checks a caller's arguments, and a constructor called
before import_fastpe() raises RuntimeError instead of reaching a NULL table."""

from __future__ import annotations

import shlex
import subprocess
import sys
import sysconfig
import textwrap

import pytest
from extbuild import build, load, no_compiler_reason, quick_cflags

import fastpe

GOOD = "float out[4]; (void)fastpe_fill_f32(out, 1, 4, 4, 10000.0, 0, 0, 1);"
BAD = "double out[4]; (void)fastpe_fill_f32(out, 1, 4, 4, 10000.0, 0, 0, 1);"


def _cc() -> list[str]:
    reason = no_compiler_reason()
    if reason or sys.platform == "win32":
        pytest.skip(reason or "uses the Unix compiler driver directly")
    return shlex.split(sysconfig.get_config_var("CC") or "cc")


def _compiles(body: str, tmp_path) -> subprocess.CompletedProcess:
    src = tmp_path / "use.c"
    src.write_text(f'#include "fastpe.h"\nvoid use(void);\nvoid use(void) {{ {body} }}\n')
    cmd = [
        *_cc(),
        "-fsyntax-only",
        "-Werror",
        f"-I{fastpe.get_include()}",
        f"-I{sysconfig.get_paths()['include']}",
        str(src),
    ]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=120)


def test_a_call_with_the_slots_types_compiles(tmp_path):
    out = _compiles(GOOD, tmp_path)
    assert out.returncode == 0, out.stderr


def test_a_wrong_pointer_type_is_refused_at_compile_time(tmp_path):
    out = _compiles(BAD, tmp_path)
    assert out.returncode != 0
    assert "fill_f32" in out.stderr


PROBE = textwrap.dedent(
    """
    #include "fastpe.h"

    /* Each constructor before import_fastpe(): NULL with RuntimeError. */
    static PyObject *unimported(PyObject *self, PyObject *which) {
        double w[1] = {1.0};
        int32_t axis[1] = {0};
        long k = PyLong_AsLong(which);
        void *h = NULL;
        (void)self;
        if (k == 0) h = fastpe_spec_new(Py_None, 8);
        if (k == 1) h = fastpe_spec_from_name("vaswani", 8);
        if (k == 2) h = fastpe_rope_from_frequencies(w, 1, 1.0);
        if (k == 3) h = fastpe_rope_from_axes(w, 1, axis, 1, 1.0);
        if (k == 4) h = fastpe_rope_new(Py_None, 8, 0, -1, NULL);
        if (k == 5) h = fastpe_spec_from_knobs(8, 1e4, "d2", 0.0, 1.0, "interleaved", "sin", 0, 0);
        if (h != NULL) Py_RETURN_TRUE;
        return NULL;
    }

    static PyMethodDef methods[] = {
        {"unimported", unimported, METH_O, NULL}, {NULL, NULL, 0, NULL}};
    static struct PyModuleDef mod = {PyModuleDef_HEAD_INIT, "fastpe_unimported_probe", NULL, -1,
                                     methods, NULL, NULL, NULL, NULL};
    PyMODINIT_FUNC PyInit_fastpe_unimported_probe(void) { return PyModule_Create(&mod); }
    """
)


@pytest.fixture(scope="module")
def unimported_probe(tmp_path_factory):
    reason = no_compiler_reason()
    if reason:
        pytest.skip(f"cannot build the probe: {reason}")
    work = tmp_path_factory.mktemp("unimported")
    (work / "fastpe_unimported_probe.c").write_text(PROBE)
    build(
        work,
        [
            dict(
                name="fastpe_unimported_probe",
                sources=["fastpe_unimported_probe.c"],
                include_dirs=[fastpe.get_include()],
                extra_compile_args=quick_cflags(),
            )
        ],
    )
    return load(work, "fastpe_unimported_probe")


@pytest.mark.parametrize(
    "which, name",
    [
        (0, "fastpe_spec_new"),
        (1, "fastpe_spec_new"),  # (fastpe_spec_from_name calls it)
        (2, "fastpe_rope_from_frequencies"),
        (3, "fastpe_rope_from_axes"),
        (4, "fastpe_rope_new"),
        (5, "fastpe_spec_from_knobs"),
    ],
)
def test_a_constructor_before_import_fastpe_raises(unimported_probe, which, name):
    with pytest.raises(RuntimeError, match=f"^{name}: import_fastpe\\(\\) has not run$"):
        unimported_probe.unimported(which)
