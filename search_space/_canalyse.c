/* An op set's first-time analysis in C (search_space/_cfoot.py drives it): what decoding
 * needs of an op set it never met, without the Python analysis.
 *
 * Mirrors, statement by statement and in the same order:
 *
 *   compiler.derive._group_io             -> the inputs and outputs
 *   compiler.views.view_sources           -> root_of() (views followed inside the set)
 *   compiler.footprint._analyse           -> the streamable inputs and their readers, the
 *                                            fused chains, the lifetimes
 *   compiler.footprint._chain_rows and
 *   search_space._cfoot.pack_rows         -> the packed chain rows (_cprofile.c's layout)
 *   compiler.capacity._GroupFacts         -> windowed / attention
 *
 * Nothing here decides a number: every per-op and per-tensor fact comes from the Python
 * definitions (tables() is filled by search_space/_cfoot.py from op_spec, is_elementwise,
 * op_shapes and sample_bytes), this file only walks them as the Python code does. The
 * differential test (tests/search_space/test_canalyse.py) compares every output with the
 * Python definitions over the op sets of decoded schedules and random op ranges.
 *
 * tables(names, out, in_at, ins, flags, s, f, elements, is_out, cons_at, cons) -> capsule
 *   per op: its output tensor, inputs (CSR), flags (bits below); per tensor: its name,
 *   bytes per sample and fixed bytes (sample_bytes), elements, whether it is a model
 *   output, its consumer ops (CSR). Every index is checked against the table sizes.
 * analyse(capsule, ops, names) -> (inputs, outputs, streamable, readers, pack, slots,
 *   windowed, attention)
 *   ops: ascending op indices; names: tensor indices standing for the streamable bits of
 *   the pack (None: the op set's own streamable inputs in the inputs' order);
 *   inputs, outputs: tensor indices (group_io); streamable: tensor indices in the
 *   analysis' order of group inputs, readers: the op reading each; pack: the chain rows
 *   as int64 bytes, or None where pack_rows returns None or Python would raise (the
 *   caller keeps the Python definition); slots: the op of each halo/attention slot.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include "_cutil.h"
#include <limits.h>
#include <stdlib.h>
#include <string.h>

enum { F_VIEW = 1, F_EW = 2, F_STREAMS = 4, F_MOVE = 8, F_HALO = 16, F_ATTN = 32 };
/* per-tensor bits of one call */
enum { T_SIZE = 1, T_PROD = 2, T_OUTSIDE = 4, T_VIRTUAL = 8, T_ALIAS = 16, T_SEEN = 32,
       T_PRIVATE = 64, T_IOIN = 128 };

typedef struct {
    int n_ops, n_tensors;
    int *out, *in_at, *ins, *cons_at, *cons;
    unsigned char *flags, *is_out;
    long long *ts, *tf, *elem;
    PyObject *names;
    /* scratch, valid where the stamp is this call's */
    int gen;
    int *ostamp, *tstamp, *root, *cnt, *firstp, *lastp, *bit, *mark;
    unsigned short *tbits;
    int mgen;
} Ana;

static void ana_free(Ana *a) {
    if (!a) return;
    free(a->out); free(a->in_at); free(a->ins); free(a->cons_at); free(a->cons);
    free(a->flags); free(a->is_out); free(a->ts); free(a->tf); free(a->elem);
    free(a->ostamp); free(a->tstamp); free(a->root); free(a->cnt); free(a->firstp); free(a->lastp);
    free(a->bit); free(a->mark); free(a->tbits);
    Py_XDECREF(a->names);
    free(a);
}

static void cap_free(PyObject *cap) {
    ana_free(PyCapsule_GetPointer(cap, "graphtune.analyse"));
}
/* int64 array of exactly `want` non-negative entries (OverflowError past int64) */
static long long *ll_array(PyObject *obj, Py_ssize_t want) {
    PyObject *seq = PySequence_Tuple(obj);
    if (!seq) return NULL;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
    if (n != want) {
        PyErr_SetString(PyExc_ValueError, "a table of the wrong length");
        Py_DECREF(seq);
        return NULL;
    }
    long long *v = alloc_n(n, sizeof(long long));
    if (!v) { Py_DECREF(seq); PyErr_NoMemory(); return NULL; }
    for (Py_ssize_t i = 0; i < n; i++) {
        long long x = PyLong_AsLongLong(PySequence_Fast_GET_ITEM(seq, i));
        if ((x == -1 && PyErr_Occurred()) || x < 0) {
            if (!PyErr_Occurred()) PyErr_SetString(PyExc_ValueError, "a negative size");
            free(v);
            Py_DECREF(seq);
            return NULL;
        }
        v[i] = x;
    }
    Py_DECREF(seq);
    return v;
}

static PyObject *py_tables(PyObject *self, PyObject *args) {
    PyObject *names, *o_out, *o_in_at, *o_ins, *o_flags, *o_s, *o_f, *o_elem, *o_is_out, *o_cons_at, *o_cons;
    (void)self;
    if (!PyArg_ParseTuple(args, "O!OOOOOOOOOO", &PyTuple_Type, &names, &o_out, &o_in_at, &o_ins, &o_flags,
                          &o_s, &o_f, &o_elem, &o_is_out, &o_cons_at, &o_cons))
        return NULL;
    Py_ssize_t nt = PyTuple_GET_SIZE(names), no = 0, m_in = 0, m_cons = 0;
    if (nt > INT_MAX / 2) { PyErr_SetString(PyExc_ValueError, "too many tensors"); return NULL; }
    for (Py_ssize_t i = 0; i < nt; i++)
        if (!PyUnicode_Check(PyTuple_GET_ITEM(names, i))) {
            PyErr_SetString(PyExc_ValueError, "tensor names: str");
            return NULL;
        }
    Ana *a = calloc(1, sizeof(Ana));
    if (!a) return PyErr_NoMemory();
    a->n_tensors = (int)nt;
    int *fl = NULL, *io = NULL;
    if (!(a->out = int_array(o_out, -1, 0, nt, &no))) goto fail;
    a->n_ops = (int)no;
    if (!(a->in_at = int_array(o_in_at, no + 1, 0, INT_MAX, NULL))) goto fail;
    if (!(a->ins = int_array(o_ins, -1, 0, nt, &m_in))) goto fail;
    if (!(fl = int_array(o_flags, no, 0, 64, NULL))) goto fail;
    if (!(a->ts = ll_array(o_s, nt)) || !(a->tf = ll_array(o_f, nt)) || !(a->elem = ll_array(o_elem, nt)))
        goto fail;
    if (!(io = int_array(o_is_out, nt, 0, 2, NULL))) goto fail;
    if (!(a->cons_at = int_array(o_cons_at, nt + 1, 0, INT_MAX, NULL))) goto fail;
    if (!(a->cons = int_array(o_cons, -1, 0, no, &m_cons))) goto fail;
    if (!offsets_ok(a->in_at, a->n_ops, m_in) || !offsets_ok(a->cons_at, a->n_tensors, m_cons)) {
        PyErr_SetString(PyExc_ValueError, "bad offsets");
        goto fail;
    }
    a->flags = alloc_n(no, 1);
    a->is_out = alloc_n(nt, 1);
    a->ostamp = alloc_n(no, sizeof(int));
    a->tstamp = alloc_n(nt, sizeof(int));
    a->root = alloc_n(nt, sizeof(int));
    a->cnt = alloc_n(nt, sizeof(int));
    a->firstp = alloc_n(nt, sizeof(int));
    a->lastp = alloc_n(nt, sizeof(int));
    a->bit = alloc_n(nt, sizeof(int));
    a->mark = alloc_n(nt, sizeof(int));
    a->tbits = alloc_n(nt, sizeof(unsigned short));
    if (!a->flags || !a->is_out || !a->ostamp || !a->tstamp || !a->root || !a->cnt || !a->firstp
        || !a->lastp || !a->bit || !a->mark || !a->tbits) {
        PyErr_NoMemory();
        goto fail;
    }
    for (Py_ssize_t i = 0; i < no; i++) a->flags[i] = (unsigned char)fl[i];
    for (Py_ssize_t i = 0; i < nt; i++) a->is_out[i] = (unsigned char)io[i];
    free(fl); free(io);
    Py_INCREF(names);
    a->names = names;
    PyObject *cap = PyCapsule_New(a, "graphtune.analyse", cap_free);
    if (!cap) { ana_free(a); return NULL; }
    return cap;
fail:
    free(fl); free(io);
    ana_free(a);
    return NULL;
}

/* a growable int64 buffer */
typedef struct { Py_ssize_t n, cap; long long *v; } LLVec;

static int ll_push(LLVec *b, long long x) {
    if (b->n == b->cap) {
        Py_ssize_t cap = b->cap ? b->cap * 2 : 256;
        if (cap > PY_SSIZE_T_MAX / (Py_ssize_t)sizeof(long long)) return -1;
        long long *v = realloc(b->v, (size_t)cap * sizeof(long long));
        if (!v) return -1;
        b->v = v;
        b->cap = cap;
    }
    b->v[b->n++] = x;
    return 0;
}

static PyObject *int_tuple(const int *v, int n) {
    PyObject *t = PyTuple_New(n);
    if (!t) return NULL;
    for (int k = 0; k < n; k++) {
        PyObject *x = PyLong_FromLong(v[k]);
        if (!x) { Py_DECREF(t); return NULL; }
        PyTuple_SET_ITEM(t, k, x);
    }
    return t;
}

static PyObject *py_analyse(PyObject *self, PyObject *args) {
    PyObject *cap, *ops_obj, *names_obj;
    (void)self;
    if (!PyArg_ParseTuple(args, "O!O!O", &PyCapsule_Type, &cap, &PyTuple_Type, &ops_obj, &names_obj))
        return NULL;
    Ana *a = PyCapsule_GetPointer(cap, "graphtune.analyse");
    if (!a) return NULL;
    if (names_obj != Py_None && !PyTuple_Check(names_obj)) {
        PyErr_SetString(PyExc_ValueError, "names: a tuple of tensor indices or None");
        return NULL;
    }
    Py_ssize_t n_ = PyTuple_GET_SIZE(ops_obj);
    if (n_ < 1 || n_ > a->n_ops) { PyErr_SetString(PyExc_ValueError, "ops: 1 to n_ops op indices"); return NULL; }
    int n = (int)n_, NT = a->n_tensors;
    int *ops = alloc_n(n, sizeof(int)), *seq = alloc_n(n, sizeof(int)), *chain_of = alloc_n(n, sizeof(int));
    int *chain_at = alloc_n(n + 1, sizeof(int));
    /* tensors met by this call (each once): inputs/outputs of the ops, at most in_at span + n */
    int *io_in = NULL, *io_out = alloc_n(n, sizeof(int)), *seen = NULL, *gin = NULL, *strm = NULL, *rdr = NULL;
    int *slots = NULL, *proots = NULL;
    LLVec pack = {0, 0, NULL};
    PyObject *result = NULL, *t_in = NULL, *t_out = NULL, *t_st = NULL, *t_rd = NULL, *t_pack = NULL, *t_sl = NULL;
    if (!ops || !seq || !chain_of || !chain_at || !io_out) { PyErr_NoMemory(); goto done; }
    if (a->gen == INT_MAX) {
        memset(a->ostamp, 0, sizeof(int) * (size_t)a->n_ops);
        memset(a->tstamp, 0, sizeof(int) * (size_t)NT);
        a->gen = 0;
    }
    int gen = ++a->gen;
    long m_in = 0;
    /* ints only (no __index__ runs Python code while the scratch is this call's) */
    for (int k = 0; k < n; k++) {
        if (!PyLong_Check(PyTuple_GET_ITEM(ops_obj, k))) {
            PyErr_SetString(PyExc_ValueError, "ops: ascending op indices");
            goto done;
        }
    }
    if (names_obj != Py_None) {
        for (Py_ssize_t b = 0; b < PyTuple_GET_SIZE(names_obj); b++) {
            if (!PyLong_Check(PyTuple_GET_ITEM(names_obj, b))) {
                PyErr_SetString(PyExc_ValueError, "names: tensor indices");
                goto done;
            }
        }
    }
    for (int k = 0; k < n; k++) {
        long i = PyLong_AsLong(PyTuple_GET_ITEM(ops_obj, k));
        if ((i == -1 && PyErr_Occurred()) || i < 0 || i >= a->n_ops || (k && i <= ops[k - 1])) {
            if (!PyErr_Occurred() || PyErr_ExceptionMatches(PyExc_OverflowError)) {
                PyErr_Clear();
                PyErr_SetString(PyExc_ValueError, "ops: ascending op indices");
            }
            goto done;
        }
        ops[k] = (int)i;
        a->ostamp[i] = gen;
        m_in += a->in_at[i + 1] - a->in_at[i];
    }
    io_in = alloc_n(m_in, sizeof(int));
    seen = alloc_n(m_in, sizeof(int));
    gin = alloc_n(m_in, sizeof(int));
    strm = alloc_n(m_in, sizeof(int));
    rdr = alloc_n(m_in, sizeof(int));
    slots = alloc_n(n, sizeof(int));
    proots = alloc_n(m_in, sizeof(int));
    if (!io_in || !seen || !gin || !strm || !rdr || !slots || !proots) { PyErr_NoMemory(); goto done; }
#define IN_SET(op) (a->ostamp[op] == gen)
#define TOUCH(t) do { if (a->tstamp[t] != gen) { a->tstamp[t] = gen; a->tbits[t] = 0; a->cnt[t] = 0; \
                                                 a->bit[t] = -1; } } while (0)
#define HAS(t, b) (a->tstamp[t] == gen && (a->tbits[t] & (b)))
#define ROOT(t) (HAS(t, T_ALIAS) ? a->root[t] : (t))
    /* the tensors of the set (footprint's size dict) and which ops produce them */
    for (int k = 0; k < n; k++) {
        int i = ops[k];
        for (int j = a->in_at[i]; j < a->in_at[i + 1]; j++) { TOUCH(a->ins[j]); a->tbits[a->ins[j]] |= T_SIZE; }
        TOUCH(a->out[i]);
        a->tbits[a->out[i]] |= T_SIZE;
    }
    /* group_io: inputs (not produced by any op of the set, in order of first use), outputs */
    for (int k = 0; k < n; k++) a->tbits[a->out[ops[k]]] |= T_IOIN;  /* here: "produced by a member" */
    int n_in = 0, n_out = 0;
    for (int k = 0; k < n; k++) {
        int i = ops[k];
        for (int j = a->in_at[i]; j < a->in_at[i + 1]; j++) {
            int t = a->ins[j];
            if (a->tbits[t] & T_IOIN) continue;
            a->tbits[t] |= T_IOIN;  /* met: not again */
            io_in[n_in++] = t;
        }
    }
    for (int k = 0; k < n; k++) {
        int o = a->out[ops[k]], outside = a->is_out[o];
        for (int j = a->cons_at[o]; j < a->cons_at[o + 1] && !outside; j++)
            if (!IN_SET(a->cons[j])) outside = 1;
        if (outside) io_out[n_out++] = o;
    }
    /* views alias their source (view_sources: ascending, chains followed) */
    for (int k = 0; k < n; k++) {
        int i = ops[k];
        if ((a->flags[i] & F_VIEW) && a->in_at[i + 1] - a->in_at[i] == 1) {
            int src = a->ins[a->in_at[i]], o = a->out[i];
            int r = ROOT(src);
            a->root[o] = r;
            a->tbits[o] |= T_ALIAS;
        }
    }
    /* seq: the ops whose output is not a view's; produced */
    int end = 0;
    for (int k = 0; k < n; k++) {
        int i = ops[k];
        if (HAS(a->out[i], T_ALIAS)) continue;
        seq[end++] = i;
        a->tbits[a->out[i]] |= T_PROD;
    }
    /* outside use (roots) */
    for (int k = 0; k < n; k++) {
        int o = a->out[ops[k]], outside = a->is_out[o];
        for (int j = a->cons_at[o]; j < a->cons_at[o + 1] && !outside; j++)
            if (!IN_SET(a->cons[j])) outside = 1;
        if (outside) { int r = ROOT(o); TOUCH(r); a->tbits[r] |= T_OUTSIDE; }
    }
    /* readers' positions per root, roots in order of first reader */
    int n_seen = 0;
    for (int p = 0; p < end; p++) {
        int i = seq[p], b = a->in_at[i];
        for (int j = b; j < a->in_at[i + 1]; j++) {
            int r = ROOT(a->ins[j]), dup = 0;
            for (int q = b; q < j; q++) if (ROOT(a->ins[q]) == r) { dup = 1; break; }
            if (dup) continue;
            TOUCH(r);
            if (!(a->tbits[r] & T_SEEN)) { a->tbits[r] |= T_SEEN; a->firstp[r] = p; seen[n_seen++] = r; }
            a->lastp[r] = p;
            a->cnt[r]++;
        }
    }
    int n_gin = 0, n_st = 0;
    for (int k = 0; k < n_seen; k++) {
        int t = seen[k];
        if (a->tbits[t] & T_PROD) continue;
        gin[n_gin++] = t;
        int priv = !a->is_out[t];
        for (int j = a->cons_at[t]; j < a->cons_at[t + 1] && priv; j++)
            if (!IN_SET(a->cons[j])) priv = 0;
        if (priv) a->tbits[t] |= T_PRIVATE;
    }
    for (int k = 0; k < n_gin; k++) {
        int t = gin[k];
        if (a->cnt[t] != 1) continue;
        int i = seq[a->firstp[t]], b = a->in_at[i], e = a->in_at[i + 1], count = 0;
        for (int j = b; j < e; j++) if (ROOT(a->ins[j]) == t) count++;
        if (count != 1) continue;
        int ok = (a->flags[i] & F_EW) ? 1
                 : (ROOT(a->ins[b]) == t && (a->flags[i] & (F_STREAMS | F_MOVE)));
        if (!ok) continue;
        strm[n_st] = t;
        rdr[n_st++] = i;
    }
    /* fused chains */
    for (int p = 0; p + 1 < end; p++) {
        int o = a->out[seq[p]], nxt = seq[p + 1];
        if (HAS(o, T_OUTSIDE)) continue;
        if (!HAS(o, T_SEEN) || a->cnt[o] != 1 || a->firstp[o] != p + 1) continue;
        if ((a->flags[nxt] & F_EW) && a->elem[a->out[nxt]] >= a->elem[o]) a->tbits[o] |= T_VIRTUAL;
    }
    int n_chains = 0;
    for (int p = 0; p < end; p++) {
        if (!(p > 0 && HAS(a->out[seq[p - 1]], T_VIRTUAL))) chain_at[n_chains++] = p;
        chain_of[p] = n_chains - 1;
    }
    chain_at[n_chains] = end;
    /* the streamable bits: the given names, or the own streamable inputs in the inputs' order */
    Py_ssize_t n_names = 0;
    if (names_obj == Py_None) {
        for (int k = 0; k < n_st; k++) a->bit[strm[k]] = -2;  /* mark */
        for (int k = 0; k < n_in; k++) {
            int t = io_in[k];
            if (a->tstamp[t] == gen && a->bit[t] == -2) a->bit[t] = (int)n_names++;
        }
    } else {
        n_names = PyTuple_GET_SIZE(names_obj);
        for (Py_ssize_t b = 0; b < n_names; b++) {
            long t = PyLong_AsLong(PyTuple_GET_ITEM(names_obj, b));
            if ((t == -1 && PyErr_Occurred()) || t < 0 || t >= NT) {
                if (!PyErr_Occurred() || PyErr_ExceptionMatches(PyExc_OverflowError)) {
                    PyErr_Clear();
                    PyErr_SetString(PyExc_ValueError, "names: tensor indices");
                }
                goto done;
            }
            TOUCH(t);
            a->bit[t] = (int)b;  /* {t: b for b, t in enumerate(names)}: the last wins */
        }
    }
#define BIT(t) (a->tstamp[t] == gen ? (a->bit[t] < 0 ? -1 : a->bit[t]) : -1)
    /* the packed rows (pack_rows) */
    int ok = 1, n_slots = 0;
    ok &= !ll_push(&pack, n_gin) && !ll_push(&pack, n_chains) && !ll_push(&pack, 0);
    for (int k = 0; k < n_gin && ok; k++) {
        int t = gin[k];
        int sized = HAS(t, T_SIZE);
        ok &= !ll_push(&pack, BIT(t)) && !ll_push(&pack, sized ? a->ts[t] : 0)
              && !ll_push(&pack, sized ? a->tf[t] : 0);
    }
    if (!ok) { PyErr_NoMemory(); goto done; }
    int valid = 1;  /* 0: pack_rows gives None (or Python raises): no pack */
    if (a->mgen > INT_MAX - n - 2) { memset(a->mark, 0, sizeof(int) * (size_t)NT); a->mgen = 0; }
    for (int c = 0; c < n_chains && valid; c++) {
        int p0 = chain_at[c], p1 = chain_at[c + 1];
        int o = a->out[seq[p1 - 1]];
        long long out_s = a->ts[o], out_f = a->tf[o];
        int seen_o = HAS(o, T_SEEN);
        int last_o = seen_o ? chain_of[a->lastp[o]] : c;  /* last.get(out, c) */
        int outside_o = HAS(o, T_OUTSIDE);
        int dies_out = outside_o && last_o <= c;
        int lives_kept = outside_o ? (n_chains > c) : (last_o > c);
        int lives_out = last_o > c;
        /* the chain's input roots in order, views' virtual ones aside */
        int mg = ++a->mgen, n_r = 0;
        for (int p = p0; p < p1; p++) {
            int i = seq[p];
            for (int j = a->in_at[i]; j < a->in_at[i + 1]; j++) {
                int r = ROOT(a->ins[j]);
                if (HAS(r, T_VIRTUAL) || a->mark[r] == mg) continue;
                a->mark[r] = mg;
                proots[n_r++] = r;
            }
        }
        int anchor = seq[p0];
        int first = a->in_at[anchor + 1] > a->in_at[anchor] ? ROOT(a->ins[a->in_at[anchor]]) : -1;
        int chained = (p1 - p0 > 1) || (a->flags[seq[p1 - 1]] & F_EW);
        /* halo / attention slots of the chain's ops */
        int n_hx = 0;
        for (int p = p0; p < p1; p++) {
            int i = seq[p];
            if (a->flags[i] & (F_HALO | F_ATTN)) {
                if ((a->flags[i] & F_HALO) && a->in_at[i + 1] == a->in_at[i]) { valid = 0; break; }
                n_hx++;
            }
        }
        if (!valid) break;
        int n_dk = 0, n_do = 0;
        for (int q = 0; q < n_r; q++) {
            int r = proots[q];
            int last_r = HAS(r, T_SEEN) ? chain_of[a->lastp[r]] : -1;
            int kept_r = HAS(r, T_OUTSIDE) ? n_chains : last_r;
            if (kept_r == c) n_dk++;
            if (last_r == c) n_do++;
        }
        ok = !ll_push(&pack, out_s) && !ll_push(&pack, out_f) && !ll_push(&pack, dies_out)
             && !ll_push(&pack, lives_kept) && !ll_push(&pack, lives_out) && !ll_push(&pack, chained ? 1 : 0)
             && !ll_push(&pack, (a->flags[anchor] & F_STREAMS) ? 1 : 0) && !ll_push(&pack, n_dk)
             && !ll_push(&pack, n_do) && !ll_push(&pack, n_hx);
        for (int pass = 0; pass < 2 && ok && valid; pass++) {
            for (int q = 0; q < n_r && ok; q++) {
                int r = proots[q];
                int last_r = HAS(r, T_SEEN) ? chain_of[a->lastp[r]] : -1;
                int want = pass == 0 ? (HAS(r, T_OUTSIDE) ? n_chains : last_r) : last_r;
                if (want != c) continue;
                if (!HAS(r, T_SIZE)) { valid = 0; break; }
                ok = !ll_push(&pack, BIT(r)) && !ll_push(&pack, a->ts[r]) && !ll_push(&pack, a->tf[r])
                     && !ll_push(&pack, HAS(r, T_PROD) ? 1 : 0) && !ll_push(&pack, HAS(r, T_PRIVATE) ? 1 : 0)
                     && !ll_push(&pack, r == first ? 1 : 0);
            }
        }
        for (int p = p0; p < p1 && ok && valid; p++) {
            int i = seq[p];
            int halo = (a->flags[i] & F_HALO) != 0, attn = (a->flags[i] & F_ATTN) != 0;
            if (!(halo || attn)) continue;
            int src = halo ? ROOT(a->ins[a->in_at[i]]) : -1;
            ok = !ll_push(&pack, n_slots) && !ll_push(&pack, halo) && !ll_push(&pack, src >= 0 ? BIT(src) : -1)
                 && !ll_push(&pack, attn);
            slots[n_slots++] = i;
        }
        if (!ok) { PyErr_NoMemory(); goto done; }
    }
    pack.v[2] = n_slots;
    int windowed = 0, attention = 0;
    for (int k = 0; k < n; k++) {
        if (a->flags[ops[k]] & F_HALO) windowed = 1;
        if (a->flags[ops[k]] & F_ATTN) attention = 1;
    }
#undef IN_SET
#undef TOUCH
#undef HAS
#undef ROOT
#undef BIT
    t_in = int_tuple(io_in, n_in);
    t_out = int_tuple(io_out, n_out);
    t_st = int_tuple(strm, n_st);
    t_rd = int_tuple(rdr, n_st);
    t_sl = int_tuple(slots, valid ? n_slots : 0);
    if (valid) {
        if (pack.n > PY_SSIZE_T_MAX / (Py_ssize_t)sizeof(long long)) { PyErr_NoMemory(); goto done; }
        t_pack = PyBytes_FromStringAndSize((const char *)pack.v, pack.n * (Py_ssize_t)sizeof(long long));
    } else {
        Py_INCREF(Py_None);
        t_pack = Py_None;
    }
    if (!t_in || !t_out || !t_st || !t_rd || !t_sl || !t_pack) goto done;
    result = Py_BuildValue("(OOOOOOOO)", t_in, t_out, t_st, t_rd, t_pack, t_sl,
                           windowed ? Py_True : Py_False, attention ? Py_True : Py_False);
done:
    Py_XDECREF(t_in); Py_XDECREF(t_out); Py_XDECREF(t_st); Py_XDECREF(t_rd); Py_XDECREF(t_pack); Py_XDECREF(t_sl);
    free(ops); free(seq); free(chain_of); free(chain_at); free(io_in); free(io_out); free(seen); free(gin);
    free(strm); free(rdr); free(slots); free(proots); free(pack.v);
    return result;
}

static PyMethodDef methods[] = {
    {"tables", py_tables, METH_VARARGS, "Per-graph tables of the op-set analysis (a capsule)."},
    {"analyse", py_analyse, METH_VARARGS, "An op set's io, streamable inputs and packed chain rows."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_canalyse", NULL, -1, methods,
                                    NULL, NULL, NULL, NULL};

PyMODINIT_FUNC PyInit__canalyse(void) { return PyModule_Create(&module); }
