/*
 * A third-party C extension that uses fastpe only through fastpe.h (built by
 * tests/test_capi.py at test time, against the installed package).
 *
 * PROBE_NAME sets the module name, so the same source also builds the
 * probes compiled against a tampered header (ABI-mismatch tests).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <string.h>
#ifndef _WIN32
#include <pthread.h>
#endif

#include "fastpe.h"

#ifndef PROBE_NAME
#define PROBE_NAME fastpe_capi_probe
#endif
#define PROBE_CAT2(a, b) a##b
#define PROBE_CAT(a, b)  PROBE_CAT2(a, b)
#define PROBE_STR2(a)    #a
#define PROBE_STR(a)     PROBE_STR2(a)

typedef struct {
    Py_buffer view;
    int have_view;
    int kind; /* 'f' or 'd' (PyArg "C" stores an int) */
    long long seq_len, d_model, row_stride, offset;
    double base;
    int layout, num_threads;
    int result;
} job_t;

static int call_fill(job_t *j) {
    void *out = j->have_view ? j->view.buf : NULL;
    if (j->kind == 'f') {
        return fastpe_fill_f32((float *)out, j->seq_len, j->d_model, j->row_stride, j->base,
                               j->offset, j->layout, j->num_threads);
    }
    return fastpe_fill_f64((double *)out, j->seq_len, j->d_model, j->row_stride, j->base, j->offset,
                           j->layout, j->num_threads);
}

/* Parse (out, kind, seq_len, d_model, row_stride, base, offset, layout, num_threads).
   out is None (a NULL pointer) or a writable buffer of the kind's item size. */
static int parse_job(PyObject *args, job_t *j) {
    PyObject *out;
    memset(j, 0, sizeof(*j));
    if (!PyArg_ParseTuple(args, "OCLLLdLii", &out, &j->kind, &j->seq_len, &j->d_model,
                          &j->row_stride, &j->base, &j->offset, &j->layout, &j->num_threads)) {
        return -1;
    }
    if (j->kind != 'f' && j->kind != 'd') {
        PyErr_SetString(PyExc_ValueError, "kind must be 'f' or 'd'");
        return -1;
    }
    if (out == Py_None) {
        return 0;
    }
    if (PyObject_GetBuffer(out, &j->view, PyBUF_WRITABLE | PyBUF_C_CONTIGUOUS) < 0) {
        return -1;
    }
    j->have_view = 1;
    /* A guard against mistakes in the tests themselves: for arguments the kernel
       accepts, the buffer must hold the whole table. */
    if (j->seq_len > 0 && j->d_model > 0 && j->row_stride >= j->d_model) {
        Py_ssize_t item = j->kind == 'f' ? (Py_ssize_t)sizeof(float) : (Py_ssize_t)sizeof(double);
        double need =
            ((double)(j->seq_len - 1) * (double)j->row_stride + (double)j->d_model) * item;
        if (need > (double)j->view.len) {
            PyBuffer_Release(&j->view);
            j->have_view = 0;
            PyErr_SetString(PyExc_ValueError, "probe: buffer too small for the table");
            return -1;
        }
    }
    return 0;
}

static PyObject *probe_fill(PyObject *self, PyObject *args) {
    job_t j;
    (void)self;
    if (parse_job(args, &j) < 0) {
        return NULL;
    }
    Py_BEGIN_ALLOW_THREADS j.result = call_fill(&j);
    Py_END_ALLOW_THREADS if (j.have_view) { PyBuffer_Release(&j.view); }
    return PyLong_FromLong(j.result);
}

#ifndef _WIN32
/* Threads that never touch Python start together behind a gate, so the fills overlap. */
typedef struct {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int open;
} gate_t;

typedef struct {
    job_t *job;
    gate_t *gate;
} thread_arg_t;

static void *thread_main(void *p) {
    thread_arg_t *a = (thread_arg_t *)p;
    pthread_mutex_lock(&a->gate->mu);
    while (!a->gate->open) {
        pthread_cond_wait(&a->gate->cv, &a->gate->mu);
    }
    pthread_mutex_unlock(&a->gate->mu);
    a->job->result = call_fill(a->job);
    return NULL;
}
#endif

/* fill_concurrently([job_args, ...]) -> [code, ...]: one pthread per job, all
   calling the C API at once without the GIL. */
static PyObject *probe_fill_concurrently(PyObject *self, PyObject *jobs_list) {
#ifdef _WIN32
    (void)self;
    (void)jobs_list;
    PyErr_SetString(PyExc_NotImplementedError, "the probe uses POSIX threads");
    return NULL;
#else
    Py_ssize_t n, i, parsed = 0, started = 0;
    job_t *jobs = NULL;
    pthread_t *tids = NULL;
    thread_arg_t *targs = NULL;
    gate_t gate;
    PyObject *result = NULL;
    int create_err = 0;
    (void)self;

    if (!PyList_Check(jobs_list)) {
        PyErr_SetString(PyExc_TypeError, "expected a list of job tuples");
        return NULL;
    }
    n = PyList_GET_SIZE(jobs_list);
    jobs = (job_t *)PyMem_Calloc((size_t)n + 1, sizeof(job_t));
    tids = (pthread_t *)PyMem_Calloc((size_t)n + 1, sizeof(pthread_t));
    targs = (thread_arg_t *)PyMem_Calloc((size_t)n + 1, sizeof(thread_arg_t));
    if (!jobs || !tids || !targs) {
        PyErr_NoMemory();
        goto done;
    }
    for (; parsed < n; parsed++) {
        if (parse_job(PyList_GET_ITEM(jobs_list, parsed), &jobs[parsed]) < 0) {
            goto done;
        }
    }
    pthread_mutex_init(&gate.mu, NULL);
    pthread_cond_init(&gate.cv, NULL);
    gate.open = 0;
    Py_BEGIN_ALLOW_THREADS for (i = 0; i < n; i++) {
        targs[i].job = &jobs[i];
        targs[i].gate = &gate;
        if (pthread_create(&tids[i], NULL, thread_main, &targs[i]) != 0) {
            create_err = 1;
            break;
        }
        started++;
    }
    pthread_mutex_lock(&gate.mu);
    gate.open = 1;
    pthread_cond_broadcast(&gate.cv);
    pthread_mutex_unlock(&gate.mu);
    for (i = 0; i < started; i++) {
        pthread_join(tids[i], NULL);
    }
    Py_END_ALLOW_THREADS pthread_cond_destroy(&gate.cv);
    pthread_mutex_destroy(&gate.mu);
    if (create_err) {
        PyErr_SetString(PyExc_RuntimeError, "pthread_create failed");
        goto done;
    }
    result = PyList_New(n);
    if (result) {
        for (i = 0; i < n; i++) {
            PyList_SET_ITEM(result, i, PyLong_FromLong(jobs[i].result));
        }
    }
done:
    for (i = 0; i < parsed; i++) {
        if (jobs[i].have_view) {
            PyBuffer_Release(&jobs[i].view);
        }
    }
    PyMem_Free(jobs);
    PyMem_Free(tids);
    PyMem_Free(targs);
    return result;
#endif
}

/* The header's constants as this extension sees them (compared with the kernel's). */
static PyObject *probe_constants(PyObject *self, PyObject *unused) {
    (void)self;
    (void)unused;
    return Py_BuildValue(
        "{s:i,s:i,s:i,s:i,s:i,s:i,s:i,s:i,s:i,s:i,s:i,s:i,s:i,s:i,s:i,s:s}",
        "FASTPE_LAYOUT_INTERLEAVED", FASTPE_LAYOUT_INTERLEAVED, "FASTPE_LAYOUT_SPLIT",
        FASTPE_LAYOUT_SPLIT, "FASTPE_OK", FASTPE_OK, "FASTPE_ENULL", FASTPE_ENULL, "FASTPE_ESIZE",
        FASTPE_ESIZE, "FASTPE_ESTRIDE", FASTPE_ESTRIDE, "FASTPE_EBASE", FASTPE_EBASE,
        "FASTPE_ELAYOUT", FASTPE_ELAYOUT, "FASTPE_ERANGE", FASTPE_ERANGE, "FASTPE_ENOMEM",
        FASTPE_ENOMEM, "FASTPE_ESCALE", FASTPE_ESCALE, "FASTPE_EOVERLAP", FASTPE_EOVERLAP,
        "FASTPE_ENOTIMPORTED", FASTPE_ENOTIMPORTED, "FASTPE_ABI_MAJOR", FASTPE_ABI_MAJOR,
        "FASTPE_ABI_MINOR", FASTPE_ABI_MINOR, "FASTPE_CAPSULE_NAME", FASTPE_CAPSULE_NAME);
}

/* (abi_major, abi_minor, size) of the table import_fastpe() accepted, and this
   header's sizeof(fastpe_api_t). */
static PyObject *probe_table(PyObject *self, PyObject *unused) {
    (void)self;
    (void)unused;
    return Py_BuildValue("(IInn)", (unsigned)fastpe_api->abi_major, (unsigned)fastpe_api->abi_minor,
                         (Py_ssize_t)fastpe_api->size, (Py_ssize_t)sizeof(fastpe_api_t));
}

static PyObject *probe_reimport(PyObject *self, PyObject *unused) {
    (void)self;
    (void)unused;
    if (import_fastpe() < 0) {
        return NULL;
    }
    Py_RETURN_NONE;
}

/* What a translation unit that never ran import_fastpe() gets. */
static PyObject *probe_call_unimported(PyObject *self, PyObject *unused) {
    const fastpe_api_t *saved = fastpe_api;
    float f[4];
    double d[4];
    int cf, cd;
    (void)self;
    (void)unused;
    fastpe_api = NULL;
    cf = fastpe_fill_f32(f, 1, 4, 4, 10000.0, 0, FASTPE_LAYOUT_INTERLEAVED, 1);
    cd = fastpe_fill_f64(d, 1, 4, 4, 10000.0, 0, FASTPE_LAYOUT_INTERLEAVED, 1);
    fastpe_api = saved;
    return Py_BuildValue("(ii)", cf, cd);
}

/* ABI 1.2 through the header's wrappers: a named convention's table, as bytes
   of float64 (name, d_model, seq_len, offset), made, filled and freed here. */
static PyObject *probe_spec_table(PyObject *self, PyObject *args) {
    const char *name;
    long long d_model, seq_len, offset;
    fastpe_spec *spec;
    PyObject *out;
    int err;
    (void)self;
    if (!PyArg_ParseTuple(args, "sLLL", &name, &d_model, &seq_len, &offset))
        return NULL;
    spec = fastpe_spec_from_name(name, d_model);
    if (spec == NULL)
        return NULL;
    if (fastpe_spec_d_model(spec) != d_model || seq_len < 0) {
        fastpe_spec_free(spec);
        PyErr_SetString(PyExc_ValueError, "bad d_model or seq_len");
        return NULL;
    }
    out = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)(seq_len * d_model * sizeof(double)));
    if (out == NULL) {
        fastpe_spec_free(spec);
        return NULL;
    }
    Py_BEGIN_ALLOW_THREADS err =
        fastpe_spec_fill_f64(spec, (double *)PyBytes_AS_STRING(out), seq_len, d_model, offset, 0);
    Py_END_ALLOW_THREADS fastpe_spec_free(spec);
    if (err != FASTPE_OK) {
        Py_DECREF(out);
        return PyErr_Format(PyExc_ValueError, "fastpe_spec_fill_f64 returned %d", err);
    }
    return out;
}

/* ABI 1.4 through the header's wrappers: (inv_freq, sections, section_layout,
   positions, x) -- float64 frequencies, int64 sections, int64 positions (n,
   n_axes), a writable C-contiguous float32 buffer x of n rows of 2*nf -- makes the
   multi-axis handle, writes the float64 cos/sin cache (half-split) of the n tokens
   and rotates x in place by them (one head, one sequence).  Returns (cache code,
   apply code, n_axes, cos bytes, sin bytes); a refused constructor raises. */
static PyObject *probe_rope_axes(PyObject *self, PyObject *args) {
    Py_buffer wv, sv, pv, xv;
    int section_layout, err, code_cache = -1, code_apply = -1, n_axes = -1;
    int64_t nf, n;
    int32_t *axis = NULL;
    fastpe_rope *rope = NULL;
    PyObject *cos = NULL, *sin = NULL, *result = NULL;
    (void)self;
    if (!PyArg_ParseTuple(args, "y*y*iy*w*", &wv, &sv, &section_layout, &pv, &xv))
        return NULL;
    nf = (int64_t)(wv.len / (Py_ssize_t)sizeof(double));
    n_axes = (int)(sv.len / (Py_ssize_t)sizeof(int64_t));
    n = n_axes > 0 ? (int64_t)(pv.len / (Py_ssize_t)sizeof(int64_t)) / n_axes : 0;
    if (nf < 1 || xv.len != (Py_ssize_t)(n * 2 * nf * (int64_t)sizeof(float))) {
        PyErr_SetString(PyExc_ValueError, "inv_freq empty or x not n rows of 2*nf float32");
        goto done;
    }
    axis = (int32_t *)PyMem_Malloc((size_t)nf * sizeof(int32_t));
    if (axis == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    err = fastpe_rope_section_axes((const int64_t *)sv.buf, n_axes, section_layout, axis, nf);
    if (err != FASTPE_OK) {
        PyErr_Format(PyExc_ValueError, "fastpe_rope_section_axes returned %d", err);
        goto done;
    }
    rope = fastpe_rope_from_axes((const double *)wv.buf, nf, axis, n_axes, 1.0);
    if (rope == NULL)
        goto done;
    cos = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)(n * 2 * nf * (int64_t)sizeof(double)));
    sin = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)(n * 2 * nf * (int64_t)sizeof(double)));
    if (cos == NULL || sin == NULL)
        goto done;
    n_axes = fastpe_rope_n_axes(rope);
    Py_BEGIN_ALLOW_THREADS code_cache = fastpe_rope_cache_axes_f64(
        rope, (double *)PyBytes_AS_STRING(cos), (double *)PyBytes_AS_STRING(sin), n, 2 * nf,
        (const int64_t *)pv.buf, FASTPE_LAYOUT_SPLIT, 1);
    code_apply =
        fastpe_rope_apply_axes_f32(rope, (float *)xv.buf, 1, n, 1, n * 2 * nf, 2 * nf, 2 * nf,
                                   (const int64_t *)pv.buf, FASTPE_LAYOUT_SPLIT, 0);
    Py_END_ALLOW_THREADS result =
        Py_BuildValue("(iiiOO)", code_cache, code_apply, n_axes, cos, sin);
done:
    fastpe_rope_free(rope);
    PyMem_Free(axis);
    Py_XDECREF(cos);
    Py_XDECREF(sin);
    PyBuffer_Release(&wv);
    PyBuffer_Release(&sv);
    PyBuffer_Release(&pv);
    PyBuffer_Release(&xv);
    return result;
}

/* The multi-axis codes and constants of the header (ABI 1.4), and what its wrappers
   return before import_fastpe(). */
static PyObject *probe_axes_constants(PyObject *self, PyObject *unused) {
    const fastpe_api_t *saved = fastpe_api;
    int64_t sections[1] = {1};
    int32_t axis[1];
    int unimported_section, unimported_n;
    (void)self;
    (void)unused;
    fastpe_api = NULL;
    unimported_section = fastpe_rope_section_axes(sections, 1, 0, axis, 1);
    unimported_n = fastpe_rope_n_axes(NULL);
    fastpe_api = saved;
    return Py_BuildValue(
        "{s:i,s:i,s:i,s:i,s:i}", "FASTPE_EINVAL", FASTPE_EINVAL, "FASTPE_SECTIONS_CONTIGUOUS",
        FASTPE_SECTIONS_CONTIGUOUS, "FASTPE_SECTIONS_INTERLEAVED", FASTPE_SECTIONS_INTERLEAVED,
        "unimported_section_axes", unimported_section, "unimported_n_axes", unimported_n);
}

static PyMethodDef probe_methods[] = {
    {"spec_table", probe_spec_table, METH_VARARGS, NULL},
    {"rope_axes", probe_rope_axes, METH_VARARGS, NULL},
    {"axes_constants", probe_axes_constants, METH_NOARGS, NULL},
    {"fill", probe_fill, METH_VARARGS, NULL},
    {"fill_concurrently", probe_fill_concurrently, METH_O, NULL},
    {"constants", probe_constants, METH_NOARGS, NULL},
    {"table", probe_table, METH_NOARGS, NULL},
    {"reimport", probe_reimport, METH_NOARGS, NULL},
    {"call_unimported", probe_call_unimported, METH_NOARGS, NULL},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef probe_module = {
    PyModuleDef_HEAD_INIT, PROBE_STR(PROBE_NAME), NULL, -1, probe_methods, NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PROBE_CAT(PyInit_, PROBE_NAME)(void) {
    if (import_fastpe() < 0) {
        return NULL;
    }
    PyObject *m = PyModule_Create(&probe_module);
#ifdef Py_GIL_DISABLED
    /* like fastpe itself: importing this probe must not re-enable the GIL */
    if (m != NULL && PyUnstable_Module_SetGIL(m, Py_MOD_GIL_NOT_USED) < 0) {
        Py_DECREF(m);
        return NULL;
    }
#endif
    return m;
}
