/* The profile walk of an op set in C: compiler.footprint._profile over the per-chain rows
 * compiler.footprint._chain_rows gives (search_space/_cfoot.py packs them as int64), and the
 * halo / attention terms of compiler.capacity._work. The Python code stays the one
 * definition: this file repeats its statements over integers, in the same order
 * (tests/search_space/test_cfoot.py compares every op set of decoded schedules).
 *
 * Pack layout (int64):
 *   n_gi, n_chains, n_slots,
 *   n_gi x (bit, s, f)                 the group inputs (bit: streamable bit, -1: none)
 *   per chain:
 *     out_s, out_f, dies_out, lives_kept, lives_out, chained, streams_anchor,
 *     n_kept, n_out, n_hx,
 *     (n_kept + n_out) x (bit, s, f, produced, private, first)   dying inputs, kept / out
 *     n_hx x (slot, halo, halo_bit, attn)   ops adding a halo (halo: the op is windowed;
 *                                           halo_bit: the bit of its first input's root,
 *                                           -1: not streamable) or attention's excess
 */
#include "_cprofile.h"

#include <stdlib.h>

enum { GI = 3, HEAD = 10, DY = 6, HX = 4 };

int cprof_chains(const long long *p, Py_ssize_t n) {
    if (n < 3 || p[0] < 0 || p[1] < 0 || p[2] < 0) return -1;
    if (p[0] > (n - 3) / GI) return -1;  /* divided, not multiplied: no overflow */
    return (int)p[1];
}

static long long lmax(long long a, long long b) { return a > b ? a : b; }

/* a streamed input: its bit is set in the mask */
static int streamed(long long bit, unsigned long long mask) {
    return bit >= 0 && bit < 64 && (mask >> bit & 1ULL);
}

int cprof_walk(const long long *p, Py_ssize_t n, unsigned long long mask, int off, int held,
               long long *raw) {
    int n_chains = cprof_chains(p, n);
    if (n_chains < 0) return -1;
    long long live_s = 0, live_f = 0;
    Py_ssize_t at = 3;
    for (long long q = 0; q < p[0]; q++, at += GI) {
        if (streamed(p[at], mask)) continue;
        live_s += p[at + 1];
        live_f += p[at + 2];
    }
    for (int c = 0; c < n_chains; c++) {
        if (at + HEAD > n) return -1;
        const long long *h = p + at;
        long long out_s = h[0], out_f = h[1];
        long long n_kept = h[7], n_out = h[8], n_hx = h[9];
        if (n_kept < 0 || n_out < 0 || n_hx < 0) return -1;
        Py_ssize_t room = n - at - HEAD;  /* counts checked against what is left, divided */
        if (n_kept > room / DY || n_out > (room - DY * n_kept) / DY
            || n_hx > (room - DY * (n_kept + n_out)) / HX) return -1;
        Py_ssize_t kept_at = at + HEAD, out_at = kept_at + DY * n_kept;
        Py_ssize_t next = out_at + DY * n_out + HX * n_hx;
        int lives;
        Py_ssize_t cands;
        long long n_cands;
        if (off) {
            if (h[2]) out_s = out_f = 0;  /* written out tile by tile, nobody here reads it later */
            lives = (int)h[4];
            cands = out_at;
            n_cands = n_out;
        } else {
            lives = (int)h[3];
            cands = kept_at;
            n_cands = n_kept;
        }
        long long during_s = live_s + out_s, during_f = live_f + out_f;
        /* dying: not streamed, and produced here or not held; reusable: produced here or
         * private and not held */
        if (h[5]) {  /* chained: in place over a same-sized tensor that dies in the chain */
            for (long long q = 0; q < n_cands; q++) {
                const long long *d = p + cands + DY * q;
                if (streamed(d[0], mask) || !(d[3] || !held)) continue;
                if (!(d[3] || (d[4] && !held))) continue;
                if (d[1] >= out_s && d[2] >= out_f) {
                    during_s = live_s;
                    during_f = live_f;
                    break;
                }
            }
        }
        if ((during_s != live_s || during_f != live_f) && h[6]) {
            for (long long q = 0; q < n_cands; q++) {
                const long long *d = p + cands + DY * q;
                if (streamed(d[0], mask) || !(d[3] || !held)) continue;
                if (!(d[3] || (d[4] && !held))) continue;
                if (d[5]) {  /* the anchor streams its first input: in place over it */
                    long long in_s = d[1], in_f = d[2];
                    during_s = live_s - in_s + lmax(in_s, out_s);
                    during_f = live_f - in_f + lmax(in_f, out_f);
                    break;
                }
            }
        }
        raw[2 * c] = during_s;
        raw[2 * c + 1] = during_f;
        for (long long q = 0; q < n_cands; q++) {
            const long long *d = p + cands + DY * q;
            if (streamed(d[0], mask) || !(d[3] || !held)) continue;
            live_s -= d[1];
            live_f -= d[2];
        }
        if (lives) {
            live_s += out_s;
            live_f += out_f;
        }
        at = next;
    }
    return at == n ? 0 : -1;
}

/* descending by (s, f) */
static int by_desc(const void *a, const void *b) {
    const long long *x = (const long long *)a, *y = (const long long *)b;
    if (x[0] != y[0]) return x[0] < y[0] ? 1 : -1;
    if (x[1] != y[1]) return x[1] < y[1] ? 1 : -1;
    return 0;
}

Py_ssize_t cprof_prune(long long *raw, Py_ssize_t n, long long *out) {
    qsort(raw, (size_t)n, 2 * sizeof(long long), by_desc);
    Py_ssize_t k = 0;
    long long top_f = 0;
    for (Py_ssize_t q = 0; q < n; q++) {
        long long s = raw[2 * q], f = raw[2 * q + 1];
        if (q > 0 && s == raw[2 * q - 2] && f == raw[2 * q - 1]) continue;  /* set() */
        if (k == 0 || f > top_f) {  /* the kept points' largest f is the last one's */
            out[2 * k] = s;
            out[2 * k + 1] = f;
            top_f = f;
            k++;
        }
    }
    return k;
}

/* a / b rounded up, as Python's -(-a // b) (b > 0) */
static long long cdiv(long long a, long long b) {
    long long q = a / b, r = a % b;
    return (r != 0 && (r > 0) == (b > 0)) ? q + 1 : q;
}

double cprof_halo(const long long *p, Py_ssize_t n, unsigned long long mask, const long long *raw,
                  long long spp, long long cpp, const double *halo_v, const double *attn_v,
                  Py_ssize_t n_slots, double work) {
    int n_chains = cprof_chains(p, n);
    if (n_chains < 0 || cpp <= 0) return -1.0;
    Py_ssize_t at = 3 + GI * p[0];
    for (int c = 0; c < n_chains; c++) {
        if (at + HEAD > n) return -1.0;
        const long long *h = p + at;
        Py_ssize_t hx = at + HEAD + DY * (h[7] + h[8]);
        if (hx + HX * h[9] > n) return -1.0;
        double halo = 0.0, attn = 0.0;
        for (long long q = 0; q < h[9]; q++) {
            const long long *e = p + hx + HX * q;
            if (e[0] < 0 || e[0] >= n_slots) return -1.0;
            /* a windowed op whose first input is not streamed adds its halo */
            if (e[1] && !streamed(e[2], mask)) halo += halo_v[e[0]];
            if (e[3]) attn += attn_v[e[0]];
        }
        if (halo != 0.0 || attn != 0.0) {
            double v = (double)(cdiv(raw[2 * c] * spp, cpp) + raw[2 * c + 1]) + halo + attn;
            if (v > work) work = v;
        }
        at = hx + HX * h[9];
    }
    return work;
}

/* profile(pack, mask, off, held) -> (raw points, pruned profile) as lists of (s, f) pairs:
 * the walk as ws_compute runs it, for the differential tests. */
PyObject *cprof_py_profile(PyObject *self, PyObject *args) {
    Py_buffer pack;
    unsigned long long mask;
    int off, held;
    (void)self;
    if (!PyArg_ParseTuple(args, "y*Kpp", &pack, &mask, &off, &held)) return NULL;
    const long long *p = (const long long *)pack.buf;
    Py_ssize_t n = pack.len / (Py_ssize_t)sizeof(long long);
    int nc = pack.len % (Py_ssize_t)sizeof(long long) ? -1 : cprof_chains(p, n);
    PyObject *result = NULL;
    long long *raw = NULL, *pruned = NULL;
    if (nc < 0) {
        PyErr_SetString(PyExc_ValueError, "profile: a malformed pack");
        goto done;
    }
    raw = (long long *)malloc(sizeof(long long) * 2 * (size_t)(nc ? nc : 1));
    pruned = (long long *)malloc(sizeof(long long) * 2 * (size_t)(nc ? nc : 1));
    if (!raw || !pruned) {
        PyErr_NoMemory();
        goto done;
    }
    if (cprof_walk(p, n, mask, off, held, raw)) {
        PyErr_SetString(PyExc_ValueError, "profile: a malformed pack");
        goto done;
    }
    PyObject *pts = PyList_New(nc);
    if (!pts) goto done;
    for (int c = 0; c < nc; c++) {
        PyObject *t = Py_BuildValue("(LL)", raw[2 * c], raw[2 * c + 1]);
        if (!t) { Py_DECREF(pts); goto done; }
        PyList_SET_ITEM(pts, c, t);
    }
    Py_ssize_t k = cprof_prune(raw, nc, pruned);
    PyObject *prof = PyList_New(k);
    if (!prof) { Py_DECREF(pts); goto done; }
    for (Py_ssize_t q = 0; q < k; q++) {
        PyObject *t = Py_BuildValue("(LL)", pruned[2 * q], pruned[2 * q + 1]);
        if (!t) { Py_DECREF(pts); Py_DECREF(prof); goto done; }
        PyList_SET_ITEM(prof, q, t);
    }
    result = Py_BuildValue("(NN)", pts, prof);
done:
    free(raw);
    free(pruned);
    PyBuffer_Release(&pack);
    return result;
}
