/* Pass 1 of search-space decoding in C: the per-group loop of search_space._build.decode_groups
 * (search_space/_cgroups.py drives it; the Python loop stays the reference and fallback).
 *
 * It mirrors, statement by statement and in the same order (so the recorder is asked the
 * same parameters in the same order):
 *
 *   Decoding.add_blocks / Decoding._link  -> the groups, their dependencies and consumers
 *   search_space._order.group_topo_order  -> topo() (Kahn's algorithm, ties by first op)
 *   decode_groups' loop                   -> per group in topological order: its samples,
 *                                            cores per part and parts read, the fit
 *                                            (Decoding.fit's cache read here; a miss runs
 *                                            Decoding.fit's search here, fit_c, asking
 *                                            Decoding.fits_l1 on a miss of its cache), set_shape, core_perm (a reuse
 *                                            calls search_space._dims.unshuffle), spread,
 *                                            set_binding (the space's cache read here; a
 *                                            miss calls search_space._build.bind_set)
 *
 * Nothing here decides a number: the fit, the core orders and the bindings are the Python
 * definitions' (read from their caches or asked for); the tables (choices, the samples per
 * part of each samples choice at this batch, each op set's input and output tensor codes)
 * come from the Python code (search_space/_cgroups.py).
 *
 * groups(values, rep, active, blocks, n_codes, batch, n_cores, spp_of, split_ok, cpp_of,
 *        parts_of, perms, spread_of, fit, unshuffle, bind_set, bind_sets, g_type, fit_tag[,
 *        fits, divs])
 *   values, rep, active: the recorder (search_space._space._Recorder): reading full
 *           parameter d marks rep[d] active (a bytearray, one byte per free parameter) and answers values[d]
 *           (values: a list of ints, or the compiled decoder's int16 vector's bytes: vals_ok)
 *   blocks: a sequence of blocks, each a tuple of group rows (op set row, slot op, slot
 *           parameter); an op set row (name, start, info, info's shared cache (a dict),
 *           separable (0/1), output tensor code, input tensor codes (a tuple, info.inputs'
 *           order), output name[, the fit's table: a bytearray, see fit_entry])
 *   spp_of: per samples choice, the samples per part it asks for at this batch; split_ok:
 *           whether the batch has more than one divisor
 *   cpp_of, parts_of: per choice, the int; perms: per perm choice, a core order (a tuple)
 *           or None (reuse); spread_of: per spread choice, its value (truth tested)
 *   fit(info, spp, cpp, parts) -> (spp, cpp, parts) on a miss of shared[(fit_tag, spp, cpp,
 *           parts)], unless fits(info, spp, cpp) -> bool (Decoding.fits_l1) and divs (the
 *           batch's divisors, ascending) are given: then Decoding.fit runs here (fit_c),
 *           asking fits on a miss of shared[("fits", spp, cpp)]; unshuffle(perm, r) -> perm; bind_set(perm, cores, parts, split, spread)
 *           -> the chunk bindings on a miss of bind_sets[(perm, cores, parts, split, spread)]
 *   g_type: search_space._build._G (its fields are set here as its __init__ would)
 * -> (groups, by_name, by_out, topo, flat): the _G records in block order, by name, by output
 *    tensor name, the names in topological order (Decoding's attributes), and per record
 *    its name, info, split, perm, cores, parts, spread and binds in one tuple (what
 *    search_space._lazy.flat_groups makes of the records, without a Python loop).
 *
 * unit_slots(seg_of, seg_first, parts): search_space._build.unit_slots for a new block.
 *
 * The scope walk's glue (search_space/_ccore.py: scope_walk and _group_rows; their Python
 * loops, _cglue.wants_py and _ccore._group_rows without it, stay the reference):
 * wants(...): the answers the walk asks for, in walk order, as scope codes;
 * group_rows(...): each group's walk row (see each function).
 *
 * Hostile tables (wrong types, codes or choices out of range, a fit or a binding that is not
 * what it must be) raise ValueError or TypeError; every buffer is released on every path.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <limits.h>
#include <stdlib.h>
#include <stdint.h>
#include <string.h>
#include <structmember.h>

enum { F_NAME, F_START, F_SLOT, F_SCOPE_AT, F_INFO, F_SPLIT, F_CORES, F_PARTS, F_PERM, F_SPREAD,
       F_BINDS, F_WAVE, F_SAMPLES, F_DEPS, F_CONSUMERS, N_FIELDS };
static const char *FIELD_NAMES[N_FIELDS] = {"name", "start", "slot", "scope_at", "info", "split", "cores",
                                            "parts", "perm", "spread", "binds", "wave", "samples", "deps",
                                            "consumers"};
static PyObject *field[N_FIELDS];
/* what search_space._lazy.Decoded keeps of each group (flat_groups' fields, in its order) */
enum { N_FLAT = 8 };
static const int FLAT_FIELDS[N_FLAT] = {F_NAME, F_INFO, F_SPLIT, F_PERM, F_CORES, F_PARTS, F_SPREAD, F_BINDS};

typedef struct {
    PyObject *row;      /* borrowed: the group's row */
    PyObject *base;     /* borrowed: its op set's row */
    PyObject *info;     /* borrowed from the row */
    PyObject *shared;   /* borrowed from the row */
    long start, slot_dim, sep, out_code;
    PyObject *in_codes; /* borrowed: a tuple */
    int *deps, n_deps;  /* producing groups in info.inputs' order (dependency list, may repeat) */
    long spp, cpp, parts, split, cores, samples;
    int spread, shaped;
    PyObject *ftab;     /* borrowed from the row: the fit's table (a bytearray) or NULL */
    Py_ssize_t fi;      /* this decode's entry in it */
    PyObject *perm, *binds; /* owned */
} G;

static void *alloc_n(Py_ssize_t n, size_t sz) {
    if (n < 0 || (size_t)n > SIZE_MAX / sz / 2) return NULL;
    return calloc(n > 0 ? (size_t)n : 1, sz);
}

/* The cache keys, built as Py_BuildValue builds them but without reading a format at every
 * call (a few thousand keys per BERT-large decode): (head, v[0], ..., v[n - 1][, tail]),
 * head omitted when `with_head` is 0 and tail when it is NULL. A NULL head is an error, as
 * Py_BuildValue's "O" with NULL is. */
static PyObject *key_of(int with_head, PyObject *head, const long *v, int n, PyObject *tail) {
    if (with_head && !head) {
        if (!PyErr_Occurred()) PyErr_SetString(PyExc_SystemError, "NULL object in a key");
        return NULL;
    }
    PyObject *t = PyTuple_New((Py_ssize_t)n + (with_head != 0) + (tail != NULL));
    if (!t) return NULL;
    Py_ssize_t i = 0;
    if (with_head) PyTuple_SET_ITEM(t, i++, Py_NewRef(head));
    for (int q = 0; q < n; q++) {
        PyObject *x = PyLong_FromLong(v[q]);
        if (!x) { Py_DECREF(t); return NULL; }
        PyTuple_SET_ITEM(t, i++, x);
    }
    if (tail) PyTuple_SET_ITEM(t, i, Py_NewRef(tail));
    return t;
}

/* Fields of the group records (search_space._build._G has slots) read and written at their
 * slot's offset, not by name: PyObject_GetAttr/SetAttr look the name up in the type every
 * time (~40 ns; ~2,500 fields per BERT-large decode). slot_offset: the offset of a writable
 * object slot `name` of `tp` (its member descriptor), -1 when it is not one (then by name).
 * fget/fset use the offset only on an object of exactly that type. */
static Py_ssize_t slot_offset(PyTypeObject *tp, PyObject *name) {
    PyObject *d = PyObject_GetAttr((PyObject *)tp, name);
    if (!d) {
        PyErr_Clear();
        return -1;
    }
    Py_ssize_t off = -1;
    /* the descriptor must be one of tp's own or its bases' (one borrowed from another class
     * could name a field that is not an object: review) */
    if (Py_IS_TYPE(d, &PyMemberDescr_Type) && PyType_IsSubtype(tp, PyDescr_TYPE(d))) {
        PyMemberDef *m = ((PyMemberDescrObject *)d)->d_member;
        if (m->type == T_OBJECT_EX && !(m->flags & READONLY) && m->offset >= (Py_ssize_t)sizeof(PyObject) &&
            m->offset <= tp->tp_basicsize - (Py_ssize_t)sizeof(PyObject *))
            off = m->offset;
    }
    Py_DECREF(d);
    return off;
}

static PyObject *fget(PyObject *o, PyTypeObject *tp, Py_ssize_t off, PyObject *name) {  /* new ref */
    if (off < 0 || Py_TYPE(o) != tp) return PyObject_GetAttr(o, name);
    PyObject *v = *(PyObject **)((char *)o + off);
    if (!v) {
        PyErr_SetObject(PyExc_AttributeError, name);
        return NULL;
    }
    Py_INCREF(v);
    return v;
}

static int fset(PyObject *o, PyTypeObject *tp, Py_ssize_t off, PyObject *name, PyObject *v) {  /* v borrowed */
    if (off < 0 || Py_TYPE(o) != tp) return PyObject_SetAttr(o, name, v);
    PyObject **p = (PyObject **)((char *)o + off), *old = *p;
    Py_INCREF(v);
    *p = v;
    Py_XDECREF(old);
    return 0;
}

static int as_long(PyObject *o, long lo, long hi, long *out, const char *what) {
    if (!PyLong_Check(o)) { PyErr_Format(PyExc_TypeError, "%s: an int expected", what); return -1; }
    long v = PyLong_AsLong(o);
    if (v == -1 && PyErr_Occurred()) return -1;
    if (v < lo || v > hi) { PyErr_Format(PyExc_ValueError, "%s out of range", what); return -1; }
    *out = v;
    return 0;
}

/* The recorder's mark of a read (search_space._space._Recorder: active[rep[d]] = 1): f is
 * rep[d], a free parameter's index; active a bytearray of one byte per free parameter.
 * (_cutil.h's, which this module does not include: its as_long differs.) Its size is read at every call (the caller may have run Python since). */
static int mark_read(PyObject *active, PyObject *f) {
    if (!PyLong_Check(f)) {  /* an int: no Python code runs here (no __index__) */
        PyErr_SetString(PyExc_TypeError, "a free parameter's index: an int");
        return -1;
    }
    int overflow;
    long i = PyLong_AsLongAndOverflow(f, &overflow);
    if (i == -1 && PyErr_Occurred()) return -1;
    if (overflow || i < 0 || i >= PyByteArray_GET_SIZE(active)) {
        PyErr_SetString(PyExc_ValueError, "a read outside the recorder's free parameters");
        return -1;
    }
    PyByteArray_AS_STRING(active)[i] = 1;
    return 0;
}

/* A recorder's values as search_space._cglue.c_values passes them: a list of ints, or the
 * bytes of the compiled decoder's int16 vector (Space._decode_marked), read in place (no
 * list of ints made per decode, issue 20). */
static int vals_ok(PyObject *values) {
    if (PyList_Check(values) || PyBytes_Check(values)) return 0;
    PyErr_SetString(PyExc_TypeError, "a recorder's values: a list or int16 bytes");
    return -1;
}

static Py_ssize_t vals_len(PyObject *values) {
    return PyList_Check(values) ? PyList_GET_SIZE(values)
                                : PyBytes_GET_SIZE(values) / (Py_ssize_t)sizeof(int16_t);
}

/* values[d] (d checked by the caller) in [lo, hi], as as_long reads a list's item */
static int vals_get(PyObject *values, Py_ssize_t d, long lo, long hi, long *out, const char *what) {
    if (PyList_Check(values)) return as_long(PyList_GET_ITEM(values, d), lo, hi, out, what);
    int16_t x;
    memcpy(&x, PyBytes_AS_STRING(values) + d * (Py_ssize_t)sizeof(int16_t), sizeof x);
    if (x < lo || x > hi) { PyErr_Format(PyExc_ValueError, "%s out of range", what); return -1; }
    *out = x;
    return 0;
}

/* the recorder: marks rep[d] active, answers values[d] as a choice index in [0, n_choices) */
static int rec_read(PyObject *values, PyObject *rep, PyObject *active, long d, Py_ssize_t n_choices,
                    long *out) {
    if (d < 0 || d >= vals_len(values) || d >= PyList_GET_SIZE(rep)) {
        PyErr_SetString(PyExc_ValueError, "bad parameter");
        return -1;
    }
    if (mark_read(active, PyList_GET_ITEM(rep, d))) return -1;
    return vals_get(values, d, 0, (long)n_choices - 1, out, "a choice");
}

static int choice_long(PyObject *tab, long i, long *out) {
    return as_long(PyTuple_GET_ITEM(tab, i), 1, INT_MAX, out, "a choice's value");
}

/* a binary min-heap of group indices by first op (starts are unique: the names are) */
static void heap_push(int *h, int *n, const G *g, int x) {
    int i = (*n)++;
    h[i] = x;
    while (i > 0) {
        int p = (i - 1) / 2;
        if (g[h[p]].start <= g[h[i]].start) break;
        int t = h[p]; h[p] = h[i]; h[i] = t;
        i = p;
    }
}

static int heap_pop(int *h, int *n, const G *g) {
    int top = h[0];
    h[0] = h[--(*n)];
    int i = 0;
    for (;;) {
        int l = 2 * i + 1, r = l + 1, m = i;
        if (l < *n && g[h[l]].start < g[h[m]].start) m = l;
        if (r < *n && g[h[r]].start < g[h[m]].start) m = r;
        if (m == i) break;
        int t = h[m]; h[m] = h[i]; h[i] = t;
        i = m;
    }
    return top;
}

/* The fit's table of an op set (shared by op sets alike, kept in its `shared` cache): per
 * (samples choice or "not split", cores-per-part choice, parts choice) the fit's answer as
 * int32 (samples per part, cores per part, parts), 0: not known yet. Read on every decode;
 * filled from the dict path below (the shared cache or Decoding.fit) the first time a
 * group asks: no tuple key, hash or dict look-up on a hit. Its size is checked at every
 * use (Python code run by a fit could resize it). */
static int32_t *fit_entry(const G *g, Py_ssize_t n_entries) {
    if (!g->ftab || g->fi < 0 || g->fi >= n_entries) return NULL;
    if (PyByteArray_GET_SIZE(g->ftab) != n_entries * 3 * (Py_ssize_t)sizeof(int32_t)) return NULL;
    return (int32_t *)PyByteArray_AS_STRING(g->ftab) + 3 * g->fi;
}

/* the batch's divisors (a tuple of 1 to 64 ints, checked by the caller) into out: each
 * divides the batch, ascending; -1 with a ValueError */
static int read_divs(PyObject *divs_t, long batch, long *out) {
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(divs_t); i++) {
        if (as_long(PyTuple_GET_ITEM(divs_t, i), 1, batch, &out[i], "a divisor")) return -1;
        if (batch % out[i] || (i && out[i] <= out[i - 1])) {
            PyErr_SetString(PyExc_ValueError, "divs: the batch's divisors, ascending");
            return -1;
        }
    }
    return 0;
}

/* Decoding.fit in C (groups() given fits and divs): its shape search statement by statement,
 * whether a chunk shape's least working set fits a core's L1 read from the op set's shared
 * cache (shared[("fits", spp, cpp)], where Decoding.fits_l1 keeps it) or, on a miss, asked
 * of fits(info, spp, cpp) (Decoding.fits_l1, which computes and keeps it): so the same
 * shapes are asked in the same order and every answer is the Python definition's. */
typedef struct {
    PyObject *fits;       /* Decoding.fits_l1 (bound), or NULL: fit() is called instead */
    PyObject *fits_tag;   /* "fits" */
    const long *divs;     /* the batch's divisors, ascending (Decoding.divs) */
    Py_ssize_t n_divs;
    long n;               /* cores per cluster */
    PyObject *fast;       /* borrowed: what fits_fast reads (FF_*), or NULL: fits is asked */
} Fitter;

static PyObject *s_fits;  /* "fits" (interned at module init) */
/* (interned at module init; declared with the glue below) */
static PyObject *s_cache, *s_ctab, *s_shared, *s_cops, *s_cwork, *s_wtab, *s_cws, *s_streamable, *s_ops,
    *s_windowed, *s_attention;
static PyObject *key_of(int with_head, PyObject *head, const long *v, int n, PyObject *tail);
static PyObject *ctab_from_parts(PyObject *info, PyObject *cache, PyObject *tables, PyObject *tkey,
                                 long spp, long cpp);

/* fits_fast's tuple (search_space._cgroups._c_fit): the decode's graph in the compute dtype,
 * the space's shape tables, L1 bytes (a float), _cwalk.fits, search_space._ccore._fill,
 * functools.partial, the lru-cached compiler.capacity.cut_sides, search_space._cfoot.halo_values
 * and _ccore._FIT_STREAMED */
enum { FF_MEM, FF_TABLES, FF_L1, FF_CFITS, FF_FILL, FF_PARTIAL, FF_CUT, FF_HALO, FF_MAX, N_FF };

/* Decoding.fits_l1 on a miss of shared[("fits", s, c)], in C (h106), for an op set whose
 * parts are kept (cache["cops"], cache["cwork"], shared["cws"]: made when the op set and its
 * class were first met), statement by statement as search_space._ccore.fits_l1 -> _work ->
 * _ws_def -> _ws_at make them: the chunk shape's walk table found (cache, the space's shape
 * tables, the shared table: ctab_from_parts) or made (the shared table: a list of 4 << n
 * None, the filler partial(_fill, mem, ops, names, s, c, table), the C definition from the
 * kept parts: None when they are not all streamable or a halo or attention term has no
 * packed chain rows, the halo values from halo_values when there is one), then _cwalk.fits
 * over its four least working sets; the answer kept in shared[("fits", s, c)] as
 * Decoding.fits_l1 keeps it. A new reference to the answer; NULL without an error when a part
 * is missing or the C definition is None (the caller asks Decoding.fits_l1: the Python code
 * decides), NULL with one on an error. */
static PyObject *fits_fast(const G *g, const Fitter *fx, long s, long c) {
    PyObject *F = fx->fast, *info = g->info, *shared = g->shared;
    PyObject *cache = NULL, *st = NULL, *tkey = NULL, *tab = NULL, *res = NULL, *own = NULL, *cops = NULL,
             *parts = NULL, *ops = NULL, *table = NULL, *fill = NULL, *ws = NULL, *wt = NULL, *wkey = NULL,
             *fkey = NULL, *hv = NULL, *sp = NULL, *cp = NULL, *flag = NULL, *cut = NULL;
    long kv[2] = {s, c};
    long max_n = PyLong_AsLong(PyTuple_GET_ITEM(F, FF_MAX));
    if (max_n == -1 && PyErr_Occurred()) return NULL;
    if (!(cache = PyObject_GetAttr(info, s_cache))) goto out;
    if (!PyDict_Check(cache)) goto out;
    if (!(st = PyObject_GetAttr(info, s_streamable))) goto out;
    Py_ssize_t n = PyObject_Size(st);
    if (n < 0 || n > max_n) goto out;  /* _ccore.fits_l1: None, the Python definition */
    if (!(tkey = key_of(1, s_ctab, kv, 2, NULL))) goto out;
    if ((tab = PyDict_GetItemWithError(cache, tkey))) {
        Py_INCREF(tab);
    } else if (!PyErr_Occurred()) {
        /* the op set's kept parts, else the Python code makes them */
        if (!(cops = PyDict_GetItemWithError(cache, s_cops))) goto out;
        Py_INCREF(cops);
        if (!(own = PyDict_GetItemWithError(cache, s_cwork))) goto out;
        Py_INCREF(own);
        if (!(parts = PyDict_GetItemWithError(shared, s_cws))) goto out;
        Py_INCREF(parts);
        if (!PyTuple_Check(own) || PyTuple_GET_SIZE(own) != 6 || !PyTuple_Check(PyTuple_GET_ITEM(own, 0)) ||
            PyTuple_GET_SIZE(PyTuple_GET_ITEM(own, 0)) != n || !PyTuple_Check(parts) ||
            PyTuple_GET_SIZE(parts) != 9 || PyTuple_GET_ITEM(parts, 0) != PyTuple_GET_ITEM(F, FF_MEM) ||
            !PyList_Check(PyTuple_GET_ITEM(parts, 3)) ||
            PyList_GET_SIZE(PyTuple_GET_ITEM(parts, 3)) != ((Py_ssize_t)4 << n))
            goto out;  /* _ws_def makes them anew: the Python code */
        tab = ctab_from_parts(info, cache, PyTuple_GET_ITEM(F, FF_TABLES), tkey, s, c);
        if (!tab && !PyErr_Occurred()) {
            /* a shape new to the class: its shared table, as _work and _ws_at make it */
            if (!(wkey = key_of(1, s_wtab, kv, 2, NULL))) goto out;
            int have = PyDict_Contains(shared, wkey);
            if (have) goto out;  /* (-1: an error) there, yet no table made: the Python code */
            PyObject *names = PyTuple_GET_ITEM(own, 0), *mem = PyTuple_GET_ITEM(F, FF_MEM);
            PyObject *f = PyTuple_GET_ITEM(parts, 1), *pack = PyTuple_GET_ITEM(parts, 8);
            int halo = 0, ok, t;
            /* halo = (f.windowed and _cut_sides(spp, cpp)) or (f.attention and cpp > 1) */
            if (!(flag = PyObject_GetAttr(f, s_windowed)) || (t = PyObject_IsTrue(flag)) < 0) goto out;
            Py_CLEAR(flag);
            if (t) {
                if (!(cut = PyObject_CallFunction(PyTuple_GET_ITEM(F, FF_CUT), "ll", s, c)) ||
                    (halo = PyObject_IsTrue(cut)) < 0)
                    goto out;
            }
            if (!halo) {
                if (!(flag = PyObject_GetAttr(f, s_attention)) || (t = PyObject_IsTrue(flag)) < 0) goto out;
                halo = t && c > 1;
            }
            if ((ok = PyObject_IsTrue(PyTuple_GET_ITEM(parts, 2))) < 0 || (t = PyObject_IsTrue(pack)) < 0) goto out;
            if (!ok || (halo && pack == Py_None)) {
                ws = Py_NewRef(Py_None);
            } else {
                if (halo && t) {
                    if (!PyTuple_Check(pack) || PyTuple_GET_SIZE(pack) < 2) goto out;
                    hv = PyObject_CallFunction(PyTuple_GET_ITEM(F, FF_HALO), "OOll", mem, PyTuple_GET_ITEM(pack, 1),
                                               s, c);
                    if (!hv) goto out;
                } else {
                    hv = Py_NewRef(Py_None);
                }
                PyObject *pk0 = Py_None;
                if (t) {
                    if (!PyTuple_Check(pack) || PyTuple_GET_SIZE(pack) < 1) goto out;
                    pk0 = PyTuple_GET_ITEM(pack, 0);
                }
                if (!(sp = PyLong_FromLong(s)) || !(cp = PyLong_FromLong(c))) goto out;
#define P_(i) PyTuple_GET_ITEM(parts, i)
                if (!(ws = PyTuple_Pack(9, P_(3), P_(4), sp, cp, P_(5), P_(6), P_(7), pk0, hv))) goto out;
#undef P_
            }
            if (!(table = PyList_New((Py_ssize_t)4 << n))) goto out;
            for (Py_ssize_t i = 0; i < ((Py_ssize_t)4 << n); i++) PyList_SET_ITEM(table, i, Py_NewRef(Py_None));
            if (!(ops = PyObject_GetAttr(info, s_ops))) goto out;
            if (!(fill = PyObject_CallFunction(PyTuple_GET_ITEM(F, FF_PARTIAL), "OOOOllO", PyTuple_GET_ITEM(F, FF_FILL),
                                               mem, ops, names, s, c, table)))
                goto out;
            if (!(wt = PyTuple_Pack(3, table, fill, ws)) || PyDict_SetItem(shared, wkey, wt)) goto out;
            tab = ctab_from_parts(info, cache, PyTuple_GET_ITEM(F, FF_TABLES), tkey, s, c);
        }
    }
    if (!tab) goto out;
    if (!PyTuple_Check(tab) || PyTuple_GET_SIZE(tab) != 9 || !PyTuple_Check(PyTuple_GET_ITEM(tab, 0)) ||
        PyTuple_GET_SIZE(PyTuple_GET_ITEM(tab, 0)) != n || PyTuple_GET_ITEM(tab, 8) == Py_None)
        goto out;  /* _ccore.fits_l1: None, the Python definition */
    res = PyObject_CallFunction(PyTuple_GET_ITEM(F, FF_CFITS), "OiOO", PyTuple_GET_ITEM(tab, 8), (int)(4 << n),
                                PyTuple_GET_ITEM(F, FF_L1), PyTuple_GET_ITEM(tab, 1));
    if (res && (!(fkey = key_of(1, s_fits, kv, 2, NULL)) || PyDict_SetItem(shared, fkey, res))) Py_CLEAR(res);
out:
    Py_XDECREF(cache); Py_XDECREF(st); Py_XDECREF(tkey); Py_XDECREF(tab); Py_XDECREF(own); Py_XDECREF(cops);
    Py_XDECREF(parts); Py_XDECREF(ops); Py_XDECREF(table); Py_XDECREF(fill); Py_XDECREF(ws); Py_XDECREF(wt);
    Py_XDECREF(wkey); Py_XDECREF(fkey); Py_XDECREF(hv); Py_XDECREF(sp); Py_XDECREF(cp); Py_XDECREF(flag);
    Py_XDECREF(cut);
    return res;
}

static long gcd_l(long a, long b) {  /* math.gcd of non-negative ints */
    while (b) { long t = a % b; a = b; b = t; }
    return a;
}

static int fits_of(const G *g, const Fitter *fx, long s, long c, int *out) {
    long kv[2] = {s, c};
    PyObject *key = key_of(1, fx->fits_tag, kv, 2, NULL);
    if (!key) return -1;
    PyObject *hit = PyDict_GetItemWithError(g->shared, key), *own = NULL;
    Py_DECREF(key);
    if (hit && hit == Py_None) hit = NULL;  /* Decoding.fits_l1: `if hit is None` computes */
    if (!hit) {
        if (PyErr_Occurred()) return -1;
        if (fx->fast && !(hit = own = fits_fast(g, fx, s, c)) && PyErr_Occurred()) return -1;
        if (!hit && !(hit = own = PyObject_CallFunction(fx->fits, "Oll", g->info, s, c))) return -1;
    } else {
        Py_INCREF(hit);
        own = hit;
    }
    int t = PyObject_IsTrue(hit);
    Py_DECREF(own);
    if (t < 0) return -1;
    *out = t;
    return 0;
}

/* Decoding.fit's shape(s, c) */
static void fit_shape(long s, long c, long parts, long n, long batch, long *out) {
    if (s == 0) {
        long p = gcd_l(gcd_l(parts, n / c), batch);
        out[0] = batch / p, out[1] = c, out[2] = p;
    } else {
        out[0] = s, out[1] = c, out[2] = gcd_l(gcd_l(parts, n / c), batch / s);
    }
}

/* Decoding.fit(info, spp, cpp, parts) -> (samples per part, cores per part, parts), kept in
 * shared[(fit_tag, spp, cpp, parts)] as Decoding.fit keeps it; a new reference */
static PyObject *fit_c(const G *g, const Fitter *fx, PyObject *fit_tag, long batch) {
    /* spp in {0} or [1, batch], cpp and parts >= 1 (checked where read): every divisor and
     * gcd below is >= 1 */
    long spp = g->spp, cpp = g->cpp, parts = g->parts, n = fx->n;
    long first[3], cand[3], res[3];
    int ok, found = 0;
    fit_shape(spp, cpp, parts, n, batch, first);
    if (fits_of(g, fx, first[0], first[1], &ok)) return NULL;
    memcpy(res, first, sizeof res);
    if (!ok) {
        for (long c = 1; c <= n && !found; c++) {  /* divisors_of(n), those >= cpp */
            if (n % c || c < cpp) continue;
            if (spp == 0) {
                long m = gcd_l(n / c, batch);
                for (long p = 1; p <= m; p++) {  /* divisors_of(gcd(n // c, batch)) >= first parts */
                    if (m % p || p < first[2]) continue;
                    if (fits_of(g, fx, batch / p, c, &ok)) return NULL;
                    if (ok) { res[0] = batch / p, res[1] = c, res[2] = p; found = 1; break; }
                }
            } else {
                for (Py_ssize_t i = fx->n_divs - 1; i >= 0; i--) {  /* reversed(divs), <= spp */
                    long sv = fx->divs[i];
                    if (sv > spp) continue;
                    fit_shape(sv, c, parts, n, batch, cand);
                    if (fits_of(g, fx, cand[0], cand[1], &ok)) return NULL;
                    if (ok) { memcpy(res, cand, sizeof res); found = 1; break; }
                }
            }
        }
    }
    long res_l[3] = {res[0], res[1], res[2]}, kv[3] = {spp, cpp, parts};
    PyObject *out = key_of(0, NULL, res_l, 3, NULL);
    PyObject *key = out ? key_of(1, fit_tag, kv, 3, NULL) : NULL;
    if (!key || PyDict_SetItem(g->shared, key, out)) { Py_XDECREF(key); Py_XDECREF(out); return NULL; }
    Py_DECREF(key);
    return out;
}

/* the fit's cached answer or Decoding.fit's; checked: 1 <= spp, parts and spp * parts <= batch,
 * 1 <= cpp (bounds that divide, not multiply) */
static int fit_of(G *g, PyObject *fit, const Fitter *fx, PyObject *fit_tag, long batch, Py_ssize_t n_entries) {
    long s, c, p;
    int32_t *e = fit_entry(g, n_entries);
    if (e && e[0] > 0) {
        s = e[0], c = e[1], p = e[2];
        if (p < 1 || p > batch || s > batch / p || c < 1 || c > INT_MAX / p) {
            PyErr_SetString(PyExc_ValueError, "a fit's table entry beyond the batch");
            return -1;
        }
        goto apply;
    }
    long kv[3] = {g->spp, g->cpp, g->parts};
    PyObject *key = key_of(1, fit_tag, kv, 3, NULL);
    if (!key) return -1;
    PyObject *hit = PyDict_GetItemWithError(g->shared, key);
    Py_DECREF(key);
    PyObject *own = NULL;
    if (!hit) {
        if (PyErr_Occurred()) return -1;
        hit = own = fx->fits ? fit_c(g, fx, fit_tag, batch)
                             : PyObject_CallFunction(fit, "Olll", g->info, g->spp, g->cpp, g->parts);
        if (!hit) return -1;
    }
    int rc = -1;
    if (!PyTuple_Check(hit) || PyTuple_GET_SIZE(hit) != 3) {
        PyErr_SetString(PyExc_ValueError, "a fit is (samples per part, cores per part, parts)");
        goto done;
    }
    if (as_long(PyTuple_GET_ITEM(hit, 0), 1, batch, &s, "a fit's samples per part") ||
        as_long(PyTuple_GET_ITEM(hit, 1), 1, INT_MAX, &c, "a fit's cores per part") ||
        as_long(PyTuple_GET_ITEM(hit, 2), 1, batch, &p, "a fit's parts"))
        goto done;
    if (s > batch / p || c > INT_MAX / p) {
        PyErr_SetString(PyExc_ValueError, "a fit beyond the batch");
        goto done;
    }
    if ((e = fit_entry(g, n_entries)) != NULL) {  /* again: the fit ran Python code */
        e[0] = (int32_t)s, e[1] = (int32_t)c, e[2] = (int32_t)p;
    }
    rc = 0;
done:
    Py_XDECREF(own);
    if (rc) return rc;
apply:
    g->split = batch / (s * p);  /* set_shape */
    g->cores = c * p;
    g->parts = p;
    g->samples = s * p;
    g->shaped = 1;
    return 0;
}

static PyObject *int_list_names(const int *ix, int n, PyObject *const *names) {
    PyObject *out = PyList_New(n);
    if (!out) return NULL;
    for (int k = 0; k < n; k++) {
        Py_INCREF(names[ix[k]]);
        PyList_SET_ITEM(out, k, names[ix[k]]);
    }
    return out;
}

static PyObject *py_groups(PyObject *self, PyObject *args) {
    PyObject *values, *rep, *active, *blocks, *spp_of, *cpp_of, *parts_of, *perms, *spread_of;
    PyObject *fit, *unshuffle, *bind_set, *bind_sets, *g_type, *fit_tag, *fits = Py_None, *divs_t = NULL;
    PyObject *fast = NULL;
    long n_codes, batch, n_cores;
    int split_ok;
    (void)self;
    if (!PyArg_ParseTuple(args, "OO!O!Olll" "O!p" "O!O!O!O!" "OOOO!O!U|OO!O!:groups",
                          &values, &PyList_Type, &rep, &PyByteArray_Type, &active, &blocks,
                          &n_codes, &batch, &n_cores, &PyTuple_Type, &spp_of, &split_ok,
                          &PyTuple_Type, &cpp_of, &PyTuple_Type, &parts_of,
                          &PyTuple_Type, &perms, &PyTuple_Type, &spread_of,
                          &fit, &unshuffle, &bind_set, &PyDict_Type, &bind_sets, &PyType_Type, &g_type,
                          &fit_tag, &fits, &PyTuple_Type, &divs_t, &PyTuple_Type, &fast))
        return NULL;
    if (n_codes < 0 || n_codes > INT_MAX / 2 || batch < 1 || batch > INT_MAX || n_cores < 1 ||
        n_cores > 4096) {
        PyErr_SetString(PyExc_ValueError, "bad sizes");
        return NULL;
    }
    if (vals_ok(values)) return NULL;
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(spp_of); i++) {
        long v;
        if (as_long(PyTuple_GET_ITEM(spp_of, i), 1, batch, &v, "samples per part")) return NULL;
    }
    /* the fit tables' entries: (samples choices + "not split") x cores choices x parts choices */
    Py_ssize_t n_spp = PyTuple_GET_SIZE(spp_of), n_cpp = PyTuple_GET_SIZE(cpp_of), n_pts = PyTuple_GET_SIZE(parts_of);
    if (n_spp > 4096 || n_cpp > 4096 || n_pts > 4096) {
        PyErr_SetString(PyExc_ValueError, "too many choices");
        return NULL;
    }
    Py_ssize_t n_fit = (n_spp + 1) * n_cpp * n_pts;
    /* with fits (Decoding.fits_l1) and divs (Decoding.divs): Decoding.fit in C (fit_c) */
    Fitter fx = {NULL, NULL, NULL, 0, n_cores, NULL};
    long fx_divs[64];
    if (fits != Py_None) {
        if (!divs_t || !PyCallable_Check(fits) || PyTuple_GET_SIZE(divs_t) < 1 ||
            PyTuple_GET_SIZE(divs_t) > 64) {
            PyErr_SetString(PyExc_ValueError, "fits: a callable with divs, 1 to 64 divisors of the batch");
            return NULL;
        }
        if (read_divs(divs_t, batch, fx_divs)) return NULL;
        fx.fits = fits;
        fx.fits_tag = s_fits;
        fx.divs = fx_divs;
        fx.n_divs = PyTuple_GET_SIZE(divs_t);
        if (fast) {  /* Decoding.fits_l1's miss in C (fits_fast) */
            if (PyTuple_GET_SIZE(fast) != N_FF || !PyDict_Check(PyTuple_GET_ITEM(fast, FF_TABLES)) ||
                !PyFloat_Check(PyTuple_GET_ITEM(fast, FF_L1)) || !PyLong_Check(PyTuple_GET_ITEM(fast, FF_MAX)) ||
                !PyCallable_Check(PyTuple_GET_ITEM(fast, FF_CFITS)) || !PyCallable_Check(PyTuple_GET_ITEM(fast, FF_FILL)) ||
                !PyCallable_Check(PyTuple_GET_ITEM(fast, FF_PARTIAL)) || !PyCallable_Check(PyTuple_GET_ITEM(fast, FF_CUT)) ||
                !PyCallable_Check(PyTuple_GET_ITEM(fast, FF_HALO))) {
                PyErr_SetString(PyExc_ValueError, "fast: (mem, tables, l1, fits, fill, partial, cut_sides, "
                                "halo_values, fit_max)");
                return NULL;
            }
            fx.fast = fast;
        }
    }
    /* a snapshot: fit, unshuffle, bind_set and a name's hash run Python code (review) */
    PyObject *bseq = PySequence_Tuple(blocks);
    if (!bseq) return NULL;
    PyObject *result = NULL, *groups = NULL, *by_name = NULL, *by_out = NULL, *topo_l = NULL;
    PyObject *flat = NULL;
    PyObject *identity = NULL, **names = NULL, *empty = NULL;
    G *g = NULL;
    int *prod = NULL, *indeg = NULL, *users_at = NULL, *users = NULL, *heap = NULL, *order = NULL;
    int *all_deps = NULL, *seen = NULL, *first_cons = NULL;
    Py_ssize_t ng = 0;
    for (Py_ssize_t b = 0; b < PySequence_Fast_GET_SIZE(bseq); b++) {
        PyObject *blk = PySequence_Fast_GET_ITEM(bseq, b);
        if (!PyTuple_Check(blk)) { PyErr_SetString(PyExc_TypeError, "a block: a tuple of rows"); goto fail; }
        ng += PyTuple_GET_SIZE(blk);
    }
    if (ng < 1 || ng > INT_MAX / 4) { PyErr_SetString(PyExc_ValueError, "bad group count"); goto fail; }
    g = alloc_n(ng, sizeof(G));
    names = alloc_n(ng, sizeof(PyObject *));
    prod = alloc_n(n_codes, sizeof(int));
    if (!g || !names || !prod) { PyErr_NoMemory(); goto fail; }
    for (long c = 0; c < n_codes; c++) prod[c] = -1;
    by_name = PyDict_New();
    by_out = PyDict_New();
    if (!by_name || !by_out) goto fail;
    /* the rows (add_blocks) and the producer of each output (_link: by_out, a later one wins) */
    Py_ssize_t total_in = 0;
    {
        Py_ssize_t i = 0;
        for (Py_ssize_t b = 0; b < PySequence_Fast_GET_SIZE(bseq); b++) {
            PyObject *blk = PySequence_Fast_GET_ITEM(bseq, b);
            for (Py_ssize_t k = 0; k < PyTuple_GET_SIZE(blk); k++, i++) {
                PyObject *row = PyTuple_GET_ITEM(blk, k);
                G *x = &g[i];
                PyObject *base;
                if (!PyTuple_Check(row) || PyTuple_GET_SIZE(row) != 3 ||
                    !PyTuple_Check(base = PyTuple_GET_ITEM(row, 0)) ||
                    (PyTuple_GET_SIZE(base) != 8 && PyTuple_GET_SIZE(base) != 9)) {
                    PyErr_SetString(PyExc_TypeError, "a group row: (a tuple of 8 or 9, slot op, slot parameter)");
                    goto fail;
                }
                x->row = row;
                x->base = base;
                x->ftab = NULL;
                if (PyTuple_GET_SIZE(base) == 9) {
                    x->ftab = PyTuple_GET_ITEM(base, 8);
                    if (!PyByteArray_Check(x->ftab) ||
                        PyByteArray_GET_SIZE(x->ftab) != n_fit * 3 * (Py_ssize_t)sizeof(int32_t)) {
                        PyErr_SetString(PyExc_ValueError, "a fit's table: a bytearray of 3 int32 per choice");
                        goto fail;
                    }
                }
                names[i] = PyTuple_GET_ITEM(base, 0);
                x->info = PyTuple_GET_ITEM(base, 2);
                x->shared = PyTuple_GET_ITEM(base, 3);
                x->in_codes = PyTuple_GET_ITEM(base, 6);
                long slot_op;
                if (!PyUnicode_Check(names[i]) || !PyDict_Check(x->shared) || !PyTuple_Check(x->in_codes) ||
                    !PyUnicode_Check(PyTuple_GET_ITEM(base, 7))) {
                    PyErr_SetString(PyExc_TypeError, "a group row's name, shared cache, inputs or output");
                    goto fail;
                }
                if (as_long(PyTuple_GET_ITEM(base, 1), 0, INT_MAX, &x->start, "a group's first op") ||
                    as_long(PyTuple_GET_ITEM(row, 1), 0, INT_MAX, &slot_op, "a group's slot op") ||
                    as_long(PyTuple_GET_ITEM(row, 2), 0, (long)vals_len(values) - 5, &x->slot_dim,
                            "a group's slot parameter") ||
                    as_long(PyTuple_GET_ITEM(base, 4), 0, 1, &x->sep, "separable") ||
                    as_long(PyTuple_GET_ITEM(base, 5), 0, n_codes - 1, &x->out_code, "an output code"))
                    goto fail;
                if (PyDict_GetItemWithError(by_name, names[i])) {
                    PyErr_SetString(PyExc_ValueError, "two groups of one name");
                    goto fail;
                }
                if (PyErr_Occurred() || PyDict_SetItem(by_name, names[i], Py_None)) goto fail;
                if (PyTuple_GET_SIZE(x->in_codes) > INT_MAX / 4 - total_in) {
                    PyErr_SetString(PyExc_ValueError, "too many inputs");
                    goto fail;
                }
                total_in += PyTuple_GET_SIZE(x->in_codes);
                prod[x->out_code] = (int)i;
                x->split = x->cores = x->parts = 1;  /* _G's defaults until shaped */
            }
        }
    }
    /* deps (info.inputs' order, producers by output), consumers (ascending group order) */
    all_deps = alloc_n(total_in, sizeof(int));
    indeg = alloc_n(ng, sizeof(int));
    users_at = alloc_n(ng + 1, sizeof(int));
    users = alloc_n(total_in, sizeof(int));
    heap = alloc_n(ng, sizeof(int));
    order = alloc_n(ng, sizeof(int));
    seen = alloc_n(ng, sizeof(int));
    if (!all_deps || !indeg || !users_at || !users || !heap || !order || !seen) { PyErr_NoMemory(); goto fail; }
    {
        Py_ssize_t used = 0;
        for (Py_ssize_t i = 0; i < ng; i++) {
            G *x = &g[i];
            x->deps = all_deps + used;
            for (Py_ssize_t k = 0; k < PyTuple_GET_SIZE(x->in_codes); k++) {
                long c;
                if (as_long(PyTuple_GET_ITEM(x->in_codes, k), 0, n_codes - 1, &c, "an input code")) goto fail;
                if (prod[c] >= 0) x->deps[x->n_deps++] = prod[c];
            }
            used += x->n_deps;
        }
    }
    /* group_topo_order: in-degree over distinct deps, users once per distinct dep */
    for (Py_ssize_t i = 0; i < ng; i++) seen[i] = -1;
    for (Py_ssize_t i = 0; i < ng; i++) {
        for (int k = 0; k < g[i].n_deps; k++) {
            int d = g[i].deps[k];
            if (seen[d] == (int)i) continue;
            seen[d] = (int)i;
            indeg[i]++;
            users_at[d + 1]++;
        }
    }
    for (Py_ssize_t i = 0; i < ng; i++) users_at[i + 1] += users_at[i];
    {
        int *fill = heap;  /* scratch: the next free place of each group's users */
        for (Py_ssize_t i = 0; i < ng; i++) { fill[i] = users_at[i]; seen[i] = -1; }
        for (Py_ssize_t i = 0; i < ng; i++) {  /* names in order: users in ascending order */
            for (int k = 0; k < g[i].n_deps; k++) {
                int d = g[i].deps[k];
                if (seen[d] == (int)i) continue;
                seen[d] = (int)i;
                users[fill[d]++] = (int)i;
            }
        }
    }
    int nh = 0, n_order = 0;
    for (Py_ssize_t i = 0; i < ng; i++) if (indeg[i] == 0) heap_push(heap, &nh, g, (int)i);
    while (nh > 0) {
        int x = heap_pop(heap, &nh, g);
        order[n_order++] = x;
        for (int k = users_at[x]; k < users_at[x + 1]; k++)
            if (--indeg[users[k]] == 0) heap_push(heap, &nh, g, users[k]);
    }
    /* the loop, producers first */
    for (int q = 0; q < n_order; q++) {
        G *x = &g[order[q]];
        long v, vs = n_spp, vc, slot = x->slot_dim;
        x->spp = 0;
        if (x->sep && split_ok) {
            if (rec_read(values, rep, active, slot, PyTuple_GET_SIZE(spp_of), &v)) goto fail;
            x->spp = PyLong_AsLong(PyTuple_GET_ITEM(spp_of, v));  /* checked above */
            vs = v;
        }
        if (rec_read(values, rep, active, slot + 1, PyTuple_GET_SIZE(cpp_of), &vc) ||
            choice_long(cpp_of, vc, &x->cpp) ||
            rec_read(values, rep, active, slot + 2, PyTuple_GET_SIZE(parts_of), &v) ||
            choice_long(parts_of, v, &x->parts))
            goto fail;
        x->fi = ((Py_ssize_t)vs * n_cpp + vc) * n_pts + v;
        if (fit_of(x, fit, &fx, fit_tag, batch, n_fit) ||
            rec_read(values, rep, active, slot + 3, PyTuple_GET_SIZE(perms), &v))
            goto fail;
        PyObject *pe = PyTuple_GET_ITEM(perms, v);
        if (pe != Py_None) {
            Py_INCREF(pe);
            x->perm = pe;
        } else if (x->n_deps == 0) {  /* core_perm: reuse without a producer */
            if (!identity) {
                identity = PyTuple_New(n_cores);
                if (!identity) goto fail;
                for (long c = 0; c < n_cores; c++) {
                    PyObject *o = PyLong_FromLong(c);
                    if (!o) goto fail;
                    PyTuple_SET_ITEM(identity, c, o);
                }
            }
            Py_INCREF(identity);
            x->perm = identity;
        } else {  /* the producer's order unshuffled */
            G *p = &g[x->deps[0]];
            if (!p->shaped || !p->perm) {
                PyErr_SetString(PyExc_ValueError, "a producer not shaped before its consumer");
                goto fail;
            }
            long prod_samples = batch / p->split;
            long r = x->samples > prod_samples && x->samples % prod_samples == 0
                ? x->samples / prod_samples : 1;
            x->perm = PyObject_CallFunction(unshuffle, "Ol", p->perm, r);
            if (!x->perm) goto fail;
        }
        x->spread = 0;
        if (x->cores < n_cores && x->split > 1) {
            if (rec_read(values, rep, active, slot + 4, PyTuple_GET_SIZE(spread_of), &v)) goto fail;
            int t = PyObject_IsTrue(PyTuple_GET_ITEM(spread_of, v));
            if (t < 0) goto fail;
            x->spread = t;
        }
        /* set_binding: every chunk's binding at once, from the space's cache */
        long kv[3] = {x->cores, x->parts, x->split};
        PyObject *key = key_of(1, x->perm, kv, 3, x->spread ? Py_True : Py_False);
        if (!key) goto fail;
        PyObject *hit = PyDict_GetItemWithError(bind_sets, key);
        Py_DECREF(key);
        if (hit) {
            Py_INCREF(hit);
        } else {
            if (PyErr_Occurred()) goto fail;
            hit = PyObject_CallFunction(bind_set, "OlllO", x->perm, x->cores, x->parts, x->split,
                                        x->spread ? Py_True : Py_False);
            if (!hit) goto fail;
        }
        x->binds = hit;
        if (!PyTuple_Check(hit) || PyTuple_GET_SIZE(hit) != x->split) {
            PyErr_SetString(PyExc_ValueError, "a binding per chunk expected");
            goto fail;
        }
    }
    /* the _G records */
    groups = PyList_New(ng);
    topo_l = PyList_New(n_order);
    empty = PyTuple_New(0);
    flat = PyTuple_New(N_FLAT * ng);
    if (!groups || !topo_l || !empty || !flat) goto fail;
    for (Py_ssize_t i = 0; i < ng; i++) {
        PyTypeObject *tp = (PyTypeObject *)g_type;
        PyObject *obj = tp->tp_new ? tp->tp_new(tp, empty, NULL) : NULL;
        if (!obj) {
            if (!PyErr_Occurred()) PyErr_SetString(PyExc_TypeError, "g_type cannot be instantiated");
            goto fail;
        }
        PyList_SET_ITEM(groups, i, obj);
        if (PyDict_SetItem(by_name, names[i], obj) ||
            PyDict_SetItem(by_out, PyTuple_GET_ITEM(g[i].base, 7), obj))
            goto fail;
    }
    PyTypeObject *gtp = (PyTypeObject *)g_type;
    Py_ssize_t off[N_FIELDS];
    for (int f = 0; f < N_FIELDS; f++) off[f] = slot_offset(gtp, field[f]);
    /* each group's first consumer (ascending start, as the consumers lists below), for its
     * wave: Decoding.derive's split // gcd(split, first consumer's split), else its split */
    first_cons = malloc(sizeof(int) * (size_t)(ng ? ng : 1));
    if (!first_cons) { PyErr_NoMemory(); goto fail; }
    for (Py_ssize_t i = 0; i < ng; i++) first_cons[i] = -1;
    for (Py_ssize_t i = 0; i < ng; i++)
        for (int k = 0; k < g[i].n_deps; k++)
            if (first_cons[g[i].deps[k]] < 0) first_cons[g[i].deps[k]] = (int)i;
    for (Py_ssize_t i = 0; i < ng; i++) {
        G *x = &g[i];
        long split = x->shaped ? x->split : 1, wave = split;
        if (first_cons[i] >= 0) {
            long a = split, b = g[first_cons[i]].shaped ? g[first_cons[i]].split : 1;
            while (b) { long t = a % b; a = b; b = t; }  /* gcd (both >= 1) */
            wave = split / a;
        }
        PyObject *vals[N_FIELDS] = {0};
        int rc = 0;
        vals[F_NAME] = names[i]; Py_INCREF(names[i]);
        vals[F_START] = PyLong_FromLong(x->start);
        vals[F_SLOT] = PyTuple_GET_ITEM(x->row, 1); Py_INCREF(vals[F_SLOT]);
        vals[F_SCOPE_AT] = PyLong_FromLong(x->start);
        vals[F_INFO] = x->info; Py_INCREF(x->info);
        vals[F_SPLIT] = PyLong_FromLong(x->shaped ? x->split : 1);
        vals[F_CORES] = PyLong_FromLong(x->shaped ? x->cores : 1);
        vals[F_PARTS] = PyLong_FromLong(x->shaped ? x->parts : 1);
        vals[F_PERM] = x->perm ? x->perm : empty;
        Py_INCREF(vals[F_PERM]);
        vals[F_SPREAD] = x->spread ? Py_True : Py_False; Py_INCREF(vals[F_SPREAD]);
        vals[F_BINDS] = x->binds ? x->binds : empty;
        Py_INCREF(vals[F_BINDS]);
        vals[F_WAVE] = PyLong_FromLong(wave);
        vals[F_SAMPLES] = PyLong_FromLong(x->shaped ? x->samples : 0);
        vals[F_DEPS] = int_list_names(x->deps, x->n_deps, names);
        vals[F_CONSUMERS] = PyList_New(0);
        for (int f = 0; f < N_FIELDS; f++) {
            if (!vals[f]) { rc = -1; break; }
        }
        for (int f = 0; f < N_FIELDS && rc == 0; f++)
            rc = fset(PyList_GET_ITEM(groups, i), gtp, off[f], field[f], vals[f]);
        for (int k = 0; k < N_FLAT && rc == 0; k++)  /* the same values, flat (FLAT_FIELDS) */
            PyTuple_SET_ITEM(flat, N_FLAT * i + k, Py_NewRef(vals[FLAT_FIELDS[k]]));
        for (int f = 0; f < N_FIELDS; f++) Py_XDECREF(vals[f]);
        if (rc) goto fail;
    }
    for (Py_ssize_t i = 0; i < ng; i++) {  /* consumers: ascending start, the first comes first */
        for (int k = 0; k < g[i].n_deps; k++) {
            PyObject *cons = fget(PyList_GET_ITEM(groups, g[i].deps[k]), gtp, off[F_CONSUMERS],
                                  field[F_CONSUMERS]);
            if (!cons) goto fail;
            int rc = PyList_Append(cons, names[i]);
            Py_DECREF(cons);
            if (rc) goto fail;
        }
    }
    for (int q = 0; q < n_order; q++) {
        Py_INCREF(names[order[q]]);
        PyList_SET_ITEM(topo_l, q, names[order[q]]);
    }
    result = PyTuple_Pack(5, groups, by_name, by_out, topo_l, flat);
fail:
    if (g) {
        for (Py_ssize_t i = 0; i < ng; i++) { Py_XDECREF(g[i].perm); Py_XDECREF(g[i].binds); }
    }
    Py_XDECREF(groups); Py_XDECREF(by_name); Py_XDECREF(by_out); Py_XDECREF(topo_l);
    Py_XDECREF(flat); Py_XDECREF(identity); Py_XDECREF(empty);
    Py_DECREF(bseq);
    free(g); free(names); free(prod); free(indeg); free(users_at); free(users); free(heap);
    free(order); free(all_deps); free(seen); free(first_cons);
    return result;
}

/* fit(info, shared, fits, divs, n_cores, batch, spp, cpp, parts, fit_tag) -> groups()'s
 * Decoding.fit (fit_c) for one chunk shape, for the differential tests: info is handed to
 * fits(info, spp, cpp); shared the dict Decoding.fit's and fits_l1's answers are kept in
 * (info.shared); spp 0 (not split) or in [1, batch], cpp and parts >= 1. */
static PyObject *py_fit(PyObject *self, PyObject *args) {
    PyObject *info, *shared, *fits, *divs_t, *fit_tag;
    long n_cores, batch, spp, cpp, parts;
    (void)self;
    if (!PyArg_ParseTuple(args, "OO!OO!lllllU:fit", &info, &PyDict_Type, &shared, &fits, &PyTuple_Type,
                          &divs_t, &n_cores, &batch, &spp, &cpp, &parts, &fit_tag))
        return NULL;
    long divs[64];
    if (n_cores < 1 || n_cores > 4096 || batch < 1 || batch > INT_MAX || spp < 0 || spp > batch ||
        cpp < 1 || cpp > INT_MAX || parts < 1 || parts > INT_MAX || !PyCallable_Check(fits) ||
        PyTuple_GET_SIZE(divs_t) < 1 || PyTuple_GET_SIZE(divs_t) > 64) {
        PyErr_SetString(PyExc_ValueError, "fit: bad arguments");
        return NULL;
    }
    if (read_divs(divs_t, batch, divs)) return NULL;
    Fitter fx = {fits, s_fits, divs, PyTuple_GET_SIZE(divs_t), n_cores, NULL};
    G g;
    memset(&g, 0, sizeof g);
    g.info = info;
    g.shared = shared;
    g.spp = spp, g.cpp = cpp, g.parts = parts;
    Py_INCREF(info);  /* held while fits runs Python */
    Py_INCREF(shared);
    PyObject *out = fit_c(&g, &fx, fit_tag, batch);
    Py_DECREF(info);
    Py_DECREF(shared);
    return out;
}

/* unit_slots(seg_of, seg_first, parts) -> per part the first op of its unit, as
 * search_space._build.unit_slots: seg_of the segment of every op, seg_first every segment's
 * first op (tuples of ints), parts tuples of op indices. */
static PyObject *py_unit_slots(PyObject *self, PyObject *args) {
    PyObject *seg_of, *seg_first, *parts;
    (void)self;
    if (!PyArg_ParseTuple(args, "O!O!O:unit_slots", &PyTuple_Type, &seg_of, &PyTuple_Type, &seg_first,
                          &parts))
        return NULL;
    PyObject *pseq = PySequence_Fast(parts, "parts: a sequence");
    if (!pseq) return NULL;
    Py_ssize_t np = PySequence_Fast_GET_SIZE(pseq), n_ops = PyTuple_GET_SIZE(seg_of);
    Py_ssize_t n_segs = PyTuple_GET_SIZE(seg_first);
    PyObject *out = NULL;
    long *span = alloc_n(2 * np, sizeof(long));
    unsigned char *crossed = NULL;
    long *unit = NULL;
    if (!span) { PyErr_NoMemory(); goto done; }
    if (np < 1) { PyErr_SetString(PyExc_ValueError, "no parts"); goto done; }
    long lo = LONG_MAX, hi = -1;
    for (Py_ssize_t k = 0; k < np; k++) {
        PyObject *p = PySequence_Fast_GET_ITEM(pseq, k);
        if (!PyTuple_Check(p) || PyTuple_GET_SIZE(p) < 1) { PyErr_SetString(PyExc_ValueError, "a part: a tuple of ops"); goto done; }
        for (int e = 0; e < 2; e++) {
            long op, sg;
            if (as_long(PyTuple_GET_ITEM(p, e ? PyTuple_GET_SIZE(p) - 1 : 0), 0, (long)n_ops - 1, &op, "an op") ||
                as_long(PyTuple_GET_ITEM(seg_of, op), 0, (long)n_segs - 1, &sg, "a segment"))
                goto done;
            span[2 * k + e] = sg;
        }
        if (span[2 * k] < lo) lo = span[2 * k];
        if (span[2 * k + 1] > hi) hi = span[2 * k + 1];
    }
    for (Py_ssize_t k = 0; k < np; k++)
        if (span[2 * k] > hi) { PyErr_SetString(PyExc_ValueError, "a part starts after every part ends"); goto done; }
    if (hi < lo) { PyErr_SetString(PyExc_ValueError, "parts end before they start"); goto done; }
    crossed = alloc_n(hi - lo + 1, 1);
    unit = alloc_n(hi - lo + 1, sizeof(long));
    if (!crossed || !unit) { PyErr_NoMemory(); goto done; }
    for (Py_ssize_t k = 0; k < np; k++)
        for (long j = span[2 * k]; j < span[2 * k + 1]; j++) crossed[j - lo] = 1;
    long start = lo;
    for (long j = lo; j <= hi; j++) {
        unit[j - lo] = start;
        if (!crossed[j - lo]) start = j + 1;
    }
    out = PyTuple_New(np);
    if (!out) goto done;
    for (Py_ssize_t k = 0; k < np; k++) {
        PyObject *first = PyTuple_GET_ITEM(seg_first, unit[span[2 * k] - lo]);
        Py_INCREF(first);
        PyTuple_SET_ITEM(out, k, first);
    }
done:
    free(span); free(crossed); free(unit);
    Py_DECREF(pseq);
    return out;
}


/* ---- the scope walk's glue (search_space/_ccore.py: scope_walk, _group_rows) ---------------- */

static PyObject *s_crow, *s_tiles, *s_cdag;

/* the fields the glue reads, and their slot offsets in the groups' type (fget) */
enum { A_SPLIT, A_WAVE, A_INFO, A_SAMPLES, A_CORES, A_PARTS, A_BINDS, A_SCOPE_AT, A_SLOT, A_NAME, N_A };
typedef struct { PyTypeObject *tp; Py_ssize_t off[N_A]; } Fields;
static PyObject *a_name[N_A];

static void fields_of(PyObject *groups_tuple, Fields *fl) {
    fl->tp = PyTuple_GET_SIZE(groups_tuple) ? Py_TYPE(PyTuple_GET_ITEM(groups_tuple, 0)) : NULL;
    for (int a = 0; a < N_A; a++) fl->off[a] = fl->tp ? slot_offset(fl->tp, a_name[a]) : -1;
}

static PyObject *aget(PyObject *o, const Fields *fl, int a) {
    return fget(o, fl->tp, fl->off[a], a_name[a]);
}

static int attr_long(PyObject *o, const Fields *fl, int a, long lo, long hi, long *out) {
    PyObject *v = aget(o, fl, a);
    if (!v) return -1;
    int rc = as_long(v, lo, hi, out, PyUnicode_AsUTF8(a_name[a]));
    Py_DECREF(v);
    return rc;
}

/* one answer of the reader: the recorder's (values, rep, active[, orep, overrides]) read as
 * search_space._space._Recorder and search_space._build._Overridden read it, or a call */
typedef struct {
    PyObject *call;                     /* a callable reader, or NULL */
    PyObject *values, *rep, *active;    /* the recorder (values: vals_ok's; a list and a bytearray) */
    PyObject *orep, *overrides;         /* the overrides (a list and a dict) or NULL */
} Reader;

static int reader_of(PyObject *r, Reader *rd) {
    memset(rd, 0, sizeof *rd);
    if (!PyTuple_Check(r)) {
        if (!PyCallable_Check(r)) { PyErr_SetString(PyExc_TypeError, "a reader: callable or a recorder's tuple"); return -1; }
        rd->call = r;
        return 0;
    }
    if (PyTuple_GET_SIZE(r) != 5 || !(PyList_Check(PyTuple_GET_ITEM(r, 0)) || PyBytes_Check(PyTuple_GET_ITEM(r, 0))) ||
        !PyList_Check(PyTuple_GET_ITEM(r, 1)) || !PyByteArray_Check(PyTuple_GET_ITEM(r, 2))) {
        PyErr_SetString(PyExc_TypeError, "a recorder: (values, rep, active, orep, overrides)");
        return -1;
    }
    rd->values = PyTuple_GET_ITEM(r, 0);
    rd->rep = PyTuple_GET_ITEM(r, 1);
    rd->active = PyTuple_GET_ITEM(r, 2);
    PyObject *orep = PyTuple_GET_ITEM(r, 3), *ov = PyTuple_GET_ITEM(r, 4);
    if (ov != Py_None) {
        if (!PyList_Check(orep) || !PyDict_Check(ov)) {
            PyErr_SetString(PyExc_TypeError, "overrides: a list and a dict");
            return -1;
        }
        rd->orep = orep;
        rd->overrides = ov;
    }
    return 0;
}

/* an answer as the index of one of n choices: in [-n, n), a negative one counted from the
 * end as the Python reference's indexing (SCOPE_POLICIES[a], XSCOPE_CODES[a]) counts it */
static int answer_index(PyObject *v, Py_ssize_t n, long *out) {
    if (as_long(v, -(long)n, (long)n - 1, out, "an answer")) return -1;
    if (*out < 0) *out += (long)n;
    return 0;
}

/* the answer to parameter d, a choice index in [0, n) (a negative one wrapped: answer_index) */
static int reader_read(const Reader *rd, long d, Py_ssize_t n, long *out) {
    if (rd->call) {
        PyObject *dd = PyLong_FromLong(d);
        if (!dd) return -1;
        PyObject *r = PyObject_CallOneArg(rd->call, dd);
        Py_DECREF(dd);
        if (!r) return -1;
        PyObject *v = PyNumber_Index(r);  /* a reader may answer a numpy integer */
        Py_DECREF(r);
        if (!v) return -1;
        int rc = answer_index(v, n, out);
        Py_DECREF(v);
        return rc;
    }
    /* sizes read at every call: a dict's hash or a key's __eq__ may run Python */
    if (d < 0 || d >= vals_len(rd->values) || d >= PyList_GET_SIZE(rd->rep)) {
        PyErr_SetString(PyExc_ValueError, "bad parameter");
        return -1;
    }
    PyObject *f = PyList_GET_ITEM(rd->rep, d);
    Py_INCREF(f);
    int rc = mark_read(rd->active, f);
    Py_DECREF(f);
    if (PyBytes_Check(rd->values) && !rd->overrides) {  /* read in place (vals_get) */
        if (rc == 0 && (rc = vals_get(rd->values, d, -(long)n, (long)n - 1, out, "an answer")) == 0 && *out < 0)
            *out += (long)n;
        return rc;
    }
    PyObject *v;
    if (PyBytes_Check(rd->values)) {
        long x;
        if (rc || vals_get(rd->values, d, SHRT_MIN, SHRT_MAX, &x, "an answer")) return -1;
        v = PyLong_FromLong(x);
        if (!v) return -1;
    } else {
        v = PyList_GET_ITEM(rd->values, d);
        Py_INCREF(v);
    }
    if (rc == 0 && rd->overrides) {
        if (d >= PyList_GET_SIZE(rd->orep)) {
            PyErr_SetString(PyExc_ValueError, "bad parameter");
            rc = -1;
        } else {
            PyObject *of = PyList_GET_ITEM(rd->orep, d);
            Py_INCREF(of);
            PyObject *o = PyDict_GetItemWithError(rd->overrides, of);
            Py_DECREF(of);
            if (o) { Py_INCREF(o); Py_DECREF(v); v = o; }
            else if (PyErr_Occurred()) rc = -1;
        }
    }
    if (rc == 0) rc = answer_index(v, n, out);
    Py_DECREF(v);
    return rc;
}

/* wants' memo of the chunk codes dict's hits by (policy, split, wave): a small direct-mapped
 * table valid while the dict is the same object, unchanged since (CPython 3.11's dict version
 * tag changes with every insertion, deletion or replacement); else cleared. A hit is the value
 * the dict holds under that key: the tuple hashing and compare of a lookup (~400
 * instructions, ~300 lookups a BERT-large candidate) spared. Not on other versions. */
#define WC_SIZE 512
typedef struct {
    long v, split, wave;
    PyObject *val;         /* a reference, NULL: empty */
} WcEntry;
static WcEntry wc_tab[WC_SIZE];
static PyObject *wc_dict = NULL;  /* a reference to the dict the table is of */
static uint64_t wc_version = 0;

static void wc_clear(void) {
    for (int i = 0; i < WC_SIZE; i++) Py_CLEAR(wc_tab[i].val);
}

static size_t wc_slot(long v, long split, long wave) {
    return (size_t)(((unsigned long)v * 131u + (unsigned long)split) * 131u + (unsigned long)wave) % WC_SIZE;
}

/* the memo's value (borrowed) for the key, NULL: not there (the table is made current) */
static PyObject *wc_get(PyObject *codes, long v, long split, long wave) {
#if PY_VERSION_HEX >= 0x030B0000 && PY_VERSION_HEX < 0x030C0000
    uint64_t ver = ((PyDictObject *)codes)->ma_version_tag;
    if (codes != wc_dict || ver != wc_version) {
        wc_clear();
        Py_XSETREF(wc_dict, Py_NewRef(codes));
        wc_version = ver;
        return NULL;
    }
    WcEntry *e = &wc_tab[wc_slot(v, split, wave)];
    return e->val && e->v == v && e->split == split && e->wave == wave ? e->val : NULL;
#else
    (void)codes; (void)v; (void)split; (void)wave;
    return NULL;
#endif
}

/* a hit of the dict (hit: its value) kept, when the dict is still the one the table is of */
static void wc_put(PyObject *codes, long v, long split, long wave, PyObject *hit) {
#if PY_VERSION_HEX >= 0x030B0000 && PY_VERSION_HEX < 0x030C0000
    if (codes != wc_dict || ((PyDictObject *)codes)->ma_version_tag != wc_version) return;
    WcEntry *e = &wc_tab[wc_slot(v, split, wave)];
    Py_XSETREF(e->val, Py_NewRef(hit));
    e->v = v;
    e->split = split;
    e->wave = wave;
#else
    (void)codes; (void)v; (void)split; (void)wave; (void)hit;
#endif
}

/* wants(asks, gd, pd, groups, reader, chunk_codes, chunk_fn, n_policies, xcodes)
 *   -> (gwants, pwants): scope_walk's loop over the answers in walk order (asks: group i, or
 *   -1 - producer p); a group's chunk scope codes from chunk_codes[(policy, split, wave)]
 *   (chunk_fn(policy, split, wave) on a miss, which keeps them there), a producer's transfer
 *   scope code xcodes[choice]. The reader is a callable or a recorder's tuple (reader_of). */
static PyObject *py_wants(PyObject *self, PyObject *args) {
    PyObject *asks, *gd, *pd, *groups, *reader, *codes, *chunk_fn, *xcodes;
    long n_pol;
    (void)self;
    if (!PyArg_ParseTuple(args, "O!O!O!OOO!OlO!:wants", &PyList_Type, &asks, &PyList_Type, &gd,
                          &PyList_Type, &pd, &groups, &reader, &PyDict_Type, &codes, &chunk_fn,
                          &n_pol, &PyTuple_Type, &xcodes))
        return NULL;
    if (n_pol < 1 || n_pol > 1 << 20) { PyErr_SetString(PyExc_ValueError, "bad policy count"); return NULL; }
    Reader rd;
    if (reader_of(reader, &rd)) return NULL;
    /* snapshots: the reader, a key's hash and chunk_fn run Python (review) */
    PyObject *ask_t = PyList_AsTuple(asks), *gd_t = PyList_AsTuple(gd), *pd_t = PyList_AsTuple(pd);
    PyObject *gs = PySequence_Tuple(groups), *gw = NULL, *pw = NULL, *result = NULL;
    PyObject *rtuple = PyTuple_Check(reader) ? reader : NULL;
    Py_XINCREF(rtuple);  /* keeps the recorder's lists alive while Python code runs */
    if (!ask_t || !gd_t || !pd_t || !gs) goto done;
    Py_ssize_t ng = PyTuple_GET_SIZE(gs);
    if (PyTuple_GET_SIZE(gd_t) != ng || PyTuple_GET_SIZE(pd_t) != ng) {
        PyErr_SetString(PyExc_ValueError, "a scope and a transfer-scope parameter per group");
        goto done;
    }
    Fields fl;
    fields_of(gs, &fl);
    gw = PyList_New(ng);
    pw = PyList_New(ng);
    if (!gw || !pw) goto done;
    for (Py_ssize_t i = 0; i < ng; i++) {
        Py_INCREF(Py_None); PyList_SET_ITEM(gw, i, Py_None);
        Py_INCREF(Py_None); PyList_SET_ITEM(pw, i, Py_None);
    }
    for (Py_ssize_t k = 0; k < PyTuple_GET_SIZE(ask_t); k++) {
        long a, d, v;
        if (as_long(PyTuple_GET_ITEM(ask_t, k), -(long)ng, (long)ng - 1, &a, "an ask")) goto done;
        if (a >= 0) {
            long split, wave;
            PyObject *gr = PyTuple_GET_ITEM(gs, a);
            if (as_long(PyTuple_GET_ITEM(gd_t, a), 0, LONG_MAX, &d, "a scope parameter") ||
                reader_read(&rd, d, n_pol, &v) ||
                attr_long(gr, &fl, A_SPLIT, 1, INT_MAX, &split) || attr_long(gr, &fl, A_WAVE, 1, INT_MAX, &wave))
                goto done;
            PyObject *hit = wc_get(codes, v, split, wave);
            if (hit) {
                Py_INCREF(hit);
            } else {
                long kv[3] = {v, split, wave};
                PyObject *key = key_of(0, NULL, kv, 3, NULL);
                if (!key) goto done;
                hit = PyDict_GetItemWithError(codes, key);
                Py_DECREF(key);
                if (hit) {  /* (kept only if the lookup left the dict as it was) */
                    Py_INCREF(hit);
                    wc_put(codes, v, split, wave, hit);
                } else {
                    if (PyErr_Occurred()) goto done;
                    hit = PyObject_CallFunction(chunk_fn, "lll", v, split, wave);
                    if (!hit) goto done;
                }
            }
            if (!PyTuple_Check(hit) || PyTuple_GET_SIZE(hit) != split) {
                Py_DECREF(hit);
                PyErr_SetString(PyExc_ValueError, "a scope code per chunk expected");
                goto done;
            }
            PyList_SetItem(gw, a, hit);  /* steals hit */
        } else {
            long p = -1 - a;
            if (as_long(PyTuple_GET_ITEM(pd_t, p), 0, LONG_MAX, &d, "a transfer-scope parameter") ||
                reader_read(&rd, d, PyTuple_GET_SIZE(xcodes), &v))
                goto done;
            PyObject *c = PyTuple_GET_ITEM(xcodes, v);
            Py_INCREF(c);
            PyList_SetItem(pw, p, c);
        }
    }
    result = PyTuple_Pack(2, gw, pw);
done:
    Py_XDECREF(ask_t); Py_XDECREF(gd_t); Py_XDECREF(pd_t); Py_XDECREF(gs);
    Py_XDECREF(gw); Py_XDECREF(pw); Py_XDECREF(rtuple);
    return result;
}

/* A shape row made from what the op set's cache already holds (search_space._ccore._crow's
 * path when its _work hits): the chunk shape's walk table cache[("ctab", spp, cpp)] (a tuple
 * of 9: names, table, inputs, allowed, code, sb, fb, fill, ws) and cache["tiles"]; the row
 * (allowed, code, sb, fb, inputs, table, fill, tiles, ws, batch // split), names, tiles,
 * False, kept in the cache under key (as _crow keeps it). A new reference; NULL without an
 * error when either is missing or the table is not a tuple of 9 (the caller asks shape_row:
 * the Python code decides), NULL with one on an error. Not wide: a walk table is made only
 * for an op set the C walk's masks hold (_shape_row checks first; fits_l1 makes one only
 * for at most _FIT_STREAMED streamable inputs). */
/* The chunk shape's walk table made as search_space._ccore._work makes it when the op set's
 * parts are kept (h106): with its code cache["cops"] and per-op-set part cache["cwork"] (a
 * tuple of 6: names, inputs, allowed, code, sb, fb), the space's shape table `tables`
 * (_ccore._shape_tables: by (code, spp, cpp)) is read, and when it lacks the shape, the
 * shared table shared[("wtab", spp, cpp)] (table, filler, C definition: made by the fit or
 * an alike op set) gives (names, table, inputs, allowed, code, sb, fb, filler, ws), kept in
 * `tables`; kept in the cache under tkey. A new reference; NULL without an error when a part
 * is missing (the Python code makes it), with one on an error. */
static PyObject *ctab_from_parts(PyObject *info, PyObject *cache, PyObject *tables, PyObject *tkey,
                                 long spp, long cpp) {
    PyObject *cops = PyDict_GetItemWithError(cache, s_cops), *own, *skey = NULL, *hit = NULL;
    if (!cops) return NULL;
    Py_INCREF(cops);
    if (!(own = PyDict_GetItemWithError(cache, s_cwork)) || !PyTuple_Check(own) || PyTuple_GET_SIZE(own) != 6) {
        Py_DECREF(cops);
        return NULL;
    }
    Py_INCREF(own);
    PyObject *sp = PyLong_FromLong(spp), *cp = PyLong_FromLong(cpp);
    if (sp && cp) skey = PyTuple_Pack(3, cops, sp, cp);
    Py_XDECREF(sp); Py_XDECREF(cp);
    if (!skey) goto done;
    hit = PyDict_GetItemWithError(tables, skey);
    if (hit) {
        Py_INCREF(hit);
    } else if (!PyErr_Occurred()) {
        long kv[2] = {spp, cpp};
        PyObject *shared = PyObject_GetAttr(info, s_shared), *wkey = NULL, *wt = NULL;
        if (shared && PyDict_Check(shared) && (wkey = key_of(1, s_wtab, kv, 2, NULL)) &&
            (wt = PyDict_GetItemWithError(shared, wkey)) && PyTuple_Check(wt) && PyTuple_GET_SIZE(wt) == 3) {
#define O_(i) PyTuple_GET_ITEM(own, i)
#define W_(i) PyTuple_GET_ITEM(wt, i)
            hit = PyTuple_Pack(9, O_(0), W_(0), O_(1), O_(2), O_(3), O_(4), O_(5), W_(1), W_(2));
#undef O_
#undef W_
            if (hit && PyDict_SetItem(tables, skey, hit)) Py_CLEAR(hit);
        }
        Py_XDECREF(shared); Py_XDECREF(wkey);
    }
    if (hit && PyDict_SetItem(cache, tkey, hit)) Py_CLEAR(hit);
done:
    Py_XDECREF(skey); Py_DECREF(own); Py_DECREF(cops);
    return hit;
}

static PyObject *crow_from_cache(PyObject *info, PyObject *cache, PyObject *tables, PyObject *key,
                                 long samples, long cores, long parts, long split, long batch) {
    long kv[2] = {samples / parts, cores / parts};
    PyObject *tkey = key_of(1, s_ctab, kv, 2, NULL);
    if (!tkey) return NULL;
    PyObject *tab = PyDict_GetItemWithError(cache, tkey);  /* borrowed */
    if (tab) {
        Py_INCREF(tab);  /* held: the next look-up may run Python (a key's __eq__) */
    } else if (!PyErr_Occurred() && tables) {
        tab = ctab_from_parts(info, cache, tables, tkey, kv[0], kv[1]);
    }
    Py_DECREF(tkey);
    if (!tab) return NULL;
    PyObject *tiles = PyDict_GetItemWithError(cache, s_tiles), *row = NULL, *base = NULL, *smp = NULL;
    if (!tiles || tiles == Py_None || !PyTuple_Check(tab) || PyTuple_GET_SIZE(tab) != 9) {
        /* None: missing, as _shape_row reads it (it computes the tiles) */
        Py_DECREF(tab);
        return NULL;  /* (an error set only when the look-up failed) */
    }
    Py_INCREF(tiles);
#define T_(i) PyTuple_GET_ITEM(tab, i)
    if (!(smp = PyLong_FromLong(batch / split)) ||
        !(base = PyTuple_Pack(10, T_(3), T_(4), T_(5), T_(6), T_(2), T_(1), T_(7), tiles, T_(8), smp)) ||
        !(row = PyTuple_Pack(4, base, T_(0), tiles, Py_False)))
        goto done;
#undef T_
    if (PyDict_SetItem(cache, key, row)) Py_CLEAR(row);
done:
    Py_DECREF(tiles); Py_XDECREF(base); Py_XDECREF(smp); Py_DECREF(tab);
    return row;
}

/* group_rows(groups, d_scope, slot_of, shape_row[, batch[, tables]]) -> (gidx, grows, gnames,
 *   gtiles, gd, pd, splits, wide): search_space._ccore._group_rows' loop. Per group (a _G) its
 *   shape's row from its op set's cache (info.cache[("crow", samples, cores, parts, split)]; on
 *   a miss, with batch (the decode's, > 0) the row made from the cache's walk table and tiles
 *   (crow_from_cache; with tables, the space's shape tables, a missing walk table made from
 *   the op set's kept parts first: ctab_from_parts), else shape_row(info, samples, cores,
 *   parts, split), which keeps it there): a row (a tuple of 4: the walk's row without bindings or None, the streamable
 *   inputs, the LLB weight tiles, wide); the walk's row is that row and the group's bindings;
 *   its scope parameter d_scope[scope_at], its transfer-scope parameter slot_of[slot] + 5. */
static PyObject *py_group_rows(PyObject *self, PyObject *args) {
    PyObject *groups, *d_scope, *slot_of, *shape_row, *tables = NULL;
    long batch = 0;
    (void)self;
    if (!PyArg_ParseTuple(args, "OOO!O|lO!:group_rows", &groups, &d_scope, &PyDict_Type, &slot_of, &shape_row,
                          &batch, &PyDict_Type, &tables))
        return NULL;
    if (batch < 0) { PyErr_SetString(PyExc_ValueError, "group_rows: a batch >= 1 (0: none)"); return NULL; }
    PyObject *gs = PySequence_Tuple(groups);  /* a snapshot: shape_row runs Python */
    if (!gs) return NULL;
    Py_ssize_t ng = PyTuple_GET_SIZE(gs);
    PyObject *gidx = PyDict_New(), *grows = PyList_New(0), *gnames = PyList_New(0),
             *gtiles = PyList_New(0), *gd = PyList_New(0), *pd = PyList_New(0),
             *splits = PyList_New(ng), *result = NULL;
    int wide = 0;
    Fields fl;
    fields_of(gs, &fl);
    if (!gidx || !grows || !gnames || !gtiles || !gd || !pd || !splits) goto done;
    for (Py_ssize_t i = 0; i < ng; i++) {  /* gidx first, as the Python comprehension */
        PyObject *gr = PyTuple_GET_ITEM(gs, i), *name = aget(gr, &fl, A_NAME);
        PyObject *ix = name ? PyLong_FromSsize_t(i) : NULL;
        int rc = ix ? PyDict_SetItem(gidx, name, ix) : -1;
        Py_XDECREF(name); Py_XDECREF(ix);
        if (rc) goto done;
    }
    for (Py_ssize_t i = 0; i < ng; i++) {
        PyObject *gr = PyTuple_GET_ITEM(gs, i);
        PyObject *info = NULL, *cache = NULL, *key = NULL, *hit = NULL, *row = NULL, *binds = NULL;
        PyObject *o = NULL, *sl = NULL;
        long samples, cores, parts, split, at, slot, v;
        int rc = -1;
        if (attr_long(gr, &fl, A_SAMPLES, 0, INT_MAX, &samples) || attr_long(gr, &fl, A_CORES, 1, INT_MAX, &cores) ||
            attr_long(gr, &fl, A_PARTS, 1, INT_MAX, &parts) || attr_long(gr, &fl, A_SPLIT, 1, INT_MAX, &split) ||
            attr_long(gr, &fl, A_SCOPE_AT, 0, INT_MAX, &at) || attr_long(gr, &fl, A_SLOT, 0, INT_MAX, &slot))
            goto group_done;
        PyObject *sp = PyLong_FromLong(split);
        if (!sp) goto group_done;
        PyList_SET_ITEM(splits, i, sp);
        if (!(info = aget(gr, &fl, A_INFO)) || !(cache = PyObject_GetAttr(info, s_cache))) goto group_done;
        if (!PyDict_Check(cache)) { PyErr_SetString(PyExc_TypeError, "an op set's cache: a dict"); goto group_done; }
        long kv[4] = {samples, cores, parts, split};
        if (!(key = key_of(1, s_crow, kv, 4, NULL))) goto group_done;
        hit = PyDict_GetItemWithError(cache, key);
        if (hit && hit != Py_None) {
            Py_INCREF(hit);
        } else {  /* missing, or None (missing, as the Python loop's .get() is None reads it) */
            if (PyErr_Occurred()) goto group_done;
            hit = NULL;  /* (a cached None is borrowed: not kept; without batch it was, review) */
            if (batch > 0 && !(hit = crow_from_cache(info, cache, tables, key, samples, cores, parts, split,
                                                     batch)) &&
                PyErr_Occurred())
                goto group_done;
            if (!hit && !(hit = PyObject_CallFunction(shape_row, "Ollll", info, samples, cores, parts, split)))
                goto group_done;
        }
        if (!PyTuple_Check(hit) || PyTuple_GET_SIZE(hit) != 4) {
            PyErr_SetString(PyExc_ValueError, "a shape row: a tuple of 4");
            goto group_done;
        }
        int w = PyObject_IsTrue(PyTuple_GET_ITEM(hit, 3));
        if (w < 0) goto group_done;
        if (w) { wide = 1; rc = 0; goto group_done; }
        PyObject *base = PyTuple_GET_ITEM(hit, 0);
        if (!PyTuple_Check(base)) { PyErr_SetString(PyExc_ValueError, "a shape row's row: a tuple"); goto group_done; }
        if (!(binds = aget(gr, &fl, A_BINDS))) goto group_done;
        Py_ssize_t nb = PyTuple_GET_SIZE(base);
        if (!(row = PyTuple_New(nb + 1))) goto group_done;
        for (Py_ssize_t k = 0; k < nb; k++) {
            PyObject *x = PyTuple_GET_ITEM(base, k);
            Py_INCREF(x);
            PyTuple_SET_ITEM(row, k, x);
        }
        Py_INCREF(binds);
        PyTuple_SET_ITEM(row, nb, binds);
        if (PyList_Append(grows, row) || PyList_Append(gnames, PyTuple_GET_ITEM(hit, 1)) ||
            PyList_Append(gtiles, PyTuple_GET_ITEM(hit, 2)))
            goto group_done;
        if (!(o = PySequence_GetItem(d_scope, at)) || PyList_Append(gd, o)) goto group_done;
        if (!(sl = PyLong_FromLong(slot))) goto group_done;
        PyObject *so = PyDict_GetItemWithError(slot_of, sl);  /* borrowed */
        if (!so) {
            if (!PyErr_Occurred()) PyErr_SetObject(PyExc_KeyError, sl);
            goto group_done;
        }
        if (as_long(so, 0, LONG_MAX - 5, &v, "a slot parameter")) goto group_done;
        Py_DECREF(o);
        if (!(o = PyLong_FromLong(v + 5)) || PyList_Append(pd, o)) goto group_done;
        rc = 0;
    group_done:
        Py_XDECREF(info); Py_XDECREF(cache); Py_XDECREF(key); Py_XDECREF(hit); Py_XDECREF(row);
        Py_XDECREF(binds); Py_XDECREF(o); Py_XDECREF(sl);
        if (rc) goto done;
    }
    result = Py_BuildValue("(OOOOOOOO)", gidx, grows, gnames, gtiles, gd, pd, splits, wide ? Py_True : Py_False);
done:
    Py_XDECREF(gidx); Py_XDECREF(grows); Py_XDECREF(gnames); Py_XDECREF(gtiles); Py_XDECREF(gd);
    Py_XDECREF(pd); Py_XDECREF(splits); Py_DECREF(gs);
    return result;
}

/* cdag_rows(groups, miss[, codes]) -> (rows, gout): search_space._cderive.derive's loop over
 *   the groups. Per group (a _G) its chunk-DAG row from its op set's cache
 *   (info.cache[("cdag", name, split)]; on a miss, with codes (the space's tensor codes) made
 *   here when the op set's inputs and outputs are kept (cdag_row_from_cache), else
 *   miss(group), which makes and keeps it: a
 *   tuple of 5, (nodes, input triples, output codes, ops, result code)); rows[i] is its first
 *   four and the group's bindings, gout[i] its result's code. */
static PyObject *s_cdag_io, *s_output, *s_g;  /* "cdag.io", "output", "g" (interned at module init) */

/* A group's chunk-DAG row made as search_space._cderive._group_row makes it when its op set's
 * inputs and outputs are kept (cache["cdag.io"]) and its result has a tensor code (h106):
 * (nodes ("g", name, c) for c < split, io[0], io[1], info.ops, codes[info.output]), kept
 * in the cache under key. A new reference; NULL without an error when either is missing
 * (the caller asks miss: the Python code makes them), with one on an error. */
static PyObject *cdag_row_from_cache(PyObject *info, PyObject *cache, PyObject *codes, PyObject *key,
                                     PyObject *name, long split) {
    PyObject *io = PyDict_GetItemWithError(cache, s_cdag_io), *out = NULL, *ops = NULL, *nodes = NULL,
             *hit = NULL;
    if (!io || !PyTuple_Check(io) || PyTuple_GET_SIZE(io) != 2) return NULL;
    Py_INCREF(io);
    PyObject *oname = PyObject_GetAttr(info, s_output);
    if (!oname) goto done;
    out = PyDict_GetItemWithError(codes, oname);
    Py_DECREF(oname);
    if (!out) goto done;
    Py_INCREF(out);
    if (!(ops = PyObject_GetAttr(info, s_ops)) || !(nodes = PyTuple_New(split))) goto done;
    for (long c = 0; c < split; c++) {
        PyObject *cn = PyLong_FromLong(c), *node = cn ? PyTuple_Pack(3, s_g, name, cn) : NULL;
        Py_XDECREF(cn);
        if (!node) goto done;
        PyTuple_SET_ITEM(nodes, c, node);
    }
    hit = PyTuple_Pack(5, nodes, PyTuple_GET_ITEM(io, 0), PyTuple_GET_ITEM(io, 1), ops, out);
    if (hit && PyDict_SetItem(cache, key, hit)) Py_CLEAR(hit);
done:
    Py_DECREF(io); Py_XDECREF(out); Py_XDECREF(ops); Py_XDECREF(nodes);
    return hit;
}

static PyObject *py_cdag_rows(PyObject *self, PyObject *args) {
    PyObject *groups, *miss, *codes = NULL;
    (void)self;
    if (!PyArg_ParseTuple(args, "OO|O!:cdag_rows", &groups, &miss, &PyDict_Type, &codes)) return NULL;
    PyObject *gs = PySequence_Tuple(groups);  /* a snapshot: miss runs Python */
    if (!gs) return NULL;
    Py_ssize_t ng = PyTuple_GET_SIZE(gs);
    PyObject *rows = PyList_New(ng), *gout = PyList_New(ng), *result = NULL;
    Fields fl;
    fields_of(gs, &fl);
    if (!rows || !gout) goto done;
    for (Py_ssize_t i = 0; i < ng; i++) {
        PyObject *gr = PyTuple_GET_ITEM(gs, i);
        PyObject *info = NULL, *cache = NULL, *name = NULL, *key = NULL, *hit = NULL, *binds = NULL;
        long split;
        int rc = -1;
        if (attr_long(gr, &fl, A_SPLIT, 1, INT_MAX, &split) || !(name = aget(gr, &fl, A_NAME)) ||
            !(info = aget(gr, &fl, A_INFO)) || !(cache = PyObject_GetAttr(info, s_cache)))
            goto group_done;
        if (!PyDict_Check(cache)) { PyErr_SetString(PyExc_TypeError, "an op set's cache: a dict"); goto group_done; }
        PyObject *sp_o = PyLong_FromLong(split);  /* the key (s_cdag, name, split) */
        if (!sp_o || !(key = PyTuple_New(3))) { Py_XDECREF(sp_o); goto group_done; }
        PyTuple_SET_ITEM(key, 0, Py_NewRef(s_cdag));
        PyTuple_SET_ITEM(key, 1, Py_NewRef(name));
        PyTuple_SET_ITEM(key, 2, sp_o);
        hit = PyDict_GetItemWithError(cache, key);
        if (hit && hit != Py_None) {
            Py_INCREF(hit);
        } else {  /* missing, or None (missing, as the Python loop's .get() is None reads it) */
            if (PyErr_Occurred()) goto group_done;
            hit = NULL;  /* (a cached None is borrowed: not kept) */
            if (codes && !(hit = cdag_row_from_cache(info, cache, codes, key, name, split)) && PyErr_Occurred())
                goto group_done;
            if (!hit && !(hit = PyObject_CallOneArg(miss, gr))) goto group_done;
        }
        if (!PyTuple_Check(hit) || PyTuple_GET_SIZE(hit) != 5) {
            PyErr_SetString(PyExc_ValueError, "a chunk-DAG row: a tuple of 5");
            goto group_done;
        }
        if (!(binds = aget(gr, &fl, A_BINDS))) goto group_done;
        PyObject *row = PyTuple_Pack(5, PyTuple_GET_ITEM(hit, 0), PyTuple_GET_ITEM(hit, 1),
                                     PyTuple_GET_ITEM(hit, 2), PyTuple_GET_ITEM(hit, 3), binds);
        if (!row) goto group_done;
        PyList_SET_ITEM(rows, i, row);
        PyList_SET_ITEM(gout, i, Py_NewRef(PyTuple_GET_ITEM(hit, 4)));
        rc = 0;
    group_done:
        Py_XDECREF(info); Py_XDECREF(cache); Py_XDECREF(name); Py_XDECREF(key); Py_XDECREF(hit);
        Py_XDECREF(binds);
        if (rc) goto done;
    }
    result = PyTuple_Pack(2, rows, gout);
done:
    Py_XDECREF(rows); Py_XDECREF(gout); Py_DECREF(gs);
    return result;
}

/* block_rows(parts, slots, by_ops) -> the rows of a new block whose op sets are all known, or
 * None: search_space._cgroups._block_rows' hit path (h106), per part its op set's rows by slot
 * found by the op set's identity (by_ops[id(ops)] = (ops, rows by slot)) and the row of its
 * slot; None as soon as a part misses (the Python loop then makes every row). */
static PyObject *py_block_rows(PyObject *self, PyObject *args) {
    PyObject *parts, *slots, *by_ops;
    (void)self;
    if (!PyArg_ParseTuple(args, "O!O!O!:block_rows", &PyTuple_Type, &parts, &PyTuple_Type, &slots,
                          &PyDict_Type, &by_ops))
        return NULL;
    Py_ssize_t n = PyTuple_GET_SIZE(parts);
    if (PyTuple_GET_SIZE(slots) != n) {
        PyErr_SetString(PyExc_ValueError, "block_rows: a slot per part");
        return NULL;
    }
    PyObject *out = PyTuple_New(n);
    if (!out) return NULL;
    for (Py_ssize_t k = 0; k < n; k++) {
        PyObject *ops = PyTuple_GET_ITEM(parts, k), *key = PyLong_FromVoidPtr(ops);  /* id(ops) */
        if (!key) { Py_DECREF(out); return NULL; }
        PyObject *hit = PyDict_GetItemWithError(by_ops, key);  /* borrowed */
        Py_DECREF(key);
        PyObject *row = NULL;
        if (hit && PyTuple_Check(hit) && PyTuple_GET_SIZE(hit) == 2 && PyTuple_GET_ITEM(hit, 0) == ops &&
            PyDict_Check(PyTuple_GET_ITEM(hit, 1)))
            row = PyDict_GetItemWithError(PyTuple_GET_ITEM(hit, 1), PyTuple_GET_ITEM(slots, k));
        if (!row) {
            Py_DECREF(out);
            if (PyErr_Occurred()) return NULL;
            Py_RETURN_NONE;
        }
        PyTuple_SET_ITEM(out, k, Py_NewRef(row));
    }
    return out;
}

static PyMethodDef methods[] = {
    {"groups", py_groups, METH_VARARGS, "Pass 1's groups, shapes and cores (see the file)."},
    {"unit_slots", py_unit_slots, METH_VARARGS, "Each part's unit's first op (see the function)."},
    {"fit", py_fit, METH_VARARGS, "Decoding.fit in C for one chunk shape (see the function)."},
    {"wants", py_wants, METH_VARARGS, "The scope walk's answers in walk order (see the function)."},
    {"group_rows", py_group_rows, METH_VARARGS, "The scope walk's rows per group (see the function)."},
    {"cdag_rows", py_cdag_rows, METH_VARARGS, "The chunk DAG's rows per group (see the function)."},
    {"block_rows", py_block_rows, METH_VARARGS, "A new block's rows of known op sets (see the function)."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_cshape", NULL, -1, methods,
                                    NULL, NULL, NULL, NULL};

PyMODINIT_FUNC PyInit__cshape(void) {
    for (int f = 0; f < N_FIELDS; f++)
        if (!field[f] && !(field[f] = PyUnicode_InternFromString(FIELD_NAMES[f]))) return NULL;
    struct { PyObject **p; const char *s; } names[] = {
        {&a_name[A_SPLIT], "split"}, {&a_name[A_WAVE], "wave"}, {&a_name[A_INFO], "info"},
        {&s_cache, "cache"}, {&a_name[A_SAMPLES], "samples"}, {&a_name[A_CORES], "cores"},
        {&a_name[A_PARTS], "parts"}, {&a_name[A_BINDS], "binds"}, {&a_name[A_SCOPE_AT], "scope_at"},
        {&a_name[A_SLOT], "slot"}, {&a_name[A_NAME], "name"}, {&s_crow, "crow"}, {&s_fits, "fits"},
        {&s_ctab, "ctab"}, {&s_tiles, "tiles"}, {&s_cdag, "cdag"}, {&s_shared, "shared"},
        {&s_cops, "cops"}, {&s_cwork, "cwork"}, {&s_wtab, "wtab"}, {&s_cws, "cws"},
        {&s_streamable, "streamable"}, {&s_ops, "ops"}, {&s_windowed, "windowed"}, {&s_attention, "attention"},
        {&s_cdag_io, "cdag.io"}, {&s_output, "output"}, {&s_g, "g"}};
    for (size_t k = 0; k < sizeof names / sizeof names[0]; k++)
        if (!*names[k].p && !(*names[k].p = PyUnicode_InternFromString(names[k].s))) return NULL;
    PyObject *m = PyModule_Create(&module);
    /* groups() sets each group's wave (this build's mark: search_space/_ccore.py _NEEDS) */
    if (m && PyModule_AddIntConstant(m, "WAVES", 1)) { Py_DECREF(m); return NULL; }
    /* group_rows makes a shape row from the cache's walk table (its batch argument) */
    if (m && PyModule_AddIntConstant(m, "CROW_TAB", 1)) { Py_DECREF(m); return NULL; }
    /* group_rows makes a missing walk table from the op set's kept parts (its tables argument) */
    if (m && PyModule_AddIntConstant(m, "CTAB_PARTS", 1)) { Py_DECREF(m); return NULL; }
    /* groups' fast argument: Decoding.fits_l1's miss in C (fits_fast) */
    if (m && PyModule_AddIntConstant(m, "FITS_FAST", 1)) { Py_DECREF(m); return NULL; }
    /* cdag_rows' codes argument: a missing row made from the op set's kept inputs and outputs */
    if (m && PyModule_AddIntConstant(m, "CDAG_IO", 1)) { Py_DECREF(m); return NULL; }
    return m;
}
