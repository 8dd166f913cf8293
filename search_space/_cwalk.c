/* The compiled scope walk of search-space decoding (search_space/_ccore.py drives it).
 *
 * Pass 3 of decoding (search_space/_build.py: Decoding.pick / _ahead_ok / _work_lb /
 * commit over compiler.capacity.CapacityWalk) over flat arrays: each step's result
 * gets the scope it asks for, or the next slower one (L1 -> LLB -> DDR) while its op
 * may not write it, the step would overflow now, or (for L1) the look-ahead says it
 * would crowd a later group chunk on its cores out of L1.
 *
 * Every number comes from the Python tables (search_space/_ccore.py builds them from
 * compiler.capacity / compiler.footprint / compiler.layout): this file only adds,
 * subtracts and compares them, in the same order as the Python code, so a result at
 * exactly capacity is decided the same way.
 *
 * Scope codes: 0 = L1, 1 = LLB, 2 = DDR.
 *
 * walk(cap_l1, cap_llb, n_cores, steps[, go_on]) -> (scopes, masks, held, usage, peak_l1,
 *                                                   peak_llb) (masks packed: a uint64 per
 *                                                   step; held: a byte per step, 0 or 1;
 *                                                   usage packed: (per-step counts
 *                                                   int32, cores int32, bytes double) as
 *                                                   bytes); on an overflow None, or with
 *                                                   go_on the same and (first overflowing
 *                                                   step, LLB?, core, needed, working set,
 *                                                   bytes in place, LLB live, live results).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdlib.h>
#include <limits.h>
#include <string.h>

#include "_cprofile.h"
#include "_cutil.h"  /* as_long, the arena (ar_alloc) */

enum { L1 = 0, LLB = 1, DDR = 2 };

/* A set of a group's streamable inputs, one bit each: up to MAX_STREAMED of them (DLRM's
 * interaction concat reads 27). The working sets are indexed by (mask * 2 + out_off) * 2 +
 * held, which must fit in a Mask too. Up to LIST_STREAMED inputs the table is a Python
 * list of 4 << inputs entries (read in place: no per-step copy); wider, a dict. */
typedef unsigned long long Mask;
#define MAX_STREAMED 61
#define LIST_STREAMED 16
enum { K_GROUP = 0, K_TRANSFER = 1, K_FIXED = 2 };

typedef struct {
    int src;       /* step index of the source, -1: a model input (DDR) */
    int sbit;      /* bit of the streamable mask, -1: not streamable */
    int edge;      /* global read index of the source (its staying table), -1: none */
} Input;

typedef struct {
    long lo, hi;   /* samples [lo, hi) */
    int n;         /* cores */
    int *cores;
} Part;

/* (the ints first, then the 8-byte fields: no padding; the steps are zeroed for every walk) */
typedef struct {
    int kind;
    int want;      /* 0..2, or 3 = auto (the slowest source) */
    int allowed;   /* bit mask of scopes the op may write */
    int init;      /* initial scope (fixed steps commit it) */
    int n_reads;
    int n_parts;   /* parts of the layout, sorted by first sample (compiler.layout.part_ranges) */
    int tensor;    /* code of the tensor it provides */
    int n_cores;   /* group: flattened parts; transfer: distinct cores of the layout */
    int n_inputs;
    int n_work;    /* 4 << streamable (a list table), 0 (a dict table: wider groups) */
    int wide;      /* the table is a dict (more than LIST_STREAMED streamable inputs) */
    int has_bounds;        /* least / most: the bounds of its working set (bounds()), known */
    int *reads;
    int *redges;   /* per read: its global read index (group readers), -1: none */
    Part *parts;
    long sb, fb;   /* bytes per sample, fixed bytes of the result */
    int *cores;
    double *res;   /* per core: bytes of the result in L1 (0 where absent) */
    unsigned char *has;  /* per core: the result has a piece there */
    Mask cmask;    /* the same as bits when the cluster has at most 64 cores (Walk.small) */
    double total;  /* bytes of the result in the LLB */
    Input *inputs;
    PyObject *table;       /* borrowed: the shared Python table (a list, None: not computed
                            * yet; or a dict, absent: not computed yet) */
    PyObject *filler;      /* borrowed: filler(index) -> float, the Python definition */
    Mask full;     /* mask of every streamable input */
    double tiles;  /* group: weight tiles in the LLB while it runs (compiler.capacity.llb_weight_tiles) */
    /* the working set computed here (ws_compute) instead of by the filler: a list table
     * whose chunk shape adds no halo or attention term; parsed on first use */
    PyObject *ws;          /* borrowed: the step's `ws` definition, NULL: the filler only */
    struct WsDef *wd;      /* `ws` parsed (parse_ws), NULL: not yet; apart from the step so
                            * the steps stay small */
    double least, most;
} Step;

/* a step's `ws` definition parsed (parse_ws; malloc'd, freed with the walk: free_ws) */
typedef struct WsDef {
    int parsed;
    long long spp, cpp, tile, osb, ofb;
    int n;                 /* streamable inputs, in order of tensor name */
    int *bit;
    long long *sb, *fb;
    double *win;           /* a windowed reader's whole window of rows */
    unsigned char *has_win;
    PyObject *prof;        /* borrowed: the op set's profiles by entry index (None: not yet) */
    PyObject *profiler;    /* borrowed: profiler(index) -> the profile packed (int64 pairs) */
    /* the op set's chain rows packed (search_space/_cfoot.py; NULL: the profiler computes
     * profiles) and, for a shape with a halo or attention term, its per-slot values */
    PyObject *pack, *hv, *av;
} WsDef;

static void free_ws(Step *s) {
    WsDef *d = s->wd;
    if (!d) return;
    free(d->bit);
    free(d->sb);
    free(d->fb);
    free(d->win);
    free(d->has_win);
    free(d);
    s->wd = NULL;
}

typedef struct {
    int done;
    double *sb;    /* per core: fraction * bytes per sample */
    double fb;
    unsigned char *fbm;  /* per core: fixed bytes stay */
} Edge;

typedef struct {
    int n, nc;
    double cap, llb_cap;
    Step *st;
    Edge *ed;
    int *last;
    int *exp_ptr, *exp_idx;   /* expire lists */
    int *rd_ptr, *rd_j, *rd_e; /* readers of each step: step j and the edge */
    int *scope;
    int *resident;            /* 0 none, 1 L1, 2 LLB */
    double *l1_live, llb_live;
    double *future;           /* n * nc */
    double *peak_l1, peak_llb;
    int *stamp;
    unsigned char *stamp2;
    int failed;               /* a Python filler raised: the exception is set */
    int go_on;                /* walk on after an overflow (else stop: the caller walks in Python) */
    int stop_first;           /* with go_on: stop at the first overflow once it is explained (a
                               * partial walk: its steps after it keep their initial scopes) */
    int small;                /* at most 64 cores: each step's cores are its cmask's bits too */
    int overflow_at;          /* the first step that overflows, -1: none */
    /* the last failed evaluate(): what CapacityWalk.l1_issue / llb_issue explain */
    int f_llb;                /* 0: an L1 overflowed, 1: the LLB */
    int f_q;                  /* usage entries written before it (cores that fitted) */
    int f_core;               /* L1: the core */
    double f_need, f_work;    /* bytes needed there; group L1: the working set */
    /* explain(): the first overflow's, kept (x_live: the live results, (step, bytes)) */
    int x_llb, x_core;
    double x_need, x_work, x_llb_live, x_staying;
    PyObject *x_live;
    int n_edges;
    int *ge_src, *ge_dst;     /* per global read: the source step and the reader */
    double *staying;
    Mask *mask_out;
    int *held_out;
    double *usage;            /* per step, per core of the step */
    int *usage_ptr;
    int *next_group;          /* per step j: the first group chunk step at or after j (n: none) */
    Arena arena;              /* every array of the walk (wa), freed at once (free_walk) */
    /* the bindings (tuples of core tuples) read while the steps are parsed, by identity:
     * each read once (bind_of); held (a reference each) until the parsing ends (binds_release) */
    struct Bind *bm;
    int bm_cap, bm_n;
} Walk;

static int *walk_begin(Walk *w, int n, int nc, double cap, double llb_cap, int go_on);

static int bad(const char *msg) {
    PyErr_SetString(PyExc_ValueError, msg);
    return -1;
}

/* The walk's memory: its arrays carved from the walk's arena (_cutil.h: one malloc per block,
 * not per array, where allocation was a fifth of a walk's time; freed at once with the walk,
 * the largest block kept for the next walk). n bytes, zeroed if asked, 16-byte aligned;
 * NULL when out of memory (no error set). */
static void *wa(Walk *w, size_t n, int zero) {
    void *p = ar_alloc(&w->arena, n);
    if (p && zero) memset(p, 0, n);
    return p;
}

/* A working set of step s: from the table, or computed by the Python definition on first
 * use (its result is kept in the space's table for later decodes). The table is read when
 * the entry is first needed, not copied when the step is parsed: the chunks of one group
 * share it, so an entry the filler computed for one chunk is found by the next. */
/* The value of entry i: `have` (borrowed), or when it is NULL the Python definition's. */
static double filled(Walk *w, Step *s, Mask i, PyObject *have) {
    if (w->failed) return 0.0;
    PyObject *r = have ? have : PyObject_CallFunction(s->filler, "K", i);
    if (!r) {
        w->failed = 1;
        return 0.0;
    }
    double v = PyFloat_AsDouble(r);
    if (!have) Py_DECREF(r);
    if (v == -1.0 && PyErr_Occurred()) w->failed = 1;
    return v;
}

/* A wide group's table is a dict: nothing cached here (its entries are few and far apart). */
static double work_wide(Walk *w, Step *s, Mask i) {
    if (w->failed) return 0.0;
    PyObject *key = PyLong_FromUnsignedLongLong(i);
    if (!key) {
        w->failed = 1;
        return 0.0;
    }
    PyObject *have = PyDict_GetItemWithError(s->table, key);  /* borrowed */
    Py_DECREF(key);
    if (!have && PyErr_Occurred()) {
        w->failed = 1;
        return 0.0;
    }
    return filled(w, s, i, have);
}

/* a / b rounded up, as Python's -(-a // b) (b > 0) */
static long long ceil_div(long long a, long long b) {
    long long q = a / b, r = a % b;
    return (r != 0 && (r > 0) == (b > 0)) ? q + 1 : q;
}

/* The `ws` definition of a step: (profiles, profiler, spp, cpp, tile, (out sb, out fb),
 * ((bit, sb, fb, window or None), ...) in order of tensor name[, chain rows packed or None,
 * (halo values, attention values) packed or None]). */
static int parse_ws(Step *s) {
    PyObject *ws = s->ws;
    if (!s->wd && !(s->wd = (WsDef *)calloc(1, sizeof(WsDef)))) {
        PyErr_NoMemory();
        return -1;
    }
    if (!PyTuple_Check(ws) || (PyTuple_GET_SIZE(ws) != 7 && PyTuple_GET_SIZE(ws) != 9))
        return bad("ws: a 7- or 9-tuple");
    s->wd->pack = s->wd->hv = s->wd->av = NULL;
    if (PyTuple_GET_SIZE(ws) == 9) {
        PyObject *pack = PyTuple_GET_ITEM(ws, 7), *hx = PyTuple_GET_ITEM(ws, 8);
        if (pack != Py_None) {
            if (!PyBytes_Check(pack) || PyBytes_GET_SIZE(pack) % (Py_ssize_t)sizeof(long long)
                || cprof_chains((const long long *)PyBytes_AS_STRING(pack),
                                PyBytes_GET_SIZE(pack) / (Py_ssize_t)sizeof(long long)) < 0)
                return bad("ws: chain rows packed as int64");
            s->wd->pack = pack;
        }
        if (hx != Py_None) {
            if (!s->wd->pack || !PyTuple_Check(hx) || PyTuple_GET_SIZE(hx) != 2
                || !PyBytes_Check(PyTuple_GET_ITEM(hx, 0)) || !PyBytes_Check(PyTuple_GET_ITEM(hx, 1))
                || PyBytes_GET_SIZE(PyTuple_GET_ITEM(hx, 0)) != PyBytes_GET_SIZE(PyTuple_GET_ITEM(hx, 1))
                || PyBytes_GET_SIZE(PyTuple_GET_ITEM(hx, 0))
                       != (Py_ssize_t)sizeof(double) * ((const long long *)PyBytes_AS_STRING(s->wd->pack))[2])
                return bad("ws: halo and attention values, one double per slot, with chain rows");
            s->wd->hv = PyTuple_GET_ITEM(hx, 0);
            s->wd->av = PyTuple_GET_ITEM(hx, 1);
        }
    }
    s->wd->prof = PyTuple_GET_ITEM(ws, 0);
    s->wd->profiler = PyTuple_GET_ITEM(ws, 1);
    if (!PyList_Check(s->wd->prof) || PyList_GET_SIZE(s->wd->prof) != s->n_work)
        return bad("ws: a profile list as long as the work table");
    if (!PyCallable_Check(s->wd->profiler)) return bad("ws: a callable profiler");
    s->wd->spp = PyLong_AsLongLong(PyTuple_GET_ITEM(ws, 2));
    s->wd->cpp = PyLong_AsLongLong(PyTuple_GET_ITEM(ws, 3));
    s->wd->tile = PyLong_AsLongLong(PyTuple_GET_ITEM(ws, 4));
    if (!PyArg_ParseTuple(PyTuple_GET_ITEM(ws, 5), "LL", &s->wd->osb, &s->wd->ofb)) return -1;
    if (PyErr_Occurred()) return -1;
    if (s->wd->cpp <= 0 || s->wd->spp < 0) return bad("ws: samples or cores out of range");
    PyObject *bits = PyTuple_GET_ITEM(ws, 6);
    if (!PyTuple_Check(bits)) return bad("ws: a tuple of streamable inputs");
    int n = (int)PyTuple_GET_SIZE(bits);
    s->wd->n = n;
    /* an earlier parse of this step that failed after its mallocs left them (review) */
    free(s->wd->bit); free(s->wd->sb); free(s->wd->fb); free(s->wd->win); free(s->wd->has_win);
    s->wd->bit = (int *)malloc(sizeof(int) * (n ? n : 1));
    s->wd->sb = (long long *)malloc(sizeof(long long) * (n ? n : 1));
    s->wd->fb = (long long *)malloc(sizeof(long long) * (n ? n : 1));
    s->wd->win = (double *)calloc(n ? n : 1, sizeof(double));
    s->wd->has_win = (unsigned char *)calloc(n ? n : 1, 1);
    if (!s->wd->bit || !s->wd->sb || !s->wd->fb || !s->wd->win || !s->wd->has_win) {
        PyErr_NoMemory();
        return -1;  /* freed with the walk (free_walk / py_working_set) */
    }
    for (int q = 0; q < n; q++) {
        PyObject *win;
        if (!PyArg_ParseTuple(PyTuple_GET_ITEM(bits, q), "iLLO", &s->wd->bit[q], &s->wd->sb[q],
                              &s->wd->fb[q], &win))
            return -1;
        if (s->wd->bit[q] < 0 || s->wd->bit[q] >= LIST_STREAMED) return bad("ws: bit out of range");
        if (win != Py_None) {
            s->wd->win[q] = PyFloat_AsDouble(win);
            if (PyErr_Occurred()) return -1;
            s->wd->has_win[q] = 1;
        }
    }
    s->wd->parsed = 1;
    return 0;
}

/* Entry i of a working-set table, as compiler.capacity._work computes it for a chunk shape
 * that adds no halo or attention term: the profile's peak for spp samples on cpp cores
 * (footprint.peak_of), then the stream buffers of the streamed inputs in order of name
 * and of a streamed output, added in the same order. The profile (footprint.group_profile,
 * shape-independent) comes from the op set's table, or from the profiler the first time. */
static double ws_compute(Walk *w, Step *s, Mask i) {
    if (w->failed) return 0.0;
    if ((!s->wd || !s->wd->parsed) && parse_ws(s)) {
        w->failed = 1;
        return 0.0;
    }
    PyObject *p = PyList_GET_ITEM(s->wd->prof, i);
    long long *raw = NULL;  /* the walk's unpruned points: computed for a new profile or a halo */
    const long long *pk = s->wd->pack ? (const long long *)PyBytes_AS_STRING(s->wd->pack) : NULL;
    Py_ssize_t npk = s->wd->pack ? PyBytes_GET_SIZE(s->wd->pack) / (Py_ssize_t)sizeof(long long) : 0;
    int nc = pk ? cprof_chains(pk, npk) : 0;
    if (pk && (p == Py_None || s->wd->hv)) {
        raw = (long long *)malloc(sizeof(long long) * 6 * (size_t)(nc ? nc : 1));
        if (!raw) {
            PyErr_NoMemory();
            w->failed = 1;
            return 0.0;
        }
        if (cprof_walk(pk, npk, i >> 2, (int)(i >> 1 & 1), (int)(i & 1), raw)) {
            free(raw);
            w->failed = 1;
            bad("ws: malformed chain rows");
            return 0.0;
        }
    }
    if (p == Py_None && pk) {
        /* the profile (footprint.group_profile) walked here; kept for the op set's other shapes */
        /* raw stays in chain order for the halo loop: the pruning sorts a copy */
        long long *sorted = raw + 2 * (nc ? nc : 1), *kept = sorted + 2 * (nc ? nc : 1);
        memcpy(sorted, raw, sizeof(long long) * 2 * (size_t)nc);
        Py_ssize_t k = cprof_prune(sorted, nc, kept);
        p = PyBytes_FromStringAndSize((const char *)kept, (Py_ssize_t)sizeof(long long) * 2 * k);
        if (!p || PyList_SetItem(s->wd->prof, i, p)) {  /* steals p */
            free(raw);
            w->failed = 1;
            return 0.0;
        }
        Py_INCREF(p);
    } else if (p == Py_None) {
        p = PyObject_CallFunction(s->wd->profiler, "K", i);
        if (!p) {
            w->failed = 1;
            return 0.0;
        }
    } else {
        Py_INCREF(p);
    }
    if (!PyBytes_Check(p) || PyBytes_GET_SIZE(p) % (2 * sizeof(long long))) {
        Py_DECREF(p);
        free(raw);
        w->failed = 1;
        bad("ws: a profile of int64 pairs");
        return 0.0;
    }
    const long long *pr = (const long long *)PyBytes_AS_STRING(p);
    Py_ssize_t np = PyBytes_GET_SIZE(p) / (Py_ssize_t)(2 * sizeof(long long));
    long long spp = s->wd->spp, cpp = s->wd->cpp, tile = s->wd->tile, peak = 0;
    for (Py_ssize_t q = 0; q < np; q++) {
        long long v = ceil_div(pr[2 * q] * spp, cpp) + pr[2 * q + 1];
        if (v > peak) peak = v;
    }
    Py_DECREF(p);
    double work = (double)peak;
    if (s->wd->hv) {  /* a windowed op's halo rows, attention's busiest core (capacity._work) */
        work = cprof_halo(pk, npk, i >> 2, raw, spp, cpp,
                          (const double *)PyBytes_AS_STRING(s->wd->hv),
                          (const double *)PyBytes_AS_STRING(s->wd->av),
                          PyBytes_GET_SIZE(s->wd->hv) / (Py_ssize_t)sizeof(double), work);
        if (work < 0.0) {
            free(raw);
            w->failed = 1;
            bad("ws: malformed halo rows");
            return 0.0;
        }
    }
    free(raw);
    Mask mask = i >> 2;
    double buffers = 0.0;
    for (int q = 0; q < s->wd->n; q++) {
        if (!(mask >> s->wd->bit[q] & 1)) continue;
        long long piece = ceil_div(s->wd->sb[q] * spp, cpp) + s->wd->fb[q];
        if (tile < piece) piece = tile;
        double buf = 2.0 * (double)piece;
        if (s->wd->has_win[q] && s->wd->win[q] + (double)piece > buf) buf = s->wd->win[q] + (double)piece;
        buffers += buf;
    }
    if (i >> 1 & 1) {
        long long piece = ceil_div(s->wd->osb * spp, cpp) + s->wd->ofb;
        if (tile < piece) piece = tile;
        buffers += 2.0 * (double)piece;
    }
    work += buffers;
    return work;
}

static double work_at(Walk *w, Step *s, Mask mask, int off, int held) {
    Mask i = ((mask * 2 + (Mask)off) * 2) + (Mask)held;
    if (s->wide) return work_wide(w, s, i);
    /* read from the shared table each time (no per-step copy: a table has 4 << streamable
     * entries, allocating and clearing them for every chunk step cost more than the reads) */
    PyObject *have = PyList_GET_ITEM(s->table, i);
    if (have != Py_None) return filled(w, s, i, have);
    if (s->ws) {
        /* computed here, kept in the shared table as the filler keeps its results */
        double v = ws_compute(w, s, i);
        if (w->failed) return 0.0;
        PyObject *f = PyFloat_FromDouble(v);
        if (!f || PyList_SetItem(s->table, i, f)) {
            w->failed = 1;
            return 0.0;
        }
        return v;
    }
    return filled(w, s, i, NULL);  /* the filler keeps its result in the table */
}


/* ---- what a reader finds in place (compiler.layout.staying_fraction) ---------------- */

/* The staying table of global read e (source ge_src[e], reader ge_dst[e]), made on first use:
 * per core of the reader, samples' worth of the source already in its L1, times the bytes per
 * sample; and the cores where the source's fixed (unbatched) bytes stay. */
static const Edge *edge(Walk *w, int e) {
    Edge *E = &w->ed[e];
    if (E->done) return E;
    E->done = 1;
    memset(E->sb, 0, sizeof(double) * (size_t)w->nc);  /* (not zeroed when carved: walk_prepare) */
    memset(E->fbm, 0, (size_t)w->nc);
    const Step *src = &w->st[w->ge_src[e]], *dst = &w->st[w->ge_dst[e]];
    double *out = E->sb;
    if (src->sb) {
        int i = 0;
        for (int pd = 0; pd < dst->n_parts; pd++) {
            const Part *D = &dst->parts[pd];
            while (i < src->n_parts && src->parts[i].hi <= D->lo) i++;
            int j = i;
            while (j < src->n_parts && src->parts[j].lo < D->hi) {
                const Part *S = &src->parts[j];
                long n = (S->hi < D->hi ? S->hi : D->hi) - (S->lo > D->lo ? S->lo : D->lo);
                j++;
                if (n <= 0) continue;
                int ks = S->n, kd = D->n;
                for (int jj = 0; jj < kd; jj++) {  /* compiler.layout.slices */
                    int cd = D->cores[jj];
                    double lo = (double)jj / kd, hi = (double)(jj + 1) / kd;
                    for (int ii = 0; ii < ks; ii++) {
                        if (S->cores[ii] != cd) continue;  /* tested first: no overlap to compute */
                        double a0 = (double)ii / ks, b0 = (double)(ii + 1) / ks;
                        double a = a0 > lo ? a0 : lo;
                        double b = b0 < hi ? b0 : hi;
                        if (b > a) out[cd] = out[cd] + (double)n * (b - a);
                    }
                }
            }
        }
        for (int c = 0; c < w->nc; c++) out[c] = out[c] * (double)src->sb;
    }
    E->fb = (double)src->fb;
    if (src->fb) {
        for (int p = 0; p < src->n_parts; p++)
            for (int q = 0; q < src->parts[p].n; q++) w->stamp2[src->parts[p].cores[q]] = 1;
        for (int p = 0; p < dst->n_parts; p++)
            for (int q = 0; q < dst->parts[p].n; q++)
                if (w->stamp2[dst->parts[p].cores[q]]) E->fbm[dst->parts[p].cores[q]] = 1;
        for (int p = 0; p < src->n_parts; p++)
            for (int q = 0; q < src->parts[p].n; q++) w->stamp2[src->parts[p].cores[q]] = 0;
    }
    return E;
}

/* ---- the capacity walk (compiler.capacity.CapacityWalk) ---------------------------- */

static void release(Walk *w, int k) {
    for (int p = w->exp_ptr[k]; p < w->exp_ptr[k + 1]; p++) {
        int i = w->exp_idx[p];
        if (w->resident[i] == 1) {
            const Step *s = &w->st[i];
            if (w->small)  /* the same subtractions, each core's alone: its bits */
                for (Mask b = s->cmask; b; b &= b - 1) {
                    int c = __builtin_ctzll(b);
                    w->l1_live[c] -= s->res[c];
                }
            else
                for (int c = 0; c < w->nc; c++)
                    if (s->has[c]) w->l1_live[c] -= s->res[c];
            w->llb_live -= 0.0;
        } else if (w->resident[i] == 2) {
            w->llb_live -= w->st[i].total;
        }
        w->resident[i] = 0;
    }
}

static void allocate(Walk *w, int i) {
    if (w->last[i] <= i) return;
    const Step *s = &w->st[i];
    if (w->scope[i] == L1) {
        if (w->small)
            for (Mask b = s->cmask; b; b &= b - 1) {
                int c = __builtin_ctzll(b);
                w->l1_live[c] += s->res[c];
            }
        else
            for (int c = 0; c < w->nc; c++)
                if (s->has[c]) w->l1_live[c] += s->res[c];
        w->resident[i] = 1;
    } else if (w->scope[i] == LLB) {
        w->llb_live += s->total;
        w->resident[i] = 2;
    }
}

/* Streamed mask, staying bytes per core (w->staying) and held: scope-independent. */
static void group_inputs(Walk *w, int k, Mask *mask, int *held) {
    const Step *s = &w->st[k];
    double *st = w->staying;
    for (int c = 0; c < w->nc; c++) st[c] = 0.0;
    *mask = 0;
    *held = 0;
    for (int q = 0; q < s->n_inputs; q++) {
        const Input *in = &s->inputs[q];
        int d = in->src;
        int sc = d >= 0 ? w->scope[d] : DDR;
        if (sc != L1) {
            if (in->sbit >= 0) *mask |= (Mask)1 << in->sbit;
            continue;
        }
        if (w->last[d] > k) *held = 1;
        if (in->edge >= 0) {
            const Edge *e = edge(w, in->edge);
            for (int c = 0; c < w->nc; c++) st[c] += e->sb[c];
            if (e->fb != 0.0)
                for (int c = 0; c < w->nc; c++)
                    if (e->fbm[c]) st[c] += e->fb;
        }
    }
}

/* Whether step k fits with its result in `scope`; fills the usage and *need. */
static int evaluate(Walk *w, int k, int scope, double *usage, double *need, Mask *mask_o,
                    int *held_o) {
    Step *s = &w->st[k];
    *need = -1.0;
    if (s->kind == K_GROUP) {
        Mask mask;
        int held;
        group_inputs(w, k, &mask, &held);
        *mask_o = mask;
        *held_o = held;
        double work = work_at(w, s, mask, scope != L1, held);
        for (int q = 0; q < s->n_cores; q++) {
            int c = s->cores[q];
            double u = w->l1_live[c] - w->staying[c] + work;
            if (u > w->cap) {
                w->f_llb = 0; w->f_q = q; w->f_core = c; w->f_need = u; w->f_work = work;
                return 0;
            }
            usage[q] = u;
        }
        /* weights pass the LLB (compiler.capacity: tiles, then the output, in that order) */
        if (scope == LLB || s->tiles != 0.0) {
            double nd = w->llb_live + s->tiles;
            if (scope == LLB) nd += s->total;
            if (nd > w->llb_cap) {
                w->f_llb = 1; w->f_q = s->n_cores; w->f_core = -1; w->f_need = nd; w->f_work = 0.0;
                return 0;
            }
            *need = nd;
        }
        return 1;
    }
    *mask_o = 0;
    *held_o = 0;
    int own = w->last[k] > k;
    int a = w->exp_ptr[k], b = w->exp_ptr[k + 1];
    if (scope == L1) {
        for (int q = 0; q < s->n_cores; q++) {
            int c = s->cores[q];
            double u = w->l1_live[c];
            for (int p = a; p < b; p++) {
                int i = w->exp_idx[p];
                if (w->resident[i] == 1 && w->st[i].has[c]) u -= w->st[i].res[c];
            }
            if (own && s->has[c]) u += s->res[c];
            if (u > w->cap) {
                w->f_llb = 0; w->f_q = q; w->f_core = c; w->f_need = u; w->f_work = 0.0;
                return 0;
            }
            usage[q] = u;
        }
        return 1;
    }
    if (scope == LLB) {
        double live = w->llb_live;
        for (int p = a; p < b; p++) {
            int i = w->exp_idx[p];
            if (w->resident[i] == 2) live -= w->st[i].total;
        }
        if (own) live += s->total;
        if (live > w->llb_cap) {
            w->f_llb = 1; w->f_q = 0; w->f_core = -1; w->f_need = live; w->f_work = 0.0;
            return 0;
        }
        *need = live;
    }
    return 1;
}

/* ---- the look-ahead (search_space._build.Decoding._ahead_ok) ------------------------- */

static double work_lb(Walk *w, int j, int k) {
    Step *s = &w->st[j];
    Mask known = 0, unknown = 0;
    int n_unknown = 0, held = 0;
    Mask ubits[2] = {0, 0};
    for (int q = 0; q < s->n_inputs; q++) {
        const Input *in = &s->inputs[q];
        int d = in->src;
        int sc;
        if (d < 0) sc = DDR;
        else if (d == k) sc = L1;
        else if (d < k) sc = w->scope[d];
        else {
            if (in->sbit >= 0) {
                if (n_unknown < 2) ubits[n_unknown] = (Mask)1 << in->sbit;
                n_unknown++;
                unknown |= (Mask)1 << in->sbit;
            }
            continue;
        }
        if (sc == L1) {
            held = held || (d >= 0 && w->last[d] > j);
        } else if (in->sbit >= 0) {
            known |= (Mask)1 << in->sbit;
        }
    }
    double best = work_at(w, s, known | unknown, 1, held);
    if (n_unknown) {
        double v = work_at(w, s, known, 1, held);
        if (v < best) best = v;
    }
    if (n_unknown == 2) {
        for (int u = 0; u < 2; u++) {
            double v = work_at(w, s, known | ubits[u], 1, held);
            if (v < best) best = v;
        }
    }
    return best;
}

static void bounds(Walk *w, Step *s, double *least, double *most) {
    if (s->has_bounds) {  /* the same entries every time: kept for the walk */
        *least = s->least;
        *most = s->most;
        return;
    }
    double ws[4] = {work_at(w, s, s->full, 1, 0), work_at(w, s, s->full, 1, 1),
                    work_at(w, s, 0, 1, 0), work_at(w, s, 0, 1, 1)};
    *least = *most = ws[0];
    for (int q = 1; q < 4; q++) {
        if (ws[q] < *least) *least = ws[q];
        if (ws[q] > *most) *most = ws[q];
    }
    if (!w->failed) {
        s->has_bounds = 1;
        s->least = *least;
        s->most = *most;
    }
}

/* What a later step's core ``c`` would hold beside step ``me``'s chunk: the later step's
 * future use, plus ``me``'s resident bytes on ``c``, minus what the edge ``e`` (``me``'s
 * read by that step, or NULL) keeps staying there. */
static inline double ahead_use(const double *row, const Step *me, const Edge *e, int c) {
    double stay = 0.0;
    if (e) {
        stay = e->sb[c];
        if (e->fb != 0.0 && e->fbm[c]) stay = stay + e->fb;
    }
    return row[c] + me->res[c] - stay;
}

static int ahead_ok(Walk *w, int k) {
    const Step *me = &w->st[k];
    double top_mine = 0.0;
    int any = 0;
    for (int c = 0; c < w->nc; c++)
        if (me->has[c]) {
            if (!any || me->res[c] > top_mine) top_mine = me->res[c];
            any = 1;
        }
    if (any && top_mine > w->cap) return 0;
    int end = w->last[k] < w->n - 1 ? w->last[k] : w->n - 1;
    int ok = 1;
    for (int p = w->rd_ptr[k]; p < w->rd_ptr[k + 1]; p++) w->stamp[w->rd_j[p]] = w->rd_e[p] + 1;
    for (int j = w->next_group[k + 1]; j <= end && ok; j = w->next_group[j + 1]) {
        Step *s = &w->st[j];  /* a group chunk: transfers have no working set to crowd */
        int reader = w->stamp[j];
        Mask both = w->small ? me->cmask & s->cmask : 0;
        if (!reader) {
            int hit = both != 0;
            if (!w->small)
                for (int q = 0; q < s->n_cores && !hit; q++) hit = me->has[s->cores[q]];
            if (!hit) continue;
        }
        const Edge *e = reader > 0 ? edge(w, reader - 1) : NULL;
        const double *row = w->future + (size_t)j * w->nc;
        double top = -1.0;
        if (w->small) {
            /* the cores both have, each once and in ascending order: the same maximum as the
             * loop below (a maximum by `>` does not depend on the order or on repeats) */
            for (Mask b = both; b; b &= b - 1) {
                double v = ahead_use(row, me, e, __builtin_ctzll(b));
                if (v > top) top = v;
            }
        } else {
            for (int q = 0; q < s->n_cores; q++) {
                int c = s->cores[q];
                if (!me->has[c]) continue;
                double v = ahead_use(row, me, e, c);
                if (v > top) top = v;
            }
        }
        if (top < 0.0 && !reader) continue;
        if (top < 0.0) top = 0.0;
        double least, most;
        bounds(w, s, &least, &most);
        if (top + least > w->cap) ok = 0;
        else if (top + most > w->cap && top + work_lb(w, j, k) > w->cap) ok = 0;
    }
    for (int p = w->rd_ptr[k]; p < w->rd_ptr[k + 1]; p++) w->stamp[w->rd_j[p]] = 0;
    return ok;
}

static void commit_future(Walk *w, int k) {
    const Step *me = &w->st[k];
    int end = w->last[k] < w->n - 1 ? w->last[k] : w->n - 1;
    for (int p = w->rd_ptr[k]; p < w->rd_ptr[k + 1]; p++) w->stamp[w->rd_j[p]] = w->rd_e[p] + 1;
    for (int j = w->next_group[k + 1]; j <= end; j = w->next_group[j + 1]) {
        /* group chunks only: rows of transfers are never read */
        double *row = w->future + (size_t)j * w->nc;
        int reader = w->stamp[j];
        if (reader) {
            const Edge *e = edge(w, reader - 1);
            if (w->small)  /* each core's sum alone: its bits */
                for (Mask b = me->cmask; b; b &= b - 1) {
                    int c = __builtin_ctzll(b);
                    double stay = e->sb[c];
                    if (e->fb != 0.0 && e->fbm[c]) stay = stay + e->fb;
                    double x = me->res[c] - stay;
                    row[c] += x > 0.0 ? x : 0.0;
                }
            else
                for (int c = 0; c < w->nc; c++) {
                    if (!me->has[c]) continue;
                    double stay = e->sb[c];
                    if (e->fb != 0.0 && e->fbm[c]) stay = stay + e->fb;
                    double x = me->res[c] - stay;
                    row[c] += x > 0.0 ? x : 0.0;
                }
        } else if (w->small) {
            for (Mask b = me->cmask; b; b &= b - 1) {
                int c = __builtin_ctzll(b);
                row[c] += me->res[c];
            }
        } else {
            for (int c = 0; c < w->nc; c++)
                if (me->has[c]) row[c] += me->res[c];
        }
    }
    for (int p = w->rd_ptr[k]; p < w->rd_ptr[k + 1]; p++) w->stamp[w->rd_j[p]] = 0;
}

/* At the first overflow (step k, before release(k)): the results CapacityWalk.l1_issue /
 * llb_issue list, as (step, bytes) in the resident dict's order (ascending step: results
 * are allocated in step order). A group's L1 overflow lists every L1 result's bytes on the
 * core less what the step finds in place when it is an input; a transfer's leaves out the
 * results released at k and adds its own; an LLB overflow lists LLB results (and the
 * transfer's own). The Python glue turns them into the CapacityIssue. */
static int explain(Walk *w, int k) {
    const Step *s = &w->st[k];
    int a = w->exp_ptr[k], b = w->exp_ptr[k + 1];
    PyObject *live = PyList_New(0);
    if (!live) { w->failed = 1; return 1; }
    for (int i = 0; i < k; i++) {
        int r = w->resident[i];
        if (!r) continue;
        if (s->kind != K_GROUP) {  /* a transfer: the results released at k are not counted */
            int gone = 0;
            for (int p = a; p < b; p++) if (w->exp_idx[p] == i) { gone = 1; break; }
            if (gone) continue;
        }
        double by;
        if (!w->f_llb) {
            if (r != 1) continue;
            by = w->st[i].has[w->f_core] ? w->st[i].res[w->f_core] : 0.0;
            if (s->kind == K_GROUP) {
                int input = 0;
                for (int q = 0; q < s->n_reads; q++) if (s->reads[q] == i) { input = 1; break; }
                if (input) {
                    double st = w->staying[w->f_core];
                    by -= by < st ? by : st;
                }
            }
        } else {
            if (r != 2) continue;
            by = w->st[i].total;
        }
        PyObject *row = Py_BuildValue("(id)", i, by);
        if (!row || PyList_Append(live, row)) { Py_XDECREF(row); Py_DECREF(live); w->failed = 1; return 1; }
        Py_DECREF(row);
    }
    if (s->kind != K_GROUP && w->last[k] > k) {  /* the transfer's own result */
        double by = w->f_llb ? s->total : (s->has[w->f_core] ? s->res[w->f_core] : 0.0);
        PyObject *row = Py_BuildValue("(id)", k, by);
        if (!row || PyList_Append(live, row)) { Py_XDECREF(row); Py_DECREF(live); w->failed = 1; return 1; }
        Py_DECREF(row);
    }
    /* kept: later steps' trials overwrite the f_ fields */
    w->x_llb = w->f_llb;
    w->x_core = w->f_core;
    w->x_need = w->f_need;
    w->x_work = w->f_work;
    w->x_live = live;
    w->x_llb_live = w->llb_live;
    w->x_staying = s->kind == K_GROUP && !w->f_llb ? w->staying[w->f_core] : 0.0;
    return 0;
}

static const int SLOWER[3][3] = {{L1, LLB, DDR}, {LLB, DDR, -1}, {DDR, -1, -1}};

/* Returns 0 on success, 1 when a step overflows (the caller decodes in Python). */
static int run(Walk *w) {
    double *tmp = w->usage;  /* each step writes its own slice */
    for (int k = 0; k < w->n; k++) {
        if (w->failed) return 1;
        const Step *s = &w->st[k];
        double *usage = tmp + w->usage_ptr[k];
        int chosen, tried = 0, h = 0;
        double need = -1.0;
        Mask m = 0;
        if (s->kind == K_FIXED) {
            chosen = s->init;
        } else {
            int want = s->want;
            if (want == 3) {
                want = -1;
                for (int r = 0; r < s->n_reads; r++) {
                    int sc = w->scope[s->reads[r]];
                    if (sc > want) want = sc;
                }
                if (want < 0) want = DDR;
            }
            int opts[3], n_opts = 0;
            for (int q = 0; q < 3 && SLOWER[want][q] >= 0; q++)
                if (s->allowed & (1 << SLOWER[want][q])) opts[n_opts++] = SLOWER[want][q];
            if (!n_opts) opts[n_opts++] = want;
            chosen = opts[n_opts - 1];
            for (int q = 0; q < n_opts - 1; q++) {
                int sc = opts[q];
                if (sc == L1 && !ahead_ok(w, k)) continue;
                w->scope[k] = sc;
                if (evaluate(w, k, sc, usage, &need, &m, &h)) {
                    chosen = sc;
                    tried = 1;
                    break;
                }
            }
        }
        /* commit: a trial that fitted is the commit's evaluation (nothing it reads changed
         * since: the usage, need, mask and held it wrote are the ones evaluated again) */
        w->scope[k] = chosen;
        if (!tried && !evaluate(w, k, chosen, usage, &need, &m, &h)) {
            if (!w->go_on) return 1;
            /* CapacityWalk.commit after an overflow: the result is placed all the same
             * (release, allocate) and the walk goes on, as Decoding.pick/commit do; the
             * plan (up to the first overflow) is walked again in Python */
            if (w->overflow_at < 0) {
                /* CapacityWalk.commit records the first overflow: the cores that fitted
                 * count towards the peaks, the LLB need does not; what it explains is
                 * kept (the live results at that moment: before release(k)) */
                w->overflow_at = k;
                for (int q = 0; q < w->f_q; q++) {
                    int c = s->cores[q];
                    if (usage[q] > w->peak_l1[c]) w->peak_l1[c] = usage[q];
                }
                if (explain(w, k)) return 1;
            }
        }
        w->mask_out[k] = m;
        w->held_out[k] = h;
        if (w->stop_first && w->overflow_at == k) return 0;  /* what a repair round reads */
        if (w->overflow_at < 0) {
            /* a transfer outside L1 uses no L1 (its slice may hold a rejected L1 trial's
             * partial usage: CapacityWalk counts only the committed evaluation's) */
            int m = (s->kind != K_GROUP && chosen != L1) ? 0 : w->usage_ptr[k + 1] - w->usage_ptr[k];
            for (int q = 0; q < m; q++) {
                int c = s->cores[q];
                if (usage[q] > w->peak_l1[c]) w->peak_l1[c] = usage[q];
            }
            if (need >= 0.0 && need > w->peak_llb) w->peak_llb = need;
        }
        release(w, k);
        allocate(w, k);
        if (chosen == L1 && w->last[k] > k) commit_future(w, k);
    }
    return 0;
}

/* ---- parsing ----------------------------------------------------------------------- */

static int ints(Walk *w, PyObject *obj, int **out, int *n) {
    PyObject *f = PySequence_Fast(obj, "a sequence of ints");
    if (!f) return -1;
    Py_ssize_t m = PySequence_Fast_GET_SIZE(f);
    if (m > (1 << 24)) {
        Py_DECREF(f);
        return bad("too many ints");
    }
    *n = (int)m;
    *out = (int *)wa(w, sizeof(int) * (size_t)(m ? m : 1), 0);
    if (!*out) {
        *n = 0;
        Py_DECREF(f);
        PyErr_NoMemory();
        return -1;
    }
    for (Py_ssize_t i = 0; i < m; i++) {
        /* a non-int's __index__ runs Python, which may shrink a list read in place: the
         * size is checked before each read and the item held while it is read (review) */
        if (i >= PySequence_Fast_GET_SIZE(f)) {
            Py_DECREF(f);
            return bad("a sequence of ints changed while it was read");
        }
        PyObject *it = PySequence_Fast_GET_ITEM(f, i);
        Py_INCREF(it);
        long v = as_long(it);
        Py_DECREF(it);
        if (v == -1 && PyErr_Occurred()) {
            Py_DECREF(f);
            return -1;
        }
        if (v < INT_MIN || v > INT_MAX) {  /* not cut to its low 32 bits */
            Py_DECREF(f);
            return bad("an int out of range");
        }
        (*out)[i] = (int)v;
    }
    Py_DECREF(f);
    return 0;
}

/* A step's layout: its pieces (first sample, samples per part, parts: a tuple of core
 * tuples each), sorted by first sample (compiler.layout.part_ranges), the bytes of its
 * result per core in L1 and in the LLB, and the cores its usage is counted on. */
/* A binding read: its parts' core counts and cores (carved from the walk's arena). */
typedef struct Bind {
    PyObject *key;         /* the binding (a strong reference while the steps are parsed) */
    int n_parts, n_flat;
    int *pn;               /* per part: its cores */
    int **pc;              /* per part: the cores */
} Bind;

static size_t bind_slot(PyObject *key, int cap) {
    return (size_t)(((uintptr_t)key >> 4) * (uintptr_t)0x9E3779B97F4A7C15ull) & (size_t)(cap - 1);
}

/* The binding `parts` (a tuple of parts, each a tuple of cores), read and checked once per
 * walk: the steps of one group chunk and the transfers that follow it share the same tuple
 * (identity: tuples of ints cannot change, and the reference held keeps the address
 * from being reused by another while the steps are parsed). NULL: the error set. */
static const Bind *bind_of(Walk *w, PyObject *parts) {
    if (w->bm_n * 2 >= w->bm_cap) {  /* (also the first: no table yet) */
        int cap = w->bm_cap ? w->bm_cap * 2 : 64;
        Bind *t = (Bind *)wa(w, sizeof(Bind) * (size_t)cap, 1);
        if (!t) {
            PyErr_NoMemory();
            return NULL;
        }
        for (int i = 0; i < w->bm_cap; i++)
            if (w->bm[i].key) {
                size_t h = bind_slot(w->bm[i].key, cap);
                while (t[h].key) h = (h + 1) & (size_t)(cap - 1);
                t[h] = w->bm[i];
            }
        w->bm = t;
        w->bm_cap = cap;
    }
    size_t h = bind_slot(parts, w->bm_cap);
    while (w->bm[h].key) {
        if (w->bm[h].key == parts) return &w->bm[h];
        h = (h + 1) & (size_t)(w->bm_cap - 1);
    }
    int nc = w->nc;
    Py_ssize_t np = PyTuple_GET_SIZE(parts);
    if (np > (1 << 16)) {
        bad("piece: too many parts");
        return NULL;
    }
    long long n_flat = 0;
    for (Py_ssize_t p = 0; p < np; p++) {
        PyObject *part = PyTuple_GET_ITEM(parts, p);
        if (!PyTuple_Check(part) || PyTuple_GET_SIZE(part) == 0 || PyTuple_GET_SIZE(part) > nc) {
            bad("part: a tuple of cores");
            return NULL;
        }
        n_flat += PyTuple_GET_SIZE(part);
    }
    if (n_flat > (1 << 24)) {
        bad("piece: too many cores");
        return NULL;
    }
    Bind b;
    b.n_parts = (int)np;
    b.n_flat = (int)n_flat;
    b.pn = (int *)wa(w, sizeof(int) * (size_t)(np ? np : 1), 0);
    b.pc = (int **)wa(w, sizeof(int *) * (size_t)(np ? np : 1), 0);
    int *cores = (int *)wa(w, sizeof(int) * (size_t)(n_flat ? n_flat : 1), 0);
    if (!b.pn || !b.pc || !cores) {
        PyErr_NoMemory();
        return NULL;
    }
    for (Py_ssize_t p = 0; p < np; p++) {
        PyObject *part = PyTuple_GET_ITEM(parts, p);
        b.pn[p] = (int)PyTuple_GET_SIZE(part);
        b.pc[p] = cores;
        for (int q = 0; q < b.pn[p]; q++) {
            PyObject *core = PyTuple_GET_ITEM(part, q);
            /* an exact int: no Python code (``__index__``) may run while the caller's
             * borrowed row is read (it could free it) */
            if (!PyLong_CheckExact(core)) {
                bad("core: an int");
                return NULL;
            }
            long c = as_long(core);
            if (c < 0 || c >= nc) {
                if (!PyErr_Occurred()) bad("core out of range");
                return NULL;
            }
            *cores++ = (int)c;
        }
    }
    b.key = Py_NewRef(parts);
    w->bm[h] = b;
    w->bm_n++;
    return &w->bm[h];
}

/* the bindings' references dropped (the parsed steps keep their cores: the arena's) */
static void binds_release(Walk *w) {
    for (int i = 0; i < w->bm_cap; i++) Py_CLEAR(w->bm[i].key);
    w->bm = NULL;
    w->bm_cap = w->bm_n = 0;
}

/* A step's layout: its pieces (first sample, samples per part, parts: a tuple of core
 * tuples each), sorted by first sample (compiler.layout.part_ranges), the bytes of its
 * result per core in L1 and in the LLB, and the cores its usage is counted on. */
static int step_pieces(Walk *w, Step *s, int npc, const long *firsts, const long *spps,
                       PyObject *const *partss) {
    int nc = w->nc;
    int n_parts = 0, n_flat = 0;
    /* the pieces' bindings (copies: the table may grow), on the stack for a few pieces */
    Bind few[8];
    Bind *bs = npc <= 8 ? few : (Bind *)wa(w, sizeof(Bind) * (size_t)npc, 0);
    if (!bs) {
        PyErr_NoMemory();
        return -1;
    }
    for (int i = 0; i < npc; i++) {
        PyObject *parts = partss[i];
        if (!PyTuple_Check(parts)) return bad("piece: (first, spp, parts)");
        if (spps[i] < 0 || firsts[i] < 0) return bad("piece: negative samples");
        const Bind *b = i > 0 && parts == partss[i - 1] ? &bs[i - 1] : bind_of(w, parts);
        if (!b) return -1;
        bs[i] = *b;
        /* bounded at every piece: an int sum of 65,536 parts of 65,536 cores wraps to 0
         * before a check after the loop (review finding) */
        if (b->n_parts > (1 << 16) - n_parts) return bad("piece: too many parts");
        n_parts += b->n_parts;
        if (b->n_flat > (1 << 24) - n_flat) return bad("piece: too many cores");
        n_flat += b->n_flat;
    }
    /* one piece of the arena for the step's arrays: the parts, the result per core (zeroed),
     * the flat cores, whether a core has a piece (zeroed); each part's cores are its
     * binding's */
    size_t z_parts = sizeof(Part) * (size_t)(n_parts ? n_parts : 1);
    size_t z_res = sizeof(double) * (size_t)nc, z_flat = sizeof(int) * (size_t)(n_flat ? n_flat : 1);
    char *mem = (char *)wa(w, z_parts + z_res + z_flat + (size_t)nc, 0);
    if (!mem) {
        PyErr_NoMemory();
        return -1;  /* freed with the walk (free_walk) */
    }
    s->parts = (Part *)mem;
    s->res = (double *)(mem + z_parts);
    int *flat = (int *)(mem + z_parts + z_res);
    s->has = (unsigned char *)(mem + z_parts + z_res + z_flat);
    memset(s->res, 0, z_res);
    memset(s->has, 0, (size_t)nc);
    s->n_parts = n_parts;
    long long total = 0;
    int pi = 0, fi = 0;
    for (int i = 0; i < npc; i++) {
        long first = firsts[i], spp = spps[i];
        const Bind *b = &bs[i];
        total += (long long)spp * b->n_parts;
        for (int p = 0; p < b->n_parts; p++) {
            Part *P = &s->parts[pi++];
            P->lo = first + p * spp;
            P->hi = P->lo + spp;
            P->n = b->pn[p];
            P->cores = b->pc[p];
            double share = (double)spp / P->n;  /* compiler.layout.samples_per_core */
            for (int q = 0; q < P->n; q++) {
                int c = P->cores[q];  /* (checked when the binding was read: bind_of) */
                flat[fi++] = c;
                s->res[c] = s->res[c] + share;
                s->has[c] = 1;
                if (c < 64) s->cmask |= (Mask)1 << c;
            }
        }
    }
    if (w->small) {  /* the cores that have a piece are the mask's bits */
        for (Mask b = s->cmask; b; b &= b - 1) {
            int c = __builtin_ctzll(b);
            s->res[c] = s->res[c] * (double)s->sb + (double)s->fb;
        }
    } else {
        for (int c = 0; c < nc; c++)
            if (s->has[c]) s->res[c] = s->res[c] * (double)s->sb + (double)s->fb;
    }
    s->total = (double)(total * s->sb + s->fb);
    /* sorted by first sample (part_ranges); insertion sort keeps equal ones in order */
    for (int a = 1; a < n_parts; a++) {
        Part x = s->parts[a];
        int b = a - 1;
        while (b >= 0 && (s->parts[b].lo > x.lo || (s->parts[b].lo == x.lo && s->parts[b].hi > x.hi))) {
            s->parts[b + 1] = s->parts[b];
            b--;
        }
        s->parts[b + 1] = x;
    }
    /* the cores its usage is counted on: a group chunk each core of its parts, a transfer
     * each distinct core once (in order of first appearance) */
    s->cores = flat;
    if (s->kind == K_GROUP) {
        s->n_cores = n_flat;
    } else {
        int m = 0;
        if (w->small) {  /* cores below 64: the ones met as bits */
            Mask met = 0;
            for (int q = 0; q < n_flat; q++) {
                Mask bit = (Mask)1 << flat[q];
                if (!(met & bit)) {
                    met |= bit;
                    flat[m++] = flat[q];
                }
            }
        } else {
            for (int q = 0; q < n_flat; q++) {
                int seen = 0;
                for (int r = 0; r < m && !seen; r++) seen = flat[r] == flat[q];
                if (!seen) flat[m++] = flat[q];
            }
        }
        s->n_cores = m;
    }
    return 0;
}

/* pieces: ((first, spp, parts), ...) */
static int step_pieces_seq(Walk *w, Step *s, PyObject *obj) {
    /* a tuple copy: a list could be changed under the borrowed items below (an item's
     * __index__ run by PyLong_AsLong can clear it; review finding) */
    PyObject *pcs = PySequence_Tuple(obj);
    if (!pcs) return -1;
    Py_ssize_t m = PyTuple_GET_SIZE(pcs);
    if (m > (1 << 16)) {
        Py_DECREF(pcs);
        return bad("pieces: too many");
    }
    long *firsts = (long *)wa(w, sizeof(long) * (size_t)(m ? m : 1), 0);
    long *spps = (long *)wa(w, sizeof(long) * (size_t)(m ? m : 1), 0);
    PyObject **partss = (PyObject **)wa(w, sizeof(PyObject *) * (size_t)(m ? m : 1), 0);
    int rc = -1;
    if (!firsts || !spps || !partss) {
        PyErr_NoMemory();
        goto out;
    }
    for (Py_ssize_t i = 0; i < m; i++) {
        PyObject *pc = PyTuple_GET_ITEM(pcs, i);
        if (!PyTuple_Check(pc) || PyTuple_GET_SIZE(pc) != 3) {
            bad("piece: (first, spp, parts)");
            goto out;
        }
        firsts[i] = PyLong_AsLong(PyTuple_GET_ITEM(pc, 0));
        spps[i] = PyLong_AsLong(PyTuple_GET_ITEM(pc, 1));
        partss[i] = PyTuple_GET_ITEM(pc, 2);
        if (PyErr_Occurred()) goto out;
    }
    rc = step_pieces(w, s, (int)m, firsts, spps, partss);
out:
    Py_DECREF(pcs);
    return rc;
}

/* inputs: ((tensor, streamable bit), ...); each input's source is resolved to a step once
 * every step is parsed (the tensor code waits in src) */
static int step_inputs(Walk *w, Step *s, PyObject *obj) {
    PyObject *ins = PySequence_Fast(obj, "inputs");
    if (!ins) return -1;
    Py_ssize_t m = PySequence_Fast_GET_SIZE(ins);
    if (m > (1 << 20)) {
        Py_DECREF(ins);
        return bad("too many inputs");
    }
    s->n_inputs = (int)m;
    s->inputs = (Input *)wa(w, sizeof(Input) * (size_t)(m ? m : 1), 1);
    if (!s->inputs) {
        Py_DECREF(ins);
        PyErr_NoMemory();
        return -1;
    }
    for (Py_ssize_t q = 0; q < m; q++) {
        PyObject *it = PySequence_Fast_GET_ITEM(ins, q);
        long tensor = -1, sbit = -2;
        if (PyTuple_Check(it) && PyTuple_GET_SIZE(it) == 2) {
            tensor = as_long(PyTuple_GET_ITEM(it, 0));
            sbit = as_long(PyTuple_GET_ITEM(it, 1));
        }
        if (PyErr_Occurred() || tensor < 0 || tensor > INT_MAX || sbit < -1 || sbit >= MAX_STREAMED) {
            Py_DECREF(ins);
            if (!PyErr_Occurred()) bad("input: (tensor code, streamable bit or -1)");
            return -1;
        }
        s->inputs[q].src = (int)tensor;
        s->inputs[q].sbit = (int)sbit;
    }
    Py_DECREF(ins);
    return 0;
}

/* a group's working-set table (wk: a list, None where not computed yet; a dict for a wide
 * group), its filler and its ws definition (None: the filler only) */
static int step_work(Step *s, PyObject *wk, PyObject *filler, PyObject *ws) {
    int top = -1;  /* the highest streamable bit */
    for (int q = 0; q < s->n_inputs; q++)
        if (s->inputs[q].sbit > top) top = s->inputs[q].sbit;
    s->table = wk;  /* read on first use (work_at) */
    s->filler = filler;
    if (s->kind == K_GROUP && !PyCallable_Check(s->filler)) return bad("filler: a callable");
    if (PyDict_Check(wk)) {  /* a wide group: every streamable input has a bit */
        if (s->kind != K_GROUP) return bad("work: a dict for a group only");
        if (top < LIST_STREAMED - 1) return bad("work: a list for narrow groups");
        s->n_work = 0;
        s->wide = 1;
        s->full = top >= 0 ? (((Mask)1 << (top + 1)) - 1) : 0;
        return 0;
    }
    if (!PyList_Check(wk)) return bad("work: a list of floats or None");
    if (ws && ws != Py_None) {
        if (s->kind != K_GROUP) return bad("ws: for a group only");
        s->ws = ws;
    }
    Py_ssize_t nw = PyList_GET_SIZE(wk);
    s->n_work = (int)nw;
    s->full = (Mask)(nw / 4) - 1;
    if (s->kind == K_GROUP) {
        if (nw < 4 || (nw & (nw - 1)) || nw > ((Py_ssize_t)4 << LIST_STREAMED))
            return bad("work table: 4 << streamable entries");
        for (int q = 0; q < s->n_inputs; q++)
            if (s->inputs[q].sbit >= LIST_STREAMED
                || (s->inputs[q].sbit >= 0 && nw / 8 < ((Py_ssize_t)1 << s->inputs[q].sbit)))
                return bad("work table too short");
    }
    return 0;
}

static int step_head(Step *s) {
    if (PyErr_Occurred()) return -1;
    if (!(s->tiles >= 0.0)) return bad("step: negative weight tiles");
    if (s->kind < 0 || s->kind > 2 || s->want < 0 || s->want > 3 || s->init < 0 || s->init > 2)
        return bad("step: kind, want or scope out of range");
    if (s->sb < 0 || s->fb < 0) return bad("step: negative sizes");
    return 0;
}

/* a step's reads: a sequence of ints (obj), or packed (obj NULL: cnt int32 at pv, checked) */
typedef struct {
    PyObject *obj;
    const int *pv;
    int cnt;
} Reads;

static int step_reads(Walk *w, Step *s, const Reads *r, int n) {
    if (r->obj) {
        if (ints(w, r->obj, &s->reads, &s->n_reads)) return -1;
    } else {
        s->n_reads = r->cnt;
        s->reads = (int *)wa(w, sizeof(int) * (size_t)(r->cnt ? r->cnt : 1), 0);
        if (!s->reads) {
            s->n_reads = 0;
            PyErr_NoMemory();
            return -1;
        }
        memcpy(s->reads, r->pv, sizeof(int) * (size_t)r->cnt);
    }
    for (int q = 0; q < s->n_reads; q++)
        if (s->reads[q] < 0 || s->reads[q] >= n) return bad("read out of range");
    return 0;
}

/* One step: (kind, want, allowed, init, tensor, reads, pieces, sb, fb, inputs, work, out,
 * filler, tiles[, ws]): work a list (None: not computed yet), filler(index) computes an entry,
 * tiles the group's weight tiles in the LLB; ws (a list table's chunk shape without halo or
 * attention terms, else None) lets ws_compute compute the entries here (parse_ws). */
static int parse_step(Walk *w, Step *s, PyObject *t, int n, int *is_out) {
    if (!PyTuple_Check(t) || (PyTuple_GET_SIZE(t) != 14 && PyTuple_GET_SIZE(t) != 15))
        return bad("step: a 14- or 15-tuple");
    s->kind = (int)PyLong_AsLong(PyTuple_GET_ITEM(t, 0));
    s->want = (int)PyLong_AsLong(PyTuple_GET_ITEM(t, 1));
    s->allowed = (int)PyLong_AsLong(PyTuple_GET_ITEM(t, 2));
    s->init = (int)PyLong_AsLong(PyTuple_GET_ITEM(t, 3));
    s->tensor = (int)PyLong_AsLong(PyTuple_GET_ITEM(t, 4));
    s->sb = PyLong_AsLong(PyTuple_GET_ITEM(t, 7));
    s->fb = PyLong_AsLong(PyTuple_GET_ITEM(t, 8));
    s->tiles = PyFloat_AsDouble(PyTuple_GET_ITEM(t, 13));
    if (step_head(s)) return -1;
    Reads rd = {PyTuple_GET_ITEM(t, 5), NULL, 0};
    if (step_reads(w, s, &rd, n)) return -1;
    if (step_pieces_seq(w, s, PyTuple_GET_ITEM(t, 6))) return -1;
    if (step_inputs(w, s, PyTuple_GET_ITEM(t, 9))) return -1;
    if (step_work(s, PyTuple_GET_ITEM(t, 10), PyTuple_GET_ITEM(t, 12),
                  PyTuple_GET_SIZE(t) == 15 ? PyTuple_GET_ITEM(t, 14) : NULL))
        return -1;
    *is_out = PyObject_IsTrue(PyTuple_GET_ITEM(t, 11));
    return *is_out < 0 ? -1 : 0;
}

static void free_walk(Walk *w) {
    binds_release(w);
    if (w->st) {
        for (int k = 0; k < w->n; k++) free_ws(&w->st[k]);  /* what parse_ws malloc'd */
    }
    w->st = NULL;
    ar_free(&w->arena);
}

static PyObject *walk_steps(Walk *wp, int n, int *is_out);

static PyObject *py_walk(PyObject *self, PyObject *args) {
    double cap, llb_cap;
    int nc;
    PyObject *steps_o;
    (void)self;
    int go_on = 0;
    if (!PyArg_ParseTuple(args, "ddiO|p", &cap, &llb_cap, &nc, &steps_o, &go_on)) return NULL;
    if (nc <= 0 || nc > 65536) {
        PyErr_SetString(PyExc_ValueError, "cores per cluster out of range");
        return NULL;
    }
    PyObject *steps = PySequence_Fast(steps_o, "steps: a sequence");
    if (!steps) return NULL;
    if (PySequence_Fast_GET_SIZE(steps) > (1 << 24)) {
        Py_DECREF(steps);
        PyErr_SetString(PyExc_ValueError, "too many steps");
        return NULL;
    }
    Walk w;
    int n = (int)PySequence_Fast_GET_SIZE(steps);
    int *is_out = walk_begin(&w, n, nc, cap, llb_cap, go_on);
    PyObject *result = NULL;
    if (!is_out) {
        PyErr_NoMemory();
        goto fail;
    }
    for (int k = 0; k < n; k++) {
        w.n = k + 1;  /* what free_walk frees */
        if (parse_step(&w, &w.st[k], PySequence_Fast_GET_ITEM(steps, k), n, &is_out[k])) goto fail;
    }
    binds_release(&w);  /* the steps are parsed */
    result = walk_steps(&w, n, is_out);  /* frees the walk (is_out with it) */
    Py_DECREF(steps);  /* the walk borrowed the tables it holds */
    return result;
fail:
    free_walk(&w);
    Py_DECREF(steps);
    return NULL;
}

/* A new walk of n steps: zeroed, its capacities set, its steps and output flags carved
 * from its arena; returns the flags (NULL: out of memory, the walk still to be freed). */
static int *walk_begin(Walk *w, int n, int nc, double cap, double llb_cap, int go_on) {
    memset(w, 0, sizeof *w);
    w->nc = nc;
    w->cap = cap;
    w->llb_cap = llb_cap;
    w->go_on = go_on;
    w->small = nc <= 64;
    w->st = (Step *)wa(w, sizeof(Step) * (size_t)(n ? n : 1), 1);
    int *is_out = (int *)wa(w, sizeof(int) * ((size_t)n + 1), 1);
    return w->st ? is_out : NULL;
}

/* What a walk of n parsed steps needs beyond its steps (is_out: the results the graph
 * outputs): the reads' edges, the last readers, expire and reader lists, the run's
 * arrays; none of it depends on the scopes the steps ask for (a repair round walks it
 * again, walk_run). 0, or -1 with the error set (the walk still to be freed). */
static int walk_prepare(Walk *w, int n, int *is_out) {
    int nc = w->nc;
    double *edge_mem = NULL;
    unsigned char *edge_fbm = NULL;
    size_t total_usage = 0;
    for (int k = 0; k < n; k++) total_usage += w->st[k].n_cores;
    w->n = n;
    /* usage_ptr and the edge indices are ints: refuse sums an int cannot hold (review) */
    if (total_usage > (size_t)INT_MAX / 2) {
        bad("walk: too many cores over the steps");
        return -1;
    }
    w->last = (int *)wa(w, sizeof(int) * ((size_t)n + 1), 0);
    if (!w->last) {
        PyErr_NoMemory();
        return -1;
    }
    /* global reads: each (reader, read) pair, with its staying table made on first use */
    long long n_rd_all = 0;
    for (int j = 0; j < n; j++) n_rd_all += w->st[j].n_reads;
    if (n_rd_all > INT_MAX / 2) {
        bad("walk: too many reads over the steps");
        return -1;
    }
    int n_rd = (int)n_rd_all;
    w->n_edges = n_rd;
    /* (not zeroed: each edge's `done` is cleared below, its tables when first made, edge()) */
    w->ed = (Edge *)wa(w, sizeof(Edge) * (size_t)(n_rd ? n_rd : 1), 0);
    w->ge_src = (int *)wa(w, sizeof(int) * ((size_t)n_rd + 1), 0);
    w->ge_dst = (int *)wa(w, sizeof(int) * ((size_t)n_rd + 1), 0);
    edge_mem = (double *)wa(w, sizeof(double) * (size_t)(n_rd ? n_rd : 1) * (size_t)nc, 0);
    edge_fbm = (unsigned char *)wa(w, (size_t)(n_rd ? n_rd : 1) * (size_t)nc, 0);
    if (!w->ed || !w->ge_src || !w->ge_dst || !edge_mem || !edge_fbm) {
        PyErr_NoMemory();
        return -1;
    }
    for (int j = 0; j < n; j++) {
        Step *s = &w->st[j];
        s->redges = (int *)wa(w, sizeof(int) * (size_t)(s->n_reads ? s->n_reads : 1), 0);
        if (!s->redges) {
            PyErr_NoMemory();
            return -1;
        }
    }
    {
        int g = 0;
        for (int j = 0; j < n; j++) {
            Step *s = &w->st[j];
            for (int q = 0; q < s->n_reads; q++, g++) {
                w->ge_src[g] = s->reads[q];
                w->ge_dst[g] = j;
                w->ed[g].done = 0;
                w->ed[g].sb = edge_mem + (size_t)g * nc;
                w->ed[g].fbm = edge_fbm + (size_t)g * nc;
                s->redges[q] = s->kind == K_GROUP ? g : -1;
            }
            /* an input's source: the last read providing its tensor */
            for (int r = 0; r < s->n_inputs; r++) {
                int tensor = s->inputs[r].src, src = -1, e = -1;
                for (int q = 0; q < s->n_reads; q++)
                    if (w->st[s->reads[q]].tensor == tensor) {
                        src = s->reads[q];
                        e = s->redges[q];
                    }
                s->inputs[r].src = src;
                s->inputs[r].edge = e;
            }
        }
    }
    /* last reader of every result (CapacityWalk.last), expire lists, reader lists */
    for (int k = 0; k < n; k++) w->last[k] = k;
    for (int j = 0; j < n; j++)
        for (int q = 0; q < w->st[j].n_reads; q++) {
            int d = w->st[j].reads[q];
            if (j > w->last[d]) w->last[d] = j;
        }
    for (int k = 0; k < n; k++)
        if (is_out[k]) w->last[k] = n;
    size_t un = (size_t)n + 1, unc = (size_t)nc;
    w->exp_ptr = (int *)wa(w, sizeof(int) * (un + 1), 1);
    w->exp_idx = (int *)wa(w, sizeof(int) * un, 0);
    w->rd_ptr = (int *)wa(w, sizeof(int) * un, 1);
    w->rd_j = (int *)wa(w, sizeof(int) * ((size_t)n_rd + 1), 0);
    w->rd_e = (int *)wa(w, sizeof(int) * ((size_t)n_rd + 1), 0);
    w->scope = (int *)wa(w, sizeof(int) * un, 0);
    /* the run's state: cleared by every run (walk_run), not here */
    w->resident = (int *)wa(w, sizeof(int) * un, 0);
    w->l1_live = (double *)wa(w, sizeof(double) * unc, 0);
    w->future = (double *)wa(w, sizeof(double) * (size_t)(n ? n : 1) * unc, 0);
    w->peak_l1 = (double *)wa(w, sizeof(double) * unc, 0);
    w->stamp = (int *)wa(w, sizeof(int) * un, 1);
    w->stamp2 = (unsigned char *)wa(w, unc, 1);
    w->staying = (double *)wa(w, sizeof(double) * unc, 1);
    w->mask_out = (Mask *)wa(w, sizeof(Mask) * un, 0);  /* (the run's too) */
    w->held_out = (int *)wa(w, sizeof(int) * un, 0);
    w->usage = (double *)wa(w, sizeof(double) * (total_usage + 1), 0);
    w->usage_ptr = (int *)wa(w, sizeof(int) * un, 1);
    int *scratch = (int *)wa(w, sizeof(int) * un, 1);
    w->next_group = (int *)wa(w, sizeof(int) * (un + 1), 0);
    if (!w->exp_ptr || !w->exp_idx || !w->rd_ptr || !w->rd_j || !w->rd_e || !w->scope || !w->resident
        || !w->l1_live || !w->future || !w->peak_l1 || !w->stamp || !w->stamp2 || !w->staying
        || !w->mask_out || !w->held_out || !w->usage || !w->usage_ptr || !scratch || !w->next_group) {
        PyErr_NoMemory();
        return -1;
    }
    for (int i = 0; i < n; i++)
        if (w->last[i] < n) w->exp_ptr[w->last[i] + 1]++;
    for (int k = 0; k < n + 1; k++) w->exp_ptr[k + 1] += w->exp_ptr[k];
    {
        int *fill = scratch;
        for (int i = 0; i < n; i++)
            if (w->last[i] < n) w->exp_idx[w->exp_ptr[w->last[i]] + fill[w->last[i]]++] = i;
    }
    {
        int *cnt = scratch;
        memset(cnt, 0, sizeof(int) * ((size_t)n + 1));
        for (int j = 0; j < n; j++)
            for (int q = 0; q < w->st[j].n_reads; q++) cnt[w->st[j].reads[q]]++;
        for (int d = 0; d < n; d++) w->rd_ptr[d + 1] = w->rd_ptr[d] + cnt[d];
        memset(cnt, 0, sizeof(int) * (n + 1));
        for (int j = 0; j < n; j++)
            for (int q = 0; q < w->st[j].n_reads; q++) {
                int d = w->st[j].reads[q];
                int slot = w->rd_ptr[d] + cnt[d]++;
                w->rd_j[slot] = j;
                w->rd_e[slot] = w->st[j].redges[q];
            }
    }
    for (int k = 0; k < n; k++) w->scope[k] = w->st[k].init;
    w->next_group[n] = w->next_group[n + 1] = n;
    for (int k = n - 1; k >= 0; k--) w->next_group[k] = w->st[k].kind == K_GROUP ? k : w->next_group[k + 1];
    for (int k = 0; k < n; k++) w->usage_ptr[k + 1] = w->usage_ptr[k] + w->st[k].n_cores;

    return 0;
}

/* Walk the prepared steps from the start (the run's state cleared: a kept walk is walked
 * again with other scopes asked for, py_rewalk) and return what walk() returns (NULL:
 * the error set). The staying tables, bounds and parsed working-set definitions depend
 * on the layouts only and are kept. */
static PyObject *walk_run(Walk *w) {
    int n = w->n, nc = w->nc;
    PyObject *result = NULL;
    Py_CLEAR(w->x_live);
    for (int k = 0; k < n; k++) w->scope[k] = w->st[k].init;
    memset(w->resident, 0, sizeof(int) * ((size_t)n + 1));
    memset(w->l1_live, 0, sizeof(double) * (size_t)nc);
    memset(w->peak_l1, 0, sizeof(double) * (size_t)nc);
    memset(w->future, 0, sizeof(double) * (size_t)(n ? n : 1) * (size_t)nc);
    memset(w->mask_out, 0, sizeof(Mask) * ((size_t)n + 1));
    memset(w->held_out, 0, sizeof(int) * ((size_t)n + 1));
    memset(w->usage, 0, sizeof(double) * ((size_t)w->usage_ptr[n] + 1));
    w->llb_live = w->peak_llb = 0.0;
    w->failed = 0;
    w->overflow_at = -1;
    int status = run(w);
    if (w->failed) goto done;  /* the filler's exception */
    if (status) {
        result = Py_None;
        Py_INCREF(result);
        goto done;
    }
    {
        /* masks and helds packed (read when the plan's steps are: search_space/_cplan.py):
         * per step a uint64 mask, a held byte */
        PyObject *scopes = PyList_New(n);
        PyObject *masks = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)sizeof(Mask) * n);
        PyObject *helds = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)n);
        PyObject *peaks = PyList_New(nc);
        /* the per-step usage packed (the caller builds the plan's (core, bytes) tuples only
         * when the plan's steps are read): per step its count (int32), then every step's
         * cores (int32) and bytes (double), in step order */
        int n_u = 0;
        for (int k = 0; k < n; k++)  /* a transfer outside L1 uses no L1 */
            n_u += (w->st[k].kind != K_GROUP && w->scope[k] != L1) ? 0 : w->st[k].n_cores;
        PyObject *ucount = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)sizeof(int) * (n ? n : 1));
        PyObject *ucores = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)sizeof(int) * (n_u ? n_u : 1));
        PyObject *uvals = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)sizeof(double) * (n_u ? n_u : 1));
        if (!scopes || !masks || !helds || !peaks || !ucount || !ucores || !uvals) {
            Py_XDECREF(scopes); Py_XDECREF(masks); Py_XDECREF(helds); Py_XDECREF(peaks);
            Py_XDECREF(ucount); Py_XDECREF(ucores); Py_XDECREF(uvals);
            goto done;
        }
        int *cnt_p = (int *)PyBytes_AS_STRING(ucount), *cores_p = (int *)PyBytes_AS_STRING(ucores);
        double *vals_p = (double *)PyBytes_AS_STRING(uvals);
        int u = 0;
        Mask *mask_p = (Mask *)PyBytes_AS_STRING(masks);
        unsigned char *held_p = (unsigned char *)PyBytes_AS_STRING(helds);
        for (int k = 0; k < n; k++) {
            PyList_SET_ITEM(scopes, k, PyLong_FromLong(w->scope[k]));
            mask_p[k] = w->mask_out[k];
            held_p[k] = w->held_out[k] != 0;
            int m = (w->st[k].kind != K_GROUP && w->scope[k] != L1) ? 0 : w->st[k].n_cores;
            cnt_p[k] = m;
            for (int q = 0; q < m; q++, u++) {
                cores_p[u] = w->st[k].cores[q];
                vals_p[u] = w->usage[w->usage_ptr[k] + q];
            }
        }
        PyObject *usage = Py_BuildValue("(NNN)", ucount, ucores, uvals);
        if (!usage) {
            Py_DECREF(scopes); Py_DECREF(masks); Py_DECREF(helds); Py_DECREF(peaks);
            goto done;
        }
        for (int c = 0; c < nc; c++) PyList_SET_ITEM(peaks, c, PyFloat_FromDouble(w->peak_l1[c]));
        if (w->overflow_at < 0)
            result = Py_BuildValue("(NNNNNd)", scopes, masks, helds, usage, peaks, w->peak_llb);
        else  /* go_on: and the first overflow, what CapacityWalk explains it with */
            result = Py_BuildValue("(NNNNNdiiiddddO)", scopes, masks, helds, usage, peaks, w->peak_llb,
                                   w->overflow_at, w->x_llb, w->x_core, w->x_need, w->x_work,
                                   w->x_staying, w->x_llb_live, w->x_live);
    }
done:
    Py_CLEAR(w->x_live);
    return result;
}

/* The walk of n parsed steps (wp->st; is_out: the results the graph outputs): prepared,
 * then run. Takes over the walk and is_out (carved from its arena): freed here,
 * whatever happens. */
static PyObject *walk_steps(Walk *wp, int n, int *is_out) {
    Walk w = *wp;
    PyObject *result = walk_prepare(&w, n, is_out) ? NULL : walk_run(&w);
    Py_XDECREF(w.x_live);
    free_walk(&w);
    return result;
}

/* ---- the walk from per-group and per-transfer rows (search_space/_ccore.py) -------------
 *
 * index(nodes, gidx, gsplit, tidx, tprod, outs) -> (refs, is_out, asks, chunk_at, step_at):
 *   nodes the order (("g", group, chunk) or ("t", transfer, 0)), gidx / tidx the positions of
 *   the groups / transfers by name, gsplit each group's chunks, tprod each transfer's
 *   producer group (-1: a fixed transfer), outs the nodes the graph outputs. refs: per step
 *   (group index, chunk) or (-1 - transfer index, 0) as int32 pairs; is_out one byte per
 *   step; asks the answers in the order the walk asks for them (a group's policy at its
 *   first chunk: its index; a producer's transfer scope at its first transfer whose scope
 *   is free: -1 - the producer's index); chunk_at per group its chunks' positions, step_at
 *   per transfer its position.
 *
 * walk_rows(cap_l1, cap_llb, n_cores, refs, is_out, reads, grows, gwants, trows, tprod,
 *           pwants[, go_on[, tpack, sizes, batch, ring[, keep[, stop]]]]) -> what walk() returns: the
 *   steps made from the rows, each as parse_step would read it (search_space/_ccore.py,
 *   _step_rows): reads per step the steps it reads (a list of int sequences, or packed as
 *   _cdag.derive packs them: bytes, int32, the count of steps, then per step its count and
 *   its reads); grows[i] = (allowed, tensor, sb, fb, inputs, work, filler, tiles, ws,
 *   samples per chunk, binds: per chunk its parts), gwants[i] the scope each chunk asks
 *   for; trows[j] = (pieces, init, tensor, sb, fb); pwants[p] the scope producer p's free
 *   transfers ask for (0..3, 3 = auto). With tpack (bytes, not None) the transfers' rows
 *   come packed from _cdag.derive instead of trows (packed_step: six int32 per transfer;
 *   sizes two int64 per tensor code; batch; ring the binding of a transfer no group chunk
 *   binds). With keep: (that, handle), the walk kept when it overflowed (rewalk below). With
 *   go_on and stop: a partial walk, stopped at its first overflow once explained (what a
 *   capacity repair round reads of a walk it will not return; the steps after it are left
 *   at their initial scopes, no mask, no usage; the peaks are those up to it). */

static int node_ref(PyObject *node, PyObject *gidx, PyObject *gsplit, PyObject *tidx,
                    int *ref, int *chunk) {
    if (!PyTuple_Check(node) || PyTuple_GET_SIZE(node) < 2 || !PyUnicode_Check(PyTuple_GET_ITEM(node, 0))
        || PyUnicode_GET_LENGTH(PyTuple_GET_ITEM(node, 0)) != 1)
        return bad("node: (\"g\", group, chunk) or (\"t\", transfer, 0)");
    Py_UCS4 kind = PyUnicode_READ_CHAR(PyTuple_GET_ITEM(node, 0), 0);
    PyObject *name = PyTuple_GET_ITEM(node, 1);
    if (kind == 'g') {
        if (PyTuple_GET_SIZE(node) != 3) return bad("node: (\"g\", group, chunk)");
        PyObject *v = PyDict_GetItemWithError(gidx, name);
        if (!v) return PyErr_Occurred() ? -1 : 1;  /* not a group of this decode */
        long i = PyLong_AsLong(v), c = PyLong_AsLong(PyTuple_GET_ITEM(node, 2));
        if (PyErr_Occurred()) return -1;
        if (i < 0 || i >= PyList_GET_SIZE(gsplit)) return bad("group index out of range");
        long split = PyLong_AsLong(PyList_GET_ITEM(gsplit, i));
        if (split == -1 && PyErr_Occurred()) return -1;
        if (c < 0 || c >= split) return bad("chunk out of range");
        *ref = (int)i;
        *chunk = (int)c;
        return 0;
    }
    if (kind != 't' || PyTuple_GET_SIZE(node) > 3) return bad("node: (\"t\", transfer, 0)");
    PyObject *v = PyDict_GetItemWithError(tidx, name);
    if (!v) return PyErr_Occurred() ? -1 : 1;
    long j = PyLong_AsLong(v);
    if (j == -1 && PyErr_Occurred()) return -1;
    if (j < 0 || j >= 0x3fffffff) return bad("transfer index out of range");
    *ref = -1 - (int)j;
    *chunk = 0;
    return 0;
}

static PyObject *py_index(PyObject *self, PyObject *args) {
    PyObject *nodes, *gidx, *gsplit, *tidx, *tprod, *outs;
    (void)self;
    if (!PyArg_ParseTuple(args, "O!O!O!O!O!O", &PyList_Type, &nodes, &PyDict_Type, &gidx,
                          &PyList_Type, &gsplit, &PyDict_Type, &tidx, &PyList_Type, &tprod, &outs))
        return NULL;
    Py_ssize_t n = PyList_GET_SIZE(nodes), ng = PyList_GET_SIZE(gsplit), nt = PyList_GET_SIZE(tprod);
    if (n > (1 << 24) || ng > (1 << 24) || nt > (1 << 24)) return PyErr_Format(PyExc_ValueError, "too many steps");
    PyObject *refs = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)sizeof(int) * 2 * (n ? n : 1));
    PyObject *is_out = PyBytes_FromStringAndSize(NULL, n ? n : 1);
    PyObject *asks = PyList_New(0), *chunk_at = PyList_New(ng), *step_at = PyList_New(nt);
    unsigned char *seen = (unsigned char *)calloc((size_t)(ng ? ng : 1), 2);
    PyObject *outs_f = NULL;
    if (!refs || !is_out || !asks || !chunk_at || !step_at || !seen) goto fail;
    int *rf = (int *)PyBytes_AS_STRING(refs);
    unsigned char *io = (unsigned char *)PyBytes_AS_STRING(is_out);
    memset(io, 0, (size_t)(n ? n : 1));
    for (Py_ssize_t i = 0; i < ng; i++) {
        long split = PyLong_AsLong(PyList_GET_ITEM(gsplit, i));
        if (split == -1 && PyErr_Occurred()) goto fail;
        if (split < 0 || split > (1 << 24)) {
            bad("split out of range");
            goto fail;
        }
        PyObject *at = PyList_New(split);
        if (!at) goto fail;
        for (long c = 0; c < split; c++) PyList_SET_ITEM(at, c, PyLong_FromLong(0));
        PyList_SET_ITEM(chunk_at, i, at);
    }
    for (Py_ssize_t j = 0; j < nt; j++) {
        Py_INCREF(Py_None);
        PyList_SET_ITEM(step_at, j, Py_None);
    }
    for (Py_ssize_t k = 0; k < n; k++) {
        int ref, chunk;
        int r = node_ref(PyList_GET_ITEM(nodes, k), gidx, gsplit, tidx, &ref, &chunk);
        if (r) {
            if (r > 0) bad("a step of no group or transfer of the decode");
            goto fail;
        }
        rf[2 * k] = ref;
        rf[2 * k + 1] = chunk;
        PyObject *pos = PyLong_FromSsize_t(k);
        if (!pos) goto fail;
        if (ref >= 0) {
            if (PyList_SetItem(PyList_GET_ITEM(chunk_at, ref), chunk, pos)) goto fail;
            if (!seen[ref]) {
                seen[ref] = 1;
                PyObject *a = PyLong_FromLong(ref);
                if (!a || PyList_Append(asks, a)) { Py_XDECREF(a); goto fail; }
                Py_DECREF(a);
            }
        } else {
            int j = -1 - ref;
            if (j >= nt) {
                Py_DECREF(pos);
                bad("transfer index out of range");
                goto fail;
            }
            if (PyList_SetItem(step_at, j, pos)) goto fail;
            long p = PyLong_AsLong(PyList_GET_ITEM(tprod, j));
            if (p == -1 && PyErr_Occurred()) goto fail;
            if (p >= ng || p < -1) {
                bad("producer out of range");
                goto fail;
            }
            if (p >= 0 && !seen[ng + p]) {
                seen[ng + p] = 1;
                PyObject *a = PyLong_FromLong(-1 - p);
                if (!a || PyList_Append(asks, a)) { Py_XDECREF(a); goto fail; }
                Py_DECREF(a);
            }
        }
    }
    outs_f = PySequence_Fast(outs, "outs: a sequence of nodes");
    if (!outs_f) goto fail;
    for (Py_ssize_t q = 0; q < PySequence_Fast_GET_SIZE(outs_f); q++) {
        int ref, chunk;
        int r = node_ref(PySequence_Fast_GET_ITEM(outs_f, q), gidx, gsplit, tidx, &ref, &chunk);
        if (r < 0) goto fail;
        if (r > 0) continue;  /* not a step of this decode */
        PyObject *pos = ref >= 0 ? PyList_GET_ITEM(PyList_GET_ITEM(chunk_at, ref), chunk)
                                 : (-1 - ref < nt ? PyList_GET_ITEM(step_at, -1 - ref) : Py_None);
        if (pos == Py_None) continue;
        Py_ssize_t k = PyLong_AsSsize_t(pos);
        if (k == -1 && PyErr_Occurred()) goto fail;
        /* the node is the step at k only if the step there is this node */
        if (k >= 0 && k < n && rf[2 * k] == ref && rf[2 * k + 1] == chunk) io[k] = 1;
    }
    Py_DECREF(outs_f);
    free(seen);
    return Py_BuildValue("(NNNNN)", refs, is_out, asks, chunk_at, step_at);
fail:
    Py_XDECREF(outs_f);
    Py_XDECREF(refs);
    Py_XDECREF(is_out);
    Py_XDECREF(asks);
    Py_XDECREF(chunk_at);
    Py_XDECREF(step_at);
    free(seen);
    return NULL;
}

static long item_long(PyObject *t, Py_ssize_t i) { return as_long(PyTuple_GET_ITEM(t, i)); }

static int scope_code(PyObject *obj, int lo, int hi, int *out) {
    long v = as_long(obj);
    if (v == -1 && PyErr_Occurred()) return -1;
    if (v < lo || v > hi) return bad("scope code out of range");
    *out = (int)v;
    return 0;
}

/* a transfer step's kind and the scope it asks for: fixed (producer -1) or its producer's
 * transfer scope */
static int packed_kind(Step *s, int j, PyObject *tprod, PyObject *pwants) {
    if (j < 0 || j >= PyList_GET_SIZE(tprod)) return bad("transfer out of range");
    PyObject *po = PyList_GET_ITEM(tprod, j);
    if (!PyLong_Check(po)) return bad("producer: an int");
    long p = as_long(po);
    if (p == -1 && PyErr_Occurred()) return -1;
    if (p < -1 || p >= PyList_GET_SIZE(pwants)) return bad("producer out of range");
    if (p < 0) {
        s->kind = K_FIXED;
        s->want = DDR;
    } else {
        s->kind = K_TRANSFER;
        if (scope_code(PyList_GET_ITEM(pwants, p), 0, 3, &s->want)) return -1;
    }
    return 0;
}

/* step k from its group's row (chunk `chunk`) or transfer's row */
static int rows_step(Walk *w, Step *s, int n, int ref, int chunk, const Reads *reads, PyObject *grows,
                     PyObject *gwants, PyObject *trows, PyObject *tprod, PyObject *pwants) {
    if (ref >= 0) {
        if (ref >= PyList_GET_SIZE(grows) || ref >= PyList_GET_SIZE(gwants)) return bad("group out of range");
        PyObject *g = PyList_GET_ITEM(grows, ref);
        if (!PyTuple_Check(g) || PyTuple_GET_SIZE(g) != 11) return bad("group row: an 11-tuple");
        PyObject *binds = PyTuple_GET_ITEM(g, 10), *wants = PyList_GET_ITEM(gwants, ref);
        if (!PyTuple_Check(binds) || chunk < 0 || chunk >= PyTuple_GET_SIZE(binds))
            return bad("group row: a binding per chunk");
        if (!PyTuple_Check(wants) || chunk >= PyTuple_GET_SIZE(wants))
            return bad("group wants: a scope per chunk");
        s->kind = K_GROUP;
        if (scope_code(PyTuple_GET_ITEM(wants, chunk), 0, 3, &s->want)) return -1;
        s->allowed = (int)item_long(g, 0);
        s->init = DDR;
        s->tensor = (int)item_long(g, 1);
        s->sb = item_long(g, 2);
        s->fb = item_long(g, 3);
        s->tiles = PyFloat_AsDouble(PyTuple_GET_ITEM(g, 7));
        long samples = item_long(g, 9);
        if (step_head(s)) return -1;
        if (samples < 0) return bad("group row: negative samples");
        if (step_reads(w, s, reads, n)) return -1;
        PyObject *parts = PyTuple_GET_ITEM(binds, chunk);
        if (!PyTuple_Check(parts) || PyTuple_GET_SIZE(parts) == 0) return bad("binding: a tuple of parts");
        /* checked by division before the multiply (a signed overflow is undefined) */
        if (chunk && samples > LONG_MAX / chunk) return bad("group row: samples out of range");
        long first = (long)chunk * samples, spp = samples / (long)PyTuple_GET_SIZE(parts);
        if (step_pieces(w, s, 1, &first, &spp, &parts)) return -1;
        if (step_inputs(w, s, PyTuple_GET_ITEM(g, 4))) return -1;
        return step_work(s, PyTuple_GET_ITEM(g, 5), PyTuple_GET_ITEM(g, 6), PyTuple_GET_ITEM(g, 8));
    }
    int j = -1 - ref;
    if (j >= PyList_GET_SIZE(trows)) return bad("transfer out of range");
    PyObject *t = PyList_GET_ITEM(trows, j);
    if (!PyTuple_Check(t) || PyTuple_GET_SIZE(t) != 5) return bad("transfer row: a 5-tuple");
    if (packed_kind(s, j, tprod, pwants)) return -1;
    s->allowed = 7;
    s->init = (int)item_long(t, 1);
    s->tensor = (int)item_long(t, 2);
    s->sb = item_long(t, 3);
    s->fb = item_long(t, 4);
    s->tiles = 0.0;
    if (step_head(s)) return -1;
    if (step_reads(w, s, reads, n)) return -1;
    if (step_pieces_seq(w, s, PyTuple_GET_ITEM(t, 0))) return -1;
    s->n_inputs = 0;
    s->inputs = (Input *)wa(w, sizeof(Input), 1);
    if (!s->inputs) {
        PyErr_NoMemory();
        return -1;
    }
    s->table = NULL;  /* a transfer has no working set (work_at is asked for groups only) */
    s->filler = Py_None;
    return 0;
}

/* A transfer's step from derive()'s packed row (search_space/_cdag.c, walk_index: tensor
 * code, dst factor, first dst chunk, dst chunks, binding group, binding chunk; group -1:
 * `ring`), its sizes from `sizes` (per tensor code, int64 bytes per sample and fixed bytes:
 * compiler.footprint.sample_bytes) and its binding the group row's chunk binding: the row
 * _ccore._transfer_row makes, its pieces (chunk * samples, samples // parts, parts) per dst
 * chunk, samples = batch // dst factor, its result in DDR. Nothing from Python is trusted:
 * every index is checked against what it indexes. */
typedef struct {
    const int *tp;         /* TPACK int32 per transfer */
    Py_ssize_t nt;         /* transfers */
    const long long *sz;   /* two int64 per tensor code */
    Py_ssize_t n_sz;       /* tensor codes */
    long batch;
    PyObject *ring;        /* the binding of a transfer with no group chunk to follow */
} Packed;

enum { TPACK = 6 };

static int packed_step(Walk *w, Step *s, int n, int j, const Reads *reads, PyObject *grows,
                       const Packed *pk) {
    if (j < 0 || j >= pk->nt) return bad("transfer out of range");
    const int *row = pk->tp + (size_t)TPACK * (size_t)j;
    int tensor = row[0], df = row[1], d0 = row[2], dn = row[3], bg = row[4], bc = row[5];
    if (tensor < 0 || tensor >= pk->n_sz) return bad("packed transfer: tensor code out of range");
    if (df <= 0 || d0 < 0 || dn <= 0 || dn > (1 << 16)) return bad("packed transfer: bad chunks");
    PyObject *parts = pk->ring;
    if (bg >= 0) {
        if (bg >= PyList_GET_SIZE(grows)) return bad("packed transfer: binding group out of range");
        PyObject *g = PyList_GET_ITEM(grows, bg);
        if (!PyTuple_Check(g) || PyTuple_GET_SIZE(g) != 11) return bad("group row: an 11-tuple");
        PyObject *binds = PyTuple_GET_ITEM(g, 10);
        if (!PyTuple_Check(binds) || bc < 0 || bc >= PyTuple_GET_SIZE(binds))
            return bad("packed transfer: binding chunk out of range");
        parts = PyTuple_GET_ITEM(binds, bc);
    } else if (bg != -1) {
        return bad("packed transfer: binding group out of range");
    }
    if (!PyTuple_Check(parts) || PyTuple_GET_SIZE(parts) == 0) return bad("binding: a tuple of parts");
    s->allowed = 7;
    s->init = DDR;
    s->tensor = tensor;
    s->sb = (long)pk->sz[2 * (size_t)tensor];
    s->fb = (long)pk->sz[2 * (size_t)tensor + 1];
    if (pk->sz[2 * (size_t)tensor] != s->sb || pk->sz[2 * (size_t)tensor + 1] != s->fb)
        return bad("packed transfer: sizes out of range");
    s->tiles = 0.0;
    if (step_head(s)) return -1;
    if (step_reads(w, s, reads, n)) return -1;
    long samples = pk->batch / df, spp = samples / (long)PyTuple_GET_SIZE(parts);
    /* the last chunk's first sample, checked by division before the multiply */
    if (samples > 0 && (long)d0 + dn - 1 > LONG_MAX / samples) return bad("packed transfer: samples out of range");
    long *firsts = (long *)wa(w, sizeof(long) * (size_t)dn, 0);
    long *spps = (long *)wa(w, sizeof(long) * (size_t)dn, 0);
    PyObject **partss = (PyObject **)wa(w, sizeof(PyObject *) * (size_t)dn, 0);
    if (!firsts || !spps || !partss) {
        PyErr_NoMemory();
        return -1;
    }
    for (int i = 0; i < dn; i++) {
        firsts[i] = ((long)d0 + i) * samples;
        spps[i] = spp;
        partss[i] = parts;
    }
    if (step_pieces(w, s, dn, firsts, spps, partss)) return -1;
    s->n_inputs = 0;
    s->inputs = (Input *)wa(w, sizeof(Input), 1);
    if (!s->inputs) {
        PyErr_NoMemory();
        return -1;
    }
    s->table = NULL;
    s->filler = Py_None;
    return 0;
}

static PyObject *walk_kept(Walk *wp, int n, int *is_out, const int *rf, PyObject *tprod,
                           Py_ssize_t n_groups, Py_ssize_t n_pw, PyObject *args);

static PyObject *py_walk_rows(PyObject *self, PyObject *args) {
    double cap, llb_cap;
    int nc, go_on = 0;
    PyObject *refs, *is_out_b, *reads, *grows, *gwants, *trows, *tprod, *pwants;
    PyObject *tpack = Py_None, *sizes = Py_None, *ring = Py_None;
    long batch = 0;
    int keep = 0, stop = 0;
    Packed pk;
    (void)self;
    if (!PyArg_ParseTuple(args, "ddiO!O!OO!O!O!O!O!|pOOlOpp", &cap, &llb_cap, &nc, &PyBytes_Type, &refs,
                          &PyBytes_Type, &is_out_b, &reads, &PyList_Type, &grows,
                          &PyList_Type, &gwants, &PyList_Type, &trows, &PyList_Type, &tprod,
                          &PyList_Type, &pwants, &go_on, &tpack, &sizes, &batch, &ring, &keep, &stop))
        return NULL;
    if (nc <= 0 || nc > 65536) return PyErr_Format(PyExc_ValueError, "cores per cluster out of range");
    memset(&pk, 0, sizeof pk);
    if (tpack != Py_None) {  /* the transfers packed by _cdag.derive (packed_step), trows unused */
        if (!PyBytes_Check(tpack) || !PyBytes_Check(sizes) || !PyTuple_Check(ring) || batch <= 0)
            return PyErr_Format(PyExc_ValueError, "packed transfers: (bytes, sizes bytes, batch, ring)");
        Py_ssize_t row = (Py_ssize_t)sizeof(int) * TPACK, pair = (Py_ssize_t)sizeof(long long) * 2;
        if (PyBytes_GET_SIZE(tpack) % row || PyBytes_GET_SIZE(sizes) % pair)
            return PyErr_Format(PyExc_ValueError, "packed transfers: whole rows");
        pk.tp = (const int *)PyBytes_AS_STRING(tpack);
        pk.nt = PyBytes_GET_SIZE(tpack) / row;
        if (pk.nt != PyList_GET_SIZE(tprod) && !(pk.nt == 1 && PyList_GET_SIZE(tprod) == 0))
            return PyErr_Format(PyExc_ValueError, "packed transfers: one row per transfer");
        pk.nt = PyList_GET_SIZE(tprod);
        pk.sz = (const long long *)PyBytes_AS_STRING(sizes);
        pk.n_sz = PyBytes_GET_SIZE(sizes) / pair;
        pk.batch = batch;
        pk.ring = ring;
    }
    /* reads: a list of int sequences, or packed by _cdag.derive (bytes, int32: the count of
     * steps, then per step its count and reads), checked whole before any step is made */
    Py_ssize_t n;
    const int *rp = NULL;
    if (PyBytes_Check(reads)) {
        Py_ssize_t nb = PyBytes_GET_SIZE(reads), ni = nb / (Py_ssize_t)sizeof(int);
        rp = (const int *)PyBytes_AS_STRING(reads);
        if (nb % (Py_ssize_t)sizeof(int) || ni < 1 || rp[0] < 0 || rp[0] > (1 << 24))
            return PyErr_Format(PyExc_ValueError, "packed reads: whole int32, the count first");
        n = rp[0];
        Py_ssize_t at = 1;
        for (Py_ssize_t k = 0; k < n; k++) {
            if (at >= ni || rp[at] < 0 || rp[at] > ni - at - 1)
                return PyErr_Format(PyExc_ValueError, "packed reads: a step's reads past the end");
            at += 1 + rp[at];
        }
        if (at != ni) return PyErr_Format(PyExc_ValueError, "packed reads: bytes after the last step");
        rp++;
    } else if (PyList_Check(reads)) {
        n = PyList_GET_SIZE(reads);
    } else {
        return PyErr_Format(PyExc_TypeError, "reads: a list, or packed (bytes)");
    }
    /* refs: two int32 per step (compared by division: no product to overflow) */
    if (n > (1 << 24) || PyBytes_GET_SIZE(is_out_b) != (n ? n : 1)
        || PyBytes_GET_SIZE(refs) / (Py_ssize_t)(2 * sizeof(int)) != (n ? n : 1)
        || PyBytes_GET_SIZE(refs) % (Py_ssize_t)(2 * sizeof(int)))
        return PyErr_Format(PyExc_ValueError, "refs, is_out and reads: one per step");
    Walk w;
    int *is_out = walk_begin(&w, (int)n, nc, cap, llb_cap, go_on);
    if (!is_out) {
        PyErr_NoMemory();
        goto fail;
    }
    w.stop_first = go_on && stop;
    const int *rf = (const int *)PyBytes_AS_STRING(refs);
    const unsigned char *io = (const unsigned char *)PyBytes_AS_STRING(is_out_b);
    for (Py_ssize_t k = 0; k < n; k++) {
        w.n = (int)k + 1;  /* what free_walk frees */
        Reads rd = {NULL, NULL, 0};
        if (rp) {  /* (a list's item is read at its step: the earlier steps run no Python) */
            rd.cnt = *rp;
            rd.pv = rp + 1;
            rp += 1 + rd.cnt;
        } else {
            if (k >= PyList_GET_SIZE(reads)) { bad("reads: one per step"); goto fail; }
            rd.obj = PyList_GET_ITEM(reads, k);
        }
        int rc = pk.tp && rf[2 * k] < 0
            ? packed_kind(&w.st[k], -1 - rf[2 * k], tprod, pwants)
                || packed_step(&w, &w.st[k], (int)n, -1 - rf[2 * k], &rd, grows, &pk)
            : rows_step(&w, &w.st[k], (int)n, rf[2 * k], rf[2 * k + 1], &rd,
                        grows, gwants, trows, tprod, pwants);
        if (rc) goto fail;
        is_out[k] = io[k] != 0;
    }
    binds_release(&w);  /* the steps are parsed */
    if (keep) return walk_kept(&w, (int)n, is_out, rf, tprod, PyList_GET_SIZE(grows),
                               PyList_GET_SIZE(pwants), args);
    /* the rows stay alive while the walk borrows their tables: the caller holds them */
    return walk_steps(&w, (int)n, is_out);
fail:
    free_walk(&w);
    return NULL;
}

/* ---- a walk kept for the capacity repair's walks (search_space/_ccore.py, scope_walk) ---
 *
 * walk_rows(..., keep=True) -> (what walk() returns, handle): the handle (None when the
 *   walk did not overflow: no repair round will walk it again) keeps the parsed and
 *   prepared steps and the rows they borrow from (walk_rows' arguments).
 * rewalk(handle, gwants, pwants[, stop]) -> what walk() returns: the same steps walked again
 *   from the start with the scopes gwants / pwants ask for (as walk_rows reads them); the
 *   staying tables, bounds and working-set definitions (layout-only) are not made again.
 *   With stop: a partial walk (walk_rows' stop), else a whole one. */
typedef struct {
    Walk w;
    int *ref, *chunk;      /* per step: (group, chunk) or (-1 - transfer, 0) */
    int *prod;             /* per step: a transfer's producer group, -1: fixed */
    Py_ssize_t n_groups, n_pw;  /* the rows' groups and producers (len(grows), len(pwants)) */
    int busy;              /* walking (a filler that walks the same handle again is refused) */
    PyObject *hold;        /* walk_rows' arguments: the rows stay alive while borrowed */
} Kept;

static const char *KEPT = "search_space._cwalk.kept";

static void kept_free(Kept *kp) {
    Py_CLEAR(kp->w.x_live);
    free_walk(&kp->w);
    Py_CLEAR(kp->hold);
    free(kp);
}

static void kept_capsule_free(PyObject *cap) {
    Kept *kp = (Kept *)PyCapsule_GetPointer(cap, KEPT);
    if (kp) kept_free(kp);
    else PyErr_Clear();
}

static PyObject *walk_kept(Walk *wp, int n, int *is_out, const int *rf, PyObject *tprod,
                           Py_ssize_t n_groups, Py_ssize_t n_pw, PyObject *args) {
    Kept *kp = (Kept *)calloc(1, sizeof(Kept));
    if (!kp) {
        free_walk(wp);
        return PyErr_NoMemory();
    }
    kp->w = *wp;  /* the walk (its arena) is the kept one's from here */
    kp->n_groups = n_groups;
    kp->n_pw = n_pw;
    Walk *w = &kp->w;
    PyObject *res = NULL, *cap = NULL;
    if (walk_prepare(w, n, is_out)) goto fail;
    kp->ref = (int *)wa(w, sizeof(int) * (size_t)(n ? n : 1), 0);
    kp->chunk = (int *)wa(w, sizeof(int) * (size_t)(n ? n : 1), 0);
    kp->prod = (int *)wa(w, sizeof(int) * (size_t)(n ? n : 1), 0);
    if (!kp->ref || !kp->chunk || !kp->prod) {
        PyErr_NoMemory();
        goto fail;
    }
    for (int k = 0; k < n; k++) {
        kp->ref[k] = rf[2 * k];
        kp->chunk[k] = rf[2 * k + 1];
        kp->prod[k] = -1;
        if (w->st[k].kind == K_TRANSFER) {  /* its producer, checked when the step was parsed */
            int j = -1 - rf[2 * k];
            PyObject *po = j >= 0 && j < PyList_GET_SIZE(tprod) ? PyList_GET_ITEM(tprod, j) : NULL;
            long p = po && PyLong_Check(po) ? as_long(po) : -1;
            if (p < 0 || p >= n_pw) {
                if (!PyErr_Occurred()) bad("producer out of range");
                goto fail;
            }
            kp->prod[k] = (int)p;
        }
    }
    kp->busy = 1;
    res = walk_run(w);
    kp->busy = 0;
    if (!res) goto fail;
    if (res == Py_None || w->overflow_at < 0) {  /* fits (or stopped): nothing to walk again */
        kept_free(kp);
        return Py_BuildValue("(NO)", res, Py_None);
    }
    /* a snapshot of the arguments, each list as a tuple of its items: the steps borrow the
     * rows' objects, which a caller clearing its lists after this call must not free */
    if (!(kp->hold = PyTuple_New(PyTuple_GET_SIZE(args)))) {
        Py_DECREF(res);
        kept_free(kp);
        return NULL;
    }
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(args); i++) {
        PyObject *a = PyTuple_GET_ITEM(args, i);
        PyObject *snap = PyList_Check(a) ? PyList_AsTuple(a) : (Py_INCREF(a), a);
        if (!snap) {
            Py_DECREF(res);
            kept_free(kp);
            return NULL;
        }
        PyTuple_SET_ITEM(kp->hold, i, snap);
    }
    cap = PyCapsule_New(kp, KEPT, kept_capsule_free);
    if (!cap) {
        Py_DECREF(res);
        kept_free(kp);
        return NULL;
    }
    return Py_BuildValue("(NN)", res, cap);
fail:
    kept_free(kp);
    return NULL;
}

/* a scope code 0..3 from an int itself (no __index__ runs that could change the lists) */
static int want_code(PyObject *obj, int *out) {
    if (!PyLong_Check(obj)) return bad("scope code: an int");
    return scope_code(obj, 0, 3, out);
}

static PyObject *py_rewalk(PyObject *self, PyObject *args) {
    PyObject *cap, *gwants, *pwants;
    int stop = 0;
    (void)self;
    if (!PyArg_ParseTuple(args, "OO!O!|p", &cap, &PyList_Type, &gwants, &PyList_Type, &pwants, &stop))
        return NULL;
    Kept *kp = (Kept *)PyCapsule_GetPointer(cap, KEPT);
    if (!kp) return NULL;
    if (kp->busy) return PyErr_Format(PyExc_ValueError, "rewalk: the walk is walking");
    if (PyList_GET_SIZE(gwants) != kp->n_groups || PyList_GET_SIZE(pwants) != kp->n_pw)
        return PyErr_Format(PyExc_ValueError, "rewalk: a scope per group and per producer");
    Walk *w = &kp->w;
    for (int k = 0; k < w->n; k++) {
        Step *s = &w->st[k];
        if (s->kind == K_GROUP) {
            PyObject *wants = PyList_GET_ITEM(gwants, kp->ref[k]);
            if (!PyTuple_Check(wants) || kp->chunk[k] >= PyTuple_GET_SIZE(wants))
                return PyErr_Format(PyExc_ValueError, "group wants: a scope per chunk");
            if (want_code(PyTuple_GET_ITEM(wants, kp->chunk[k]), &s->want)) return NULL;
        } else if (s->kind == K_TRANSFER) {
            if (want_code(PyList_GET_ITEM(pwants, kp->prod[k]), &s->want)) return NULL;
        }
    }
    w->stop_first = w->go_on && stop;
    kp->busy = 1;
    PyObject *res = walk_run(w);
    kp->busy = 0;
    return res;
}

/* a walk of one step that has `ws` only: what ws_compute reads (free_ws after) */
static void ws_alone(Walk *w, Step *st, PyObject *ws, int n_work) {
    memset(w, 0, sizeof *w);
    memset(st, 0, sizeof *st);
    st->ws = ws;
    st->n_work = n_work;
}

/* working_set's and ws_halo's (ws, n_work, index), an entry of a list table of 4 <<
 * streamable entries, as a walk of one step (ws_alone) and the index; -1 with the error set
 * when the arguments are not that */
static int ws_entry(PyObject *args, Walk *w, Step *st, unsigned long long *i) {
    PyObject *ws;
    int n_work;
    if (!PyArg_ParseTuple(args, "OiK", &ws, &n_work, i)) return -1;
    if (n_work < 4 || (n_work & (n_work - 1)) || *i >= (unsigned long long)n_work) {
        PyErr_SetString(PyExc_ValueError, "index outside a table of 4 << streamable entries");
        return -1;
    }
    ws_alone(w, st, ws, n_work);
    return 0;
}

/* working_set(ws, n_work, index): entry `index` of a list table of n_work entries as the
 * walk computes it from `ws` (ws_compute); for the differential tests. */
static PyObject *py_working_set(PyObject *self, PyObject *args) {
    Walk w;
    Step st;
    unsigned long long i;
    (void)self;
    if (ws_entry(args, &w, &st, &i)) return NULL;
    double v = ws_compute(&w, &st, (Mask)i);
    free_ws(&st);
    if (w.failed) return NULL;
    return PyFloat_FromDouble(v);
}

/* ---- h106: the fit's four least working sets in one call ----------------------------- */

/* fits(ws, n_work, l1, table) -> bool: search_space._ccore.fits_l1's loop over a chunk
 * shape's working-set entries, whether any of the four least (the streamable inputs all
 * streamed, then none; the output streamed out, then kept; not held) is <= l1, asked in that
 * order and stopping at the first that fits. Each entry is read from `table` (a list of
 * n_work entries, or None: no table) when it holds it, else computed from `ws` as the walk
 * computes it (ws_compute, the same definition `working_set` gives) and, with a table,
 * kept there as the walk keeps it. One parse of `ws` for the four entries. */
static PyObject *py_fits(PyObject *self, PyObject *args) {
    PyObject *ws, *table;
    int n_work;
    double l1;
    (void)self;
    if (!PyArg_ParseTuple(args, "OidO", &ws, &n_work, &l1, &table)) return NULL;
    if (n_work < 4 || (n_work & (n_work - 1))) {
        PyErr_SetString(PyExc_ValueError, "fits: a table of 4 << streamable entries");
        return NULL;
    }
    if (table != Py_None && (!PyList_Check(table) || PyList_GET_SIZE(table) != n_work)) {
        PyErr_SetString(PyExc_ValueError, "fits: the table is a list of n_work entries, or None");
        return NULL;
    }
    Walk w;
    Step st;
    ws_alone(&w, &st, ws, n_work);
    Mask full = (Mask)(n_work / 4) - 1, masks[2] = {full, 0};
    int found = 0;
    for (int m = 0; m < 2 && !found && !w.failed; m++) {
        if (m == 1 && full == 0) break;  /* no streamable input: the same two entries again */
        for (int off = 1; off >= 0 && !found; off--) {
            Mask i = (masks[m] * 2 + (Mask)off) * 2;  /* not held */
            /* the profiler inside ws_compute runs Python, which may have changed the table:
             * its size is checked before every read, and an entry is an exact float (no
             * __float__ runs) or None (review) */
            if (table != Py_None && PyList_GET_SIZE(table) != n_work) {
                PyErr_SetString(PyExc_ValueError, "fits: the table changed size");
                w.failed = 1;
                break;
            }
            PyObject *have = table != Py_None ? PyList_GET_ITEM(table, (Py_ssize_t)i) : Py_None;
            double v;
            if (have != Py_None) {
                if (!PyFloat_CheckExact(have)) {
                    PyErr_SetString(PyExc_TypeError, "fits: a table entry is a float or None");
                    w.failed = 1;
                    break;
                }
                v = PyFloat_AS_DOUBLE(have);
            } else {
                v = ws_compute(&w, &st, i);
                if (w.failed) break;
                if (table != Py_None) {
                    PyObject *f = PyFloat_FromDouble(v);
                    if (!f || PyList_SetItem(table, (Py_ssize_t)i, f)) { w.failed = 1; break; }
                }
            }
            if (v <= l1) found = 1;
        }
    }
    free_ws(&st);
    if (w.failed) {
        if (!PyErr_Occurred()) PyErr_SetString(PyExc_ValueError, "fits: a malformed ws");
        return NULL;
    }
    return PyBool_FromLong(found);
}

/* ws_halo(ws, n_work, index) -> (halo, windows, attention): the parts of entry `index`'s
 * working set an L1 issue lists (compiler.capacity._work's f.halo entry: the halo bytes and
 * attention excess of the point that set the peak, the window rows beyond two stream tiles),
 * from the same definition ws_compute reads, statement by statement as _work computes them
 * (h106). The chain rows' layout is _cprofile.c's (its header comment): the halo entries of
 * a chain follow its dying inputs. */
enum { HW_GI = 3, HW_HEAD = 10, HW_DY = 6, HW_HX = 4 };
static PyObject *py_ws_halo(PyObject *self, PyObject *args) {
    PyObject *result = NULL;
    Walk w;
    Step st;
    unsigned long long i;
    (void)self;
    if (ws_entry(args, &w, &st, &i)) return NULL;
    long long *raw = NULL;
    double halo_peak = 0.0, attn_peak = 0.0, windows = 0.0;
    (void)ws_compute(&w, &st, (Mask)i);  /* parses ws; the profile made and kept in its list */
    if (w.failed) goto done;
    Mask mask = (Mask)i >> 2;
    long long spp = st.wd->spp, cpp = st.wd->cpp, tile = st.wd->tile;
    if (st.wd->hv) {  /* a halo or attention term at this shape: the peak's point */
        PyObject *p = PyList_GET_ITEM(st.wd->prof, (Py_ssize_t)i);
        if (!PyBytes_Check(p) || PyBytes_GET_SIZE(p) % (2 * sizeof(long long))) {
            bad("ws: a profile of int64 pairs");
            goto done;
        }
        const long long *pr = (const long long *)PyBytes_AS_STRING(p);
        long long peak = 0;
        for (Py_ssize_t q = 0; q < PyBytes_GET_SIZE(p) / (Py_ssize_t)(2 * sizeof(long long)); q++) {
            long long v = ceil_div(pr[2 * q] * spp, cpp) + pr[2 * q + 1];
            if (v > peak) peak = v;
        }
        double work = (double)peak;
        const long long *pk = (const long long *)PyBytes_AS_STRING(st.wd->pack);
        Py_ssize_t npk = PyBytes_GET_SIZE(st.wd->pack) / (Py_ssize_t)sizeof(long long);
        int nc = cprof_chains(pk, npk);
        const double *hv = (const double *)PyBytes_AS_STRING(st.wd->hv);
        const double *av = (const double *)PyBytes_AS_STRING(st.wd->av);
        Py_ssize_t n_slots = PyBytes_GET_SIZE(st.wd->hv) / (Py_ssize_t)sizeof(double);
        raw = (long long *)malloc(sizeof(long long) * 2 * (size_t)(nc > 0 ? nc : 1));
        if (!raw) { PyErr_NoMemory(); goto done; }
        if (nc < 0 || cprof_walk(pk, npk, mask, (int)(i >> 1 & 1), (int)(i & 1), raw)) {
            bad("ws: malformed chain rows");
            goto done;
        }
        Py_ssize_t at = HW_GI * pk[0] + 3;
        for (int c = 0; c < nc; c++) {
            if (at + HW_HEAD > npk) { bad("ws: malformed halo rows"); goto done; }
            const long long *h = pk + at;
            Py_ssize_t hx = at + HW_HEAD + HW_DY * (h[7] + h[8]);
            if (hx + HW_HX * h[9] > npk) { bad("ws: malformed halo rows"); goto done; }
            double halo = 0.0, attn = 0.0;
            for (long long q = 0; q < h[9]; q++) {
                const long long *e = pk + hx + HW_HX * q;
                if (e[0] < 0 || e[0] >= n_slots) { bad("ws: malformed halo rows"); goto done; }
                /* a windowed op whose first input is not streamed adds its halo */
                if (e[1] && !(e[2] >= 0 && e[2] < 64 && (mask >> e[2] & 1ULL))) halo += hv[e[0]];
                if (e[3]) attn += av[e[0]];
            }
            if (halo != 0.0 || attn != 0.0) {
                double v = (double)(ceil_div(raw[2 * c] * spp, cpp) + raw[2 * c + 1]) + halo + attn;
                if (v > work) work = v, halo_peak = halo, attn_peak = attn;
            }
            at = hx + HW_HX * h[9];
        }
    }
    for (int q = 0; q < st.wd->n; q++) {  /* _work's stream buffers: the window rows */
        if (!(mask >> st.wd->bit[q] & 1)) continue;
        long long piece = ceil_div(st.wd->sb[q] * spp, cpp) + st.wd->fb[q];
        if (tile < piece) piece = tile;
        double buf = 2.0 * (double)piece;
        if (st.wd->has_win[q] && st.wd->win[q] + (double)piece > buf) windows += st.wd->win[q] + (double)piece - buf;
    }
    result = Py_BuildValue("(ddd)", halo_peak, windows, attn_peak);
done:
    free(raw);
    free_ws(&st);
    if (!result && !PyErr_Occurred()) PyErr_SetString(PyExc_ValueError, "ws_halo: a malformed ws");
    return result;
}

static PyMethodDef methods[] = {
    {"walk", py_walk, METH_VARARGS, "The scope walk of search-space decoding (see _ccore.py)."},
    {"index", py_index, METH_VARARGS, "A decode's order as step references (see _ccore.py)."},
    {"walk_rows", py_walk_rows, METH_VARARGS,
     "The scope walk from per-group and per-transfer rows (see _ccore.py)."},
    {"rewalk", py_rewalk, METH_VARARGS,
     "A kept walk (walk_rows with keep) walked again with other scopes asked for (see _ccore.py)."},
    {"working_set", py_working_set, METH_VARARGS,
     "A working-set entry as the walk computes it (see _ccore.py, _ws_def)."},
    {"ws_halo", py_ws_halo, METH_VARARGS,
     "The halo, window and attention parts of a working-set entry (see _crows.py, l1_halo)."},
    {"fits", py_fits, METH_VARARGS,
     "Whether a chunk shape's least working set fits L1 (see _ccore.py, fits_l1)."},
    {"profile", cprof_py_profile, METH_VARARGS,
     "An op set's profile walk from its packed chain rows (see _cfoot.py, _cprofile.c)."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_cwalk", NULL, -1, methods,
                                    NULL, NULL, NULL, NULL};

PyMODINIT_FUNC PyInit__cwalk(void) { return PyModule_Create(&module); }
