/*
 * Times fastpe's C API from C (no Python in the loop): built by
 * bench/capi_calls.py against the installed fastpe.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdlib.h>
#ifdef _WIN32
#include <windows.h>
#else
#include <time.h>
#endif

#include "fastpe.h"

static double now(void) {
#ifdef _WIN32
    LARGE_INTEGER f, c;
    QueryPerformanceFrequency(&f);
    QueryPerformanceCounter(&c);
    return (double)c.QuadPart / (double)f.QuadPart;
#else
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
#endif
}

/* seconds per call of `iters` float32 fills of seq_len x d_model from `offset`,
   through fastpe_fill_f32 (spec=None) or fastpe_spec_fill_f32 (spec = a name) */
static PyObject *time_fill(PyObject *self, PyObject *args) {
    long long seq_len, d_model, offset, iters, i;
    int num_threads, err = 0;
    const char *name = NULL;
    fastpe_spec *spec = NULL;
    float *out;
    double t0, t1;
    (void)self;
    if (!PyArg_ParseTuple(args, "LLLLiz", &seq_len, &d_model, &offset, &iters, &num_threads, &name))
        return NULL;
    if (seq_len < 1 || d_model < 1 || iters < 1) {
        PyErr_SetString(PyExc_ValueError, "seq_len, d_model and iters must be >= 1");
        return NULL;
    }
    if (name != NULL && (spec = fastpe_spec_from_name(name, d_model)) == NULL)
        return NULL;
    out = (float *)malloc((size_t)(seq_len * d_model) * sizeof(float));
    if (out == NULL) {
        fastpe_spec_free(spec);
        return PyErr_NoMemory();
    }
    Py_BEGIN_ALLOW_THREADS for (i = 0; i < 2 && err == 0; i++) /* warm: the plan cache, the pages */
        err = spec ? fastpe_spec_fill_f32(spec, out, seq_len, d_model, offset, num_threads)
                   : fastpe_fill_f32(out, seq_len, d_model, d_model, 10000.0, offset,
                                     FASTPE_LAYOUT_INTERLEAVED, num_threads);
    t0 = now();
    for (i = 0; i < iters && err == 0; i++)
        err = spec ? fastpe_spec_fill_f32(spec, out, seq_len, d_model, offset, num_threads)
                   : fastpe_fill_f32(out, seq_len, d_model, d_model, 10000.0, offset,
                                     FASTPE_LAYOUT_INTERLEAVED, num_threads);
    t1 = now();
    Py_END_ALLOW_THREADS free(out);
    fastpe_spec_free(spec);
    if (err != FASTPE_OK)
        return PyErr_Format(PyExc_RuntimeError, "fastpe returned %d", err);
    return PyFloat_FromDouble((t1 - t0) / (double)iters);
}

/* seconds per call of `iters` float32 RoPE caches (cos and sin, n positions from 0,
   head_dim 128, the default rule, half-split) through fastpe_rope_cache_f32 */
static PyObject *time_rope_cache(PyObject *self, PyObject *args) {
    long long n, iters, i;
    int num_threads, err = 0;
    fastpe_rope *rope;
    float *cos, *sin;
    double t0, t1;
    (void)self;
    if (!PyArg_ParseTuple(args, "LLi", &n, &iters, &num_threads))
        return NULL;
    if (n < 1 || iters < 1) {
        PyErr_SetString(PyExc_ValueError, "n and iters must be >= 1");
        return NULL;
    }
    if ((rope = fastpe_rope_new(Py_None, 128, 0, -1, NULL)) == NULL)
        return NULL;
    cos = (float *)malloc((size_t)(n * 128) * sizeof(float));
    sin = (float *)malloc((size_t)(n * 128) * sizeof(float));
    if (cos == NULL || sin == NULL) {
        free(cos);
        free(sin);
        fastpe_rope_free(rope);
        return PyErr_NoMemory();
    }
    Py_BEGIN_ALLOW_THREADS for (i = 0; i < 2 && err == 0; i++) /* warm: the pages */
        err = fastpe_rope_cache_f32(rope, cos, sin, n, 128, NULL, 0, FASTPE_LAYOUT_SPLIT,
                                    num_threads);
    t0 = now();
    for (i = 0; i < iters && err == 0; i++)
        err = fastpe_rope_cache_f32(rope, cos, sin, n, 128, NULL, 0, FASTPE_LAYOUT_SPLIT,
                                    num_threads);
    t1 = now();
    Py_END_ALLOW_THREADS free(cos);
    free(sin);
    fastpe_rope_free(rope);
    if (err != FASTPE_OK)
        return PyErr_Format(PyExc_RuntimeError, "fastpe returned %d", err);
    return PyFloat_FromDouble((t1 - t0) / (double)iters);
}

static PyMethodDef methods[] = {
    {"time_fill", time_fill, METH_VARARGS, NULL},
    {"time_rope_cache", time_rope_cache, METH_VARARGS, NULL},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "fastpe_capi_timer", NULL, -1, methods, NULL, NULL, NULL, NULL};

PyMODINIT_FUNC PyInit_fastpe_capi_timer(void) {
    PyObject *m;
    if (import_fastpe() < 0)
        return NULL;
    m = PyModule_Create(&module);
#ifdef Py_GIL_DISABLED
    if (m != NULL && PyUnstable_Module_SetGIL(m, Py_MOD_GIL_NOT_USED) < 0) {
        Py_DECREF(m);
        return NULL;
    }
#endif
    return m;
}
