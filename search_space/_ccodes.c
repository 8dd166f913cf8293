/* A decoded candidate's codes and identity text in one call (search_space/_lazy.py drives it).
 *
 * search_space._lazy.Decoded._code_python is the reference: each group spec, placed transfer
 * and order step of a decoded schedule interned in the space's value table
 * (compiler.codes.ValueTable), then compiler.key_text.coded_text joins the reprs of those
 * values into repr(schedule.structural_key()). This module does the same from what the
 * compiled decoder leaves (the flat group records, the packed transfers' int32 rows, the
 * packed chunk positions, the walk's scopes), with its own hash tables from what a value is
 * made of to its code and its text piece. A value met for the first time is interned in
 * the order the Python code interns it (groups, then transfers, then steps in the order):
 * a group spec or placed transfer here when the Cache was given `first` (see "the
 * first-time path" below), else and for steps by the Python code (a callback), so the
 * table, the codes and the text are the ones the Python code gives; the differential tests
 * (tests/search_space/test_ccodes.py) compare them on every zoo model, and the C
 * first-time path with the callbacks'.
 *
 * Cache(..., first=(places, Placement, GroupSpec, TransferItem, scope names, value table
 *       [, (field names of the three types, or None each)])): the first-time path in C.
 *
 * Cache(new_group, group_info, new_transfer, step_code, limit): the callbacks
 *   new_group(flat, i, sc) -> group code of flat group record i with its chunks' scopes sc
 *   group_info(code) -> (ops, text, first op repr) of a group code (key_text's pieces)
 *   new_transfer(tensor, df, d0, dn, scope, bind)
 *       -> (transfer item code, placement, repr of the placement)
 *   step_code(node) -> the step code of an order node
 * A placed transfer's entry text (key_text.transfer_text) is formatted here from its packed
 * row (kind, tensor code, src factor, dst factor, first src chunk, src chunks, first dst
 * chunk, dst chunks: _cdag.c's TR_PACK int32, kind 0 concat / 1 split) and its item's
 * placement repr.
 * Cache.encode(batch, flat, gidx, chunk_at, scopes, nodes, rows, binds, names, tnames,
 *              step_at)
 *   -> (group codes, transfer codes, step codes as int32 bytearrays, text, placements)
 *   or None when the state is one this code does not take (the Python code is used):
 *   duplicate transfer names, two groups with one first op, positions not covering the
 *   order once, a malformed table. Values interned before such a refusal are in the
 *   table as the Python code would have interned them (same keys, same order).
 * Keys are compared by value (names, core tuples, the scopes), except the op tuples, which
 * the space shares and the Python code keys by identity (each is kept alive here).
 * Past `limit` entries in a table, the table starts again (bounded memory).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

enum { NF = 8, TR_PACK = 8, MAX_SC = 4096 };

typedef struct {
    uint64_t hash;
    PyObject *name, *ops, *perm;  /* owned; name NULL: a free slot */
    int split, cores, parts, spread, nsc, code;
    unsigned char *sc;
} GEntry;

typedef struct {
    int filled, empty, split;
    long long first;
    PyObject *ops, *text, *first_repr;  /* owned */
    PyObject **step_text;               /* per chunk: "(first, chunk)" (NULL until made) */
} GInfo;

typedef struct {
    uint64_t hash;
    PyObject *name, *bind;  /* owned; name NULL: a free slot */
    int row[TR_PACK], scope, code;
    PyObject *place, *entry, *name_repr;  /* owned */
} TEntry;

/* a name's step codes by chunk (kind 0: group steps ("g", name, chunk), 1: transfer steps) */
typedef struct {
    uint64_t hash;
    PyObject *name;  /* owned; NULL: a free slot */
    int kind, n;
    int *codes;      /* -1: unknown */
} SEntry;

/* a placed transfer's item: (tensor, dst factor, dst chunks, placement) -> its code */
typedef struct {
    uint64_t hash;
    PyObject *tensor, *bind;  /* owned; tensor NULL: a free slot */
    int df, d0, dn, scope, code;
    PyObject *place, *place_repr;  /* owned */
} IEntry;

/* a repr remembered by identity (an op tuple's, a placement's); the object is held, so its
 * address is not reused while the entry lives */
typedef struct {
    uint64_t hash;
    PyObject *key, *repr;  /* owned; key NULL: a free slot */
} REntry;

typedef struct {
    PyObject_HEAD
    PyObject *new_group, *group_info, *new_transfer, *step_code;
    /* the first-time path in C (Cache(..., first=...)): the space's places dict, the Placement,
     * GroupSpec and TransferItem types, the scope names, and the value table's lists and dicts
     * (compiler.codes.ValueTable: add_group and add_transfer done here as there) */
    PyObject *places, *place_type, *group_type, *item_type, *scope_names;
    /* each type's field names in order when its instances may be made as its generated
     * __init__ makes them (object.__new__, then object.__setattr__ field by field), else NULL */
    PyObject *place_fields, *group_fields, *item_fields;
    PyObject *t_groups, *t_group_ops, *t_group_first, *t_group_places, *t_ops, *t_placements,
             *t_ops_codes, *t_place_codes, *t_group_codes, *t_transfers, *t_transfer_codes;
    REntry *r; size_t rcap, rn;
    GEntry *g; size_t gcap, gn;
    TEntry *t; size_t tcap, tn;
    SEntry *s; size_t scap, sn;
    IEntry *it; size_t itcap, itn;
    GInfo *info; size_t icap;
    Py_ssize_t limit;
    long long hits, misses, firsts;
} Cache;

static PyObject *s_open, *s_close, *s_sep, *s_one, *s_empty, *s_g, *s_t, *s_ops;

/* one more value into a hash (a 64-bit finaliser: every input bit moves the low bits, which
 * index the tables) */
static uint64_t mix(uint64_t h, uint64_t v) {
    h ^= v + 0x9e3779b97f4a7c15ULL + (h << 6) + (h >> 2);
    h ^= h >> 33; h *= 0xff51afd7ed558ccdULL;
    h ^= h >> 33; h *= 0xc4ceb9fe1a85ec53ULL;
    return h ^ (h >> 33);
}

static void g_clear(Cache *c) {
    for (size_t i = 0; i < c->gcap; i++) {
        GEntry *e = &c->g[i];
        if (!e->name) continue;
        Py_DECREF(e->name); Py_DECREF(e->ops); Py_DECREF(e->perm);
        free(e->sc);
    }
    free(c->g); c->g = NULL; c->gcap = c->gn = 0;
}

static void t_clear(Cache *c) {
    for (size_t i = 0; i < c->tcap; i++) {
        TEntry *e = &c->t[i];
        if (!e->name) continue;
        Py_DECREF(e->name); Py_DECREF(e->bind); Py_DECREF(e->place); Py_DECREF(e->entry);
        Py_DECREF(e->name_repr);
    }
    free(c->t); c->t = NULL; c->tcap = c->tn = 0;
}

static void s_clear(Cache *c) {
    for (size_t i = 0; i < c->scap; i++) {
        SEntry *e = &c->s[i];
        if (!e->name) continue;
        Py_DECREF(e->name); free(e->codes);
    }
    free(c->s); c->s = NULL; c->scap = c->sn = 0;
}

static void it_clear(Cache *c) {
    for (size_t i = 0; i < c->itcap; i++) {
        IEntry *e = &c->it[i];
        if (!e->tensor) continue;
        Py_DECREF(e->tensor); Py_DECREF(e->bind); Py_DECREF(e->place); Py_DECREF(e->place_repr);
    }
    free(c->it); c->it = NULL; c->itcap = c->itn = 0;
}

/* a table's doubling (open addressing, linear probing): the entries re-placed by their hash;
 * KEY is the field that is NULL in an empty slot */
#define DEFINE_GROW(NAME, TYPE, ARR, CAP, KEY, FIRST)                       \
    static int NAME(Cache *c) {                                             \
        size_t cap = c->CAP ? c->CAP * 2 : FIRST;                           \
        TYPE *n = calloc(cap, sizeof(TYPE));                                \
        if (!n) { PyErr_NoMemory(); return -1; }                            \
        for (size_t i = 0; i < c->CAP; i++) {                               \
            TYPE *e = &c->ARR[i];                                           \
            if (!e->KEY) continue;                                          \
            size_t j = (size_t)e->hash & (cap - 1);                         \
            while (n[j].KEY) j = (j + 1) & (cap - 1);                       \
            n[j] = *e;                                                      \
        }                                                                   \
        free(c->ARR); c->ARR = n; c->CAP = cap;                             \
        return 0;                                                           \
    }

DEFINE_GROW(s_grow, SEntry, s, scap, name, 256)

DEFINE_GROW(it_grow, IEntry, it, itcap, tensor, 1024)

static void info_clear(Cache *c) {
    for (size_t i = 0; i < c->icap; i++) {
        GInfo *g = &c->info[i];
        if (!g->filled) continue;
        Py_DECREF(g->ops); Py_DECREF(g->text); Py_DECREF(g->first_repr);
        for (int k = 0; k < g->split; k++) Py_XDECREF(g->step_text[k]);
        free(g->step_text);
    }
    free(c->info); c->info = NULL; c->icap = 0;
}

/* equal str objects (names): by identity, else by value */
static int same_str(PyObject *a, PyObject *b) {
    if (a == b) return 1;
    return PyUnicode_Compare(a, b) == 0;
}

DEFINE_GROW(g_grow, GEntry, g, gcap, name, 1024)

DEFINE_GROW(t_grow, TEntry, t, tcap, name, 1024)

/* the per-code pieces of group code `code` (asked of group_info once) */
/* the (grown) slot of group code `code` */
static GInfo *info_slot(Cache *c, int code) {
    if (code < 0) { PyErr_SetString(PyExc_ValueError, "a negative group code"); return NULL; }
    if ((size_t)code >= c->icap) {
        size_t cap = c->icap ? c->icap : 1024;
        while (cap <= (size_t)code) cap *= 2;
        GInfo *n = realloc(c->info, cap * sizeof(GInfo));
        if (!n) { PyErr_NoMemory(); return NULL; }
        memset(n + c->icap, 0, (cap - c->icap) * sizeof(GInfo));
        c->info = n; c->icap = cap;
    }
    return &c->info[code];
}

/* fill a slot from a group's (ops tuple, text, first op repr) (borrowed) */
static int info_set(GInfo *g, PyObject *ops, PyObject *text, PyObject *first) {
    g->empty = PyTuple_GET_SIZE(ops) == 0;
    g->first = 0;
    if (!g->empty) {
        g->first = PyLong_AsLongLong(PyTuple_GET_ITEM(ops, 0));
        if (g->first == -1 && PyErr_Occurred()) return -1;
    }
    g->split = -1;  /* set by the caller (the record's split) */
    g->ops = Py_NewRef(ops); g->text = Py_NewRef(text); g->first_repr = Py_NewRef(first);
    g->step_text = NULL;
    g->filled = 1;
    return 0;
}

static GInfo *info_of(Cache *c, int code) {
    GInfo *g = info_slot(c, code);
    if (!g || g->filled) return g;
    PyObject *r = PyObject_CallFunction(c->group_info, "i", code);
    if (!r) return NULL;
    PyObject *ops, *text, *first;
    if (!PyTuple_Check(r) || PyTuple_GET_SIZE(r) != 3
        || !PyTuple_Check(ops = PyTuple_GET_ITEM(r, 0))
        || !PyUnicode_Check(text = PyTuple_GET_ITEM(r, 1))
        || !PyUnicode_Check(first = PyTuple_GET_ITEM(r, 2))) {
        Py_DECREF(r);
        PyErr_SetString(PyExc_TypeError, "group_info: (ops tuple, text, first op repr) expected");
        return NULL;
    }
    int bad = info_set(g, ops, text, first);
    Py_DECREF(r);
    return bad ? NULL : g;
}

static int info_split(GInfo *g, int split) {
    if (g->split == split) return 0;
    if (g->split >= 0) { PyErr_SetString(PyExc_ValueError, "a group code with two splits"); return -1; }
    g->step_text = calloc((size_t)(split > 0 ? split : 1), sizeof(PyObject *));
    if (!g->step_text) { PyErr_NoMemory(); return -1; }
    g->split = split;
    return 0;
}

/* the entry of (kind, name) in the step table, made when missing (room ensured by the caller) */
static SEntry *s_find(Cache *c, int kind, PyObject *name) {
    Py_hash_t hn = PyObject_Hash(name);
    if (hn == -1) return NULL;
    uint64_t h = mix((uint64_t)hn, (uint64_t)kind);
    size_t i = (size_t)h & (c->scap - 1);
    for (; c->s[i].name; i = (i + 1) & (c->scap - 1)) {
        SEntry *e = &c->s[i];
        if (e->hash == h && e->kind == kind && same_str(e->name, name)) return e;
    }
    SEntry *e = &c->s[i];
    e->hash = h; e->name = Py_NewRef(name); e->kind = kind; e->n = 0; e->codes = NULL;
    c->sn++;
    return e;
}

/* code slot of chunk ch of a step table entry (grown with -1) */
static int *s_slot(SEntry *e, int ch) {
    if (ch >= e->n) {
        int n = e->n ? e->n : 4;
        while (n <= ch) n *= 2;
        int *codes = realloc(e->codes, sizeof(int) * (size_t)n);
        if (!codes) { PyErr_NoMemory(); return NULL; }
        for (int k = e->n; k < n; k++) codes[k] = -1;
        e->codes = codes; e->n = n;
    }
    return &e->codes[ch];
}

/* repr of the tuple (first, ..., first + n - 1) into buf (room for n * 13 + 4 chars) */
/* the decimal text of v at p, as "%d" writes it; the end */
static char *put_int(char *p, long long v) {
    char tmp[24];
    int n = 0;
    unsigned long long u = v < 0 ? 0ULL - (unsigned long long)v : (unsigned long long)v;
    if (v < 0) *p++ = '-';
    do { tmp[n++] = (char)('0' + (int)(u % 10)); u /= 10; } while (u);
    while (n) *p++ = tmp[--n];
    return p;
}

static void run_text(char *buf, int first, int n) {
    char *p = buf;
    *p++ = '(';
    for (int k = 0; k < n; k++) {
        if (k) { *p++ = ','; *p++ = ' '; }
        p = put_int(p, (long long)first + k);
    }
    if (n == 1) *p++ = ',';
    *p++ = ')';
    *p = 0;
}

/* "(name, 'kind', tensor, sf, df, src, dst, place)" from its pieces' texts, as
 * PyUnicode_FromFormat("(%U, '%s', %U, %d, %d, %s, %s, %U)") makes it; copied byte for byte
 * when the three str pieces are ASCII (else that call) */
static PyObject *entry_text(PyObject *nrep, const char *kind, PyObject *trep, int sf, int df, const char *src,
                            const char *dst, PyObject *prep) {
    if (!PyUnicode_IS_ASCII(nrep) || !PyUnicode_IS_ASCII(trep) || !PyUnicode_IS_ASCII(prep))
        return PyUnicode_FromFormat("(%U, '%s', %U, %d, %d, %s, %s, %U)", nrep, kind, trep, sf, df, src, dst, prep);
    Py_ssize_t ln = PyUnicode_GET_LENGTH(nrep), lt = PyUnicode_GET_LENGTH(trep), lp = PyUnicode_GET_LENGTH(prep);
    size_t lk = strlen(kind), ls = strlen(src), ld = strlen(dst);
    /* "(" n ", '" k "', " t ", " sf ", " df ", " src ", " dst ", " p ")": 18 fixed, 2 ints of <= 11 */
    Py_ssize_t cap = ln + lt + lp + (Py_ssize_t)(lk + ls + ld) + 18 + 22;
    char *buf = malloc((size_t)cap), *p = buf;
    if (!buf) return PyErr_NoMemory();
#define PUT(s, n) (memcpy(p, (s), (size_t)(n)), p += (n))
    *p++ = '(';
    PUT(PyUnicode_1BYTE_DATA(nrep), ln);
    PUT(", '", 3); PUT(kind, lk); PUT("', ", 3);
    PUT(PyUnicode_1BYTE_DATA(trep), lt);
    PUT(", ", 2); p = put_int(p, sf); PUT(", ", 2); p = put_int(p, df);
    PUT(", ", 2); PUT(src, ls); PUT(", ", 2); PUT(dst, ld); PUT(", ", 2);
    PUT(PyUnicode_1BYTE_DATA(prep), lp);
    *p++ = ')';
#undef PUT
    PyObject *out = PyUnicode_FromStringAndSize(buf, p - buf);
    free(buf);
    return out;
}

static int as_int(PyObject *o, int *out) {
    long v = PyLong_AsLong(o);
    if (v == -1 && PyErr_Occurred()) return -1;
    if (v < INT32_MIN || v > INT32_MAX) { PyErr_SetString(PyExc_OverflowError, "out of int32"); return -1; }
    *out = (int)v;
    return 0;
}

static int cmp_ops(Cache *c, const int *gcodes, int a, int b) {
    GInfo *x = &c->info[gcodes[a]], *y = &c->info[gcodes[b]];
    if (x->empty != y->empty) return x->empty ? -1 : 1;
    if (x->empty) return 0;
    return x->first < y->first ? -1 : x->first > y->first ? 1 : 0;
}

/* insertion sort of idx[0..n) by cmp; *tie set when two compare equal */
static void sort_groups(Cache *c, const int *gcodes, int *idx, int n, int *tie) {
    for (int i = 1; i < n; i++) {
        int v = idx[i], j = i - 1;
        while (j >= 0) {
            int r = cmp_ops(c, gcodes, idx[j], v);
            if (r == 0) *tie = 1;
            if (r <= 0) break;
            idx[j + 1] = idx[j]; j--;
        }
        idx[j + 1] = v;
    }
}

static PyObject *g_names;  /* the names list of the transfers being sorted (encode holds the GIL) */
static int g_cmp_error;

static int cmp_name(const void *a, const void *b) {
    PyObject *x = PyList_GET_ITEM(g_names, *(const int *)a), *y = PyList_GET_ITEM(g_names, *(const int *)b);
    int r = PyUnicode_Compare(x, y);
    if (r == -1 && PyErr_Occurred()) { g_cmp_error = 1; PyErr_Clear(); return 0; }
    if (r == 0) g_cmp_error = 1;  /* duplicate names: the Python code */
    return r;
}

static int append_tuple(PyObject *out, PyObject **parts, Py_ssize_t n) {
    /* repr of a tuple whose items' reprs are parts (key_text._tuple) */
    if (PyList_Append(out, s_open)) return -1;
    for (Py_ssize_t k = 0; k < n; k++) {
        if (k && PyList_Append(out, s_sep)) return -1;
        if (PyList_Append(out, parts[k])) return -1;
    }
    return PyList_Append(out, n == 1 ? s_one : s_close);
}

/* ---- the first-time path in C (Cache(..., first=...)) ----
 * What a value met the first time costs in Python (issue 20: ~5 new group specs and ~5 new
 * placed transfers a decoded BERT-base candidate) done here with the same objects, in the
 * same order: _lazy.Interned.placement (the space's places dict, a Placement made when
 * missing), Interned.group_code (the table's key (name, id(ops), split, id(place)...)),
 * compiler.codes.ValueTable.add_group / add_transfer (its lists and dicts), the new_transfer
 * callback's item key (tensor, dst factor, dst chunks, id(place)), and key_text._Pieces.group
 * (repr((ops, split, chunks)) from the reprs of the op tuple and the placements, and the repr
 * of the group's least op). */

DEFINE_GROW(r_grow, REntry, r, rcap, key, 1024)

static void r_clear(Cache *c) {
    for (size_t i = 0; i < c->rcap; i++)
        if (c->r[i].key) { Py_DECREF(c->r[i].key); Py_DECREF(c->r[i].repr); }
    free(c->r); c->r = NULL; c->rcap = c->rn = 0;
}

/* repr(o), remembered by identity (o is held with it): a new reference */
static PyObject *repr_of(Cache *c, PyObject *o) {
    uint64_t h = mix(0, (uint64_t)(uintptr_t)o);
    if (c->rcap)
        for (size_t i = (size_t)h & (c->rcap - 1); c->r[i].key; i = (i + 1) & (c->rcap - 1))
            if (c->r[i].key == o) return Py_NewRef(c->r[i].repr);
    PyObject *rep = PyObject_Repr(o);
    if (!rep) return NULL;
    if (!PyUnicode_Check(rep)) { Py_DECREF(rep); PyErr_SetString(PyExc_TypeError, "repr: not a str"); return NULL; }
    if (c->rn + 1 > (size_t)c->limit) r_clear(c);  /* bounded: starts again */
    if (2 * (c->rn + 1) > c->rcap && r_grow(c)) { Py_DECREF(rep); return NULL; }
    size_t i = (size_t)h & (c->rcap - 1);
    while (c->r[i].key) i = (i + 1) & (c->rcap - 1);
    c->r[i].hash = h; c->r[i].key = Py_NewRef(o); c->r[i].repr = Py_NewRef(rep);
    c->rn++;
    return rep;
}

/* type(*args) for a frozen dataclass whose __init__ only sets its fields: as that __init__
 * does (object.__setattr__ of each field in order, on object.__new__(type)) when `fields`
 * (its field names) is given, else by calling the type */
static PyObject *make_value(PyObject *type, PyObject *fields, PyObject *const *args, Py_ssize_t n) {
    if (!fields || PyTuple_GET_SIZE(fields) != n) return PyObject_Vectorcall(type, args, (size_t)n, NULL);
    PyObject *empty = PyTuple_New(0);
    if (!empty) return NULL;
    PyObject *obj = PyBaseObject_Type.tp_new((PyTypeObject *)type, empty, NULL);
    Py_DECREF(empty);
    if (!obj) return NULL;
    for (Py_ssize_t k = 0; k < n; k++)
        if (PyObject_GenericSetAttr(obj, PyTuple_GET_ITEM(fields, k), args[k])) { Py_DECREF(obj); return NULL; }
    return obj;
}

/* the space's shared Placement(scope name, bind) (Interned.placement): a new reference */
static PyObject *place_get(Cache *c, int scope, PyObject *bind) {
    PyObject *name = PyTuple_GET_ITEM(c->scope_names, scope);
    PyObject *key = PyTuple_Pack(2, name, bind);
    if (!key) return NULL;
    PyObject *p = PyDict_GetItemWithError(c->places, key);
    if (p) { Py_INCREF(p); Py_DECREF(key); return p; }
    if (PyErr_Occurred()) { Py_DECREF(key); return NULL; }
    PyObject *args[2] = {name, bind};
    p = make_value(c->place_type, c->place_fields, args, 2);
    if (!p || PyDict_SetItem(c->places, key, p)) { Py_XDECREF(p); Py_DECREF(key); return NULL; }
    Py_DECREF(key);
    return p;
}

/* *code = d[key] when there (1), 0 when not, -1 on an error */
static int code_in(PyObject *d, PyObject *key, int *code) {
    PyObject *v = PyDict_GetItemWithError(d, key);
    if (!v) return PyErr_Occurred() ? -1 : 0;
    return as_int(v, code) ? -1 : 1;
}

/* the code of o in an identity-keyed table (ValueTable._ops_codes / _place_codes and the list
 * of values beside it), interned when new: a new reference to the code */
static PyObject *id_code(PyObject *codes, PyObject *values, PyObject *o) {
    PyObject *oid = PyLong_FromVoidPtr(o);
    if (!oid) return NULL;
    PyObject *k = PyDict_GetItemWithError(codes, oid);
    if (k) { Py_DECREF(oid); return Py_NewRef(k); }
    if (PyErr_Occurred()) { Py_DECREF(oid); return NULL; }
    k = PyLong_FromSsize_t(PyList_GET_SIZE(values));
    if (!k || PyDict_SetItem(codes, oid, k) || PyList_Append(values, o)) { Py_XDECREF(k); Py_DECREF(oid); return NULL; }
    Py_DECREF(oid);
    return k;
}

/* ValueTable.add_group(tkey, gs) for gs = GroupSpec(.., ops, .., places): its code */
static int table_add_group(Cache *c, PyObject *tkey, PyObject *gs, PyObject *ops, PyObject *places, int *code) {
    Py_ssize_t n = PyList_GET_SIZE(c->t_groups);
    PyObject *v = PyLong_FromSsize_t(n);
    if (!v || PyDict_SetItem(c->t_group_codes, tkey, v)) { Py_XDECREF(v); return -1; }
    Py_DECREF(v);
    if (PyList_Append(c->t_groups, gs)) return -1;
    PyObject *o = id_code(c->t_ops_codes, c->t_ops, ops);
    if (!o) return -1;
    int bad = PyList_Append(c->t_group_ops, o);
    Py_DECREF(o);
    if (bad) return -1;
    v = PyLong_FromSsize_t(PyList_GET_SIZE(c->t_group_places));
    if (!v) return -1;
    bad = PyList_Append(c->t_group_first, v);
    Py_DECREF(v);
    if (bad) return -1;
    for (Py_ssize_t j = 0; j < PyTuple_GET_SIZE(places); j++) {
        PyObject *k = id_code(c->t_place_codes, c->t_placements, PyTuple_GET_ITEM(places, j));
        if (!k) return -1;
        bad = PyList_Append(c->t_group_places, k);
        Py_DECREF(k);
        if (bad) return -1;
    }
    *code = (int)n;
    return 0;
}

/* Interned.group_code(table, name, info, split, sc, binds): the code of the group spec, its
 * chunks' placements in *places_out (a new tuple) */
static int first_group(Cache *c, PyObject *name, PyObject *ops, PyObject *split, PyObject *binds,
                       const unsigned char *sc, int nsc, int *code, PyObject **places_out) {
    PyObject *places = PyTuple_New(nsc), *tkey = NULL, *gs = NULL;
    if (!places) return -1;
    for (int j = 0; j < nsc; j++) {
        PyObject *p = place_get(c, sc[j], PyTuple_GET_ITEM(binds, j));
        if (!p) goto fail;
        PyTuple_SET_ITEM(places, j, p);
    }
    tkey = PyTuple_New(3 + nsc);
    if (!tkey) goto fail;
    PyTuple_SET_ITEM(tkey, 0, Py_NewRef(name));
    PyObject *oid = PyLong_FromVoidPtr(ops);
    if (!oid) goto fail;
    PyTuple_SET_ITEM(tkey, 1, oid);
    PyTuple_SET_ITEM(tkey, 2, Py_NewRef(split));
    for (int j = 0; j < nsc; j++) {
        PyObject *pid = PyLong_FromVoidPtr(PyTuple_GET_ITEM(places, j));
        if (!pid) goto fail;
        PyTuple_SET_ITEM(tkey, 3 + j, pid);
    }
    int found = code_in(c->t_group_codes, tkey, code);
    if (found < 0) goto fail;
    if (!found) {
        PyObject *args[4] = {name, ops, split, places};
        gs = make_value(c->group_type, c->group_fields, args, 4);
        if (!gs || table_add_group(c, tkey, gs, ops, places, code)) goto fail;
        Py_DECREF(gs);
    }
    Py_DECREF(tkey);
    c->firsts++;
    *places_out = places;
    return 0;
fail:
    Py_XDECREF(places); Py_XDECREF(tkey); Py_XDECREF(gs);
    return -1;
}

/* key_text._Pieces.group's text pieces of a group spec (ops, split, places): repr((ops, split,
 * chunks)) and repr(min(ops) if ops else -1), new references */
static int group_pieces(Cache *c, PyObject *ops, PyObject *split, PyObject *places, PyObject **text_out,
                        PyObject **first_out) {
    PyObject *orep = NULL, *list = NULL, *chunks = NULL, *text = NULL, *first = NULL;
    Py_ssize_t n = PyTuple_GET_SIZE(places);
    PyObject **reps = calloc((size_t)(n ? n : 1), sizeof(PyObject *));
    if (!reps) { PyErr_NoMemory(); return -1; }
    int rc = -1;
    if (!(orep = repr_of(c, ops))) goto done;
    for (Py_ssize_t j = 0; j < n; j++)
        if (!(reps[j] = repr_of(c, PyTuple_GET_ITEM(places, j)))) goto done;
    if (!(list = PyList_New(0)) || append_tuple(list, reps, n) || !(chunks = PyUnicode_Join(s_empty, list)))
        goto done;
    if (!(text = PyUnicode_FromFormat("(%U, %R, %U)", orep, split, chunks))) goto done;
    Py_ssize_t no = PyTuple_GET_SIZE(ops);
    if (no == 0) {
        first = PyUnicode_FromString("-1");
    } else {
        PyObject *m = PyTuple_GET_ITEM(ops, 0);  /* min(): the first of the least */
        for (Py_ssize_t k = 1; k < no; k++) {
            int lt = PyObject_RichCompareBool(PyTuple_GET_ITEM(ops, k), m, Py_LT);
            if (lt < 0) goto done;
            if (lt) m = PyTuple_GET_ITEM(ops, k);
        }
        first = PyObject_Repr(m);
    }
    if (!first) goto done;
    *text_out = Py_NewRef(text); *first_out = Py_NewRef(first);
    rc = 0;
done:
    for (Py_ssize_t j = 0; j < n; j++) Py_XDECREF(reps[j]);
    free(reps);
    Py_XDECREF(orep); Py_XDECREF(list); Py_XDECREF(chunks); Py_XDECREF(text); Py_XDECREF(first);
    return rc;
}

/* the new_transfer callback's work: (item code, placement, placement repr), new references */
static int first_transfer(Cache *c, PyObject *tensor, int df, int d0, int dn, int scope, PyObject *bind,
                          int *code, PyObject **place_out, PyObject **repr_out) {
    PyObject *place = place_get(c, scope, bind), *dst = NULL, *tkey = NULL, *dfo = NULL, *item = NULL;
    if (!place) return -1;
    if (!(dst = PyTuple_New(dn))) goto fail;
    for (int k = 0; k < dn; k++) {
        PyObject *v = PyLong_FromLong((long)d0 + k);
        if (!v) goto fail;
        PyTuple_SET_ITEM(dst, k, v);
    }
    if (!(dfo = PyLong_FromLong(df))) goto fail;
    PyObject *pid = PyLong_FromVoidPtr(place);
    if (!pid) goto fail;
    tkey = PyTuple_Pack(4, tensor, dfo, dst, pid);
    Py_DECREF(pid);
    if (!tkey) goto fail;
    int found = code_in(c->t_transfer_codes, tkey, code);
    if (found < 0) goto fail;
    if (!found) {
        PyObject *args[4] = {tensor, dfo, dst, place};
        item = make_value(c->item_type, c->item_fields, args, 4);
        if (!item) goto fail;
        Py_ssize_t n = PyList_GET_SIZE(c->t_transfers);
        PyObject *v = PyLong_FromSsize_t(n);
        if (!v || PyDict_SetItem(c->t_transfer_codes, tkey, v)) { Py_XDECREF(v); goto fail; }
        Py_DECREF(v);
        if (PyList_Append(c->t_transfers, item)) goto fail;
        Py_CLEAR(item);
        *code = (int)n;
    }
    PyObject *rep = repr_of(c, place);
    if (!rep) goto fail;
    Py_DECREF(dst); Py_DECREF(tkey); Py_DECREF(dfo);
    c->firsts++;
    *place_out = place; *repr_out = rep;
    return 0;
fail:
    Py_DECREF(place); Py_XDECREF(dst); Py_XDECREF(tkey); Py_XDECREF(dfo); Py_XDECREF(item);
    return -1;
}

/* info_of for a group met the first time here: its pieces made in C from what first_group
 * interned (the table's spec of `code` has these ops, split and placements) */
static GInfo *info_from(Cache *c, int code, PyObject *ops, PyObject *split, PyObject *places) {
    GInfo *g = info_slot(c, code);
    if (!g || g->filled) return g;
    PyObject *text = NULL, *first = NULL;
    if (group_pieces(c, ops, split, places, &text, &first)) return NULL;
    int bad = info_set(g, ops, text, first);
    Py_DECREF(text); Py_DECREF(first);
    return bad ? NULL : g;
}

/* "(first, ch)" (PyUnicode_FromFormat("(%U, %d)"), formatted here when first is ASCII: the
 * repr of an int) */
static PyObject *step_text(PyObject *first, int ch) {
    Py_ssize_t n;
    const char *f = PyUnicode_IS_ASCII(first) ? PyUnicode_AsUTF8AndSize(first, &n) : NULL;
    if (!f || n > 64) return PyUnicode_FromFormat("(%U, %d)", first, ch);
    char buf[96];
    int len = snprintf(buf, sizeof buf, "(%s, %d)", f, ch);
    return PyUnicode_FromStringAndSize(buf, len);
}

static PyObject *Cache_encode(Cache *c, PyObject *args) {
    PyObject *batch, *flat, *gidx, *chunk_b, *scopes, *nodes, *rows_b, *binds, *names, *tnames, *step_b;
    if (!PyArg_ParseTuple(args, "OO!O!SO!O!SO!O!O!S", &batch, &PyTuple_Type, &flat, &PyDict_Type, &gidx,
                          &chunk_b, &PyList_Type, &scopes, &PyList_Type, &nodes, &rows_b,
                          &PyTuple_Type, &binds, &PyList_Type, &names, &PyList_Type, &tnames, &step_b))
        return NULL;
    Py_ssize_t nf = PyTuple_GET_SIZE(flat), G = nf / NF, L = PyList_GET_SIZE(nodes);
    Py_ssize_t T = PyList_GET_SIZE(names), NT = PyList_GET_SIZE(tnames);
    const int *ca = (const int *)PyBytes_AS_STRING(chunk_b);
    Py_ssize_t na = PyBytes_GET_SIZE(chunk_b) / (Py_ssize_t)sizeof(int);
    const int *sa = (const int *)PyBytes_AS_STRING(step_b);
    Py_ssize_t ns = PyBytes_GET_SIZE(step_b) / (Py_ssize_t)sizeof(int);
    const int *rows = (const int *)PyBytes_AS_STRING(rows_b);
    if (nf % NF || PyDict_GET_SIZE(gidx) != G || na < G + 1 || ca[G] != na || PyList_GET_SIZE(scopes) != L
        || PyBytes_GET_SIZE(rows_b) != (Py_ssize_t)sizeof(int) * TR_PACK * T || PyTuple_GET_SIZE(binds) != T
        || !(ns == T || (T == 0 && ns == 1)) || L > INT32_MAX / 2)
        Py_RETURN_NONE;
    /* the group records in gidx's order, names equal */
    {
        Py_ssize_t pos = 0, i = 0;
        PyObject *k, *v;
        while (PyDict_Next(gidx, &pos, &k, &v)) {
            PyObject *name = PyTuple_GET_ITEM(flat, i * NF);
            if (!PyUnicode_Check(k) || !PyUnicode_Check(name) || !PyLong_Check(v))
                Py_RETURN_NONE;
            long at = PyLong_AsLong(v);
            if (at == -1 && PyErr_Occurred()) {  /* not a C long: not a decoder's index */
                PyErr_Clear();
                Py_RETURN_NONE;
            }
            if (at != i || !same_str(k, name))
                Py_RETURN_NONE;
            i++;
        }
    }
    PyObject *result = NULL, *text = NULL, *places = NULL, *parts = NULL, *tmp = NULL;
    int *owner = NULL, *gcodes = NULL, *idx = NULL, *tidx = NULL;
    TEntry **tent = NULL;
    SEntry **gse = NULL;
    unsigned char *sc = NULL;
    PyObject **pieces = NULL;
    PyObject *gb = NULL, *tb = NULL, *sb = NULL, *opsref = NULL, *gplaces = NULL;
    int refuse = 0;
    owner = malloc(sizeof(int) * 2 * (size_t)(L ? L : 1));
    gcodes = malloc(sizeof(int) * (size_t)(G ? G : 1));
    idx = malloc(sizeof(int) * (size_t)(G ? G : 1));
    tidx = malloc(sizeof(int) * (size_t)(T ? T : 1));
    tent = malloc(sizeof(TEntry *) * (size_t)(T ? T : 1));
    sc = malloc(MAX_SC);
    Py_ssize_t np_ = G > T ? G : T;
    if (np_ < L) np_ = L;
    pieces = malloc(sizeof(PyObject *) * (size_t)(np_ ? np_ : 1));
    if (!owner || !gcodes || !idx || !tidx || !tent || !sc || !pieces) { PyErr_NoMemory(); goto fail; }
    /* every order position owned once: (group, chunk) or (-1 - transfer, 0) */
    for (Py_ssize_t k = 0; k < L; k++) owner[2 * k] = INT32_MIN;
    for (Py_ssize_t i = 0; i < G; i++) {
        int a = ca[i], b = ca[i + 1];
        if (a < G + 1 || b < a || b > na) { refuse = 1; goto done; }
        for (int j = a; j < b; j++) {
            int k = ca[j];
            if (k < 0 || k >= L || owner[2 * k] != INT32_MIN) { refuse = 1; goto done; }
            owner[2 * k] = (int)i; owner[2 * k + 1] = j - a;
        }
    }
    for (Py_ssize_t j = 0; j < T; j++) {
        int k = sa[j];
        if (k < 0 || k >= L || owner[2 * k] != INT32_MIN) { refuse = 1; goto done; }
        owner[2 * k] = -1 - (int)j; owner[2 * k + 1] = 0;
        PyObject *nm = PyList_GET_ITEM(names, j);
        if (!PyUnicode_Check(nm)) { refuse = 1; goto done; }
        tidx[j] = (int)j;
    }
    for (Py_ssize_t k = 0; k < L; k++) if (owner[2 * k] == INT32_MIN) { refuse = 1; goto done; }
    /* transfers by name (duplicates: the Python code) */
    g_names = names; g_cmp_error = 0;
    if (T > 1) qsort(tidx, (size_t)T, sizeof(int), cmp_name);
    g_names = NULL;
    if (g_cmp_error) { refuse = 1; goto done; }

    /* past the limit, a table starts again (here, not in the middle: entries found are used) */
    if (c->gn + (size_t)G > (size_t)c->limit) g_clear(c);
    if (c->tn + (size_t)T > (size_t)c->limit) t_clear(c);
    if (c->itn + (size_t)T > (size_t)c->limit) it_clear(c);
    if (c->sn + (size_t)(G + T) > (size_t)c->limit) s_clear(c);
    /* 1. groups, in the records' order */
    for (Py_ssize_t i = 0; i < G; i++) {
        PyObject **f = &PyTuple_GET_ITEM(flat, i * NF);
        PyObject *name = f[0], *perm = f[3], *gbinds = f[7];
        int split, cores, parts_, spread;
        if (as_int(f[2], &split) || as_int(f[4], &cores) || as_int(f[5], &parts_)) goto fail;
        spread = PyObject_IsTrue(f[6]);
        if (spread < 0) goto fail;
        Py_XSETREF(opsref, PyObject_GetAttr(f[1], s_ops));  /* held while it is used */
        if (!opsref) goto fail;
        PyObject *ops = opsref;
        int a = ca[i], nsc = ca[i + 1] - a;
        if (nsc > MAX_SC || !PyTuple_Check(gbinds) || PyTuple_GET_SIZE(gbinds) != nsc || nsc != split) {
            refuse = 1; goto done;
        }
        for (int j = 0; j < nsc; j++) {
            int v;
            if (as_int(PyList_GET_ITEM(scopes, ca[a + j]), &v)) goto fail;
            if (v < 0 || v > 2) { refuse = 1; goto done; }
            sc[j] = (unsigned char)v;
        }
        Py_hash_t hn = PyObject_Hash(name), hp = PyObject_Hash(perm);
        if (hn == -1 || hp == -1) goto fail;
        uint64_t h = mix(mix(mix(mix((uint64_t)hn, (uint64_t)(uintptr_t)ops), (uint64_t)hp),
                             ((uint64_t)(uint32_t)split << 32) | (uint32_t)cores),
                         ((uint64_t)(uint32_t)parts_ << 1) | (uint64_t)spread);
        for (int j = 0; j < nsc; j++) h = mix(h, sc[j]);
        int code = -1;
        if (c->gcap) {
            for (size_t s = (size_t)h & (c->gcap - 1); c->g[s].name; s = (s + 1) & (c->gcap - 1)) {
                GEntry *e = &c->g[s];
                if (e->hash != h || e->ops != ops || e->split != split || e->cores != cores || e->parts != parts_
                    || e->spread != spread || e->nsc != nsc || memcmp(e->sc, sc, (size_t)nsc) || !same_str(e->name, name))
                    continue;
                int eq = e->perm == perm ? 1 : PyObject_RichCompareBool(e->perm, perm, Py_EQ);
                if (eq < 0) goto fail;
                if (eq) { code = e->code; break; }
            }
        }
        if (code < 0) {
            c->misses++;
            if (c->places && PyTuple_Check(ops)) {  /* interned here (first_group) */
                if (first_group(c, name, ops, f[2], gbinds, sc, nsc, &code, &gplaces)) goto fail;
            } else {  /* by the Python code */
                tmp = PyTuple_New(nsc);
                if (!tmp) goto fail;
                for (int j = 0; j < nsc; j++) PyTuple_SET_ITEM(tmp, j, PyLong_FromLong(sc[j]));
                PyObject *r = PyObject_CallFunction(c->new_group, "OnO", flat, i, tmp);
                Py_CLEAR(tmp);
                if (!r) goto fail;
                code = (int)PyLong_AsLong(r);
                Py_DECREF(r);
                if (code == -1 && PyErr_Occurred()) goto fail;
            }
            if (2 * (c->gn + 1) > c->gcap && g_grow(c)) goto fail;
            size_t s = (size_t)h & (c->gcap - 1);
            while (c->g[s].name) s = (s + 1) & (c->gcap - 1);
            GEntry *e = &c->g[s];
            e->sc = malloc((size_t)(nsc ? nsc : 1));
            if (!e->sc) { PyErr_NoMemory(); goto fail; }
            memcpy(e->sc, sc, (size_t)nsc);
            e->hash = h; e->name = Py_NewRef(name); e->ops = Py_NewRef(ops); e->perm = Py_NewRef(perm);
            e->split = split; e->cores = cores; e->parts = parts_; e->spread = spread; e->nsc = nsc;
            e->code = code;
            c->gn++;
        } else {
            c->hits++;
        }
        GInfo *gi = gplaces ? info_from(c, code, ops, f[2], gplaces) : info_of(c, code);
        Py_CLEAR(gplaces);
        if (!gi || info_split(gi, split)) goto fail;
        gcodes[i] = code;
    }
    /* 2. transfers, in their order (room for all of them first: tent[] points into the table) */
    while (2 * (c->tn + (size_t)T) > c->tcap) if (t_grow(c)) goto fail;
    places = PyTuple_New(T);
    if (!places) goto fail;
    for (Py_ssize_t j = 0; j < T; j++) {
        const int *row = rows + (size_t)TR_PACK * (size_t)j;
        PyObject *name = PyList_GET_ITEM(names, j), *bind = PyTuple_GET_ITEM(binds, j);
        int scope;
        if (as_int(PyList_GET_ITEM(scopes, sa[j]), &scope)) goto fail;
        if (scope < 0 || scope > 2 || row[1] < 0 || row[1] >= NT || row[0] < 0 || row[0] > 1
            || row[4] < 0 || row[5] < 0 || row[6] < 0 || row[7] < 0
            /* what _cdag.make_transfers refuses ("a bad row"): the Python path raises it */
            || row[2] < 1 || row[3] < 1 || row[2] > (1 << 20) || row[3] > (1 << 20)
            || row[5] > (1 << 20) || row[7] > (1 << 20)
            || row[5] > INT_MAX - row[4] || row[7] > INT_MAX - row[6]) {
            refuse = 1; goto done;
        }
        Py_hash_t hn = PyObject_Hash(name), hb = PyObject_Hash(bind);
        if (hn == -1 || hb == -1) goto fail;
        uint64_t h = mix((uint64_t)hn, (uint64_t)hb);
        for (int q = 0; q < TR_PACK; q++) h = mix(h, (uint32_t)row[q]);
        h = mix(h, (uint64_t)scope);
        TEntry *hit = NULL;
        if (c->tcap) {
            for (size_t s = (size_t)h & (c->tcap - 1); c->t[s].name; s = (s + 1) & (c->tcap - 1)) {
                TEntry *e = &c->t[s];
                if (e->hash != h || e->scope != scope || memcmp(e->row, row, sizeof(e->row)) || !same_str(e->name, name))
                    continue;
                int eq = e->bind == bind ? 1 : PyObject_RichCompareBool(e->bind, bind, Py_EQ);
                if (eq < 0) goto fail;
                if (eq) { hit = e; break; }
            }
        }
        if (!hit) {
            c->misses++;
            /* its item (tensor, dst factor, dst chunks, placement): known, or the Python code's */
            PyObject *tensor = PyList_GET_ITEM(tnames, row[1]);
            if (!PyUnicode_Check(tensor)) { refuse = 1; goto done; }
            Py_hash_t ht = PyObject_Hash(tensor);
            if (ht == -1) goto fail;
            uint64_t hi = mix(mix(mix(mix(mix((uint64_t)ht, (uint64_t)hb), (uint32_t)row[3]), (uint32_t)row[6]),
                                  (uint32_t)row[7]), (uint64_t)scope);
            IEntry *item = NULL;
            size_t si = 0;
            if (c->itcap) {
                for (si = (size_t)hi & (c->itcap - 1); c->it[si].tensor; si = (si + 1) & (c->itcap - 1)) {
                    IEntry *e = &c->it[si];
                    if (e->hash != hi || e->df != row[3] || e->d0 != row[6] || e->dn != row[7] || e->scope != scope
                        || !same_str(e->tensor, tensor))
                        continue;
                    int eq = e->bind == bind ? 1 : PyObject_RichCompareBool(e->bind, bind, Py_EQ);
                    if (eq < 0) goto fail;
                    if (eq) { item = e; break; }
                }
            }
            if (!item) {
                int code;
                PyObject *place, *place_repr;
                if (c->places) {  /* interned here (first_transfer) */
                    if (first_transfer(c, tensor, row[3], row[6], row[7], scope, bind, &code, &place, &place_repr))
                        goto fail;
                } else {  /* by the Python code */
                    PyObject *r = PyObject_CallFunction(c->new_transfer, "OiiiiO", tensor, row[3], row[6], row[7],
                                                        scope, bind);
                    if (!r) goto fail;
                    if (!PyTuple_Check(r) || PyTuple_GET_SIZE(r) != 3 || !PyUnicode_Check(PyTuple_GET_ITEM(r, 2))
                        || as_int(PyTuple_GET_ITEM(r, 0), &code)) {
                        Py_DECREF(r);
                        if (!PyErr_Occurred())
                            PyErr_SetString(PyExc_TypeError, "new_transfer: (code, placement, placement repr) expected");
                        goto fail;
                    }
                    place = Py_NewRef(PyTuple_GET_ITEM(r, 1));
                    place_repr = Py_NewRef(PyTuple_GET_ITEM(r, 2));
                    Py_DECREF(r);
                }
                if (2 * (c->itn + 1) > c->itcap && it_grow(c)) { Py_DECREF(place); Py_DECREF(place_repr); goto fail; }
                si = (size_t)hi & (c->itcap - 1);
                while (c->it[si].tensor) si = (si + 1) & (c->itcap - 1);
                item = &c->it[si];
                item->hash = hi; item->tensor = Py_NewRef(tensor); item->bind = Py_NewRef(bind);
                item->df = row[3]; item->d0 = row[6]; item->dn = row[7]; item->scope = scope; item->code = code;
                item->place = place;
                item->place_repr = place_repr;
                c->itn++;
            }
            /* its entry's text: transfer_text(name, kind, tensor, sf, df, src, transfer_tail) */
            PyObject *nrep = PyObject_Repr(name), *trep = PyObject_Repr(tensor), *entry = NULL;
            char *src = malloc((size_t)row[5] * 13 + 4), *dst = malloc((size_t)row[7] * 13 + 4);
            if (nrep && trep && src && dst) {
                run_text(src, row[4], row[5]);
                run_text(dst, row[6], row[7]);
                entry = entry_text(nrep, row[0] == 0 ? "concat" : "split", trep, row[2], row[3], src, dst,
                                   item->place_repr);
            } else if (!PyErr_Occurred()) {
                PyErr_NoMemory();
            }
            free(src); free(dst); Py_XDECREF(trep);
            if (!entry) { Py_XDECREF(nrep); goto fail; }
            size_t s = (size_t)h & (c->tcap - 1);
            while (c->t[s].name) s = (s + 1) & (c->tcap - 1);
            TEntry *e = &c->t[s];
            e->hash = h; e->name = Py_NewRef(name); e->bind = Py_NewRef(bind);
            memcpy(e->row, row, sizeof(e->row));
            e->scope = scope; e->code = item->code;
            e->place = Py_NewRef(item->place); e->entry = entry; e->name_repr = nrep;
            c->tn++;
            hit = e;
        } else {
            c->hits++;
        }
        tent[j] = hit;
        PyTuple_SET_ITEM(places, j, Py_NewRef(hit->place));
    }
    /* 3. steps, in the order; the order's text */
    sb = PyByteArray_FromStringAndSize(NULL, (Py_ssize_t)sizeof(int) * L);
    if (!sb) goto fail;
    int *scodes = (int *)PyByteArray_AS_STRING(sb);
    /* each group's and transfer's step codes by name (room for all first: the entries are pointed to) */
    while (2 * (c->sn + (size_t)(G + T)) > c->scap) if (s_grow(c)) goto fail;
    gse = malloc(sizeof(SEntry *) * (size_t)(G + T + 1));
    if (!gse) { PyErr_NoMemory(); goto fail; }
    for (Py_ssize_t i = 0; i < G; i++)
        if (!(gse[i] = s_find(c, 0, PyTuple_GET_ITEM(flat, i * NF)))) goto fail;
    for (Py_ssize_t j = 0; j < T; j++)
        if (!(gse[G + j] = s_find(c, 1, PyList_GET_ITEM(names, j)))) goto fail;
    for (Py_ssize_t k = 0; k < L; k++) {
        int o = owner[2 * k], ch = owner[2 * k + 1];
        PyObject *node = PyList_GET_ITEM(nodes, k);
        SEntry *se = o >= 0 ? gse[o] : gse[G + (-1 - o)];
        /* the node is (kind, that name, chunk): else the Python code */
        if (!PyTuple_Check(node) || PyTuple_GET_SIZE(node) != 3 || !PyUnicode_Check(PyTuple_GET_ITEM(node, 0))
            || !PyUnicode_Check(PyTuple_GET_ITEM(node, 1))
            || !same_str(PyTuple_GET_ITEM(node, 0), o >= 0 ? s_g : s_t)
            || !same_str(PyTuple_GET_ITEM(node, 1), se->name)) {
            refuse = 1; goto done;
        }
        int nch;
        if (as_int(PyTuple_GET_ITEM(node, 2), &nch)) goto fail;
        if (nch < 0 || nch > (1 << 20) || (o >= 0 && nch != ch)) { refuse = 1; goto done; }
        int *slot = s_slot(se, nch);
        if (!slot) goto fail;
        if (*slot < 0) {
            PyObject *r = PyObject_CallFunctionObjArgs(c->step_code, node, NULL);
            if (!r) goto fail;
            int v;
            int bad = as_int(r, &v);
            Py_DECREF(r);
            if (bad) goto fail;
            slot = s_slot(se, nch);  /* (the same entry: the table does not move here) */
            *slot = v;
        }
        scodes[k] = *slot;
        if (o >= 0) {
            GInfo *gi = &c->info[gcodes[o]];
            if (!gi->step_text[ch]) {
                gi->step_text[ch] = step_text(gi->first_repr, ch);
                if (!gi->step_text[ch]) goto fail;
            }
            pieces[k] = gi->step_text[ch];
        } else {
            pieces[k] = tent[-1 - o]->name_repr;
        }
    }
    /* the text: (batch, groups by ops, transfers by name, order) */
    for (Py_ssize_t i = 0; i < G; i++) idx[i] = (int)i;
    {
        int tie = 0;
        sort_groups(c, gcodes, idx, (int)G, &tie);
        if (tie) { refuse = 1; goto done; }
    }
    parts = PyList_New(0);
    if (!parts) goto fail;
    if (PyList_Append(parts, s_open)) goto fail;
    tmp = PyObject_Repr(batch);
    if (!tmp || PyList_Append(parts, tmp)) goto fail;
    Py_CLEAR(tmp);
    if (PyList_Append(parts, s_sep)) goto fail;
    {
        PyObject **gp = malloc(sizeof(PyObject *) * (size_t)(G ? G : 1));
        if (!gp) { PyErr_NoMemory(); goto fail; }
        for (Py_ssize_t i = 0; i < G; i++) gp[i] = c->info[gcodes[idx[i]]].text;
        int bad = append_tuple(parts, gp, G);
        free(gp);
        if (bad || PyList_Append(parts, s_sep)) goto fail;
    }
    {
        PyObject **tp = malloc(sizeof(PyObject *) * (size_t)(T ? T : 1));
        if (!tp) { PyErr_NoMemory(); goto fail; }
        for (Py_ssize_t j = 0; j < T; j++) tp[j] = tent[tidx[j]]->entry;
        int bad = append_tuple(parts, tp, T);
        free(tp);
        if (bad || PyList_Append(parts, s_sep)) goto fail;
    }
    if (append_tuple(parts, pieces, L) || PyList_Append(parts, s_close)) goto fail;
    text = PyUnicode_Join(s_empty, parts);
    if (!text) goto fail;
    gb = PyByteArray_FromStringAndSize((const char *)gcodes, (Py_ssize_t)sizeof(int) * G);
    tb = PyByteArray_FromStringAndSize(NULL, (Py_ssize_t)sizeof(int) * T);
    if (!gb || !tb) goto fail;
    for (Py_ssize_t j = 0; j < T; j++) ((int *)PyByteArray_AS_STRING(tb))[j] = tent[j]->code;
    result = PyTuple_Pack(5, gb, tb, sb, text, places);
    goto done;
fail:
    Py_CLEAR(result);
    refuse = 0;
done:
    if (refuse && !PyErr_Occurred()) result = Py_NewRef(Py_None);
    Py_XDECREF(text); Py_XDECREF(places); Py_XDECREF(parts); Py_XDECREF(tmp);
    Py_XDECREF(gb); Py_XDECREF(tb); Py_XDECREF(sb); Py_XDECREF(opsref); Py_XDECREF(gplaces);
    free(owner); free(gcodes); free(idx); free(tidx); free(tent); free(gse); free(sc); free(pieces);
    return result;
}

static PyObject *Cache_stats(Cache *c, PyObject *Py_UNUSED(ignored)) {
    return Py_BuildValue("{s:L,s:L,s:L,s:n,s:n,s:n,s:n}", "hits", c->hits, "misses", c->misses,
                         "firsts", c->firsts,
                         "groups", (Py_ssize_t)c->gn, "transfers", (Py_ssize_t)c->tn,
                         "items", (Py_ssize_t)c->itn, "names", (Py_ssize_t)c->sn);
}

/* the value table's attribute `name`, of `type` (a new reference) */
static PyObject *table_attr(PyObject *table, const char *name, PyTypeObject *type) {
    PyObject *v = PyObject_GetAttrString(table, name);
    if (v && !Py_IS_TYPE(v, type)) {
        PyErr_Format(PyExc_TypeError, "first: the table's %s is not a %s", name, type->tp_name);
        Py_CLEAR(v);
    }
    return v;
}

#define FIRST_REFS(X) X(places) X(place_type) X(group_type) X(item_type) X(scope_names) X(t_groups) \
    X(place_fields) X(group_fields) X(item_fields) \
    X(t_group_ops) X(t_group_first) X(t_group_places) X(t_ops) X(t_placements) X(t_ops_codes)           \
    X(t_place_codes) X(t_group_codes) X(t_transfers) X(t_transfer_codes)

static int Cache_init(Cache *c, PyObject *args, PyObject *kw) {
    static char *kwlist[] = {"new_group", "group_info", "new_transfer", "step_code", "limit", "first", NULL};
    PyObject *a, *b, *d, *e, *first = Py_None;
    Py_ssize_t limit = 32768;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "OOOO|nO", kwlist, &a, &b, &d, &e, &limit, &first)) return -1;
    if (limit < 1) { PyErr_SetString(PyExc_ValueError, "limit must be >= 1"); return -1; }
    if (c->places || c->gn || c->tn || c->itn || c->sn || c->rn || c->icap) {
        PyErr_SetString(PyExc_RuntimeError, "a Cache is initialised once");
        return -1;
    }
    Py_XSETREF(c->new_group, Py_NewRef(a));
    Py_XSETREF(c->group_info, Py_NewRef(b));
    Py_XSETREF(c->new_transfer, Py_NewRef(d));
    Py_XSETREF(c->step_code, Py_NewRef(e));
    c->limit = limit;
    if (first == Py_None) return 0;
    /* (places dict, Placement, GroupSpec, TransferItem, scope names by code, value table) */
    PyObject *places, *pt, *gt, *itt, *names, *table, *made = Py_None;
    if (!PyArg_ParseTuple(first, "O!OOOO!O|O;first: (places, Placement, GroupSpec, TransferItem, scope names, table"
                          "[, field names of the three or None each])",
                          &PyDict_Type, &places, &pt, &gt, &itt, &PyTuple_Type, &names, &table, &made))
        return -1;
    PyObject *fields[3] = {NULL, NULL, NULL};
    if (made != Py_None) {
        if (!PyTuple_Check(made) || PyTuple_GET_SIZE(made) != 3) {
            PyErr_SetString(PyExc_TypeError, "first: three field-name tuples (or None) expected");
            return -1;
        }
        PyObject *types[3] = {pt, gt, itt};
        for (int k = 0; k < 3; k++) {
            PyObject *f = PyTuple_GET_ITEM(made, k);
            if (f == Py_None) continue;
            if (!PyType_Check(types[k]) || ((PyTypeObject *)types[k])->tp_new != PyBaseObject_Type.tp_new
                || !PyTuple_Check(f)) {
                PyErr_SetString(PyExc_TypeError, "first: field names for a type object.__new__ makes");
                return -1;
            }
            for (Py_ssize_t j = 0; j < PyTuple_GET_SIZE(f); j++)
                if (!PyUnicode_Check(PyTuple_GET_ITEM(f, j))) {
                    PyErr_SetString(PyExc_TypeError, "first: field names are str");
                    return -1;
                }
            fields[k] = f;
        }
    }
    if (PyTuple_GET_SIZE(names) != 3 || !PyUnicode_Check(PyTuple_GET_ITEM(names, 0))
        || !PyUnicode_Check(PyTuple_GET_ITEM(names, 1)) || !PyUnicode_Check(PyTuple_GET_ITEM(names, 2))) {
        PyErr_SetString(PyExc_TypeError, "first: three scope names expected");
        return -1;
    }
    PyObject *lists[6] = {NULL}, *dicts[5] = {NULL};
    static const char *ln[6] = {"groups", "group_ops", "group_first", "group_places", "ops", "placements"};
    static const char *dn[5] = {"_ops_codes", "_place_codes", "_group_codes", "transfers", "_transfer_codes"};
    int bad = 0;
    for (int k = 0; k < 6 && !bad; k++) bad = !(lists[k] = table_attr(table, ln[k], &PyList_Type));
    for (int k = 0; k < 5 && !bad; k++)
        bad = !(dicts[k] = table_attr(table, dn[k], k == 3 ? &PyList_Type : &PyDict_Type));
    if (bad) {
        for (int k = 0; k < 6; k++) Py_XDECREF(lists[k]);
        for (int k = 0; k < 5; k++) Py_XDECREF(dicts[k]);
        return -1;
    }
    c->places = Py_NewRef(places); c->place_type = Py_NewRef(pt); c->group_type = Py_NewRef(gt);
    c->item_type = Py_NewRef(itt); c->scope_names = Py_NewRef(names);
    c->place_fields = Py_XNewRef(fields[0]); c->group_fields = Py_XNewRef(fields[1]);
    c->item_fields = Py_XNewRef(fields[2]);
    c->t_groups = lists[0]; c->t_group_ops = lists[1]; c->t_group_first = lists[2]; c->t_group_places = lists[3];
    c->t_ops = lists[4]; c->t_placements = lists[5];
    c->t_ops_codes = dicts[0]; c->t_place_codes = dicts[1]; c->t_group_codes = dicts[2]; c->t_transfers = dicts[3];
    c->t_transfer_codes = dicts[4];
    return 0;
}

static int Cache_traverse(Cache *c, visitproc visit, void *arg) {
    Py_VISIT(c->new_group); Py_VISIT(c->group_info); Py_VISIT(c->new_transfer); Py_VISIT(c->step_code);
#define VISIT_REF(f) Py_VISIT(c->f);
    FIRST_REFS(VISIT_REF)
    return 0;
}

static int Cache_clear_refs(Cache *c) {
    Py_CLEAR(c->new_group); Py_CLEAR(c->group_info); Py_CLEAR(c->new_transfer); Py_CLEAR(c->step_code);
#define CLEAR_REF(f) Py_CLEAR(c->f);
    FIRST_REFS(CLEAR_REF)
    return 0;
}

static void Cache_dealloc(Cache *c) {
    PyObject_GC_UnTrack(c);
    Cache_clear_refs(c);
    g_clear(c); t_clear(c); s_clear(c); it_clear(c); info_clear(c); r_clear(c);
    Py_TYPE(c)->tp_free((PyObject *)c);
}

static PyMethodDef Cache_methods[] = {
    {"encode", (PyCFunction)Cache_encode, METH_VARARGS, "codes, transfer placements and text of a decode"},
    {"stats", (PyCFunction)Cache_stats, METH_NOARGS, "hits, misses and entries (for tests, benches)"},
    {NULL, NULL, 0, NULL}};

static PyTypeObject CacheType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "search_space._ccodes.Cache",
    .tp_basicsize = sizeof(Cache),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC,
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)Cache_init,
    .tp_dealloc = (destructor)Cache_dealloc,
    .tp_traverse = (traverseproc)Cache_traverse,
    .tp_clear = (inquiry)Cache_clear_refs,
    .tp_methods = Cache_methods,
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_ccodes", NULL, -1, NULL, NULL, NULL, NULL, NULL};

PyMODINIT_FUNC PyInit__ccodes(void) {
    if (PyType_Ready(&CacheType) < 0) return NULL;
    if (!s_open && !(s_open = PyUnicode_InternFromString("("))) return NULL;
    if (!s_close && !(s_close = PyUnicode_InternFromString(")"))) return NULL;
    if (!s_sep && !(s_sep = PyUnicode_InternFromString(", "))) return NULL;
    if (!s_one && !(s_one = PyUnicode_InternFromString(",)"))) return NULL;
    if (!s_empty && !(s_empty = PyUnicode_InternFromString(""))) return NULL;
    if (!s_g && !(s_g = PyUnicode_InternFromString("g"))) return NULL;
    if (!s_t && !(s_t = PyUnicode_InternFromString("t"))) return NULL;
    if (!s_ops && !(s_ops = PyUnicode_InternFromString("ops"))) return NULL;
    PyObject *m = PyModule_Create(&module);
    if (!m) return NULL;
    if (PyModule_AddObjectRef(m, "Cache", (PyObject *)&CacheType) < 0) { Py_DECREF(m); return NULL; }
    return m;
}
