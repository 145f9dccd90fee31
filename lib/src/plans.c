/*
 * The library's only plan cache: what a fill or a rotation prepares once and
 * then reuses (a table's frequencies and rotation rows, a RoPE rule's handle),
 * kept under the bytes of what it was built from.  Callers run from any
 * thread, with or without Python's GIL, so every entry is reached under one
 * mutex and reference-counted: eviction never drops a value a caller holds.
 *
 * A key is compared byte for byte, so equal keys are equal inputs; callers
 * write their keys field by field (no struct padding, NaN and -0.0 by their
 * bits), and start them with a PE_PLAN_* tag so that kinds never meet.
 *
 * This file calls nothing of the library's (the values' drop functions are the
 * callers'): the fork handlers and the unload reach it from below.
 */
#include "pe_lib.h"

#include <stdlib.h>

/* The bound: PE_PLANS_MAX entries and PE_PLANS_MAX_BYTES of values, the least
 * recently used idle entries dropped first.  A model cycling over a few hundred
 * configurations (one Llama RoPE plan is 70 KiB) keeps all of them; the bytes
 * keep a few wide tables from holding more than a model's weights would
 * notice. */
#define PE_PLANS_MAX       1024
#define PE_PLANS_MAX_BYTES ((size_t)64 << 20)
#define PE_PLANS_BUCKETS   2048 /* a power of two, twice the entries */

typedef struct {
    unsigned char *key; /* NULL: a free slot */
    size_t len;
    uint64_t hash;
    void *value;
    size_t bytes;
    pe_plan_drop drop;
    int64_t refs;  /* callers holding it now */
    uint64_t used; /* LRU stamp */
    int next;      /* the bucket's next slot + 1, 0 at its end */
} plan_entry;

static plan_entry plans[PE_PLANS_MAX];
static int buckets[PE_PLANS_BUCKETS]; /* first slot + 1, 0 when empty */
static int n_entries = 0, max_entries = PE_PLANS_MAX;
static size_t held_bytes = 0;
static uint64_t plan_clock = 0, plan_builds = 0;
static pe_mutex plans_lock = PE_MUTEX_INIT;

/* FNV-1a over 8-byte words (keys are mostly doubles), then the tail. */
static uint64_t key_hash(const unsigned char *k, size_t len) {
    uint64_t h = 1469598103934665603ull;
    size_t i = 0;
    for (; i + 8 <= len; i += 8) {
        uint64_t w;
        memcpy(&w, k + i, 8);
        h = (h ^ w) * 1099511628211ull;
        h ^= h >> 29;
    }
    for (; i < len; i++)
        h = (h ^ k[i]) * 1099511628211ull;
    return h ^ (h >> 32);
}

/* The slot of key, or -1 (under the lock). */
static int find_slot(const unsigned char *k, size_t len, uint64_t h) {
    for (int s = buckets[h & (PE_PLANS_BUCKETS - 1)]; s != 0; s = plans[s - 1].next) {
        const plan_entry *e = &plans[s - 1];
        if (e->hash == h && e->len == len && memcmp(e->key, k, len) == 0)
            return s - 1;
    }
    return -1;
}

/* Unlink and drop slot s (idle; under the lock). */
static void drop_slot(int s) {
    plan_entry *e = &plans[s];
    int *link = &buckets[e->hash & (PE_PLANS_BUCKETS - 1)];
    while (*link != s + 1)
        link = &plans[*link - 1].next;
    *link = e->next;
    if (e->drop != NULL)
        e->drop(e->value);
    free(e->key);
    held_bytes -= e->bytes;
    n_entries -= 1;
    memset(e, 0, sizeof(*e));
}

/* The least recently used idle entry, or -1 (under the lock). */
static int idle_lru(void) {
    int victim = -1;
    for (int s = 0; s < PE_PLANS_MAX; s++) {
        const plan_entry *e = &plans[s];
        if (e->key != NULL && e->refs == 0 && (victim < 0 || e->used < plans[victim].used))
            victim = s;
    }
    return victim;
}

void *pe_plans_find(const void *key, size_t len, int *slot) {
    uint64_t h = key_hash((const unsigned char *)key, len);
    void *v = NULL;
    pe_mutex_lock(&plans_lock);
    *slot = find_slot((const unsigned char *)key, len, h);
    if (*slot >= 0) {
        plans[*slot].refs += 1;
        plans[*slot].used = ++plan_clock;
        v = plans[*slot].value;
    }
    pe_mutex_unlock(&plans_lock);
    return v;
}

void *pe_plans_add(const void *key, size_t len, void *value, size_t bytes, pe_plan_drop drop,
                   int *slot) {
    uint64_t h = key_hash((const unsigned char *)key, len);
    unsigned char *k;
    int s;
    pe_mutex_lock(&plans_lock);
    plan_builds += 1;
    s = find_slot((const unsigned char *)key, len, h);
    if (s >= 0) { /* another thread built it first: theirs is kept */
        plans[s].refs += 1;
        plans[s].used = ++plan_clock;
        pe_mutex_unlock(&plans_lock);
        if (drop != NULL)
            drop(value);
        *slot = s;
        return plans[s].value;
    }
    while (bytes <= PE_PLANS_MAX_BYTES && n_entries > 0 &&
           (n_entries >= max_entries || held_bytes + bytes > PE_PLANS_MAX_BYTES)) {
        int victim = idle_lru();
        if (victim < 0)
            break;
        drop_slot(victim);
    }
    k = (unsigned char *)malloc(len > 0 ? len : 1);
    s = -1;
    if (k != NULL && n_entries < max_entries && bytes <= PE_PLANS_MAX_BYTES - held_bytes) {
        for (s = 0; plans[s].key != NULL; s++) {
        }
    }
    if (s < 0) { /* no room (every entry in use, or too large): the caller's own */
        pe_mutex_unlock(&plans_lock);
        free(k);
        *slot = -1;
        return value;
    }
    memcpy(k, key, len);
    plans[s].key = k;
    plans[s].len = len;
    plans[s].hash = h;
    plans[s].value = value;
    plans[s].bytes = bytes;
    plans[s].drop = drop;
    plans[s].refs = 1;
    plans[s].used = ++plan_clock;
    plans[s].next = buckets[h & (PE_PLANS_BUCKETS - 1)];
    buckets[h & (PE_PLANS_BUCKETS - 1)] = s + 1;
    n_entries += 1;
    held_bytes += bytes;
    pe_mutex_unlock(&plans_lock);
    *slot = s;
    return value;
}

void pe_plans_release(int slot) {
    if (slot >= 0) {
        pe_mutex_lock(&plans_lock);
        plans[slot].refs -= 1;
        pe_mutex_unlock(&plans_lock);
    }
}

void pe_plans_charge(int slot, size_t bytes) {
    if (slot >= 0) {
        pe_mutex_lock(&plans_lock);
        plans[slot].bytes += bytes;
        held_bytes += bytes;
        pe_mutex_unlock(&plans_lock);
    }
}

void pe_plans_visit(void (*fn)(void *ctx, const void *key, size_t len, int64_t refs), void *ctx) {
    pe_mutex_lock(&plans_lock);
    for (int s = 0; s < PE_PLANS_MAX; s++) {
        if (plans[s].key != NULL)
            fn(ctx, plans[s].key, plans[s].len, plans[s].refs);
    }
    pe_mutex_unlock(&plans_lock);
}

void pe_plans_stats(int64_t *out) {
    pe_mutex_lock(&plans_lock);
    out[0] = n_entries;
    out[1] = (int64_t)held_bytes;
    out[2] = (int64_t)plan_builds;
    out[3] = max_entries;
    out[4] = (int64_t)PE_PLANS_MAX_BYTES;
    pe_mutex_unlock(&plans_lock);
}

void pe_plans_kinds(int64_t *out) {
    memset(out, 0, 2 * PE_PLAN_KINDS * sizeof(int64_t));
    pe_mutex_lock(&plans_lock);
    for (int s = 0; s < PE_PLANS_MAX; s++) {
        int64_t tag = 0;
        if (plans[s].key == NULL)
            continue;
        if (plans[s].len >= 8)
            memcpy(&tag, plans[s].key, 8);
        if (tag < 0 || tag >= PE_PLAN_KINDS)
            tag = 0;
        out[2 * tag] += 1;
        out[2 * tag + 1] += plans[s].refs;
    }
    pe_mutex_unlock(&plans_lock);
}

int pe_plans_set_max(int n) {
    int old;
    pe_mutex_lock(&plans_lock);
    old = max_entries;
    max_entries = n < 1 ? 1 : n > PE_PLANS_MAX ? PE_PLANS_MAX : n;
    pe_mutex_unlock(&plans_lock);
    return old;
}

void pe_plans_lock(int take) {
    if (take)
        pe_mutex_lock(&plans_lock);
    else
        pe_mutex_unlock(&plans_lock);
}

void pe_plans_clear(void) {
    pe_mutex_lock(&plans_lock);
    for (int s = 0; s < PE_PLANS_MAX; s++) {
        if (plans[s].key != NULL && plans[s].refs == 0) /* (a running call keeps its plan) */
            drop_slot(s);
    }
    pe_mutex_unlock(&plans_lock);
}
