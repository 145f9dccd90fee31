/*
 * The library's life in a process: the memory behind handles, the state a
 * fork() must find consistent, and what is freed when the library goes away.
 *
 * Handle shells.  The structs behind fastpe_spec and fastpe_rope pointers are
 * not returned to malloc while the library is loaded: a freed one (its magic
 * cleared) waits in a pool for the next handle of its kind.  A call through a
 * stale pointer therefore reads the library's own memory and sees no magic
 * (FASTPE_EHANDLE), never freed memory; only once a later handle has been given
 * the same shell does the stale pointer designate that handle, as with free().
 * The pool never holds more shells than were live at once.
 *
 * fork().  A child has only the forking thread, but inherits every mutex in the
 * state it had, possibly held by a thread that no longer exists there.  The
 * prepare handler takes the library's locks, so the fork happens while no
 * other thread is inside a critical section; both sides then release them.
 *
 * Layers: system.c installs these handlers, and they call only down (the
 * shells here, the plan cache's lock in plans.c), never back into the entry
 * points above.
 *
 * The shells' lock also guards what a handle keeps once made (pe_shell_kept,
 * pe_shell_keep): its RoPE table rows' low parts, made by its first correctly
 * rounded cache (pe_rope_lows, rope.c).
 */
#include "pe_lib.h"

#include <stdlib.h>

typedef struct {
    void **slots;
    size_t n, cap;
} shell_pool;

static shell_pool pools[PE_SHELL_KINDS];
static pe_mutex shell_lock = PE_MUTEX_INIT;

void *pe_shell_alloc(int kind, size_t size) {
    void *p = NULL;
    pe_mutex_lock(&shell_lock);
    if (pools[kind].n > 0)
        p = pools[kind].slots[--pools[kind].n];
    pe_mutex_unlock(&shell_lock);
    if (p == NULL)
        return calloc(1, size);
    memset(p, 0, size);
    return p;
}

void pe_shell_free(int kind, void *p) {
    shell_pool *q = &pools[kind];
    if (p == NULL)
        return;
    pe_mutex_lock(&shell_lock);
    if (q->n == q->cap) {
        size_t cap = q->cap ? 2 * q->cap : 16;
        void **s = (void **)realloc(q->slots, cap * sizeof(void *));
        if (s == NULL) { /* no room to keep it: returned to malloc after all */
            pe_mutex_unlock(&shell_lock);
            free(p);
            return;
        }
        q->slots = s;
        q->cap = cap;
    }
    q->slots[q->n++] = p;
    pe_mutex_unlock(&shell_lock);
}

/* What a handle keeps once made, read and published under the shells' lock. */
double *pe_shell_kept(double *const *slot) {
    double *v;
    pe_mutex_lock(&shell_lock);
    v = *slot;
    pe_mutex_unlock(&shell_lock);
    return v;
}

double *pe_shell_keep(double **slot, double *v) {
    pe_mutex_lock(&shell_lock);
    if (*slot == NULL) {
        *slot = v;
    } else {
        free(v);
        v = *slot;
    }
    pe_mutex_unlock(&shell_lock);
    return v;
}

static void shells_release(void) {
    pe_mutex_lock(&shell_lock);
    for (int k = 0; k < PE_SHELL_KINDS; k++) {
        for (size_t i = 0; i < pools[k].n; i++)
            free(pools[k].slots[i]);
        free(pools[k].slots);
        pools[k].slots = NULL;
        pools[k].n = pools[k].cap = 0;
    }
    pe_mutex_unlock(&shell_lock);
}

#if !defined(_WIN32)
void pe_fork_prepare(void) {
    pe_plans_lock(1);
    pe_mutex_lock(&shell_lock);
}

void pe_fork_parent(void) {
    pe_mutex_unlock(&shell_lock);
    pe_plans_lock(0);
}

void pe_fork_child(void) {
    /* the child's only thread is the one that took them in prepare */
    pe_mutex_unlock(&shell_lock);
    pe_plans_lock(0);
}
#endif

/* At unload (dlclose of a shared build that is not kept loaded, or exit): the
 * plans nobody is using and the pooled shells.  Live handles are the caller's. */
#if defined(__GNUC__) || defined(__clang__)
__attribute__((destructor)) static void pe_unload(void) {
    pe_plans_clear();
    shells_release();
}
#endif
