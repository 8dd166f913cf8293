/* A step plan's timing-free parts made in C (sim/_ctime.py and sim/_moves.py drive it).
 *
 * The Python functions are the reference and the fallback (GRAPHTUNE_PURE_SIM=1, or this
 * module not built): sim._moves._plan (a movement plan between two layouts) and
 * sim._ctime.pack_group (a group step plan packed for sim/_csim.c). This module does the same
 * floating-point operations in the same order, and keeps the same insertion order where the
 * Python code fills a dict (a resource's first contribution decides its place), so every
 * plan and pack is the same bit for bit (tests/sim/test_cpack.py compares them on random
 * layouts and on the zoo's schedules). Built with -ffp-contract=off (no fused multiply-adds).
 *
 * move_plan(s_scope, d_scope, s_pieces, d_pieces, routes, n_cores, n_res, llb, ddr)
 *   -> (flows, incoming, staying, noc, ddr bytes, hops): MovePlan's fields.
 *   scopes: 0 L1, 1 LLB, 2 DDR (not both the same off-core scope: that is the empty plan);
 *   pieces: a layout's ((first sample, samples per part, ((core, ...), ...)), ...);
 *   routes: a tuple of n_cores * n_cores link tuples, (a, b)'s at a * n_cores + b (None:
 *   the chip has no route from a to b, a ValueError when a plan needs it). A conversion that
 *   fails raises at once (each number checked before the next is read).
 * inputs_flows(tensors, srcs, dst, dst_cores, streamed, rereads, input_layout, moves,
 *              move_plan, fixed_plan, Flows, chip, cpack) -> (staged, streamed):
 *   sim._plans.inputs_flows's loop: each input's movement and fixed plans read from the
 *   cache `moves` by the keys sim._moves.move_plan and fixed_plan use (a miss calls them:
 *   they make the plan and keep it), added to its bucket's Flows (made by calling Flows)
 *   as Flows.add does (add_plan), `bytes * passes` as Python ints.
 * pack_group(kinds, staged, first, ex, streams, wflow, slowest, cores, parts, cost_of,
 *            setup, hop_lat, ddr_lat) -> bytes, or None (more than MAX_SCOPES scopes)
 *   kinds: ((tensor, scope), ...); staged: ((scope, Flows), ...); first, ex, wflow: a Flows
 *   or None; streams: the streams in order (streamed inputs, ex, wflow, out: as
 *   pack_group lists them); slowest: the slowest part's cycles; cost_of: {part size:
 *   ComputeCost}; setup, hop_lat, ddr_lat: _Sim.latency_of's terms.
 * add_items(into, items, nbytes): sim._flows.Flows.add's sums of one dict: for each
 *   (resource, coefficient) of `items` in order, into[resource] = into.get(resource, 0.0) +
 *   coefficient * nbytes.
 * add_plan(flows, plan, nbytes): all of Flows.add (nbytes > 0): add_items of the plan's
 *   flows, incoming and staying into the Flows' dicts, then its noc, ddr and hops.
 * op_cost(rows, ops, s, k, params, remote) -> (mme, vme, move, fill, useful, wbound), or
 *   None: sim._model._cost's sums (with compiler.opshape.matrix_tiles, batched_split and
 *   sim._model.grouped_conv_cycles inlined). rows: each op's ROW doubles (kind, batched,
 *   amount, groups, gemm_rows, n, k, weight_bytes, in_bytes, requant_flops, int8; see
 *   halo_bytes, operand_bytes, in_rows; sim._model._shape_rows); params: granule m, granule n, MACs per cycle (FP16, INT8),
 *   instruction overhead, lanes (FP16, INT8), transcendental cycles per element, L1
 *   bytes per cycle, half the weight buffer, the weight path's bytes per cycle, the
 *   vector tile. Python multiplies integers exactly: a product of two integral values past
 *   2**53 (where a double would round) gives None, and the caller prices in Python.
 * work_scan(rows, ops, half_wb) -> (cut, picks): sim._model.group_work's sum of its
 *   batched ops' halo bytes, in op order, and the ops its loop does more with (a batched
 *   op with an operand or a halo, a gather, a matmul past half the weight buffer), in order.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

enum { MAX_SCOPES = 8, MAX_CODES = 160 };

/* ---- a growable array of doubles ------------------------------------------------------ */
typedef struct {
    double *d;
    Py_ssize_t n, cap;
} Buf;

static int put(Buf *b, double v) {
    if (b->n == b->cap) {
        Py_ssize_t cap = b->cap ? 2 * b->cap : 256;
        double *d = PyMem_Realloc(b->d, (size_t)cap * sizeof(double));
        if (d == NULL) {
            PyErr_NoMemory();
            return -1;
        }
        b->d = d;
        b->cap = cap;
    }
    b->d[b->n++] = v;
    return 0;
}

/* one or two numbers as doubles / C longs, each checked before the next is read (a second
   conversion run with the first's error set would replace it, or run Python code with an
   error pending); b may be NULL */
static int as_doubles(PyObject *a, double *x, PyObject *b, double *y) {
    *x = PyFloat_AsDouble(a);
    if (*x == -1.0 && PyErr_Occurred()) return -1;
    if (b == NULL) return 0;
    *y = PyFloat_AsDouble(b);
    return (*y == -1.0 && PyErr_Occurred()) ? -1 : 0;
}

static int as_longs(PyObject *a, long *x, PyObject *b, long *y) {
    *x = PyLong_AsLong(a);
    if (*x == -1 && PyErr_Occurred()) return -1;
    *y = PyLong_AsLong(b);
    return (*y == -1 && PyErr_Occurred()) ? -1 : 0;
}

static PyObject *S_FLOWS, *S_INCOMING, *S_NOC, *S_HOPS, *S_DDR, *S_MME, *S_VME;

static int num_attr(PyObject *o, PyObject *name, double *out) {
    PyObject *v = PyObject_GetAttr(o, name);
    if (v == NULL) return -1;
    *out = PyFloat_AsDouble(v);
    Py_DECREF(v);
    return (*out == -1.0 && PyErr_Occurred()) ? -1 : 0;
}

/* a dict of (int -> number) items, in order, as pairs of doubles */
static int put_items(Buf *b, PyObject *d) {
    if (!PyDict_Check(d)) {
        PyErr_SetString(PyExc_TypeError, "a Flows dict expected");
        return -1;
    }
    if (put(b, (double)PyDict_GET_SIZE(d)) < 0) return -1;
    Py_ssize_t pos = 0;
    PyObject *k, *v;
    while (PyDict_Next(d, &pos, &k, &v)) {
        double kk = PyFloat_AsDouble(k);
        if (kk == -1.0 && PyErr_Occurred()) return -1;
        double vv = PyFloat_AsDouble(v);
        if (vv == -1.0 && PyErr_Occurred()) return -1;
        if (put(b, kk) < 0 || put(b, vv) < 0) return -1;
    }
    return 0;
}

/* sim._ctime._flows: latency, noc, n_inc, incoming items, n_fl, flows items; `ddr` gets
   the Flows' DDR bytes */
static int put_flows(Buf *b, PyObject *fl, const double lat3[3], double *ddr) {
    double hops, noc;
    if (num_attr(fl, S_HOPS, &hops) < 0 || num_attr(fl, S_DDR, ddr) < 0 ||
        num_attr(fl, S_NOC, &noc) < 0)
        return -1;
    double lat = lat3[0] + hops * lat3[1]; /* _Sim.latency_of */
    if (*ddr > 0) lat += lat3[2];
    if (put(b, lat) < 0 || put(b, noc) < 0) return -1;
    PyObject *inc = PyObject_GetAttr(fl, S_INCOMING);
    if (inc == NULL) return -1;
    int rc = put_items(b, inc);
    Py_DECREF(inc);
    if (rc < 0) return -1;
    PyObject *fls = PyObject_GetAttr(fl, S_FLOWS);
    if (fls == NULL) return -1;
    rc = put_items(b, fls);
    Py_DECREF(fls);
    return rc;
}

/* a scope's code: its place among the scopes met so far (codes.setdefault) */
static int code_of(PyObject **codes, int *n, PyObject *kind) {
    for (int i = 0; i < *n; i++) {
        int eq = PyObject_RichCompareBool(codes[i], kind, Py_EQ);
        if (eq < 0) return -1;
        if (eq) return i;
    }
    if (*n >= MAX_CODES) {
        PyErr_SetString(PyExc_ValueError, "too many scopes");
        return -1;
    }
    codes[*n] = kind;
    return (*n)++;
}

static PyObject *pack_group(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    (void)self;
    if (nargs != 13) {
        PyErr_SetString(PyExc_TypeError, "pack_group takes 13 arguments");
        return NULL;
    }
    PyObject *kinds = args[0], *staged = args[1], *first = args[2], *ex = args[3];
    PyObject *streams = args[4], *wflow = args[5], *cores = args[7], *parts = args[8];
    PyObject *cost_of = args[9];
    if (!PyTuple_Check(kinds) || !PyTuple_Check(staged) || !PyTuple_Check(streams) ||
        !PyTuple_Check(cores) || !PyTuple_Check(parts) || !PyDict_Check(cost_of)) {
        PyErr_SetString(PyExc_TypeError, "pack_group: tuples and a dict expected");
        return NULL;
    }
    double slowest, lat3[3];
    if (as_doubles(args[6], &slowest, NULL, NULL) < 0 ||
        as_doubles(args[10], &lat3[0], args[11], &lat3[1]) < 0 ||
        as_doubles(args[12], &lat3[2], NULL, NULL) < 0)
        return NULL;
    PyObject *codes[MAX_CODES];
    int n_codes = 0;
    Buf b = {NULL, 0, 0};
    double ddr;
    Py_ssize_t nk = PyTuple_GET_SIZE(kinds), ns = PyTuple_GET_SIZE(staged);
    if (put(&b, (double)nk) < 0) goto fail;
    for (Py_ssize_t i = 0; i < nk; i++) {
        PyObject *it = PyTuple_GET_ITEM(kinds, i);
        if (!PyTuple_Check(it) || PyTuple_GET_SIZE(it) != 2) goto bad;
        int c = code_of(codes, &n_codes, PyTuple_GET_ITEM(it, 1));
        if (c < 0 || put(&b, c) < 0) goto fail;
    }
    if (put(&b, (double)ns) < 0) goto fail;
    for (Py_ssize_t i = 0; i < ns; i++) {
        PyObject *it = PyTuple_GET_ITEM(staged, i);
        if (!PyTuple_Check(it) || PyTuple_GET_SIZE(it) != 2) goto bad;
        int c = code_of(codes, &n_codes, PyTuple_GET_ITEM(it, 0));
        if (c < 0 || put(&b, c) < 0) goto fail;
        if (put_flows(&b, PyTuple_GET_ITEM(it, 1), lat3, &ddr) < 0) goto fail;
    }
    if (first != Py_None) {
        if (put(&b, 1) < 0 || put_flows(&b, first, lat3, &ddr) < 0 || put(&b, ddr) < 0)
            goto fail;
    } else if (put(&b, 0) < 0) goto fail;
    if (ex != Py_None) {
        double noc;
        if (num_attr(ex, S_NOC, &noc) < 0 || put(&b, 1) < 0 || put(&b, noc) < 0) goto fail;
    } else if (put(&b, 0) < 0) goto fail;
    if (n_codes > MAX_SCOPES) {
        PyMem_Free(b.d);
        Py_RETURN_NONE;
    }
    Py_ssize_t nm = PyTuple_GET_SIZE(streams);
    if (put(&b, (double)nm) < 0) goto fail;
    for (Py_ssize_t i = 0; i < nm; i++)
        if (put_flows(&b, PyTuple_GET_ITEM(streams, i), lat3, &ddr) < 0) goto fail;
    if (wflow != Py_None) {
        if (num_attr(wflow, S_DDR, &ddr) < 0 || put(&b, 1) < 0 || put(&b, ddr) < 0) goto fail;
    } else if (put(&b, 0) < 0) goto fail;
    if (put(&b, slowest) < 0) goto fail;
    Py_ssize_t nc = PyTuple_GET_SIZE(cores), np = PyTuple_GET_SIZE(parts), total = 0;
    if (put(&b, (double)nc) < 0) goto fail;
    for (Py_ssize_t i = 0; i < nc; i++) {
        double c = PyFloat_AsDouble(PyTuple_GET_ITEM(cores, i));
        if ((c == -1.0 && PyErr_Occurred()) || put(&b, c) < 0) goto fail;
    }
    for (Py_ssize_t i = 0; i < np; i++) {
        PyObject *part = PyTuple_GET_ITEM(parts, i);
        if (!PyTuple_Check(part)) goto bad;
        total += PyTuple_GET_SIZE(part);
    }
    if (put(&b, (double)total) < 0) goto fail;
    for (Py_ssize_t i = 0; i < np; i++) {
        PyObject *part = PyTuple_GET_ITEM(parts, i);
        PyObject *size = PyLong_FromSsize_t(PyTuple_GET_SIZE(part));
        if (size == NULL) goto fail;
        PyObject *cost = PyDict_GetItemWithError(cost_of, size);
        Py_DECREF(size);
        if (cost == NULL) {
            if (!PyErr_Occurred()) PyErr_SetString(PyExc_KeyError, "a part size not costed");
            goto fail;
        }
        double mme, vme;
        if (num_attr(cost, S_MME, &mme) < 0 || num_attr(cost, S_VME, &vme) < 0) goto fail;
        for (Py_ssize_t j = 0; j < PyTuple_GET_SIZE(part); j++) {
            double c = PyFloat_AsDouble(PyTuple_GET_ITEM(part, j));
            if ((c == -1.0 && PyErr_Occurred()) || put(&b, c) < 0 || put(&b, mme) < 0 ||
                put(&b, vme) < 0)
                goto fail;
        }
    }
    PyObject *out = PyBytes_FromStringAndSize((const char *)b.d,
                                              b.n * (Py_ssize_t)sizeof(double));
    PyMem_Free(b.d);
    return out;
bad:
    PyErr_SetString(PyExc_TypeError, "pack_group: malformed arguments");
fail:
    PyMem_Free(b.d);
    return NULL;
}

/* ---- movement plans ------------------------------------------------------------------ */
typedef struct {
    long lo, hi;
    PyObject *cores; /* a tuple of ints (borrowed) */
} Range;

static int cmp_cores(PyObject *a, PyObject *b) {
    Py_ssize_t na = PyTuple_GET_SIZE(a), nb = PyTuple_GET_SIZE(b);
    for (Py_ssize_t i = 0; i < na && i < nb; i++) {
        long x = PyLong_AsLong(PyTuple_GET_ITEM(a, i)), y = PyLong_AsLong(PyTuple_GET_ITEM(b, i));
        if (x != y) return x < y ? -1 : 1;
    }
    return na < nb ? -1 : na > nb ? 1 : 0;
}

static int cmp_range(const void *pa, const void *pb) {
    const Range *a = pa, *b = pb;
    if (a->lo != b->lo) return a->lo < b->lo ? -1 : 1;
    if (a->hi != b->hi) return a->hi < b->hi ? -1 : 1;
    return cmp_cores(a->cores, b->cores);
}

/* compiler.layout.part_ranges: (first sample, end sample, cores) of every part, sorted;
   every core checked in [0, n_cores) */
static Range *ranges_of(PyObject *pieces, Py_ssize_t *count, long n_cores) {
    if (!PyTuple_Check(pieces)) {
        PyErr_SetString(PyExc_TypeError, "pieces: a tuple expected");
        return NULL;
    }
    Py_ssize_t n = 0;
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(pieces); i++) {
        PyObject *pc = PyTuple_GET_ITEM(pieces, i);
        if (!PyTuple_Check(pc) || PyTuple_GET_SIZE(pc) != 3 ||
            !PyTuple_Check(PyTuple_GET_ITEM(pc, 2))) {
            PyErr_SetString(PyExc_TypeError, "a piece: (first, spp, parts) expected");
            return NULL;
        }
        n += PyTuple_GET_SIZE(PyTuple_GET_ITEM(pc, 2));
    }
    Range *out = PyMem_Malloc((size_t)(n ? n : 1) * sizeof(Range));
    if (out == NULL) {
        PyErr_NoMemory();
        return NULL;
    }
    Py_ssize_t k = 0;
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(pieces); i++) {
        PyObject *pc = PyTuple_GET_ITEM(pieces, i), *parts = PyTuple_GET_ITEM(pc, 2);
        long first, spp;
        if (as_longs(PyTuple_GET_ITEM(pc, 0), &first, PyTuple_GET_ITEM(pc, 1), &spp) < 0)
            goto fail;
        for (Py_ssize_t p = 0; p < PyTuple_GET_SIZE(parts); p++) {
            PyObject *cs = PyTuple_GET_ITEM(parts, p);
            if (!PyTuple_Check(cs) || PyTuple_GET_SIZE(cs) == 0) {
                PyErr_SetString(PyExc_ValueError, "a part: a non-empty tuple of cores expected");
                goto fail;
            }
            for (Py_ssize_t j = 0; j < PyTuple_GET_SIZE(cs); j++) {
                long c = PyLong_AsLong(PyTuple_GET_ITEM(cs, j));
                if (PyErr_Occurred()) goto fail;
                if (c < 0 || c >= n_cores) {
                    PyErr_SetString(PyExc_ValueError, "a core out of range");
                    goto fail;
                }
            }
            long off;
            if (__builtin_mul_overflow((long)p, spp, &off) ||
                __builtin_add_overflow(first, off, &out[k].lo) ||
                __builtin_add_overflow(out[k].lo, spp, &out[k].hi)) {
                PyErr_SetString(PyExc_ValueError, "a part's samples out of range");
                goto fail;
            }
            out[k].cores = cs;
            k++;
        }
    }
    qsort(out, (size_t)k, sizeof(Range), cmp_range);
    *count = k;
    return out;
fail:
    PyMem_Free(out);
    return NULL;
}

/* one dict of the plan being made: values by resource id, ids in first-added order */
typedef struct {
    double *val;
    int *order, *seen;
    int n;
} Acc;

static void acc_add(Acc *a, long r, double v) {
    if (!a->seen[r]) {
        a->seen[r] = 1;
        a->val[r] = 0.0;
        a->order[a->n++] = (int)r;
    }
    a->val[r] = a->val[r] + v;
}

static PyObject *acc_items(const Acc *a) {
    PyObject *t = PyTuple_New(a->n);
    if (t == NULL) return NULL;
    for (int i = 0; i < a->n; i++) {
        PyObject *it = PyTuple_New(2), *k = PyLong_FromLong(a->order[i]),
                 *v = PyFloat_FromDouble(a->val[a->order[i]]);
        if (it == NULL || k == NULL || v == NULL) {
            Py_XDECREF(it);
            Py_XDECREF(k);
            Py_XDECREF(v);
            Py_DECREF(t);
            return NULL;
        }
        PyTuple_SET_ITEM(it, 0, k);
        PyTuple_SET_ITEM(it, 1, v);
        PyTuple_SET_ITEM(t, i, it);
    }
    return t;
}

static PyObject *move_plan(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    (void)self;
    if (nargs != 9) {
        PyErr_SetString(PyExc_TypeError, "move_plan takes 9 arguments");
        return NULL;
    }
    long s_scope, d_scope, nc, n_res, llb, ddr;
    PyObject *routes = args[4];
    if (as_longs(args[0], &s_scope, args[1], &d_scope) < 0 ||
        as_longs(args[5], &nc, args[6], &n_res) < 0 || as_longs(args[7], &llb, args[8], &ddr) < 0)
        return NULL;
    if (s_scope < 0 || s_scope > 2 || d_scope < 0 || d_scope > 2 || nc <= 0 || n_res <= nc ||
        llb < 0 || llb >= n_res || ddr < 0 || ddr >= n_res || !PyTuple_Check(routes) ||
        PyTuple_GET_SIZE(routes) != (Py_ssize_t)nc * nc) {
        PyErr_SetString(PyExc_ValueError, "move_plan: bad scopes, counts or routes");
        return NULL;
    }
    Py_ssize_t ns, nd;
    Range *sp = ranges_of(args[2], &ns, nc);
    if (sp == NULL) return NULL;
    Range *dp = ranges_of(args[3], &nd, nc);
    if (dp == NULL) {
        PyMem_Free(sp);
        return NULL;
    }
    PyObject *result = NULL;
    size_t R = (size_t)n_res;
    double *vals = PyMem_Calloc(3 * R, sizeof(double));
    int *ints = PyMem_Calloc(6 * R, sizeof(int));
    if (vals == NULL || ints == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    Acc fl = {vals, ints, ints + R, 0}, inc = {vals + R, ints + 2 * R, ints + 3 * R, 0},
        stay = {vals + 2 * R, ints + 4 * R, ints + 5 * R, 0};
    double noc = 0.0;
    long hops = 0;
    long off_s = s_scope == 1 ? llb : ddr, off_d = d_scope == 1 ? llb : ddr;
    Py_ssize_t i = 0;
    for (Py_ssize_t di = 0; di < nd; di++) {
        long d_lo = dp[di].lo, d_hi = dp[di].hi;
        PyObject *d_cores = dp[di].cores;
        while (i < ns && sp[i].hi <= d_lo) i++;
        Py_ssize_t j = i;
        while (j < ns && sp[j].lo < d_hi) {
            long s_lo = sp[j].lo, s_hi = sp[j].hi;
            PyObject *s_cores = sp[j].cores;
            long n = (s_hi < d_hi ? s_hi : d_hi) - (s_lo > d_lo ? s_lo : d_lo);
            j++;
            if (n <= 0) continue;
            if (s_scope == 0 && d_scope == 0) {
                /* compiler.layout.slices(s_cores, d_cores) */
                Py_ssize_t ks = PyTuple_GET_SIZE(s_cores), kd = PyTuple_GET_SIZE(d_cores);
                for (Py_ssize_t jj = 0; jj < kd; jj++) {
                    double lo = (double)jj / (double)kd, hi = (double)(jj + 1) / (double)kd;
                    long bcore = PyLong_AsLong(PyTuple_GET_ITEM(d_cores, jj));
                    for (Py_ssize_t ii = 0; ii < ks; ii++) {
                        double x = (double)ii / (double)ks, y = (double)(ii + 1) / (double)ks;
                        double a = x > lo ? x : lo, bb = y < hi ? y : hi;
                        if (!(bb > a)) continue;
                        double frac = bb - a;
                        long acore = PyLong_AsLong(PyTuple_GET_ITEM(s_cores, ii));
                        double nb = (double)n * frac;
                        if (acore == bcore) {
                            acc_add(&stay, bcore, nb);
                            continue;
                        }
                        acc_add(&inc, bcore, nb);
                        acc_add(&fl, acore, nb);
                        acc_add(&fl, bcore, nb);
                        PyObject *route = PyTuple_GET_ITEM(routes, acore * nc + bcore);
                        if (route == Py_None) { /* the chip has no such route */
                            PyErr_SetString(PyExc_ValueError, "no route between two cores");
                            goto done;
                        }
                        if (!PyTuple_Check(route)) {
                            PyErr_SetString(PyExc_TypeError, "a route: a tuple expected");
                            goto done;
                        }
                        Py_ssize_t nl = PyTuple_GET_SIZE(route);
                        for (Py_ssize_t l = 0; l < nl; l++) {
                            long link = PyLong_AsLong(PyTuple_GET_ITEM(route, l));
                            if (link < 0 || link >= n_res) {
                                if (!PyErr_Occurred())
                                    PyErr_SetString(PyExc_ValueError, "a link out of range");
                                goto done;
                            }
                            acc_add(&fl, link, nb);
                        }
                        noc = noc + nb;
                        if (nl > hops) hops = (long)nl;
                    }
                }
            } else if (d_scope == 0) {
                acc_add(&fl, off_s, (double)n);
                Py_ssize_t k = PyTuple_GET_SIZE(d_cores);
                for (Py_ssize_t c = 0; c < k; c++) {
                    long core = PyLong_AsLong(PyTuple_GET_ITEM(d_cores, c));
                    acc_add(&fl, core, (double)n / (double)k);
                    acc_add(&inc, core, (double)n / (double)k);
                }
            } else if (s_scope == 0) {
                acc_add(&fl, off_d, (double)n);
                Py_ssize_t k = PyTuple_GET_SIZE(s_cores);
                for (Py_ssize_t c = 0; c < k; c++)
                    acc_add(&fl, PyLong_AsLong(PyTuple_GET_ITEM(s_cores, c)),
                            (double)n / (double)k);
            } else { /* LLB <-> DDR through the system DMAs */
                acc_add(&fl, llb, (double)n);
                acc_add(&fl, ddr, (double)n);
            }
        }
    }
    {
        PyObject *a = acc_items(&fl), *b = a ? acc_items(&inc) : NULL,
                 *c = b ? acc_items(&stay) : NULL;
        if (c != NULL)
            result = Py_BuildValue("(NNNddl)", a, b, c, noc, fl.seen[ddr] ? fl.val[ddr] : 0.0,
                                   hops);
        else {
            Py_XDECREF(a);
            Py_XDECREF(b);
        }
    }
done:
    PyMem_Free(vals);
    PyMem_Free(ints);
    PyMem_Free(sp);
    PyMem_Free(dp);
    return result;
}

/* into[r] = into.get(r, 0.0) + c * nbytes for each (r, c) of items, in order (`lookup` 0:
   into is empty and taken to stay so, 0.0 + c * nbytes put as Python adds it) */
static int fill_items(PyObject *into, PyObject *items, double nbytes, int lookup) {
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(items); i++) {
        PyObject *it = PyTuple_GET_ITEM(items, i);
        if (!PyTuple_Check(it) || PyTuple_GET_SIZE(it) != 2) {
            PyErr_SetString(PyExc_TypeError, "add_items: (resource, coefficient) pairs");
            return -1;
        }
        PyObject *r = PyTuple_GET_ITEM(it, 0);
        double c = PyFloat_AsDouble(PyTuple_GET_ITEM(it, 1));
        if (c == -1.0 && PyErr_Occurred()) return -1;
        PyObject *old = lookup ? PyDict_GetItemWithError(into, r) : NULL;
        double base = 0.0;
        if (old != NULL) {
            base = PyFloat_AsDouble(old);
            if (base == -1.0 && PyErr_Occurred()) return -1;
        } else if (PyErr_Occurred()) return -1;
        PyObject *v = PyFloat_FromDouble(base + c * nbytes);
        if (v == NULL || PyDict_SetItem(into, r, v) < 0) {
            Py_XDECREF(v);
            return -1;
        }
        Py_DECREF(v);
    }
    return 0;
}

static PyObject *add_items(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    (void)self;
    if (nargs != 3 || !PyDict_Check(args[0]) || !PyTuple_Check(args[1])) {
        PyErr_SetString(PyExc_TypeError, "add_items(dict, tuple, nbytes)");
        return NULL;
    }
    PyObject *into = args[0], *items = args[1];
    double nbytes = PyFloat_AsDouble(args[2]);
    if (nbytes == -1.0 && PyErr_Occurred()) return NULL;
    /* into empty (a new Flows' first plan): the items put without looking each up, as a
       plan's resources are distinct (its dict's keys); if some repeated (fewer keys than
       items), into is emptied and the items added again with the lookups */
    if (PyDict_GET_SIZE(into) == 0) {
        if (fill_items(into, items, nbytes, 0) < 0) return NULL;
        if (PyDict_GET_SIZE(into) == PyTuple_GET_SIZE(items)) Py_RETURN_NONE;
        PyDict_Clear(into);
    }
    if (fill_items(into, items, nbytes, 1) < 0) return NULL;
    Py_RETURN_NONE;
}

static PyObject *S_STAYING;

/* `into_obj.name` (a dict) += `plan.name` (pairs) * nbytes; skipped when the pairs are empty */
static int add_named(PyObject *into_obj, PyObject *plan, PyObject *name, PyObject *nb) {
    PyObject *items = PyObject_GetAttr(plan, name);
    if (items == NULL) return -1;
    if (PyTuple_Check(items) && PyTuple_GET_SIZE(items) == 0) {
        Py_DECREF(items);
        return 0;
    }
    PyObject *into = PyObject_GetAttr(into_obj, name);
    if (into == NULL) {
        Py_DECREF(items);
        return -1;
    }
    PyObject *args[3] = {into, items, nb};
    PyObject *r = add_items(NULL, args, 3);
    Py_DECREF(into);
    Py_DECREF(items);
    if (r == NULL) return -1;
    Py_DECREF(r);
    return 0;
}

/* fl.name += plan.name * nbytes (floats) */
static int add_scaled(PyObject *fl, PyObject *plan, PyObject *name, double nbytes) {
    double mine, theirs;
    if (num_attr(fl, name, &mine) < 0 || num_attr(plan, name, &theirs) < 0) return -1;
    PyObject *v = PyFloat_FromDouble(mine + theirs * nbytes);
    if (v == NULL) return -1;
    int rc = PyObject_SetAttr(fl, name, v);
    Py_DECREF(v);
    return rc;
}

static PyObject *add_plan(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    (void)self;
    if (nargs != 3) {
        PyErr_SetString(PyExc_TypeError, "add_plan(flows, plan, nbytes)");
        return NULL;
    }
    PyObject *fl = args[0], *plan = args[1];
    double nbytes = PyFloat_AsDouble(args[2]);
    if (nbytes == -1.0 && PyErr_Occurred()) return NULL;
    if (add_named(fl, plan, S_FLOWS, args[2]) < 0 || add_named(fl, plan, S_INCOMING, args[2]) < 0 ||
        add_named(fl, plan, S_STAYING, args[2]) < 0 || add_scaled(fl, plan, S_NOC, nbytes) < 0 ||
        add_scaled(fl, plan, S_DDR, nbytes) < 0)
        return NULL;
    PyObject *ph = PyObject_GetAttr(plan, S_HOPS);
    if (ph == NULL) return NULL;
    PyObject *mh = PyObject_GetAttr(fl, S_HOPS);
    if (mh == NULL) {
        Py_DECREF(ph);
        return NULL;
    }
    int gt = PyObject_RichCompareBool(ph, mh, Py_GT);
    Py_DECREF(mh);
    if (gt > 0 && PyObject_SetAttr(fl, S_HOPS, ph) < 0) gt = -1;
    Py_DECREF(ph);
    if (gt < 0) return NULL;
    Py_RETURN_NONE;
}

/* ---- a new step plan's input flows ------------------------------------------------------ */
static PyObject *S_FIXED, *ZERO, *ONE;

/* cache[key], or fn(*fargs) (sim._moves.move_plan / fixed_plan: they make the plan and keep
   it in the cache); a new reference */
static PyObject *cached_plan(PyObject *cache, PyObject *key, PyObject *fn,
                             PyObject *const *fargs, Py_ssize_t nf) {
    if (key == NULL) return NULL;
    PyObject *hit = PyDict_GetItemWithError(cache, key);
    Py_DECREF(key);
    if (hit != NULL) {
        Py_INCREF(hit);
        return hit;
    }
    if (PyErr_Occurred()) return NULL;
    return PyObject_Vectorcall(fn, fargs, (size_t)nf, NULL);
}

/* Flows.add(plan, nbytes, cpack): nothing when nbytes <= 0; steals `plan` and `nb` */
static int add_owned(PyObject *fl, PyObject *plan, PyObject *nb) {
    int rc = -1;
    if (plan != NULL && nb != NULL) {
        int le = PyObject_RichCompareBool(nb, ZERO, Py_LE);
        if (le > 0) rc = 0;
        else if (le == 0) {
            PyObject *args[3] = {fl, plan, nb};
            PyObject *r = add_plan(NULL, args, 3);
            if (r != NULL) {
                Py_DECREF(r);
                rc = 0;
            }
        }
    }
    Py_XDECREF(plan);
    Py_XDECREF(nb);
    return rc;
}

/* 1 + the extra passes of `rereads` ((op, tensor, extra), ...) over `name`: a new int */
static PyObject *passes_of(PyObject *rereads, PyObject *name) {
    PyObject *sum = Py_NewRef(ZERO);
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(rereads); i++) {
        PyObject *r = PyTuple_GET_ITEM(rereads, i);
        if (!PyTuple_Check(r) || PyTuple_GET_SIZE(r) != 3) {
            PyErr_SetString(PyExc_TypeError, "a reread: (op, tensor, extra passes) expected");
            Py_DECREF(sum);
            return NULL;
        }
        int eq = PyObject_RichCompareBool(PyTuple_GET_ITEM(r, 1), name, Py_EQ);
        if (eq < 0) {
            Py_DECREF(sum);
            return NULL;
        }
        if (eq) {
            PyObject *s = PyNumber_Add(sum, PyTuple_GET_ITEM(r, 2));
            Py_DECREF(sum);
            if (s == NULL) return NULL;
            sum = s;
        }
    }
    PyObject *p = PyNumber_Add(ONE, sum);
    Py_DECREF(sum);
    return p;
}

static PyObject *inputs_flows(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    (void)self;
    if (nargs != 13 || !PyTuple_Check(args[0]) || !PyTuple_Check(args[1]) ||
        !PyTuple_Check(args[2]) || PyTuple_GET_SIZE(args[2]) < 1 || !PyAnySet_Check(args[4]) ||
        !PyTuple_Check(args[5]) || !PyTuple_Check(args[6]) || PyTuple_GET_SIZE(args[6]) < 1 ||
        !PyDict_CheckExact(args[7])) {
        PyErr_SetString(PyExc_TypeError,
                        "inputs_flows(tensors, srcs, dst, dst_cores, streamed, rereads, "
                        "input_layout, moves, move_plan, fixed_plan, Flows, chip, cpack)");
        return NULL;
    }
    PyObject *tensors = args[0], *srcs = args[1], *dst = args[2], *dst_cores = args[3];
    PyObject *streamed_names = args[4], *rereads = args[5], *in_layout = args[6];
    PyObject *moves = args[7], *move_fn = args[8], *fixed_fn = args[9], *flows_type = args[10];
    PyObject *chip = args[11], *cpack = args[12];
    PyObject *dst_scope = PyTuple_GET_ITEM(dst, 0), *no_cores = PyTuple_New(0);
    PyObject *staged = PyDict_New(), *streamed = PyDict_New();
    if (no_cores == NULL || staged == NULL || streamed == NULL) goto fail;
    Py_ssize_t n = PyTuple_GET_SIZE(tensors);
    if (PyTuple_GET_SIZE(srcs) < n) n = PyTuple_GET_SIZE(srcs); /* zip */
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *t = PyTuple_GET_ITEM(tensors, i), *got = PyTuple_GET_ITEM(srcs, i);
        PyObject *src = in_layout, *src_cores = no_cores;
        if (!PyTuple_Check(t) || PyTuple_GET_SIZE(t) != 3) goto bad;
        if (got != Py_None) {
            if (!PyTuple_Check(got) || PyTuple_GET_SIZE(got) != 2) goto bad;
            src = PyTuple_GET_ITEM(got, 0);
            src_cores = PyTuple_GET_ITEM(got, 1);
            if (!PyTuple_Check(src) || PyTuple_GET_SIZE(src) < 1) goto bad;
        }
        PyObject *name = PyTuple_GET_ITEM(t, 0), *sb = PyTuple_GET_ITEM(t, 1);
        PyObject *fb = PyTuple_GET_ITEM(t, 2), *bucket = staged, *passes;
        int in = PySet_Contains(streamed_names, name);
        if (in < 0) goto fail;
        if (in) {
            bucket = streamed;
            passes = passes_of(rereads, name);
            if (passes == NULL) goto fail;
        } else
            passes = Py_NewRef(ONE);
        PyObject *scope = PyTuple_GET_ITEM(src, 0);
        PyObject *fl = PyDict_GetItemWithError(bucket, scope); /* borrowed */
        if (fl == NULL) {
            if (PyErr_Occurred() || (fl = PyObject_CallNoArgs(flows_type)) == NULL) {
                Py_DECREF(passes);
                goto fail;
            }
            int rc = PyDict_SetItem(bucket, scope, fl);
            Py_DECREF(fl); /* the bucket holds it */
            if (rc < 0) {
                Py_DECREF(passes);
                goto fail;
            }
        }
        int rc = PyObject_IsTrue(sb);
        if (rc > 0) {
            PyObject *fa[5] = {chip, src, dst, moves, cpack};
            PyObject *plan = cached_plan(moves, PyTuple_Pack(2, src, dst), move_fn, fa, 5);
            rc = add_owned(fl, plan, plan ? PyNumber_Multiply(sb, passes) : NULL);
        }
        if (rc >= 0) rc = PyObject_IsTrue(fb);
        if (rc > 0) {
            PyObject *fa[6] = {chip, scope, src_cores, dst_scope, dst_cores, moves};
            PyObject *plan = cached_plan(
                moves, PyTuple_Pack(5, S_FIXED, scope, src_cores, dst_scope, dst_cores),
                fixed_fn, fa, 6);
            rc = add_owned(fl, plan, plan ? PyNumber_Multiply(fb, passes) : NULL);
        }
        Py_DECREF(passes);
        if (rc < 0) goto fail;
    }
    Py_DECREF(no_cores);
    return Py_BuildValue("(NN)", staged, streamed);
bad:
    PyErr_SetString(PyExc_TypeError, "inputs_flows: (tensor, bytes, bytes) and "
                                     "(layout, cores) or None expected");
fail:
    Py_XDECREF(no_cores);
    Py_XDECREF(staged);
    Py_XDECREF(streamed);
    return NULL;
}

/* ---- compute costs ------------------------------------------------------------------ */
enum { K_MATRIX, K_BATCHED, K_VECTOR, K_SPECIAL, K_MOVE, K_VIEW, K_GATHER, ROW = 14 };
enum { P_GM, P_GN, P_MACS, P_MACS8, P_OVH, P_LANES, P_LANES8, P_TCPE, P_L1BW, P_HALF_WB, P_WBW,
       P_TILE, N_PARAMS };

/* a * b, noting when both are integral and the product is past 2**53 (Python's exact
   integer product and a double's would differ) */
static double mulx(double a, double b, int *bad) {
    double r = a * b;
    if (fabs(r) >= 9007199254740992.0 && a == floor(a) && b == floor(b)) *bad = 1;
    return r;
}

typedef struct {
    double tiles, padded, useful;
} Tiles;

/* compiler.opshape.matrix_tiles(shape, share, matrix, gemm_rows) */
static Tiles matrix_tiles(const double *d, double share, double rows_given, const double *p,
                          double macs, int *bad) {
    double reps, rows;
    if ((int)d[0] == K_MATRIX) {
        reps = d[3];
        rows = share;
    } else {
        reps = share;
        rows = rows_given;
    }
    double gm = p[P_GM], gn = p[P_GN];
    Tiles t;
    t.tiles = trunc(mulx(mulx(reps, ceil(rows / gm), bad), ceil(d[5] / gn), bad));
    t.padded = mulx(mulx(mulx(t.tiles, gm, bad), gn, bad), d[6], bad) / macs;
    t.useful = mulx(mulx(mulx(reps, rows, bad), d[5], bad), d[6], bad) / macs;
    return t;
}

/* The op rows' bytes as doubles (``n``: whole rows of ROW; anything else a stale build's
   layout: ValueError). */
static const double *op_rows(PyObject *b, Py_ssize_t *n) {
    Py_ssize_t size = PyBytes_GET_SIZE(b), row = (Py_ssize_t)(ROW * sizeof(double));
    if (size % row != 0) {
        PyErr_SetString(PyExc_ValueError, "rows: not whole rows of ROW doubles (a stale build?)");
        return NULL;
    }
    *n = size / row;
    return (const double *)PyBytes_AS_STRING(b);
}

/* Op ``op``'s row, its kind checked (NaN too: (int) of it is undefined); NULL with the
   exception set for an op or a kind out of range. */
static const double *op_row(const double *rows, Py_ssize_t n, PyObject *op, const char *who) {
    long i = PyLong_AsLong(op);
    if (i == -1 && PyErr_Occurred()) return NULL;
    if (i < 0 || i >= n) {
        PyErr_Format(PyExc_IndexError, "%s: an op out of range", who);
        return NULL;
    }
    const double *d = rows + ROW * i;
    if (!(d[0] >= K_MATRIX && d[0] <= K_GATHER)) {
        PyErr_Format(PyExc_ValueError, "%s: an op's kind out of range", who);
        return NULL;
    }
    return d;
}

static PyObject *op_cost(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    (void)self;
    if (nargs != 6 || !PyBytes_Check(args[0]) || !PyTuple_Check(args[1]) ||
        !PyBytes_Check(args[4]) || !PyAnySet_Check(args[5])) {
        PyErr_SetString(PyExc_TypeError, "op_cost(rows, ops, s, k, params, remote)");
        return NULL;
    }
    Py_ssize_t n_ops;
    const double *rows = op_rows(args[0], &n_ops);
    if (rows == NULL) return NULL;
    if (PyBytes_GET_SIZE(args[4]) != (Py_ssize_t)(N_PARAMS * sizeof(double))) {
        PyErr_SetString(PyExc_ValueError, "op_cost: params");
        return NULL;
    }
    const double *p = (const double *)PyBytes_AS_STRING(args[4]);
    PyObject *ops = args[1], *remote = args[5];
    double s, k;
    if (as_doubles(args[2], &s, args[3], &k) < 0) return NULL;
    double gm = p[P_GM], gn = p[P_GN], ovh = p[P_OVH], tcpe = p[P_TCPE], l1bw = p[P_L1BW];
    double half_wb = p[P_HALF_WB], wbw = p[P_WBW], tile = p[P_TILE];
    double mme = 0.0, vme = 0.0, move = 0.0, fill = 0.0, useful = 0.0, wbound = 0.0;
    int bad = 0;
    for (Py_ssize_t j = 0; j < PyTuple_GET_SIZE(ops); j++) {
        const double *d = op_row(rows, n_ops, PyTuple_GET_ITEM(ops, j), "op_cost");
        if (d == NULL) return NULL;
        int kind = (int)d[0];
        if (kind == K_VIEW) continue;
        int is_matrix = kind == K_MATRIX || kind == K_BATCHED;
        double macs = d[10] != 0.0 ? p[P_MACS8] : p[P_MACS];
        double lanes = d[10] != 0.0 ? p[P_LANES8] : p[P_LANES];
        double share = d[1] != 0.0 ? ceil(mulx(s, d[2], &bad) / k) : ceil(d[2]);
        if (kind == K_MATRIX && d[3] > 1) { /* sim._model.grouped_conv_cycles */
            double ilanes = nearbyint(lanes);
            Tiles mt = matrix_tiles(d, share, 0.0, p, macs, &bad);
            double best = mt.padded + mulx(mt.tiles, ovh, &bad), bu = mt.useful;
            int vector = 0;
            double pack = d[5] < gn ? floor(gn / d[5]) : 1.0;
            if (pack > 1) {
                double packs = ceil(d[3] / pack);
                double tiles = mulx(mulx(packs, ceil(share / gm), &bad),
                                    ceil(mulx(pack, d[5], &bad) / gn), &bad);
                double cyc = mulx(tiles, mulx(mulx(mulx(gm, gn, &bad), pack, &bad), d[6], &bad)
                                             / macs + ovh, &bad);
                if (cyc < best) best = cyc;
            }
            double vec = mulx(mulx(mulx(share, d[3], &bad), d[5], &bad), d[6], &bad) / ilanes;
            if (vec < best) {
                best = vec;
                bu = 0.0;
                vector = 1;
            }
            if (vector) {
                vme += best;
                fill += (tile / lanes < best) ? tile / lanes : best;
                wbound += d[7] / wbw;
            } else {
                mme += best;
                useful += bu;
                fill += mulx(mulx(d[6], gm, &bad), gn, &bad) / macs + ovh;
                wbound += (d[7] / wbw > best) ? d[7] / wbw : best;
            }
        } else if (is_matrix) {
            Tiles mt;
            if (kind == K_BATCHED && d[1] != 0.0) { /* compiler.opshape.batched_split */
                double total = ceil(mulx(d[2], s, &bad) - 1e-9);
                if (total < 1) total = 1;
                double gemms, rws;
                if (total >= k) {
                    gemms = ceil(total / k);
                    rws = d[4];
                } else {
                    double per = floor(k / total);
                    gemms = 1;
                    rws = ceil(d[4] / per);
                }
                mt = matrix_tiles(d, gemms, rws, p, macs, &bad);
            } else {
                mt = matrix_tiles(d, share, d[4], p, macs, &bad);
            }
            double t_op = mt.padded + mulx(mt.tiles, ovh, &bad);
            mme += t_op;
            useful += mt.useful;
            fill += mulx(mulx(d[6], gm, &bad), gn, &bad) / macs + ovh;
            wbound += (d[7] / wbw > t_op) ? d[7] / wbw : t_op;
        } else if (kind == K_VECTOR || kind == K_SPECIAL) {
            double c = share / lanes * (kind == K_SPECIAL ? tcpe : 1.0);
            vme += c;
            fill += (tile / lanes < c) ? tile / lanes : c;
        } else if (kind == K_MOVE) {
            move += 2.0 * share / l1bw;
        } else {
            move += share / l1bw;
        }
        if (d[9] != 0.0) {
            double c = share * (d[9] / ((1e-9 > d[2]) ? 1e-9 : d[2])) / lanes;
            vme += c;
            fill += (tile / lanes < c) ? tile / lanes : c;
        }
        if (d[7] > half_wb && is_matrix) {
            int in = PySet_Contains(remote, PyTuple_GET_ITEM(ops, j)); /* an int: op_row read it */
            if (in < 0) return NULL;
            if (!in) {
                double extra = ceil(d[7] / half_wb) - 1;
                double streamed = d[1] != 0.0 ? mulx(s, d[8], &bad) / k : d[8];
                move += mulx(extra, streamed, &bad) / l1bw;
            }
        }
        if (d[7] != 0.0 && !is_matrix) wbound += d[7] / wbw;
    }
    if (bad) Py_RETURN_NONE;
    return Py_BuildValue("(dddddd)", mme, vme, move, fill, useful, wbound);
}

static PyObject *work_scan(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    (void)self;
    if (nargs != 3 || !PyBytes_Check(args[0]) || !PyTuple_Check(args[1])) {
        PyErr_SetString(PyExc_TypeError, "work_scan(rows, ops, half_wb)");
        return NULL;
    }
    Py_ssize_t n_ops;
    const double *rows = op_rows(args[0], &n_ops);
    if (rows == NULL) return NULL;
    PyObject *ops = args[1];
    double half_wb = PyFloat_AsDouble(args[2]);
    if (half_wb == -1.0 && PyErr_Occurred()) return NULL;
    PyObject *picks = PyList_New(0);
    if (picks == NULL) return NULL;
    double cut = 0.0;
    for (Py_ssize_t j = 0; j < PyTuple_GET_SIZE(ops); j++) {
        PyObject *op = PyTuple_GET_ITEM(ops, j);
        const double *d = op_row(rows, n_ops, op, "work_scan");
        if (d == NULL) goto fail;
        int kind = (int)d[0], pick = 0;
        if (d[1] != 0.0) {
            cut += d[11];
            if ((kind == K_BATCHED && d[12] != 0.0) ||
                (d[11] != 0.0 && d[13] != 0.0 && d[8] != 0.0))
                pick = 1;
        }
        if (kind == K_GATHER || (d[7] > half_wb && (kind == K_MATRIX || kind == K_BATCHED)))
            pick = 1;
        if (pick && PyList_Append(picks, op) < 0) goto fail;
    }
    return Py_BuildValue("(dN)", cut, picks);
fail:
    Py_DECREF(picks);
    return NULL;
}

static PyMethodDef methods[] = {
    {"inputs_flows", (PyCFunction)(void (*)(void))inputs_flows, METH_FASTCALL,
     "sim._plans.inputs_flows's loop (see the module doc)."},
    {"work_scan", (PyCFunction)(void (*)(void))work_scan, METH_FASTCALL,
     "sim._model.group_work's halo sum and the ops it does more with (see the module doc)."},
    {"op_cost", (PyCFunction)(void (*)(void))op_cost, METH_FASTCALL,
     "sim._model._cost's sums (see the module doc)."},
    {"add_plan", (PyCFunction)(void (*)(void))add_plan, METH_FASTCALL,
     "All of sim._flows.Flows.add (see the module doc)."},
    {"add_items", (PyCFunction)(void (*)(void))add_items, METH_FASTCALL,
     "One dict's sums of sim._flows.Flows.add (see the module doc)."},
    {"move_plan", (PyCFunction)(void (*)(void))move_plan, METH_FASTCALL,
     "A movement plan's fields (sim._moves._plan; see the module doc)."},
    {"pack_group", (PyCFunction)(void (*)(void))pack_group, METH_FASTCALL,
     "A group step plan packed for sim._csim.group_step (sim._ctime.pack_group)."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "sim._cpack",
                                    "A step plan's timing-free parts in C (sim/_ctime.py).",
                                    -1, methods, NULL, NULL, NULL, NULL};

PyMODINIT_FUNC PyInit__cpack(void) {
    S_FLOWS = PyUnicode_InternFromString("flows");
    S_INCOMING = PyUnicode_InternFromString("incoming");
    S_NOC = PyUnicode_InternFromString("noc");
    S_HOPS = PyUnicode_InternFromString("hops");
    S_DDR = PyUnicode_InternFromString("ddr");
    S_STAYING = PyUnicode_InternFromString("staying");
    S_MME = PyUnicode_InternFromString("mme_cycles");
    S_VME = PyUnicode_InternFromString("vme_cycles");
    S_FIXED = PyUnicode_InternFromString("fixed");
    ZERO = PyLong_FromLong(0);
    ONE = PyLong_FromLong(1);
    if (!S_FIXED || !ZERO || !ONE) return NULL;
    if (!S_FLOWS || !S_INCOMING || !S_NOC || !S_HOPS || !S_DDR || !S_MME || !S_VME || !S_STAYING)
        return NULL;
    return PyModule_Create(&module);
}
