/* The simulator's timed step in C (sim/_ctime.py packs the plans and drives it).
 *
 * sim._engine._Sim.group_step and transfer_step are the reference: this module books a
 * step's loads and streams on the resources first come, first served, gates its loads on L1
 * room, and sets its cores' times and engine cycles, with the same floating-point
 * operations in the same order, so every result is the same bit for bit
 * (tests/sim/test_csim.py). Everything timing-free (which flows, which costs) was decided in
 * Python once per step plan and packed into a flat array of doubles (sim._ctime.pack_group,
 * pack_flows); no Python object is touched inside the loop.
 *
 * The simulation's state is one array of doubles that the Python code reads and writes too
 * (through memoryview slices, for the steps this module does not take: gathered tables, host
 * ops, a recorded timeline):
 *   st[0] resources R, st[1] cores n, st[2] L1 data bytes per core,
 *   then bw[R], free_at[R], busy[R], core_start[n], core_free[n], core_usage[n], mme[n],
 *   vme[n].
 *
 * A flows block (one reservation): latency, noc bytes, n_inc, n_inc x (core, bytes arriving
 * in its L1), n_fl, n_fl x (resource id, bytes).
 *
 * group_step(pack, st, ready, deps, l1, noc, wb[, events, label])
 *   -> (ls, le, start, end, top, noc, wb)
 *   pack (bytes of doubles): K, K x input scope code; L, L x (scope code, flows block);
 *     first (0/1) [flows block, its DDR bytes]; ex (0/1) [its noc bytes]; M, M x flows block
 *     (the streams in order); weight stream (0/1) [its DDR bytes]; the slowest part's
 *     cycles; n_cores, n_cores x core; P, P x (core, mme cycles, vme cycles).
 *   deps: the steps providing the K inputs (their end times in `ready`); l1: the step's
 *   (core, bytes) in L1; noc, wb: the simulation's NoC and weight bytes so far; events,
 *   label: a recorded timeline (Reservations.events) and the step's label.
 * transfer_step(pack, st, ready, deps, l1, noc[, events, label]) -> (ls, le, top, noc)
 *   (its pack: below).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

enum { MAX_SCOPES = 8, MAX_LOADS = 64, MAX_CORES = 256 };

typedef struct {
    int R, n;
    double l1_cap;
    const double *bw;
    double *free_at, *busy, *cstart, *cfree, *cusage, *mme, *vme;
} State;

typedef struct {
    const double *p, *end;
    int bad;
} Reader;

/* a reader over a pack (a bytes object of doubles); a length that is not a whole number of
   doubles is malformed (the reader starts bad, at its end: nothing past the data is read) */
static Reader reader_of(PyObject *pack) {
    const char *b = PyBytes_AS_STRING(pack);
    Py_ssize_t n = PyBytes_GET_SIZE(pack);
    const double *end = (const double *)(b + n - n % (Py_ssize_t)sizeof(double));
    Reader r = {(const double *)b, end, n % (Py_ssize_t)sizeof(double) != 0};
    if (r.bad) r.p = end;
    return r;
}

static double rd(Reader *r) {
    if (r->p >= r->end) {
        r->bad = 1;
        return 0.0;
    }
    return *r->p++;
}

/* an index read from the pack, checked against [0, lim) */
static int rdi(Reader *r, int lim) {
    double v = rd(r);
    if (!(v >= 0.0 && v < (double)lim)) {
        r->bad = 1;
        return 0;
    }
    return (int)v;
}

static int state_of(Py_buffer *b, State *s) {
    const double *d = (const double *)b->buf;
    Py_ssize_t len = b->len / (Py_ssize_t)sizeof(double);
    /* the counts checked as doubles before the casts (NaN or huge: refused) */
    if (len < 3 || !(d[0] >= 1.0 && d[0] <= (double)(1 << 20)) ||
        !(d[1] >= 1.0 && d[1] <= (double)MAX_CORES)) return -1;
    s->R = (int)d[0];
    s->n = (int)d[1];
    s->l1_cap = d[2];
    if (s->R <= 0 || s->n <= 0 || s->n > MAX_CORES ||
        len != 3 + 3 * (Py_ssize_t)s->R + 5 * (Py_ssize_t)s->n) return -1;
    double *w = (double *)b->buf;
    s->bw = d + 3;
    s->free_at = w + 3 + s->R;
    s->busy = s->free_at + s->R;
    s->cstart = s->busy + s->R;
    s->cfree = s->cstart + s->n;
    s->cusage = s->cfree + s->n;
    s->mme = s->cusage + s->n;
    s->vme = s->mme + s->n;
    return 0;
}

/* A flows block as read from a pack: positions of its parts. */
typedef struct {
    double lat, noc;
    const double *inc, *fl;
    int n_inc, n_fl;
} Block;

static void read_block(Reader *r, const State *s, Block *b) {
    b->lat = rd(r);
    b->noc = rd(r);
    b->n_inc = rdi(r, 1 << 20);
    b->inc = r->p;
    for (int i = 0; i < b->n_inc && !r->bad; i++) {
        rdi(r, s->n);
        rd(r);
    }
    b->n_fl = rdi(r, 1 << 20);
    b->fl = r->p;
    for (int i = 0; i < b->n_fl && !r->bad; i++) {
        rdi(r, s->R);
        rd(r);
    }
}

static PyObject *LOAD, *STREAM, *EMPTY; /* the timeline's suffixes */

/* a recorded reservation (Reservations.reserve with record on): (label + suffix, start,
 * ((resource, cycles busy), ...)) appended to `events` */
static int record(PyObject *events, PyObject *label, PyObject *suffix, const Block *b,
                  const State *s, double start) {
    PyObject *spans = PyTuple_New(b->n_fl);
    if (spans == NULL) return -1;
    for (int i = 0; i < b->n_fl; i++) {
        int r = (int)b->fl[2 * i];
        PyObject *span = Py_BuildValue("(id)", r, b->fl[2 * i + 1] / s->bw[r]);
        if (span == NULL) {
            Py_DECREF(spans);
            return -1;
        }
        PyTuple_SET_ITEM(spans, i, span);
    }
    PyObject *name = PyUnicode_Concat(label, suffix);
    PyObject *ev = name == NULL ? NULL : Py_BuildValue("(NdN)", name, start, spans);
    if (ev == NULL) {
        if (name == NULL) Py_DECREF(spans);
        return -1;
    }
    int rc = PyList_Append(events, ev);
    Py_DECREF(ev);
    return rc;
}

/* Reservations.reserve: FCFS on every resource of the block, from `ready`. */
static void reserve(const State *s, const Block *b, double ready, double *a, double *e) {
    if (b->n_fl == 0) {
        *a = *e = ready;
        return;
    }
    double start = ready, longest = 0.0;
    for (int i = 0; i < b->n_fl; i++) {
        int r = (int)b->fl[2 * i];
        if (s->free_at[r] > start) start = s->free_at[r];
    }
    for (int i = 0; i < b->n_fl; i++) {
        int r = (int)b->fl[2 * i];
        double d = b->fl[2 * i + 1] / s->bw[r];
        s->free_at[r] = start + d;
        s->busy[r] += d;
        if (d > longest) longest = d;
    }
    *a = start;
    *e = start + longest + b->lat;
}

/* _Sim.gate: the earliest load start L1 room allows on `cores`. */
static double gate_of(const State *s, const double *incoming, const int *cores, int nc) {
    double gate = 0.0;
    for (int i = 0; i < nc; i++) {
        int c = cores[i];
        double inc = incoming[c];
        if (inc <= 0) continue;
        double t = s->cusage[c] + inc <= s->l1_cap ? s->cstart[c] : s->cfree[c];
        if (t > gate) gate = t;
    }
    return gate;
}

static int get_buffers(PyObject *st_obj, PyObject *ready_obj, Py_buffer *sb, Py_buffer *rb,
                       State *s) {
    if (PyObject_GetBuffer(st_obj, sb, PyBUF_WRITABLE | PyBUF_C_CONTIGUOUS) < 0) return -1;
    if (PyObject_GetBuffer(ready_obj, rb, PyBUF_WRITABLE | PyBUF_C_CONTIGUOUS) < 0) {
        PyBuffer_Release(sb);
        return -1;
    }
    if (sb->itemsize != (Py_ssize_t)sizeof(double) || rb->itemsize != (Py_ssize_t)sizeof(double) ||
        state_of(sb, s) < 0) {
        PyBuffer_Release(sb);
        PyBuffer_Release(rb);
        PyErr_SetString(PyExc_ValueError, "malformed simulation state");
        return -1;
    }
    return 0;
}

/* the end times of the steps `deps` names (a tuple of ints) */
static int dep_times(PyObject *deps, const Py_buffer *rb, double *out, Py_ssize_t want) {
    if (!PyTuple_Check(deps) || PyTuple_GET_SIZE(deps) != want) {
        PyErr_SetString(PyExc_ValueError, "deps do not match the plan's inputs");
        return -1;
    }
    const double *ready = (const double *)rb->buf;
    Py_ssize_t nr = rb->len / (Py_ssize_t)sizeof(double);
    for (Py_ssize_t i = 0; i < want; i++) {
        Py_ssize_t d = PyLong_AsSsize_t(PyTuple_GET_ITEM(deps, i));
        if (d == -1 && PyErr_Occurred()) return -1;
        if (d < 0 || d >= nr) {
            PyErr_SetString(PyExc_IndexError, "dependency out of range");
            return -1;
        }
        out[i] = ready[d];
    }
    return 0;
}

static PyObject *group_step(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    (void)self;
    if ((nargs != 7 && nargs != 9) || !PyBytes_Check(args[0]) ||
        (nargs == 9 && (!PyList_Check(args[7]) || !PyUnicode_Check(args[8])))) {
        PyErr_SetString(PyExc_TypeError,
                        "group_step(pack, st, ready, deps, l1, noc, wb[, events, label])");
        return NULL;
    }
    PyObject *events = nargs == 9 ? args[7] : NULL, *label = nargs == 9 ? args[8] : NULL;
    double noc = PyFloat_AsDouble(args[5]);
    if (noc == -1.0 && PyErr_Occurred()) return NULL;
    double wb = PyFloat_AsDouble(args[6]);
    if (wb == -1.0 && PyErr_Occurred()) return NULL;
    Py_buffer sb, rb;
    State s;
    if (get_buffers(args[1], args[2], &sb, &rb, &s) < 0) return NULL;
    PyObject *out = NULL;
    Reader r = reader_of(args[0]);
    double incoming[MAX_CORES], usage[MAX_CORES], t_dep[MAX_LOADS];
    double kind_ready[MAX_SCOPES], load_ready[MAX_LOADS];
    Block loads[MAX_LOADS], streams[MAX_LOADS];
    int order[MAX_LOADS], cores[MAX_CORES];
    char has_usage[MAX_CORES];

    /* when the data of each source scope is ready (star: all inputs) */
    int K = rdi(&r, MAX_LOADS);
    if (r.bad) goto malformed;
    if (dep_times(args[3], &rb, t_dep, K) < 0) goto done;
    double star = 0.0;
    for (int i = 0; i < MAX_SCOPES; i++) kind_ready[i] = 0.0;
    for (int i = 0; i < K; i++) {
        int kind = rdi(&r, MAX_SCOPES);
        double t = t_dep[i];
        if (t > star) star = t;
        if (t > kind_ready[kind]) kind_ready[kind] = t;
    }
    /* L1 in use on the step's cores (later pairs win, as dict() does) */
    PyObject *l1 = args[4];
    if (!PyTuple_Check(l1)) {
        PyErr_SetString(PyExc_TypeError, "l1 must be a tuple of (core, bytes)");
        goto done;
    }
    for (int c = 0; c < s.n; c++) has_usage[c] = 0;
    double top = 0.0;
    int any = 0;
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(l1); i++) {
        PyObject *pair = PyTuple_GET_ITEM(l1, i);
        if (!PyTuple_Check(pair) || PyTuple_GET_SIZE(pair) != 2) {
            PyErr_SetString(PyExc_TypeError, "l1 must be a tuple of (core, bytes)");
            goto done;
        }
        long c = PyLong_AsLong(PyTuple_GET_ITEM(pair, 0));
        if (c == -1 && PyErr_Occurred()) goto done;
        double b = PyFloat_AsDouble(PyTuple_GET_ITEM(pair, 1));
        if (b == -1.0 && PyErr_Occurred()) goto done;
        if (c < 0 || c >= s.n) {
            PyErr_SetString(PyExc_IndexError, "core out of range");
            goto done;
        }
        usage[c] = b;
        has_usage[c] = 1;
    }
    for (int c = 0; c < s.n; c++) {
        if (has_usage[c] && (!any || usage[c] > top)) top = usage[c];
        if (has_usage[c]) any = 1;
    }
    /* the staged loads, then the first item of the weight path */
    int L = rdi(&r, MAX_LOADS - 1);
    for (int i = 0; i < L && !r.bad; i++) {
        load_ready[i] = kind_ready[rdi(&r, MAX_SCOPES)];
        read_block(&r, &s, &loads[i]);
    }
    if (rd(&r) != 0.0) {
        load_ready[L] = 0.0;
        read_block(&r, &s, &loads[L]);
        wb += rd(&r);
        L++;
    }
    double ex = rd(&r);
    if (ex != 0.0) noc += rd(&r);
    int M = rdi(&r, MAX_LOADS);
    for (int i = 0; i < M && !r.bad; i++) read_block(&r, &s, &streams[i]);
    double wflow = rd(&r);
    double wflow_ddr = wflow != 0.0 ? rd(&r) : 0.0;
    double cycles = rd(&r);
    int nc = rdi(&r, MAX_CORES + 1);
    for (int i = 0; i < nc && !r.bad; i++) cores[i] = rdi(&r, s.n);
    int P = rdi(&r, 1 << 20);
    const double *parts = r.p;
    for (int i = 0; i < P && !r.bad; i++) {
        int c = rdi(&r, s.n);
        rd(&r);
        rd(&r);
        if (!r.bad && !has_usage[c]) {
            PyErr_Format(PyExc_KeyError, "core %d has no L1 use", c);
            goto done;
        }
    }
    if (r.bad || r.p != r.end) goto malformed;

    for (int c = 0; c < s.n; c++) incoming[c] = 0.0;
    for (int i = 0; i < L; i++) {
        const Block *b = &loads[i];
        for (int j = 0; j < b->n_inc; j++) incoming[(int)b->inc[2 * j]] += b->inc[2 * j + 1];
        noc += b->noc;
    }
    /* timing: loads may start during the previous step on these cores when L1 has room */
    double gate = gate_of(&s, incoming, cores, nc);
    double ls = gate > star ? gate : star, le = ls;
    for (int i = 0; i < L; i++) { /* first come, first served: a stable sort by ready time */
        int j = i;
        while (j > 0 && load_ready[order[j - 1]] > load_ready[i]) {
            order[j] = order[j - 1];
            j--;
        }
        order[j] = i;
    }
    for (int i = 0; i < L; i++) {
        double data = load_ready[order[i]], a, e;
        reserve(&s, &loads[order[i]], gate > data ? gate : data, &a, &e);
        if (events != NULL && loads[order[i]].n_fl &&
            record(events, label, LOAD, &loads[order[i]], &s, a) < 0) goto done;
        if (i == 0) {
            ls = a;
            le = e;
        } else {
            if (a < ls) ls = a;
            if (e > le) le = e;
        }
    }
    double start = star > le ? star : le;
    for (int i = 0; i < nc; i++)
        if (s.cfree[cores[i]] > start) start = s.cfree[cores[i]];
    wb += wflow_ddr;
    double end = start + cycles;
    for (int i = 0; i < M; i++) {
        double a, e;
        reserve(&s, &streams[i], start, &a, &e);
        if (events != NULL && streams[i].n_fl &&
            record(events, label, STREAM, &streams[i], &s, a) < 0) goto done;
        if (e > end) end = e;
    }
    for (int i = 0; i < P; i++) {
        int c = (int)parts[3 * i];
        s.cstart[c] = start;
        s.cfree[c] = end;
        s.cusage[c] = usage[c];
        s.mme[c] += parts[3 * i + 1];
        s.vme[c] += parts[3 * i + 2];
    }
    out = Py_BuildValue("(ddddddd)", ls, le, start, end, top, noc, wb);
    goto done;
malformed:
    PyErr_SetString(PyExc_ValueError, "malformed step pack");
done:
    PyBuffer_Release(&sb);
    PyBuffer_Release(&rb);
    return out;
}

/* the largest of a step's L1 bytes (0 when none), as max(..., default=0.0) */
static int l1_top(PyObject *l1, double *top) {
    if (!PyTuple_Check(l1)) {
        PyErr_SetString(PyExc_TypeError, "l1 must be a tuple of (core, bytes)");
        return -1;
    }
    *top = 0.0;
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(l1); i++) {
        PyObject *pair = PyTuple_GET_ITEM(l1, i);
        if (!PyTuple_Check(pair) || PyTuple_GET_SIZE(pair) != 2) {
            PyErr_SetString(PyExc_TypeError, "l1 must be a tuple of (core, bytes)");
            return -1;
        }
        double b = PyFloat_AsDouble(PyTuple_GET_ITEM(pair, 1));
        if (b == -1.0 && PyErr_Occurred()) return -1;
        if (i == 0 || b > *top) *top = b;
    }
    return 0;
}

/* transfer_step(pack, st, ready, deps, l1, noc[, events, label]) -> (ls, le, top, noc)
 * pack: gated (0/1: the destination is L1, its loads wait for room), n_cores, n_cores x core,
 * one flows block. deps: the source steps (a sequence of ints). */
static PyObject *transfer_step(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    (void)self;
    if ((nargs != 6 && nargs != 8) || !PyBytes_Check(args[0]) ||
        (nargs == 8 && (!PyList_Check(args[6]) || !PyUnicode_Check(args[7])))) {
        PyErr_SetString(PyExc_TypeError,
                        "transfer_step(pack, st, ready, deps, l1, noc[, events, label])");
        return NULL;
    }
    double noc = PyFloat_AsDouble(args[5]), top;
    if (PyErr_Occurred() || l1_top(args[4], &top) < 0) return NULL;
    PyObject *deps = PySequence_Fast(args[3], "deps must be a sequence of ints");
    if (deps == NULL) return NULL;
    Py_buffer sb, rb;
    State s;
    if (get_buffers(args[1], args[2], &sb, &rb, &s) < 0) {
        Py_DECREF(deps);
        return NULL;
    }
    PyObject *out = NULL;
    Reader r = reader_of(args[0]);
    double incoming[MAX_CORES];
    int cores[MAX_CORES];
    int gated = rd(&r) != 0.0;
    int nc = rdi(&r, MAX_CORES + 1);
    for (int i = 0; i < nc && !r.bad; i++) cores[i] = rdi(&r, s.n);
    Block b;
    read_block(&r, &s, &b);
    if (r.bad || r.p != r.end) {
        PyErr_SetString(PyExc_ValueError, "malformed transfer pack");
        goto done;
    }
    const double *ready = (const double *)rb.buf;
    Py_ssize_t nr = rb.len / (Py_ssize_t)sizeof(double), nd = PySequence_Fast_GET_SIZE(deps);
    double data = 0.0;
    for (Py_ssize_t i = 0; i < nd; i++) {
        Py_ssize_t d = PyLong_AsSsize_t(PySequence_Fast_GET_ITEM(deps, i));
        if (d == -1 && PyErr_Occurred()) goto done;
        if (d < 0 || d >= nr) {
            PyErr_SetString(PyExc_IndexError, "dependency out of range");
            goto done;
        }
        if (ready[d] > data) data = ready[d];
    }
    noc += b.noc;
    double gate = 0.0;
    if (gated) {
        for (int c = 0; c < s.n; c++) incoming[c] = 0.0;
        for (int j = 0; j < b.n_inc; j++) incoming[(int)b.inc[2 * j]] += b.inc[2 * j + 1];
        gate = gate_of(&s, incoming, cores, nc);
    }
    double ls, le;
    reserve(&s, &b, gate > data ? gate : data, &ls, &le);
    if (nargs == 8 && b.n_fl && record(args[6], args[7], EMPTY, &b, &s, ls) < 0) goto done;
    out = Py_BuildValue("(dddd)", ls, le, top, noc);
done:
    Py_DECREF(deps);
    PyBuffer_Release(&sb);
    PyBuffer_Release(&rb);
    return out;
}

static PyMethodDef methods[] = {
    {"group_step", (PyCFunction)(void (*)(void))group_step, METH_FASTCALL,
     "Book a group step packed by sim._ctime.pack_group (see the module doc)."},
    {"transfer_step", (PyCFunction)(void (*)(void))transfer_step, METH_FASTCALL,
     "Book a transfer step packed by sim._ctime.pack_transfer (see the module doc)."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "sim._csim",
                                    "The simulator's timed step in C (sim/_ctime.py).", -1,
                                    methods, NULL, NULL, NULL, NULL};

PyMODINIT_FUNC PyInit__csim(void) {
    LOAD = PyUnicode_InternFromString(" load");
    STREAM = PyUnicode_InternFromString(" stream");
    EMPTY = PyUnicode_InternFromString("");
    if (LOAD == NULL || STREAM == NULL || EMPTY == NULL) return NULL;
    return PyModule_Create(&module);
}
