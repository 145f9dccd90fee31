/*
 * What the process may run on, and the one-time set-up: the cores a team may
 * use (affinity mask, cgroup CPU quota), the fork guard, the cache-size probe
 * behind the streaming-store thresholds, and the AVX-512 dispatch.
 */
#if defined(__linux__) && !defined(_GNU_SOURCE)
#define _GNU_SOURCE
#endif
#include "pe_lib.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#if defined(__linux__)
#include <sched.h>
#include <sys/stat.h>
#endif

/* The CPU quota of this process's cgroup, in whole cores (0: none); written
 * once, at initialisation (and by the Python binding, which reads it the same
 * way and lets its tests substitute the files). */
static PE_RELAXED(int) cpu_quota = 0;

void pe_set_cpu_quota(int n) { pe_relaxed_store(&cpu_quota, n > 0 ? n : 0); }

/* Cores this process may run on.  Teams never exceed it: threads beyond the
 * cores only slow a fill down, and every thread libgomp cannot create (a task
 * limit such as `ulimit -u` or a container's pids.max) aborts the whole process
 * from inside the runtime.  Linux: the affinity mask, read per call since it
 * can change, and the cgroup quota; elsewhere the runtime's processor count. */
int pe_usable_cpus(void) {
    int n = 0;
#if defined(__linux__) && defined(CPU_COUNT)
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof(set), &set) == 0)
        n = CPU_COUNT(&set);
#endif
    if (n < 1)
        n = pe_omp_num_procs();
    int quota = pe_relaxed_load(&cpu_quota);
    if (quota > 0 && quota < n)
        n = quota;
    return n < 1 ? 1 : n;
}

int pe_max_threads(void) {
    int n = pe_omp_max_threads();
    int lim = pe_omp_thread_limit();
    int cpus = pe_usable_cpus();
    if (pe_forked_child())
        return 1;
    n = n < lim ? n : lim;
    n = n < cpus ? n : cpus;
    return n >= 1 ? n : 1;
}

int pe_openmp_version(void) { return FASTPE_OPENMP_VERSION; }

/* Default teams on a busy machine.  A team thread that the scheduler has not
 * run yet holds every other thread at the region's barriers for up to a
 * scheduler slice (milliseconds), so a two-thread fill beside one busy process
 * costs many times a one-thread fill.  A default-sized team (num_threads not
 * given) therefore takes only the cores that other processes left idle
 * recently: CPU time of this process's cores from /proc/stat, less this
 * process's own CPU time (its team threads, spinning ones included), over at
 * least IDLE_WINDOW_NS, re-read at most that often.  The estimate only sizes
 * the team; every entry is computed the same way by any team. */
static volatile int idle_teams_on = 1;

int pe_idle_estimate(int n, double others, double own, int last) {
    double idle = n - (others > 0 ? others : 0);
    /* a core counts when at least 3/4 of it was idle */
    int cap = idle < 1 ? 1 : (int)(idle + 0.25);
    /* A window with every core in use shows what the others got, not what they
       wanted: a team larger than the idle cores (an explicit num_threads)
       squeezes low-priority processes, which then look idle.  Such a window may
       lower the estimate only. */
    if (others + own >= n - 0.5 && cap > last)
        cap = last;
    return cap;
}

int pe_set_idle_teams(int on) {
    int old = idle_teams_on;
    idle_teams_on = on != 0;
    return old;
}

#if defined(__linux__) && defined(CPU_COUNT)
#include <time.h>

#define IDLE_WINDOW_NS 100000000LL /* 100 ms: /proc/stat counts 10 ms ticks */

static pthread_mutex_t idle_lock = PTHREAD_MUTEX_INITIALIZER;
static long long idle_at_ns = -1;  /* when the last sample was taken (monotonic) */
static long long idle_busy = 0;    /* its busy ticks of this process's cores */
static long long idle_total = 0;   /* its total ticks of those cores */
static long long idle_self_ns = 0; /* its CPU time of this process */
static int idle_cap = 1 << 30;     /* cores idle over the last window (none yet: all) */

static long long now_ns(clockid_t clock) {
    struct timespec ts;
    if (clock_gettime(clock, &ts) != 0)
        return -1;
    return (long long)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

/* Busy and total ticks of the cores in set, summed from /proc/stat's per-core
 * lines ("cpuN user nice system idle iowait irq softirq steal ..."); 0 if the
 * file cannot be read.  Steal counts as busy: the hypervisor ran something
 * else there. */
static int read_ticks(const cpu_set_t *set, long long *busy, long long *total) {
    FILE *f = fopen("/proc/stat", "r");
    char line[512];
    int seen = 0;
    *busy = *total = 0;
    if (f == NULL)
        return 0;
    while (fgets(line, sizeof(line), f) != NULL) {
        unsigned long long v[8] = {0};
        int cpu;
        if (strncmp(line, "cpu", 3) != 0)
            break; /* the per-core lines come first */
        if (line[3] < '0' || line[3] > '9')
            continue; /* the all-cores line */
        if (sscanf(line + 3, "%d %llu %llu %llu %llu %llu %llu %llu %llu", &cpu, &v[0], &v[1],
                   &v[2], &v[3], &v[4], &v[5], &v[6], &v[7]) < 5)
            continue;
        if (cpu < 0 || cpu >= CPU_SETSIZE || !CPU_ISSET(cpu, set))
            continue;
        long long idle = (long long)(v[3] + v[4]);
        long long all = (long long)(v[0] + v[1] + v[2] + v[3] + v[4] + v[5] + v[6] + v[7]);
        *busy += all - idle;
        *total += all;
        seen = 1;
    }
    fclose(f);
    return seen;
}

int pe_idle_team(int nt) {
    cpu_set_t set;
    long long busy, total;
    int saved_errno = errno; /* the caller's errno survives the /proc reads */
    if (!idle_teams_on || nt <= 1)
        return nt;
    long long t = now_ns(CLOCK_MONOTONIC);
    if (t >= 0 && pthread_mutex_trylock(&idle_lock) == 0) {
        /* another caller taking a sample: this one uses the last estimate */
        if (idle_at_ns < 0 || t - idle_at_ns >= IDLE_WINDOW_NS) {
            long long self = now_ns(CLOCK_PROCESS_CPUTIME_ID);
            if (sched_getaffinity(0, sizeof(set), &set) == 0 && self >= 0 &&
                read_ticks(&set, &busy, &total)) {
                int n = CPU_COUNT(&set);
                long long db = busy - idle_busy, dt = total - idle_total;
                if (idle_at_ns >= 0 && dt > 0 && n > 0) {
                    /* ticks per core over the window, and this process's share in ticks */
                    double per_core = (double)dt / n;
                    double own = (double)(self - idle_self_ns) / (double)(t - idle_at_ns);
                    double others = (double)db / per_core - own;
                    int last = __atomic_load_n(&idle_cap, __ATOMIC_RELAXED);
                    __atomic_store_n(&idle_cap, pe_idle_estimate(n, others, own, last),
                                     __ATOMIC_RELAXED);
                }
                idle_at_ns = t;
                idle_busy = busy;
                idle_total = total;
                idle_self_ns = self;
            }
        }
        pthread_mutex_unlock(&idle_lock);
    }
    errno = saved_errno;
    int k = __atomic_load_n(&idle_cap, __ATOMIC_RELAXED);
    return k < nt ? k : nt;
}

static void idle_sample(void) { (void)pe_idle_team(2); }
#else
int pe_idle_team(int nt) { return nt; }
static void idle_sample(void) {}
#endif

/* Fork guard.  GNU libgomp's thread pool does not survive fork(): the child has
 * only the forking thread, but the pool's bookkeeping still lists the parent's
 * workers, so a 2+-thread team in the child waits for them forever.  A
 * pthread_atfork child handler marks the child; fills there use a 1-thread team,
 * which libgomp serves from the calling thread.  The mark is inherited.  The
 * handlers also hold every lock of the library across the fork (lifecycle.c),
 * so that no lock reaches the child held by a thread the child does not have. */
#if defined(_WIN32)
int pe_forked_child(void) { return 0; }
static int install_fork_guard(void) { return 0; }
#else
static volatile int forked_child_flag = 0;
#if defined(__linux__) && defined(CPU_COUNT) /* (the idle sampler's lock, above) */
#define IDLE_LOCK()   pthread_mutex_lock(&idle_lock)
#define IDLE_UNLOCK() pthread_mutex_unlock(&idle_lock)
#else
#define IDLE_LOCK()   ((void)0)
#define IDLE_UNLOCK() ((void)0)
#endif
static void on_fork_prepare(void) {
    IDLE_LOCK();
    pe_fork_prepare();
}
static void on_fork_parent(void) {
    pe_fork_parent();
    IDLE_UNLOCK();
}
static void on_fork_child(void) {
    forked_child_flag = 1;
    pe_fork_child();
    IDLE_UNLOCK();
}
int pe_forked_child(void) { return forked_child_flag; }
static int install_fork_guard(void) {
    return pthread_atfork(on_fork_prepare, on_fork_parent, on_fork_child);
}
#endif

#if defined(__linux__)
/* The first line of a small file, or 0 if it cannot be read. */
static int read_line(const char *path, char *buf, size_t n) {
    FILE *f = fopen(path, "r");
    if (f == NULL)
        return 0;
    int ok = fgets(buf, (int)n, f) != NULL;
    fclose(f);
    return ok;
}

/* ceil(quota / period) of one cgroup directory, 0 if it sets none. */
static int64_t quota_of(const char *dir) {
    char path[4400], text[128];
    long long q = 0, p = 0;
    snprintf(path, sizeof(path), "%s/cpu.max", dir); /* v2: "max 100000" or "Q P" */
    if (read_line(path, text, sizeof(text))) {
        if (strncmp(text, "max", 3) == 0)
            return 0;
        p = 100000;
        if (sscanf(text, "%lld %lld", &q, &p) < 1)
            return 0;
    } else { /* v1 */
        snprintf(path, sizeof(path), "%s/cpu.cfs_quota_us", dir);
        if (!read_line(path, text, sizeof(text)) || sscanf(text, "%lld", &q) != 1)
            return 0;
        snprintf(path, sizeof(path), "%s/cpu.cfs_period_us", dir);
        if (!read_line(path, text, sizeof(text)) || sscanf(text, "%lld", &p) != 1)
            return 0;
    }
    if (q <= 0 || p <= 0)
        return 0;
    long long n = q / p + (q % p != 0);
    return n > 1 << 30 ? 1 << 30 : n;
}

/* The memory limit of one cgroup directory in bytes (v2 memory.max, else v1
 * memory.limit_in_bytes), 0 if it sets none: "max", or v1's ~2^63 for none. */
static int64_t memory_of(const char *dir) {
    char path[4400], text[128], *end;
    snprintf(path, sizeof(path), "%s/memory.max", dir);
    if (!read_line(path, text, sizeof(text))) {
        snprintf(path, sizeof(path), "%s/memory.limit_in_bytes", dir);
        if (!read_line(path, text, sizeof(text)))
            return 0;
    }
    errno = 0;
    long long n = strtoll(text, &end, 10);
    if (errno != 0 || end == text || (*end != 0 && *end != '\n'))
        return 0;
    return n > 0 && n < (1LL << 62) ? n : 0;
}

/* The tightest (smallest nonzero) value `of` gives over the cgroups this process
 * is in for `controller`, its own and every ancestor's (a parent's limit applies
 * too); 0 for none.  proc_cgroup is /proc/self/cgroup's format, root the cgroup
 * mount: v2's unified hierarchy, or v1's mount of the controller's set (its
 * names, else the controller's own name). */
static int64_t cgroup_tightest(const char *proc_cgroup, const char *root, const char *controller,
                               int64_t (*of)(const char *dir)) {
    int64_t best = 0;
    FILE *f = fopen(proc_cgroup, "r");
    char line[4096], dir[4400];
    if (f == NULL)
        return 0;
    while (fgets(line, sizeof(line), f) != NULL) {
        /* "id:controllers:path" */
        char *c1 = strchr(line, ':');
        char *c2 = c1 != NULL ? strchr(c1 + 1, ':') : NULL;
        if (c2 == NULL)
            continue;
        *c2 = 0;
        char *names = c1 + 1, *path = c2 + 1, *part[256];
        path[strcspn(path, "\n")] = 0;
        int base, np = 0;
        if (names[0] == 0) {
            base = snprintf(dir, sizeof(dir), "%s", root); /* v2 (unified) */
        } else {
            int has = 0; /* v1: a hierarchy whose controllers include this one */
            for (const char *t = names; *t != 0;) {
                size_t k = strcspn(t, ",");
                has = has || (k == strlen(controller) && strncmp(t, controller, k) == 0);
                t += k + (t[k] == ',');
            }
            if (!has)
                continue;
            struct stat st;
            base = snprintf(dir, sizeof(dir), "%s/%s", root, names);
            if (stat(dir, &st) != 0 || !S_ISDIR(st.st_mode))
                base = snprintf(dir, sizeof(dir), "%s/%s", root, controller);
        }
        if (base < 0 || (size_t)base >= sizeof(dir))
            continue;
        /* the path's parts, without empty ones and "..", then the deepest first */
        char *save = NULL;
        for (char *t = strtok_r(path, "/", &save); t != NULL && np < 256;
             t = strtok_r(NULL, "/", &save))
            if (strcmp(t, "..") != 0)
                part[np++] = t;
        for (int i = np; i >= 0; i--) {
            size_t len = (size_t)base;
            for (int j = 0; j < i && len < sizeof(dir); j++)
                len += (size_t)snprintf(dir + len, sizeof(dir) - len, "/%s", part[j]);
            if (len >= sizeof(dir))
                continue;
            int64_t n = of(dir);
            if (n > 0)
                best = best == 0 || n < best ? n : best;
            dir[base] = 0;
        }
    }
    fclose(f);
    return best;
}
#endif

int pe_cgroup_cpu_quota_in(const char *proc_cgroup, const char *root) {
#if defined(__linux__)
    return (int)cgroup_tightest(proc_cgroup, root, "cpu", quota_of);
#else
    (void)proc_cgroup;
    (void)root;
    return 0;
#endif
}

int64_t pe_cgroup_memory_limit_in(const char *proc_cgroup, const char *root) {
#if defined(__linux__)
    return cgroup_tightest(proc_cgroup, root, "memory", memory_of);
#else
    (void)proc_cgroup;
    (void)root;
    return 0;
#endif
}

/* The streaming-store thresholds: 1/32 of the last-level cache for float64,
 * 1/8 for float32, at least 8 MiB each (32 and 64 MiB when the cache size is
 * unknown).  Per byte a float32 row carries twice the arithmetic, which the
 * streaming path overlaps less well with its memory traffic, so plain stores
 * win for longer.  docs/performance.md has the figures. */
void pe_default_stream_bytes(double *f64, double *f32) {
    long long llc = 0;
#if defined(__linux__)
    for (int i = 0; i < 16; i++) {
        char path[128], text[64];
        snprintf(path, sizeof(path), "/sys/devices/system/cpu/cpu0/cache/index%d/size", i);
        FILE *f = fopen(path, "r");
        if (f == NULL)
            continue;
        int ok = fgets(text, sizeof(text), f) != NULL;
        fclose(f);
        if (!ok)
            continue;
        char *end;
        long long v = strtoll(text, &end, 10);
        long long mult = *end == 'K' || *end == 'k'   ? 1LL << 10
                         : *end == 'M' || *end == 'm' ? 1LL << 20
                         : *end == 'G' || *end == 'g' ? 1LL << 30
                                                      : 1;
        if (v * mult > llc)
            llc = v * mult;
    }
#endif
    if (llc <= 0) {
        *f64 = (double)(32 << 20);
        *f32 = (double)(64 << 20);
        return;
    }
    *f64 = (double)((llc / 32) > (8LL << 20) ? llc / 32 : 8LL << 20);
    *f32 = (double)((llc / 8) > (8LL << 20) ? llc / 8 : 8LL << 20);
}

/* Fills of at least this many bytes into memory the caller already has use
 * streaming stores: set from the cache size at initialisation, and by the
 * test setter (relaxed atomics: a fill running meanwhile sees either value). */
static PE_RELAXED(double) stream_bytes_f64 = (double)(32 << 20);
static PE_RELAXED(double) stream_bytes_f32 = (double)(64 << 20);

void pe_set_stream_bytes(double f64, double f32, double *old_f64, double *old_f32) {
    if (old_f64 != NULL)
        *old_f64 = pe_relaxed_load(&stream_bytes_f64);
    if (old_f32 != NULL)
        *old_f32 = pe_relaxed_load(&stream_bytes_f32);
    pe_relaxed_store(&stream_bytes_f64, f64);
    pe_relaxed_store(&stream_bytes_f32, f32);
}

double pe_stream_bytes(int itemsize) {
    return pe_relaxed_load(itemsize == 8 ? &stream_bytes_f64 : &stream_bytes_f32);
}

static int init_error = 0;

static void init_once(void) {
    double f64, f32;
    /* the start-up probes (cache sizes, cgroup files) fail with ENOENT on many
       systems; errors are returned as codes, so the caller's errno is kept */
    int saved_errno = errno;
    const char *avx512 = getenv("FASTPE_AVX512");
    /* LLVM's libomp initialises itself at its first query: here, where errno is
       restored, rather than in some later call */
    (void)pe_omp_max_threads();
    (void)pe_omp_thread_limit();
    (void)pe_omp_num_procs();
    pe_v512_init();
    /* FASTPE_AVX512=0: the portable writers only (the same bits; for tests) */
    if (avx512 != NULL && strcmp(avx512, "0") == 0)
        pe_v512_set(0);
    pe_default_stream_bytes(&f64, &f32);
    pe_set_stream_bytes(f64, f32, NULL, NULL);
    pe_set_cpu_quota(pe_cgroup_cpu_quota_in("/proc/self/cgroup", "/sys/fs/cgroup"));
    idle_sample(); /* the first window starts here */
    init_error = install_fork_guard();
    errno = saved_errno;
}

#if defined(_WIN32)
static INIT_ONCE init_flag = INIT_ONCE_STATIC_INIT;
static BOOL CALLBACK init_cb(PINIT_ONCE once, PVOID param, PVOID *ctx) {
    (void)once;
    (void)param;
    (void)ctx;
    init_once();
    return TRUE;
}
void pe_init(void) { InitOnceExecuteOnce(&init_flag, init_cb, NULL, NULL); }
#else
static pthread_once_t init_flag = PTHREAD_ONCE_INIT;
void pe_init(void) { pthread_once(&init_flag, init_once); }
#endif

/* Nonzero if the fork guard could not be installed (the binding refuses to import). */
int pe_init_error(void) {
    pe_init();
    return init_error;
}
