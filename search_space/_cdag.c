/* The compiled chunk DAG of search-space decoding (search_space/_cderive.py drives it), and two
 * smaller pieces of pass 1: the blocks read from a vector (blocks(), search_space._build.read_blocks)
 * and op sets' class keys (class_tables()/class_key(), search_space._cclass.class_key).
 *
 * Pass 2 of decoding (search_space/_build.py: Decoding.derive, then the order of
 * search_space/_order.py) over integer tables: the transfers the groups need, the
 * chunk DAG, the output nodes and the execution order. It mirrors, function by
 * function and in the same order (so transfers get the same names and the DAG the
 * same insertion order):
 *
 *   compiler.derive.derive_transfers  -> derive() with provide() / add_transfer()
 *   compiler.graph.dfs_postorder      -> postorder()
 *   search_space._order.depth_order   -> depth_order()
 *   search_space._order.breadth_order -> breadth_order()
 *
 * It is specific to decoding: the draft groups' chunks are all placed in DDR
 * (Decoding.derive), so every transfer's default placement
 * (compiler.derive.default_transfer_placement) is DDR on the consumer chunk's cores,
 * else the first source group chunk's, else core 0; the glue builds the Placement.
 *
 * Nothing here decides a number: the tables (tensor codes, batched flags, producer
 * ops, each op set's inputs and outputs from compiler.derive.group_io) come from the
 * Python definitions (search_space/_cderive.py).
 *
 * derive(groups, n_ops, n_tensors, graph_outputs, order, lookahead, topo, tnodes, known, ring,
 *        transfer_type, places, placement_type, tensor_names[, gout])
 *   groups: sequence of (nodes, inputs, outputs, ops, binds): nodes the group's chunk nodes
 *           ("g", name, chunk), one per chunk (the split); inputs a flat tuple of
 *           (tensor code, batched, producer op or -1) triples; outputs tensor codes; binds
 *           one core binding per chunk (a tuple of core tuples, shared: its identity is
 *           part of a key)
 *   graph_outputs: flat tuple of (tensor code, batched, producer op) triples
 *   order: 0 = depth (with lookahead), 1 = breadth (topo: group indices)
 *   tnodes: [concat nodes, split nodes], the space's interned ("t", "<kind>_<k>", 0) node
 *           tuples by k, appended to as needed (so no call builds a node or a name twice)
 *   known: the space's transfer values by key (kind 0 concat / 1 split, number, tensor code,
 *          src factor, dst factor, first src chunk, src chunks, first dst chunk, dst chunks,
 *          id of the binding: the consumer chunk's, else the first source group chunk's,
 *          else `ring`); a transfer not known is made here (transfer_type, a frozen
 *          dataclass, its fields set as its __init__ sets them; its placement the shared
 *          places[("DDR", binding)], made with placement_type when missing) and added;
 *          None: every transfer is made anew (search_space/_cderive.py: on the models
 *          measured, 97-99 % of a decode's transfers were not known, and the table only
 *          kept them alive)
 *   tensor_names: the tensor name of each code
 * -> (transfers, deps, outs, order, reads): transfers in the final order; deps a dict
 *    node -> list of nodes (the Python code's insertion order); outs the output nodes;
 *    order the nodes in order; reads per order position the positions of its
 *    dependencies (lazy: packed as bytes, int32: the count of steps, then per step its count
 *    and its reads; what walk_rows in _cwalk.c reads). Nothing is built that an earlier call built: the nodes are the given
 *    tuples, the transfers the known values. With gout (per group the code of its result):
 *    a sixth item, what the compiled walk reads of the order and the transfers
 *    (walk_index below; search_space/_ccore.py, _packed_rows).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include "_cutil.h"
#include <stdlib.h>
#include <string.h>
#include <limits.h>

enum { CONCAT = 0, SPLIT = 1 };

typedef struct { int n, cap; int *v; } IntVec;

/* a vector's memory is the call's arena (grown by a copy: the old array stays until the
 * call ends): no malloc, realloc or free per vector */
static int iv_push(Arena *ar, IntVec *a, int x) {
    if (a->n == a->cap) {
        int cap = a->cap ? a->cap * 2 : 4;
        if (cap < 0) return -1;
        int *v = ar_alloc(ar, sizeof(int) * (size_t)cap);
        if (!v) return -1;
        if (a->n) memcpy(v, a->v, sizeof(int) * (size_t)a->n);
        a->v = v;
        a->cap = cap;
    }
    a->v[a->n++] = x;
    return 0;
}

typedef struct { int f, c, node; } Prov;
typedef struct { int n, cap; Prov *v; } ProvVec;

typedef struct {
    int kind, tensor, sf, df;
    int s0, sn, d0, dn;  /* source chunks s0 .. s0 + sn - 1, destination chunks d0 .. */
    int bind_g, bind_c;
} Tr;

typedef struct {
    int n_groups, n_tensors, n_ops, n_group_nodes;
    int *split, *gbase;           /* per group: split, first node id */
    int *gof;                     /* per group node: its group */
    int *owner;                   /* per op: group index or -1 */
    unsigned char *batched;       /* per tensor code */
    int *prod;                    /* per tensor code: producer op or -1 */
    ProvVec *prov;                /* per tensor code: providers (f, c) -> node */
    IntVec *deps;                 /* per node */
    IntVec ins;                   /* nodes in the deps dict's insertion order */
    Tr *tr;
    int n_tr, cap_tr;
    int err;
    Arena ar;                     /* every array of the call (ar_free frees them at once) */
} D;

/* providers.get((t, f, c)): the node, or -1 */
static int prov_get(D *d, int t, int f, int c) {
    ProvVec *p = &d->prov[t];
    for (int i = 0; i < p->n; i++)
        if (p->v[i].f == f && p->v[i].c == c) return p->v[i].node;
    return -1;
}

/* providers[(t, f, c)] = node */
static void prov_set(D *d, int t, int f, int c, int node) {
    ProvVec *p = &d->prov[t];
    for (int i = 0; i < p->n; i++)
        if (p->v[i].f == f && p->v[i].c == c) { p->v[i].node = node; return; }
    if (p->n == p->cap) {
        int cap = p->cap ? p->cap * 2 : 4;
        Prov *v = ar_alloc(&d->ar, sizeof(Prov) * (size_t)cap);
        if (!v) { d->err = 1; return; }
        if (p->n) memcpy(v, p->v, sizeof(Prov) * (size_t)p->n);
        p->v = v;
        p->cap = cap;
    }
    p->v[p->n].f = f;
    p->v[p->n].c = c;
    p->v[p->n].node = node;
    p->n++;
}

static int group_of_tensor(D *d, int t) {  /* producer_group.get(t) */
    int op = d->prod[t];
    return op >= 0 && op < d->n_ops ? d->owner[op] : -1;
}

static int provide(D *d, int t, int f, int c, int cg);

/* derive_transfers._add: one split/concat of t from sf to df chunks; bind (g, c) is
 * the consumer chunk's placement (_at(consumers, j)), g = -1 when there is none */
static void add_transfer(D *d, int kind, int t, int sf, int df, int s0, int s1, int d0, int d1,
                         int bind_g, int bind_c) {
    if (d->err) return;
    if (d->n_tr == d->cap_tr) {
        int cap = d->cap_tr ? d->cap_tr * 2 : 16;
        if (cap > INT_MAX / 2 - d->n_group_nodes) { d->err = 1; return; }
        Tr *v = ar_alloc(&d->ar, sizeof(Tr) * (size_t)cap);
        IntVec *dv = ar_alloc(&d->ar, sizeof(IntVec) * (size_t)(d->n_group_nodes + cap));
        if (!v || !dv) { d->err = 1; return; }
        if (d->n_tr) memcpy(v, d->tr, sizeof(Tr) * (size_t)d->n_tr);
        memcpy(dv, d->deps, sizeof(IntVec) * (size_t)(d->n_group_nodes + d->cap_tr));
        memset(dv + d->n_group_nodes + d->cap_tr, 0, sizeof(IntVec) * (size_t)(cap - d->cap_tr));
        d->tr = v;
        d->deps = dv;
        d->cap_tr = cap;
    }
    int tmp = d->n_tr++;  /* the counter advances before the sources are provided */
    Tr *tr = &d->tr[tmp];
    memset(tr, 0, sizeof(Tr));
    tr->kind = kind; tr->tensor = t; tr->sf = sf; tr->df = df;
    tr->s0 = s1 > s0 ? s0 : 0; tr->sn = s1 > s0 ? s1 - s0 : 0;
    tr->d0 = d1 > d0 ? d0 : 0; tr->dn = d1 > d0 ? d1 - d0 : 0;
    int node = d->n_group_nodes + tmp;
    int first_g = -1, first_c = 0;  /* src_places[0]: the first source that is a group chunk */
    for (int i = s0; i < s1; i++) {
        int n = provide(d, t, sf, i, -1);
        if (d->err) return;
        if (n < 0) continue;
        if (iv_push(&d->ar, &d->deps[node], n)) { d->err = 1; return; }
        if (first_g < 0 && n < d->n_group_nodes) {
            int g = d->gof[n];
            first_g = g;
            first_c = n - d->gbase[g];
        }
    }
    if (iv_push(&d->ar, &d->ins, node)) { d->err = 1; return; }
    tr = &d->tr[tmp];  /* provide() may have grown the array */
    if (bind_g >= 0) { tr->bind_g = bind_g; tr->bind_c = bind_c; }
    else if (first_g >= 0) { tr->bind_g = first_g; tr->bind_c = first_c; }
    else { tr->bind_g = -1; tr->bind_c = 0; }
    for (int c = d0; c < d1; c++) prov_set(d, t, df, c, node);
}

/* derive_transfers.provide: the node providing chunk c of t cut f ways, -1: None
 * (a model input, always there); cg: the consumer group (_at(g.chunks, j)), -1: None */
static int provide(D *d, int t, int f, int c, int cg) {
    if (d->err) return -1;
    int pg = group_of_tensor(d, t);
    if (!d->batched[t]) return pg < 0 ? -1 : d->gbase[pg];
    int src_f = pg >= 0 ? d->split[pg] : 1;
    if (f == src_f) return prov_get(d, t, f, c);
    int hit = prov_get(d, t, f, c);
    if (hit >= 0) return hit;
#define AT_G(j) ((cg >= 0 && (j) < d->split[cg]) ? cg : -1)
    if (src_f % f == 0) {
        int r = src_f / f;
        for (int j = 0; j < f; j++)
            add_transfer(d, CONCAT, t, src_f, f, j * r, (j + 1) * r, j, j + 1, AT_G(j), j);
    } else if (f % src_f == 0) {
        int r = f / src_f;
        for (int i = 0; i < src_f; i++)
            add_transfer(d, SPLIT, t, src_f, f, i, i + 1, i * r, (i + 1) * r, AT_G(i * r), i * r);
    } else {
        if (prov_get(d, t, 1, 0) < 0)
            add_transfer(d, CONCAT, t, src_f, 1, 0, src_f, 0, 1, AT_G(0), 0);
        add_transfer(d, SPLIT, t, 1, f, 0, 1, 0, f, AT_G(0), 0);
    }
#undef AT_G
    return prov_get(d, t, f, c);
}

/* compiler.graph.dfs_postorder over the nodes (roots first, then the dict's keys) */
static int postorder(D *d, const int *roots, int n_roots, int n_nodes, int lookahead,
                     int *out, int *n_out) {
    unsigned char *seen = ar_calloc(&d->ar, n_nodes, 1);
    int *st_n = ar_alloc(&d->ar, sizeof(int) * (size_t)(n_nodes + 1));
    int *st_i = ar_alloc(&d->ar, sizeof(int) * (size_t)(n_nodes + 1));
    if (!seen || !st_n || !st_i) return -1;
    int k = 0;
    for (int r = 0; r < n_roots + d->ins.n; r++) {
        int root = r < n_roots ? roots[r] : d->ins.v[r - n_roots];
        if (seen[root]) continue;
        seen[root] = 1;
        int sp = 0;
        st_n[sp] = root; st_i[sp] = 0; sp++;
        while (sp) {
            sp--;
            int n = st_n[sp], i = st_i[sp];
            IntVec *ds = &d->deps[n];
            if (i < ds->n) {
                st_n[sp] = n; st_i[sp] = i + 1; sp++;
                int m = ds->v[i];
                if (!seen[m]) { seen[m] = 1; st_n[sp] = m; st_i[sp] = 0; sp++; }
                continue;
            }
            out[k++] = n;
            if (lookahead > 0 && n < d->n_group_nodes) {  /* search_space._order.depth_order */
                int g = d->gof[n];
                int c = n - d->gbase[g];
                int hi = c + 1 + lookahead < d->split[g] ? c + 1 + lookahead : d->split[g];
                for (int m = hi - 1; m >= c + 1; m--) {  /* reversed(ahead) */
                    int id = d->gbase[g] + m;
                    if (!seen[id]) { seen[id] = 1; st_n[sp] = id; st_i[sp] = 0; sp++; }
                }
            }
        }
    }
    *n_out = k;
    return 0;
}

/* search_space._order.breadth_order: every chunk of each group in topo order, each
 * after what it needs, then the dict's other keys */
static int breadth_order(D *d, const int *topo, int n_topo, int n_nodes, int *out, int *n_out) {
    unsigned char *placed = ar_calloc(&d->ar, n_nodes, 1);
    IntVec sn = {0, 0, NULL}, si = {0, 0, NULL};
    if (!placed) return -1;
    int k = 0, rc = 0;
    int n_seeds = 0;
    for (int q = 0; q < n_topo; q++) n_seeds += d->split[topo[q]];
    int sq = 0, srem = 0;  /* seed r is chunk srem of group topo[sq] (splits are >= 1) */
    for (int r = 0; r < n_seeds + d->ins.n && !rc; r++) {
        int root;
        if (r < n_seeds) {
            root = d->gbase[topo[sq]] + srem;
            if (++srem == d->split[topo[sq]]) { sq++; srem = 0; }
        } else {
            root = d->ins.v[r - n_seeds];
        }
        if (placed[root]) continue;
        sn.n = si.n = 0;
        if (iv_push(&d->ar, &sn, root) || iv_push(&d->ar, &si, 0)) { rc = -1; break; }
        while (sn.n) {
            sn.n--; si.n--;
            int m = sn.v[sn.n], i = si.v[si.n];
            IntVec *ds = &d->deps[m];
            if (i < ds->n) {
                if (iv_push(&d->ar, &sn, m) || iv_push(&d->ar, &si, i + 1)) { rc = -1; break; }
                if (!placed[ds->v[i]])
                    if (iv_push(&d->ar, &sn, ds->v[i]) || iv_push(&d->ar, &si, 0)) { rc = -1; break; }
                continue;
            }
            if (!placed[m]) { placed[m] = 1; out[k++] = m; }
        }
    }
    *n_out = k;
    return rc;
}

static int get_int(PyObject *seq, Py_ssize_t i, int *v) {
    long x = as_long(PySequence_Fast_GET_ITEM(seq, i));
    if (x == -1 && PyErr_Occurred()) return -1;
    if (x < INT_MIN || x > INT_MAX) { PyErr_SetString(PyExc_ValueError, "integer out of range"); return -1; }
    *v = (int)x;
    return 0;
}

/* item i of a list of ints: an int itself (no __index__ runs that could change the list) */
static int get_int_item(PyObject *list, Py_ssize_t i, int *v) {
    PyObject *o = PyList_GET_ITEM(list, i);
    if (!PyLong_Check(o)) { PyErr_SetString(PyExc_ValueError, "an int expected"); return -1; }
    long x = as_long(o);
    if (x == -1 && PyErr_Occurred()) return -1;
    if (x < INT_MIN || x > INT_MAX) { PyErr_SetString(PyExc_ValueError, "integer out of range"); return -1; }
    *v = (int)x;
    return 0;
}

static void free_d(D *d) { ar_free(&d->ar); }

/* tensor triples (code, batched, producer op) into the tables; the codes in `codes` */
static int read_triples(D *d, PyObject *flat, IntVec *codes) {  /* (codes: on d's arena) */
    Py_ssize_t n = PySequence_Fast_GET_SIZE(flat);
    if (n % 3) { PyErr_SetString(PyExc_ValueError, "tensor triples expected"); return -1; }
    for (Py_ssize_t i = 0; i < n; i += 3) {
        int t, b, p;
        if (get_int(flat, i, &t) || get_int(flat, i + 1, &b) || get_int(flat, i + 2, &p)) return -1;
        if (t < 0 || t >= d->n_tensors) { PyErr_SetString(PyExc_ValueError, "bad tensor code"); return -1; }
        d->batched[t] = (unsigned char)(b != 0);
        d->prod[t] = p;
        if (iv_push(&d->ar, codes, t)) { PyErr_NoMemory(); return -1; }
    }
    return 0;
}

/* the node ("t", "<kind>_<k>", 0) of the space's interned list (appended to as needed) */
static PyObject *transfer_node(PyObject *list, const char *kind, int k) {
    while (PyList_GET_SIZE(list) <= k) {
        PyObject *name = PyUnicode_FromFormat("%s_%zd", kind, PyList_GET_SIZE(list));
        if (!name) return NULL;
        PyUnicode_InternInPlace(&name);
        PyObject *node = Py_BuildValue("(sOi)", "t", name, 0);
        Py_DECREF(name);
        if (!node) return NULL;
        int rc = PyList_Append(list, node);
        Py_DECREF(node);
        if (rc) return NULL;
    }
    PyObject *node = PyList_GET_ITEM(list, k);
    if (!PyTuple_Check(node) || PyTuple_GET_SIZE(node) != 3) {
        PyErr_SetString(PyExc_ValueError, "transfer nodes: (\"t\", name, 0) tuples");
        return NULL;
    }
    return node;  /* borrowed: the list keeps it */
}

/* A new Transfer value (compiler.schedule.Transfer, a frozen dataclass): made as its
 * __init__ makes it, the fields set in the instance dict in field order, its placement the
 * space's shared Placement("DDR", bind) (made with place_type when not met before). */
static const char *TR_FIELDS[8] = {"name", "kind", "tensor", "src_factor", "dst_factor", "src_chunks",
                                   "dst_chunks", "placement"};
static PyObject *tr_field[8], *kind_str[2], *ddr_str;  /* interned once (module init) */

/* the chunk runs (first .. first + n - 1) of small transfers, made once per process and
 * shared by every Transfer that has them (tuples of ints: immutable, compared by value) */
enum { RUN_MAX = 64 };
static PyObject *run_cache[RUN_MAX][RUN_MAX + 1];

static PyObject *run_tuple(int first, int n) {
    int cached = first >= 0 && first < RUN_MAX && n >= 0 && n <= RUN_MAX;
    if (cached && run_cache[first][n]) return Py_NewRef(run_cache[first][n]);
    PyObject *t = PyTuple_New(n);
    if (!t) return NULL;
    for (int k = 0; k < n; k++) {
        PyObject *x = PyLong_FromLong(first + k);
        if (!x) { Py_DECREF(t); return NULL; }
        PyTuple_SET_ITEM(t, k, x);
    }
    if (cached) run_cache[first][n] = Py_NewRef(t);
    return t;
}

/* The transfer type must be compiler.schedule.Transfer itself (fetched once): make_transfer
 * makes it with object.__new__ and fills its instance dict, which on another type (one with
 * its own layout: np.ndarray, type) crashes (review). */
static PyObject *transfer_cls = NULL;

static int check_tr_type(PyObject *tr_type) {
    if (!transfer_cls) {
        PyObject *mod = PyImport_ImportModule("compiler.schedule");
        if (!mod) return -1;
        transfer_cls = PyObject_GetAttrString(mod, "Transfer");
        Py_DECREF(mod);
        if (!transfer_cls) return -1;
    }
    if (tr_type != transfer_cls) {
        PyErr_SetString(PyExc_TypeError, "the transfer type must be compiler.schedule.Transfer");
        return -1;
    }
    return 0;
}

static PyObject *make_transfer(PyObject *tr_type, PyObject *name, int kind, PyObject *tensor, int sf, int df,
                               int s0, int sn, int d0, int dn, PyObject *bind, PyObject *places,
                               PyObject *place_type, PyObject **place_slot) {
    PyObject *vals[8] = {NULL};
    PyObject *obj = NULL, *dict = NULL, *pkey = NULL, *empty = NULL;
    if (!PyUnicode_Check(tensor)) { PyErr_SetString(PyExc_ValueError, "a tensor name expected"); return NULL; }
    PyObject *place = place_slot ? *place_slot : NULL;
    if (place) {  /* this binding's placement, found by an earlier transfer of the call */
        Py_INCREF(place);
    } else {
        pkey = PyTuple_Pack(2, ddr_str, bind);
        if (!pkey) return NULL;
        place = PyDict_GetItemWithError(places, pkey);
        if (place) {
            Py_INCREF(place);
        } else {
            if (PyErr_Occurred()) goto fail;
            place = PyObject_CallFunctionObjArgs(place_type, ddr_str, bind, NULL);
            if (!place || PyDict_SetItem(places, pkey, place)) { Py_XDECREF(place); goto fail; }
        }
        if (place_slot) *place_slot = Py_NewRef(place);
    }
    vals[7] = place;
    Py_INCREF(name); vals[0] = name;
    vals[1] = kind_str[kind == CONCAT ? 0 : 1];
    Py_INCREF(vals[1]);
    Py_INCREF(tensor); vals[2] = tensor;
    vals[3] = PyLong_FromLong(sf);
    vals[4] = PyLong_FromLong(df);
    vals[5] = run_tuple(s0, sn);
    vals[6] = run_tuple(d0, dn);
    for (int k = 0; k < 8; k++) if (!vals[k]) goto fail;
    empty = PyTuple_New(0);
    if (!empty) goto fail;
    obj = PyBaseObject_Type.tp_new((PyTypeObject *)tr_type, empty, NULL);
    if (!obj) goto fail;
    dict = PyObject_GenericGetDict(obj, NULL);
    if (!dict || !PyDict_Check(dict)) {
        if (!PyErr_Occurred()) PyErr_SetString(PyExc_TypeError, "the transfer type has no instance dict");
        goto fail;
    }
    for (int k = 0; k < 8; k++)
        if (PyDict_SetItem(dict, tr_field[k], vals[k])) goto fail;
    Py_DECREF(dict);
    Py_DECREF(empty);
    Py_XDECREF(pkey);
    for (int k = 0; k < 8; k++) Py_DECREF(vals[k]);
    return obj;
fail:
    Py_XDECREF(obj); Py_XDECREF(dict); Py_XDECREF(empty); Py_XDECREF(pkey);
    for (int k = 0; k < 8; k++) Py_XDECREF(vals[k]);
    return NULL;
}

/* What the compiled walk reads of the order and the transfers (search_space/_ccore.py,
 * _step_rows; _cwalk.c's index() computes the same from the node tuples), when derive() is
 * given gout (per group the code of its result, GroupInfo.output: the group a transfer's
 * scope follows, Decoding.by_out, the last group of a code as a dict comprehension keeps):
 * (refs, is_out, asks, chunk_at, step_at, tprod, tpack): refs per order position (group,
 * chunk) or (-1 - transfer, 0) as int32 pairs; is_out one byte per position; asks the
 * answers in walk order (a group at its first chunk, -1 - producer at its first transfer
 * whose scope is free); chunk_at int32: G + 1 offsets (group g's chunks at [off[g], off[g+1]))
 * then each group's chunks' positions (0 when not in the order); step_at int32 per transfer
 * its position (-1 when not): both bytes, so a kept schedule's positions are two untracked
 * objects, not a list per group (search_space._crows._Positions); tprod per transfer its producer group,
 * -1 for a fixed one (an output node, or no group's result); tpack per transfer int32
 * (tensor code, dst factor, first dst chunk, dst chunks, binding group, binding chunk; group
 * -1: the ring), in the transfers' final order. */
enum { TPACK = 6 };
/* derive(..., lazy=1)'s packed transfers: per transfer int32 (kind, tensor code, src factor,
 * dst factor, first src chunk, src chunks, first dst chunk, dst chunks), in final order */
enum { TR_PACK = 8, MAX_RUNS = 1 << 21 };  /* (MAX_RUNS: make_transfers' chunk entries in all) */

static PyObject *walk_index(D *d, PyObject *gout, const int *order_v, int n_ord, const int *pos,
                            const int *tat, const IntVec *outs) {
    int G = d->n_groups, NT = d->n_tr, NN = d->n_group_nodes + d->n_tr;
    PyObject *refs = NULL, *io = NULL, *asks = NULL, *chunk_at = NULL, *step_at = NULL, *tprod = NULL;
    PyObject *tpack = NULL, *res = NULL;
    int *byout = NULL, *tp_v = NULL;
    unsigned char *seen = NULL, *fixed = NULL;
    if (PyList_GET_SIZE(gout) != G) {
        PyErr_SetString(PyExc_ValueError, "gout: one tensor code per group");
        return NULL;
    }
    byout = ar_calloc(&d->ar, d->n_tensors, sizeof(int));
    tp_v = ar_calloc(&d->ar, NT, sizeof(int));
    seen = ar_calloc(&d->ar, 2 * (Py_ssize_t)G, 1);
    fixed = ar_calloc(&d->ar, NT, 1);
    if (!byout || !tp_v || !seen || !fixed) { PyErr_NoMemory(); goto done; }
    for (int t = 0; t < d->n_tensors; t++) byout[t] = -1;
    for (int g = 0; g < G; g++) {
        int code;
        if (get_int_item(gout, g, &code)) goto done;
        if (code < 0 || code >= d->n_tensors) {
            PyErr_SetString(PyExc_ValueError, "gout: bad tensor code");
            goto done;
        }
        byout[code] = g;
    }
    for (int q = 0; q < outs->n; q++) {
        int n = outs->v[q];
        if (n >= d->n_group_nodes && n < NN) fixed[tat[n - d->n_group_nodes]] = 1;
    }
    for (int i = 0; i < NT; i++) {
        int j = tat[i];
        tp_v[j] = fixed[j] ? -1 : byout[d->tr[i].tensor];
    }
    refs = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)sizeof(int) * 2 * (n_ord ? n_ord : 1));
    io = PyBytes_FromStringAndSize(NULL, n_ord ? n_ord : 1);
    tpack = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)sizeof(int) * TPACK * (NT ? NT : 1));
    asks = PyList_New(0);
    {
        Py_ssize_t nch = 0;
        for (int g = 0; g < G; g++) nch += d->split[g];
        chunk_at = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)sizeof(int) * (G + 1 + nch));
    }
    step_at = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)sizeof(int) * (NT ? NT : 1));
    tprod = PyList_New(NT);
    if (!refs || !io || !tpack || !asks || !chunk_at || !step_at || !tprod) goto done;
    /* (none: one unused entry, zeroed: no uninitialised bytes reach Python) */
    if (!n_ord) memset(PyBytes_AS_STRING(refs), 0, sizeof(int) * 2);
    int *rf = (int *)PyBytes_AS_STRING(refs);
    unsigned char *iob = (unsigned char *)PyBytes_AS_STRING(io);
    int *pk = (int *)PyBytes_AS_STRING(tpack);
    memset(iob, 0, (size_t)(n_ord ? n_ord : 1));
    memset(pk, 0, sizeof(int) * TPACK * (size_t)(NT ? NT : 1));
    {
        int *ca = (int *)PyBytes_AS_STRING(chunk_at), at = G + 1;
        for (int g = 0; g < G; g++) {
            ca[g] = at;
            for (int c = 0; c < d->split[g]; c++) {
                int k = pos[d->gbase[g] + c];
                ca[at++] = k < 0 ? 0 : k;
            }
        }
        ca[G] = at;
    }
    int *sa = (int *)PyBytes_AS_STRING(step_at);
    if (!NT) sa[0] = -1;
    for (int i = 0; i < NT; i++) {
        int j = tat[i], k = pos[d->n_group_nodes + i];
        PyObject *p = PyLong_FromLong(tp_v[j]);
        if (!p) goto done;
        sa[j] = k < 0 ? -1 : k;
        PyList_SET_ITEM(tprod, j, p);
        Tr *tr = &d->tr[i];
        int *row = pk + (size_t)TPACK * (size_t)j;
        row[0] = tr->tensor;
        row[1] = tr->df;
        row[2] = tr->d0;
        row[3] = tr->dn;
        row[4] = tr->bind_g;
        row[5] = tr->bind_g >= 0 ? tr->bind_c : 0;
    }
    for (int k = 0; k < n_ord; k++) {
        int n = order_v[k];
        PyObject *a = NULL;
        if (n < d->n_group_nodes) {
            int g = d->gof[n];
            rf[2 * k] = g;
            rf[2 * k + 1] = n - d->gbase[g];
            if (!seen[g]) {
                seen[g] = 1;
                a = PyLong_FromLong(g);
                if (!a) goto done;
            }
        } else {
            int j = tat[n - d->n_group_nodes], p = tp_v[j];
            rf[2 * k] = -1 - j;
            rf[2 * k + 1] = 0;
            if (p >= 0 && !seen[G + p]) {
                seen[G + p] = 1;
                a = PyLong_FromLong(-1 - p);
                if (!a) goto done;
            }
        }
        if (a) {
            int rc = PyList_Append(asks, a);
            Py_DECREF(a);
            if (rc) goto done;
        }
    }
    for (int q = 0; q < outs->n; q++) {
        int k = pos[outs->v[q]];
        if (k >= 0 && k < n_ord) iob[k] = 1;
    }
    res = PyTuple_Pack(7, refs, io, asks, chunk_at, step_at, tprod, tpack);
done:
    Py_XDECREF(refs); Py_XDECREF(io); Py_XDECREF(asks); Py_XDECREF(chunk_at);
    Py_XDECREF(step_at); Py_XDECREF(tprod); Py_XDECREF(tpack);
    /* (byout, tp_v, seen, fixed: the call's arena) */
    return res;
}

static PyObject *py_derive(PyObject *self, PyObject *args) {
    PyObject *groups, *gouts, *topo_obj, *tnodes, *known, *ring, *tr_type, *places, *place_type, *tnames;
    PyObject *gout = Py_None;
    int n_ops, n_tensors, order, lookahead, lazy = 0;
    (void)self;
    if (!PyArg_ParseTuple(args, "OiiOiiOO!OOO!O!OO!|Oi", &groups, &n_ops, &n_tensors, &gouts, &order,
                          &lookahead, &topo_obj, &PyList_Type, &tnodes, &known, &ring,
                          &PyType_Type, &tr_type, &PyDict_Type, &places, &place_type, &PyList_Type, &tnames,
                          &gout, &lazy))
        return NULL;
    if (check_tr_type(tr_type)) return NULL;
    if (lazy && known != Py_None) {
        PyErr_SetString(PyExc_ValueError, "packed transfers (lazy) are not interned: known must be None");
        return NULL;
    }
    if (known != Py_None && !PyDict_Check(known)) {
        PyErr_SetString(PyExc_TypeError, "known: a dict of transfers by key, or None");
        return NULL;
    }
    if (gout != Py_None && !PyList_Check(gout)) {
        PyErr_SetString(PyExc_ValueError, "gout: a list of tensor codes, one per group");
        return NULL;
    }
    if (PyList_GET_SIZE(tnames) < n_tensors) {
        PyErr_SetString(PyExc_ValueError, "a tensor name per code expected");
        return NULL;
    }
    if (n_ops < 0 || n_tensors < 0) { PyErr_SetString(PyExc_ValueError, "negative table size"); return NULL; }
    if (PyList_GET_SIZE(tnodes) != 2 || !PyList_Check(PyList_GET_ITEM(tnodes, 0))
        || !PyList_Check(PyList_GET_ITEM(tnodes, 1))) {
        PyErr_SetString(PyExc_ValueError, "transfer nodes: [concat nodes, split nodes]");
        return NULL;
    }
    /* snapshots: a Placement made below (place_type) runs Python, which must not free what
     * this call still reads (the caller's groups and tensor names: review) */
    PyObject *gs = PySequence_Tuple(groups);
    if (!gs) return NULL;
    PyObject *tn = PyList_AsTuple(tnames);
    if (!tn) { Py_DECREF(gs); return NULL; }
    /* the transfer nodes met, held: node_obj borrows them while the space's lists may change */
    PyObject *keep = PyList_New(0);
    if (!keep) { Py_DECREF(gs); Py_DECREF(tn); return NULL; }
    PyObject *go = NULL, *tp = NULL, *result = NULL;
    PyObject *transfers = NULL, *deps = NULL, *outs_l = NULL, *ord_l = NULL, *reads_l = NULL;
    PyObject **place_of = NULL;  /* owned: per chunk node its binding's Placement */
    PyObject **node_obj = NULL;  /* borrowed: the groups' node tuples and the interned transfer nodes */
    PyObject **gin = NULL, **gbinds = NULL;
    IntVec *in_codes = NULL;
    IntVec out_codes = {0, 0, NULL}, outs = {0, 0, NULL}, go_codes = {0, 0, NULL};
    int *order_v = NULL, *num = NULL, *pos = NULL, *topo = NULL, *tat = NULL;
    PyObject *walk = NULL, *tr_packed = NULL, *tr_binds = NULL;
    int n_nodes = 0;
    D d;
    memset(&d, 0, sizeof(d));
    Py_ssize_t G_ = PySequence_Fast_GET_SIZE(gs);
    if (G_ > INT_MAX / 2) {
        PyErr_SetString(PyExc_ValueError, "too many groups");
        Py_DECREF(gs); Py_DECREF(tn); Py_DECREF(keep);
        return NULL;
    }
    int G = (int)G_;
    d.n_groups = G; d.n_ops = n_ops; d.n_tensors = n_tensors;
    d.split = ar_calloc(&d.ar, G, sizeof(int));
    d.gbase = ar_calloc(&d.ar, G, sizeof(int));
    d.owner = ar_calloc(&d.ar, n_ops, sizeof(int));
    d.batched = ar_calloc(&d.ar, n_tensors, 1);
    d.prod = ar_calloc(&d.ar, n_tensors, sizeof(int));
    d.prov = ar_calloc(&d.ar, n_tensors, sizeof(ProvVec));
    gin = ar_calloc(&d.ar, G, sizeof(PyObject *));
    gbinds = ar_calloc(&d.ar, G, sizeof(PyObject *));
    in_codes = ar_calloc(&d.ar, G, sizeof(IntVec));
    if (!d.split || !d.gbase || !d.owner || !d.batched || !d.prod || !d.prov || !gin || !gbinds
        || !in_codes) {
        PyErr_NoMemory();
        goto done;
    }
    for (int i = 0; i < n_ops; i++) d.owner[i] = -1;
    for (int t = 0; t < n_tensors; t++) d.prod[t] = -1;
    int base = 0;
    for (int g = 0; g < G; g++) {
        PyObject *row = PySequence_Fast_GET_ITEM(gs, g);
        if (!PyTuple_Check(row) || PyTuple_GET_SIZE(row) != 5 || !PyTuple_Check(PyTuple_GET_ITEM(row, 0))
            || !PyTuple_Check(PyTuple_GET_ITEM(row, 4))) {
            PyErr_SetString(PyExc_ValueError, "group: (node tuples, inputs, outputs, ops, binds)");
            goto done;
        }
        Py_ssize_t split = PyTuple_GET_SIZE(PyTuple_GET_ITEM(row, 0));
        if (split < 1) { PyErr_SetString(PyExc_ValueError, "split < 1"); goto done; }
        if (split > INT_MAX / 2 - base) { PyErr_SetString(PyExc_ValueError, "too many chunks"); goto done; }
        if (PyTuple_GET_SIZE(PyTuple_GET_ITEM(row, 4)) != split) {
            PyErr_SetString(PyExc_ValueError, "a core binding per chunk expected");
            goto done;
        }
        gbinds[g] = PyTuple_GET_ITEM(row, 4);
        d.split[g] = (int)split;
        d.gbase[g] = base;
        base += (int)split;
        gin[g] = PySequence_Tuple(PyTuple_GET_ITEM(row, 1));
        if (!gin[g] || read_triples(&d, gin[g], &in_codes[g])) goto done;
        PyObject *ops = PySequence_Tuple(PyTuple_GET_ITEM(row, 3));
        if (!ops) goto done;
        for (Py_ssize_t i = 0; i < PySequence_Fast_GET_SIZE(ops); i++) {
            int op;
            if (get_int(ops, i, &op)) { Py_DECREF(ops); goto done; }
            if (op >= 0 && op < n_ops) d.owner[op] = g;
        }
        Py_DECREF(ops);
        /* group_io outputs: every chunk of the group provides them */
        PyObject *outs_t = PySequence_Tuple(PyTuple_GET_ITEM(row, 2));
        if (!outs_t) goto done;
        for (Py_ssize_t i = 0; i < PySequence_Fast_GET_SIZE(outs_t); i++) {
            int t;
            if (get_int(outs_t, i, &t) || t < 0 || t >= n_tensors) {
                if (!PyErr_Occurred()) PyErr_SetString(PyExc_ValueError, "bad tensor code");
                Py_DECREF(outs_t);
                goto done;
            }
            if (iv_push(&d.ar, &out_codes, g) || iv_push(&d.ar, &out_codes, t)) { Py_DECREF(outs_t); PyErr_NoMemory(); goto done; }
        }
        Py_DECREF(outs_t);
    }
    d.n_group_nodes = base;
    d.deps = ar_calloc(&d.ar, base, sizeof(IntVec));
    d.gof = ar_calloc(&d.ar, base, sizeof(int));
    if (!d.deps || !d.gof) { PyErr_NoMemory(); goto done; }
    for (int g = 0; g < G; g++)
        for (int c = 0; c < d.split[g]; c++) d.gof[d.gbase[g] + c] = g;
    go = PySequence_Tuple(gouts);
    if (!go || read_triples(&d, go, &go_codes)) goto done;
    /* providers of the groups' outputs, in group order */
    for (int i = 0; i < out_codes.n; i += 2) {
        int g = out_codes.v[i], t = out_codes.v[i + 1];
        for (int c = 0; c < d.split[g]; c++) prov_set(&d, t, d.split[g], c, d.gbase[g] + c);
    }
    /* each group chunk's dependencies, in group order */
    for (int g = 0; g < G && !d.err; g++) {
        for (int c = 0; c < d.split[g] && !d.err; c++) {
            int node = d.gbase[g] + c;
            for (int i = 0; i < in_codes[g].n; i++) {
                int p = provide(&d, in_codes[g].v[i], d.split[g], c, g);
                if (d.err) break;
                if (p < 0) continue;
                int dup = 0;
                for (int q = 0; q < d.deps[node].n; q++) if (d.deps[node].v[q] == p) { dup = 1; break; }
                if (!dup && iv_push(&d.ar, &d.deps[node], p)) d.err = 1;
            }
            if (!d.err && iv_push(&d.ar, &d.ins, node)) d.err = 1;
        }
    }
    /* the output nodes */
    for (int i = 0; i < go_codes.n && !d.err; i++) {
        int t = go_codes.v[i];
        int p;
        if (d.batched[t]) {
            p = provide(&d, t, 1, 0, -1);
        } else {
            int pg = group_of_tensor(&d, t);
            p = prov_get(&d, t, pg >= 0 ? d.split[pg] : 1, 0);
        }
        if (p < 0) continue;
        int dup = 0;
        for (int q = 0; q < outs.n; q++) if (outs.v[q] == p) { dup = 1; break; }
        if (!dup && iv_push(&d.ar, &outs, p)) d.err = 1;
    }
    if (d.err) { PyErr_NoMemory(); goto done; }
    n_nodes = d.n_group_nodes + d.n_tr;
    order_v = ar_calloc(&d.ar, n_nodes, sizeof(int));
    num = ar_calloc(&d.ar, d.n_tr, sizeof(int));
    pos = ar_calloc(&d.ar, n_nodes, sizeof(int));
    node_obj = ar_calloc(&d.ar, n_nodes, sizeof(PyObject *));
    tat = ar_calloc(&d.ar, d.n_tr, sizeof(int));
    if (!order_v || !num || !pos || !node_obj || !tat) { PyErr_NoMemory(); goto done; }
    /* names: DFS post-order from the outputs (the guide's ListOps order), then the rest */
    int n_post = 0;
    if (postorder(&d, outs.v, outs.n, n_nodes, 0, order_v, &n_post)) { PyErr_NoMemory(); goto done; }
    int counts[2] = {0, 0};
    for (int i = 0; i < d.n_tr; i++) num[i] = -1;
    for (int i = 0; i < n_post; i++) {
        int n = order_v[i];
        if (n >= d.n_group_nodes) { int tmp = n - d.n_group_nodes; num[tmp] = counts[d.tr[tmp].kind]++; }
    }
    for (int i = 0; i < d.n_tr; i++) if (num[i] < 0) num[i] = counts[d.tr[i].kind]++;
    /* node objects: the groups' own tuples, the space's interned transfer nodes */
    for (int g = 0; g < G; g++) {
        PyObject *nodes = PyTuple_GET_ITEM(PySequence_Fast_GET_ITEM(gs, g), 0);
        for (int c = 0; c < d.split[g]; c++) node_obj[d.gbase[g] + c] = PyTuple_GET_ITEM(nodes, c);
    }
    /* per chunk node (and the ring, last) its binding's Placement once found: the space's
     * places dict is asked once per binding, not once per transfer */
    place_of = ar_calloc(&d.ar, d.n_group_nodes + 1, sizeof(PyObject *));
    transfers = PyList_New(d.n_tr);
    if (!place_of || !transfers) { if (!place_of) PyErr_NoMemory(); goto done; }
    if (lazy) {  /* packed (make_transfers builds them), with their bindings and names */
        tr_packed = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)sizeof(int) * TR_PACK * d.n_tr);  /* (none: b"") */
        tr_binds = PyTuple_New(d.n_tr);
        if (!tr_packed || !tr_binds) goto done;
    }
    for (int i = 0; i < d.n_tr; i++) {
        Tr *tr = &d.tr[i];
        const char *kind = tr->kind == CONCAT ? "concat" : "split";
        if (PyList_GET_SIZE(tnodes) != 2 || !PyList_Check(PyList_GET_ITEM(tnodes, tr->kind))) {
            PyErr_SetString(PyExc_ValueError, "transfer nodes: [concat nodes, split nodes]");
            goto done;  /* (changed by Python a Placement ran) */
        }
        PyObject *node = transfer_node(PyList_GET_ITEM(tnodes, tr->kind), kind, num[i]);
        if (!node || PyList_Append(keep, node)) goto done;
        node_obj[d.n_group_nodes + i] = node;
        /* transfers.sort(key=(kind, number)): concat_0.. then split_0.. */
        int at = tr->kind == CONCAT ? num[i] : counts[CONCAT] + num[i];
        tat[i] = at;
        int s0 = tr->s0, d0 = tr->d0;
        PyObject *bind = ring;
        PyObject **slot = &place_of[d.n_group_nodes];
        if (tr->bind_g >= 0) {
            if (tr->bind_c < 0 || tr->bind_c >= d.split[tr->bind_g]) {
                PyErr_SetString(PyExc_ValueError, "bad binding");
                goto done;
            }
            bind = PyTuple_GET_ITEM(gbinds[tr->bind_g], tr->bind_c);
            slot = &place_of[d.gbase[tr->bind_g] + tr->bind_c];
        }
        if (lazy) {
            int *row = (int *)PyBytes_AS_STRING(tr_packed) + (size_t)TR_PACK * (size_t)at;
            row[0] = tr->kind; row[1] = tr->tensor; row[2] = tr->sf; row[3] = tr->df;
            row[4] = s0; row[5] = tr->sn; row[6] = d0; row[7] = tr->dn;
            PyTuple_SET_ITEM(tr_binds, at, Py_NewRef(bind));
            PyList_SET_ITEM(transfers, at, Py_NewRef(PyTuple_GET_ITEM(node, 1)));  /* its name */
            continue;
        }
        if (known == Py_None) {  /* not interned: a new value */
            PyObject *t = make_transfer(tr_type, PyTuple_GET_ITEM(node, 1), tr->kind,
                                        PyTuple_GET_ITEM(tn, tr->tensor), tr->sf, tr->df, s0, tr->sn,
                                        d0, tr->dn, bind, places, place_type, slot);
            if (!t) goto done;
            PyList_SET_ITEM(transfers, at, t);
            continue;
        }
        /* the value's key: sources and destinations are runs (s0 .. s0 + n) */
        PyObject *key = PyTuple_New(10);
        if (!key) goto done;
        {
            const long kv[9] = {tr->kind, num[i], tr->tensor, tr->sf, tr->df, s0, tr->sn, d0, tr->dn};
            for (int q = 0; q < 10; q++) {
                PyObject *x = q < 9 ? PyLong_FromLong(kv[q]) : PyLong_FromVoidPtr(bind);
                if (!x) { Py_DECREF(key); goto done; }
                PyTuple_SET_ITEM(key, q, x);
            }
        }
        PyObject *hit = PyDict_GetItemWithError(known, key);
        if (hit) {
            Py_DECREF(key);
            Py_INCREF(hit);
            PyList_SET_ITEM(transfers, at, hit);
            continue;
        }
        if (PyErr_Occurred()) { Py_DECREF(key); goto done; }
        PyObject *t = make_transfer(tr_type, PyTuple_GET_ITEM(node, 1), tr->kind, PyTuple_GET_ITEM(tn, tr->tensor),
                                    tr->sf, tr->df, s0, tr->sn, d0, tr->dn, bind, places, place_type,
                                    slot);
        if (!t) { Py_DECREF(key); goto done; }
        PyList_SET_ITEM(transfers, at, t);
        int rc = PyDict_SetItem(known, key, t);
        Py_DECREF(key);
        if (rc) goto done;
    }
    outs_l = PyList_New(outs.n);
    if (!outs_l) goto done;
    if (lazy) {  /* the DAG packed (deps_of makes the dict): (node objects, int32 rows) */
        PyObject *nl = PyTuple_New(n_nodes);
        Py_ssize_t len = 0;
        for (int i = 0; i < d.ins.n; i++) len += 2 + d.deps[d.ins.v[i]].n;
        PyObject *flat = nl ? PyBytes_FromStringAndSize(NULL, (Py_ssize_t)sizeof(int) * len) : NULL;  /* (none: b"") */
        if (!flat) { Py_XDECREF(nl); goto done; }
        for (int i = 0; i < n_nodes; i++) PyTuple_SET_ITEM(nl, i, Py_NewRef(node_obj[i]));
        int *fv = (int *)PyBytes_AS_STRING(flat);
        for (int i = 0; i < d.ins.n; i++) {
            IntVec *ds = &d.deps[d.ins.v[i]];
            *fv++ = d.ins.v[i];
            *fv++ = ds->n;
            for (int k = 0; k < ds->n; k++) *fv++ = ds->v[k];
        }
        deps = PyTuple_Pack(2, nl, flat);
        Py_DECREF(nl); Py_DECREF(flat);
        if (!deps) goto done;
    } else if (!(deps = PyDict_New())) {
        goto done;
    }
    for (int i = 0; i < d.ins.n && !lazy; i++) {
        int n = d.ins.v[i];
        PyObject *l = PyList_New(d.deps[n].n);
        if (!l) goto done;
        for (int k = 0; k < d.deps[n].n; k++) {
            PyObject *o = node_obj[d.deps[n].v[k]];
            Py_INCREF(o);
            PyList_SET_ITEM(l, k, o);
        }
        int rc = PyDict_SetItem(deps, node_obj[n], l);
        Py_DECREF(l);
        if (rc) goto done;
    }
    for (int i = 0; i < outs.n; i++) {
        Py_INCREF(node_obj[outs.v[i]]);
        PyList_SET_ITEM(outs_l, i, node_obj[outs.v[i]]);
    }
    /* the order: depth-first (look-ahead 0 is the naming post-order itself) or breadth-first */
    int n_ord = n_post;
    if (order == 0 && lookahead > 0) {
        if (postorder(&d, outs.v, outs.n, n_nodes, lookahead, order_v, &n_ord)) { PyErr_NoMemory(); goto done; }
    } else if (order == 1) {
        tp = PySequence_Tuple(topo_obj);
        if (!tp) goto done;
        Py_ssize_t nt = PySequence_Fast_GET_SIZE(tp);
        topo = ar_calloc(&d.ar, nt, sizeof(int));
        if (!topo) { PyErr_NoMemory(); goto done; }
        for (Py_ssize_t i = 0; i < nt; i++)
            if (get_int(tp, i, &topo[i]) || topo[i] < 0 || topo[i] >= G) {
                if (!PyErr_Occurred()) PyErr_SetString(PyExc_ValueError, "bad topo");
                goto done;
            }
        if (breadth_order(&d, topo, (int)nt, n_nodes, order_v, &n_ord)) { PyErr_NoMemory(); goto done; }
    }
    ord_l = PyList_New(n_ord);
    if (!ord_l) goto done;
    for (int i = 0; i < n_ord; i++) {
        Py_INCREF(node_obj[order_v[i]]);
        PyList_SET_ITEM(ord_l, i, node_obj[order_v[i]]);
    }
    /* per order position, the positions of the steps it reads (CapacityWalk.reads) */
    for (int i = 0; i < n_nodes; i++) pos[i] = -1;
    for (int i = 0; i < n_ord; i++) pos[order_v[i]] = i;
    if (lazy) {  /* packed (int32): the count of steps, then per step its count and reads */
        size_t n_int = 1 + (size_t)n_ord;
        for (int i = 0; i < n_ord; i++) n_int += (size_t)d.deps[order_v[i]].n;
        if (n_int > (size_t)PY_SSIZE_T_MAX / sizeof(int)) { PyErr_NoMemory(); goto done; }
        reads_l = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)(n_int * sizeof(int)));
        if (!reads_l) goto done;
        int *rv = (int *)PyBytes_AS_STRING(reads_l);
        *rv++ = n_ord;
        for (int i = 0; i < n_ord; i++) {
            IntVec *ds = &d.deps[order_v[i]];
            *rv++ = ds->n;
            for (int k = 0; k < ds->n; k++) *rv++ = pos[ds->v[k]];
        }
    } else {
        if (!(reads_l = PyList_New(n_ord))) goto done;
        for (int i = 0; i < n_ord; i++) {
            IntVec *ds = &d.deps[order_v[i]];
            PyObject *l = PyList_New(ds->n);
            if (!l) goto done;
            PyList_SET_ITEM(reads_l, i, l);
            for (int k = 0; k < ds->n; k++) {
                PyObject *x = PyLong_FromLong(pos[ds->v[k]]);
                if (!x) goto done;
                PyList_SET_ITEM(l, k, x);
            }
        }
    }
    if (lazy) {  /* in the transfers' place: (packed rows, bindings, names) */
        PyObject *packed = PyTuple_Pack(3, tr_packed, tr_binds, transfers);
        if (!packed) goto done;
        Py_SETREF(transfers, packed);
    }
    if (gout != Py_None) {
        walk = walk_index(&d, gout, order_v, n_ord, pos, tat, &outs);
        if (!walk) goto done;
        result = PyTuple_Pack(6, transfers, deps, outs_l, ord_l, reads_l, walk);
    } else {
        result = PyTuple_Pack(5, transfers, deps, outs_l, ord_l, reads_l);
    }
done:
    Py_XDECREF(walk);
    Py_XDECREF(tr_packed); Py_XDECREF(tr_binds);
    if (place_of) for (int i = 0; i <= d.n_group_nodes; i++) Py_XDECREF(place_of[i]);
    Py_XDECREF(transfers); Py_XDECREF(deps); Py_XDECREF(outs_l); Py_XDECREF(ord_l);
    Py_XDECREF(reads_l);
    if (gin) for (int g = 0; g < G; g++) Py_XDECREF(gin[g]);
    Py_XDECREF(go); Py_XDECREF(tp);
    Py_DECREF(gs); Py_DECREF(tn); Py_DECREF(keep);
    free_d(&d);  /* every array above: the call's arena */
    return result;
}

/* make_transfers(packed, binds, names, tnames, tr_type, places, place_type): the Transfer
 * values derive(..., lazy=1) packed, made as derive() makes them (make_transfer): per
 * transfer its packed row (TR_PACK int32), its core binding and its name; tnames the
 * tensor names by code. Reads snapshots (tuples) of the caller's sequences: a Placement
 * made here runs Python, which must not free what is still read. */
static PyObject *py_make_transfers(PyObject *self, PyObject *args) {
    PyObject *packed, *binds_o, *names_o, *tnames_o, *tr_type, *places, *place_type;
    (void)self;
    if (!PyArg_ParseTuple(args, "SOOOO!O!O", &packed, &binds_o, &names_o, &tnames_o, &PyType_Type, &tr_type,
                          &PyDict_Type, &places, &place_type))
        return NULL;
    if (check_tr_type(tr_type)) return NULL;
    PyObject *binds = PySequence_Tuple(binds_o), *names = NULL, *tn = NULL, *out = NULL;
    if (!binds) return NULL;
    names = PySequence_Tuple(names_o);
    tn = names ? PySequence_Tuple(tnames_o) : NULL;
    if (!tn) goto done;
    Py_ssize_t n = PyTuple_GET_SIZE(binds), n_t = PyTuple_GET_SIZE(tn);
    if (PyTuple_GET_SIZE(names) != n
        || PyBytes_GET_SIZE(packed) != (Py_ssize_t)sizeof(int) * TR_PACK * n) {
        PyErr_SetString(PyExc_ValueError, "packed transfers: a row, a binding and a name each");
        goto done;
    }
    int rows[TR_PACK];
    /* every row checked before any is made; the chunk runs of all rows together at most
     * MAX_RUNS entries (a small hostile buffer must not ask for gigabytes: review) */
    long long runs = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        memcpy(rows, PyBytes_AS_STRING(packed) + sizeof(rows) * (size_t)i, sizeof(rows));
        int kind = rows[0], t = rows[1];
        if ((kind != CONCAT && kind != SPLIT) || t < 0 || t >= n_t || rows[2] < 1 || rows[3] < 1
            || rows[2] > (1 << 20) || rows[3] > (1 << 20) || rows[4] < 0 || rows[6] < 0
            || rows[5] < 0 || rows[7] < 0 || rows[5] > INT_MAX - rows[4] || rows[7] > INT_MAX - rows[6]
            || rows[5] > (1 << 20) || rows[7] > (1 << 20)) {
            PyErr_SetString(PyExc_ValueError, "packed transfers: a bad row");
            goto done;
        }
        runs += (long long)rows[5] + rows[7];
    }
    if (runs > MAX_RUNS) {
        PyErr_SetString(PyExc_ValueError, "packed transfers: too many chunks in all");
        goto done;
    }
    out = PyList_New(n);
    if (!out) goto done;
    for (Py_ssize_t i = 0; i < n; i++) {
        memcpy(rows, PyBytes_AS_STRING(packed) + sizeof(rows) * (size_t)i, sizeof(rows));
        int kind = rows[0], t = rows[1];
        PyObject *tr = make_transfer(tr_type, PyTuple_GET_ITEM(names, i), kind, PyTuple_GET_ITEM(tn, t),
                                     rows[2], rows[3], rows[4], rows[5], rows[6], rows[7],
                                     PyTuple_GET_ITEM(binds, i), places, place_type, NULL);
        if (!tr) { Py_CLEAR(out); goto done; }
        PyList_SET_ITEM(out, i, tr);
    }
done:
    Py_DECREF(binds); Py_XDECREF(names); Py_XDECREF(tn);
    return out;
}

/* deps_of(nodes, packed): the chunk DAG derive(..., lazy=1) packed, as the dict the eager
 * derive() returns (the same insertion order, the node objects given): packed is int32 rows
 * (node, count, its dependencies), each an index into nodes. Reads a snapshot of nodes. */
static PyObject *py_deps_of(PyObject *self, PyObject *args) {
    PyObject *nodes_o, *packed;
    (void)self;
    if (!PyArg_ParseTuple(args, "OS", &nodes_o, &packed)) return NULL;
    PyObject *nodes = PySequence_Tuple(nodes_o);
    if (!nodes) return NULL;
    PyObject *out = PyDict_New();
    Py_ssize_t n = PyTuple_GET_SIZE(nodes), len = PyBytes_GET_SIZE(packed) / (Py_ssize_t)sizeof(int);
    if (!out) goto fail;
    if (PyBytes_GET_SIZE(packed) % (Py_ssize_t)sizeof(int)) goto bad;
    const char *raw = PyBytes_AS_STRING(packed);
    Py_ssize_t i = 0;
    int v[2];
    while (i < len) {
        if (len - i < 2) goto bad;  /* (an empty DAG is packed as b"") */
        memcpy(v, raw + sizeof(int) * (size_t)i, sizeof(v));
        if (v[0] < 0 || v[0] >= n || v[1] < 0 || v[1] > len - i - 2) goto bad;
        PyObject *l = PyList_New(v[1]);
        if (!l) goto fail;
        for (int k = 0; k < v[1]; k++) {
            int x;
            memcpy(&x, raw + sizeof(int) * (size_t)(i + 2 + k), sizeof(int));
            if (x < 0 || x >= n) { Py_DECREF(l); goto bad; }
            PyList_SET_ITEM(l, k, Py_NewRef(PyTuple_GET_ITEM(nodes, x)));
        }
        int rc = PyDict_SetItem(out, PyTuple_GET_ITEM(nodes, v[0]), l);
        Py_DECREF(l);
        if (rc) goto fail;
        i += 2 + v[1];
    }
    Py_DECREF(nodes);
    return out;
bad:
    PyErr_SetString(PyExc_ValueError, "packed chunk DAG: a bad row");
fail:
    Py_XDECREF(out);
    Py_DECREF(nodes);
    return NULL;
}

/* blocks(values, rep, active, lens, below, d_cut, d_mode, min_ops, max_ops, modes, known):
 * search_space._build.read_blocks over a _Recorder's assignment (values, rep, active: a
 * read of parameter d marks active[rep[d]] (a bytearray: mark_read) and answers values[d];
 * values a list of ints or an int16 vector's bytes), statement by statement:
 * the same parameters are read in the same order. lens: each segment's op count; below:
 * the granularity's cut rank bound (its parameter read by the caller); d_cut per segment
 * boundary, d_mode per segment; max_ops -1: no bound; modes: MODES; known: the space's
 * blocks by (first segment, last segment, mode). -> per block the known Block or, when not
 * known, (first segment, last segment, mode) for the caller to make. */
static int rec_read(PyObject *values, PyObject *rep, PyObject *active, PyObject *dims, Py_ssize_t i,
                    long *out) {
    if (i < 0 || i >= PyList_GET_SIZE(dims)) { PyErr_SetString(PyExc_ValueError, "bad parameter index"); return -1; }
    long d = PyLong_AsLong(PyList_GET_ITEM(dims, i));
    if (d == -1 && PyErr_Occurred()) return -1;
    /* values: a list of ints, or the bytes of an int16 vector read in place (search_space._cglue.c_values) */
    int raw = PyBytes_Check(values);
    Py_ssize_t nv = raw ? PyBytes_GET_SIZE(values) / (Py_ssize_t)sizeof(int16_t) : PyList_GET_SIZE(values);
    if (d < 0 || d >= nv || d >= PyList_GET_SIZE(rep)) {
        PyErr_SetString(PyExc_ValueError, "bad parameter");
        return -1;
    }
    if (mark_read(active, PyList_GET_ITEM(rep, d))) return -1;
    if (raw) {
        int16_t x;
        memcpy(&x, PyBytes_AS_STRING(values) + d * (Py_ssize_t)sizeof(int16_t), sizeof x);
        *out = x;
        return 0;
    }
    *out = PyLong_AsLong(PyList_GET_ITEM(values, d));
    return (*out == -1 && PyErr_Occurred()) ? -1 : 0;
}

static int add_block(PyObject *out, PyObject *known, PyObject *modes, long a, long b, long m) {
    if (m < 0 || m >= PyTuple_GET_SIZE(modes)) { PyErr_SetString(PyExc_ValueError, "bad mode"); return -1; }
    /* (a, b, mode) as Py_BuildValue("(llO)") builds it, without reading a format */
    PyObject *key = PyTuple_New(3), *ka = PyLong_FromLong(a), *kb = PyLong_FromLong(b);
    if (!key || !ka || !kb) { Py_XDECREF(key); Py_XDECREF(ka); Py_XDECREF(kb); return -1; }
    PyTuple_SET_ITEM(key, 0, ka);
    PyTuple_SET_ITEM(key, 1, kb);
    PyTuple_SET_ITEM(key, 2, Py_NewRef(PyTuple_GET_ITEM(modes, m)));
    PyObject *hit = PyDict_GetItemWithError(known, key);
    if (!hit && PyErr_Occurred()) { Py_DECREF(key); return -1; }
    int rc = PyList_Append(out, hit ? hit : key);
    Py_DECREF(key);
    return rc;
}

static PyObject *py_blocks(PyObject *self, PyObject *args) {
    PyObject *values, *rep, *active, *lens, *d_cut, *d_mode, *modes, *known;
    long below, min_ops, max_ops;
    (void)self;
    if (!PyArg_ParseTuple(args, "OO!O!O!lO!O!llO!O!", &values, &PyList_Type, &rep,
                          &PyByteArray_Type, &active, &PyList_Type, &lens, &below, &PyList_Type, &d_cut,
                          &PyList_Type, &d_mode, &min_ops, &max_ops, &PyTuple_Type, &modes,
                          &PyDict_Type, &known))
        return NULL;
    if (!PyList_Check(values) && !PyBytes_Check(values)) {
        PyErr_SetString(PyExc_TypeError, "a recorder's values: a list or int16 bytes");
        return NULL;
    }
    Py_ssize_t n = PyList_GET_SIZE(lens);
    if (n < 1 || PyList_GET_SIZE(d_mode) != n || PyList_GET_SIZE(d_cut) < n - 1) {
        PyErr_SetString(PyExc_ValueError, "a mode per segment and a cut per boundary expected");
        return NULL;
    }
    PyObject *out = PyList_New(0);
    if (!out) return NULL;
    long m, v;
    long a = 0;
    long size = PyLong_AsLong(PyList_GET_ITEM(lens, 0));
    if ((size == -1 && PyErr_Occurred()) || rec_read(values, rep, active, d_mode, 0, &m)) goto fail;
    for (Py_ssize_t k = 0; k + 1 < n; k++) {
        long nxt = PyLong_AsLong(PyList_GET_ITEM(lens, k + 1));
        if (nxt == -1 && PyErr_Occurred()) goto fail;
        if (nxt < 0 || size > LONG_MAX - nxt) { PyErr_SetString(PyExc_ValueError, "bad segment length"); goto fail; }
        int cut;
        if (max_ops >= 0 && size + nxt > max_ops) {
            cut = 1;
        } else if (size < min_ops || below == 0) {
            cut = 0;
        } else {
            if (rec_read(values, rep, active, d_cut, k, &v)) goto fail;
            cut = v < below;
        }
        if (cut) {
            if (add_block(out, known, modes, a, (long)k, m)) goto fail;
            a = (long)k + 1;
            size = nxt;
            if (rec_read(values, rep, active, d_mode, a, &m)) goto fail;
        } else {
            size += nxt;
        }
    }
    if (add_block(out, known, modes, a, (long)n - 1, m)) goto fail;
    return out;
fail:
    Py_DECREF(out);
    return NULL;
}

/* ---- class keys of op sets (search_space/_cclass.py: class_key, the reference) ----------- */

typedef struct {
    int n_ops, n_tensors;
    int *desc, *out, *in_at, *ins;      /* per op: description code, output, inputs (CSR) */
    int *prod, *cons_at, *cons;          /* per tensor: producer op or -1, consumers (CSR) */
    unsigned char *is_out;               /* per tensor: a model output */
    int *stamp, *pos, gen;               /* per op: the call that marked it, its position */
    int *ext_of, *ext_stamp;             /* per tensor: its outside index in this call */
    PyObject *names;                     /* tensor names by index (a tuple) */
} Classes;

static void classes_free(PyObject *cap) {
    Classes *c = PyCapsule_GetPointer(cap, "graphtune.classes");
    if (!c) return;
    free(c->desc); free(c->out); free(c->in_at); free(c->ins); free(c->prod); free(c->cons_at);
    free(c->cons); free(c->is_out); free(c->stamp); free(c->pos); free(c->ext_of); free(c->ext_stamp);
    Py_XDECREF(c->names);
    free(c);
}

/* class_tables(names, desc, out, in_at, ins, prod, cons_at, cons, is_out) -> a capsule:
 * per tensor (by index) its name, producer op (-1: none), consumers (CSR) and whether it is
 * a model output; per op its description code, output and inputs (CSR). */
static PyObject *py_class_tables(PyObject *self, PyObject *args) {
    PyObject *names, *o_desc, *o_out, *o_in_at, *o_ins, *o_prod, *o_cons_at, *o_cons, *o_is_out;
    (void)self;
    if (!PyArg_ParseTuple(args, "O!OOOOOOOO", &PyTuple_Type, &names, &o_desc, &o_out, &o_in_at, &o_ins,
                          &o_prod, &o_cons_at, &o_cons, &o_is_out))
        return NULL;
    Py_ssize_t nt = PyTuple_GET_SIZE(names), no, m_in, m_cons;
    if (nt > INT_MAX / 2) { PyErr_SetString(PyExc_ValueError, "too many tensors"); return NULL; }
    for (Py_ssize_t i = 0; i < nt; i++)
        if (!PyUnicode_Check(PyTuple_GET_ITEM(names, i))) { PyErr_SetString(PyExc_ValueError, "tensor names: str"); return NULL; }
    Classes *c = calloc(1, sizeof(Classes));
    if (!c) return PyErr_NoMemory();
    c->n_tensors = (int)nt;
    c->desc = int_array(o_desc, -1, 0, INT_MAX, &no);
    if (!c->desc) goto fail;
    if (no > INT_MAX / 2) { PyErr_SetString(PyExc_ValueError, "too many ops"); goto fail; }
    c->n_ops = (int)no;
    if (!(c->out = int_array(o_out, no, 0, nt, NULL))) goto fail;
    if (!(c->in_at = int_array(o_in_at, no + 1, 0, INT_MAX, NULL))) goto fail;
    if (!(c->ins = int_array(o_ins, -1, 0, nt, &m_in))) goto fail;
    if (!(c->prod = int_array(o_prod, nt, -1, no, NULL))) goto fail;
    if (!(c->cons_at = int_array(o_cons_at, nt + 1, 0, INT_MAX, NULL))) goto fail;
    if (!(c->cons = int_array(o_cons, -1, 0, no, &m_cons))) goto fail;
    int *flags = int_array(o_is_out, nt, 0, 2, NULL);
    if (!flags) goto fail;
    c->is_out = alloc_n(nt, 1);
    if (c->is_out) for (Py_ssize_t i = 0; i < nt; i++) c->is_out[i] = (unsigned char)flags[i];
    free(flags);
    if (!offsets_ok(c->in_at, c->n_ops, m_in) || !offsets_ok(c->cons_at, c->n_tensors, m_cons)) {
        PyErr_SetString(PyExc_ValueError, "bad offsets");
        goto fail;
    }
    c->stamp = alloc_n(no, sizeof(int));
    c->pos = alloc_n(no, sizeof(int));
    c->ext_of = alloc_n(nt, sizeof(int));
    c->ext_stamp = alloc_n(nt, sizeof(int));
    if (!c->is_out || !c->stamp || !c->pos || !c->ext_of || !c->ext_stamp) { PyErr_NoMemory(); goto fail; }
    Py_INCREF(names);
    c->names = names;
    PyObject *cap = PyCapsule_New(c, "graphtune.classes", classes_free);
    if (!cap) { Py_DECREF(names); c->names = NULL; goto fail; }
    return cap;
fail:
    free(c->desc); free(c->out); free(c->in_at); free(c->ins); free(c->prod); free(c->cons_at);
    free(c->cons); free(c->is_out); free(c->stamp); free(c->pos); free(c->ext_of); free(c->ext_stamp);
    free(c);
    return NULL;
}

/* class_key(tables, ops) -> (key, outside tensor names, output name): class_key of
 * search_space/_cclass.py over the tables, value for value (ops ascending). */
static PyObject *py_class_key(PyObject *self, PyObject *args) {
    PyObject *cap, *ops_obj;
    (void)self;
    if (!PyArg_ParseTuple(args, "O!O!", &PyCapsule_Type, &cap, &PyTuple_Type, &ops_obj)) return NULL;
    Classes *c = PyCapsule_GetPointer(cap, "graphtune.classes");
    if (!c) return NULL;
    Py_ssize_t n = PyTuple_GET_SIZE(ops_obj);
    if (n < 1) { PyErr_SetString(PyExc_ValueError, "an empty op set"); return NULL; }
    /* (not zeroed: each entry is written before it is read; the tensor-sized ones are
     * mostly never touched) */
    int *ops = alloc_raw(n, sizeof(int));
    int *ext = alloc_raw(c->n_tensors, sizeof(int));  /* outside tensors in order of first use */
    int *rank = alloc_raw(c->n_tensors, sizeof(int));
    PyObject *rows = NULL, *flags = NULL, *ranks = NULL, *names = NULL, *key = NULL, *result = NULL;
    if (!ops || !ext || !rank) { PyErr_NoMemory(); goto done; }
    if (c->gen == INT_MAX) {  /* stamps wrap: clear them */
        memset(c->stamp, 0, sizeof(int) * (size_t)c->n_ops);
        memset(c->ext_stamp, 0, sizeof(int) * (size_t)c->n_tensors);
        c->gen = 0;
    }
    int gen = ++c->gen;
    for (Py_ssize_t k = 0; k < n; k++) {
        long i = PyLong_AsLong(PyTuple_GET_ITEM(ops_obj, k));
        if ((i == -1 && PyErr_Occurred()) || i < 0 || i >= c->n_ops || (k && i <= ops[k - 1])) {
            if (!PyErr_Occurred()) PyErr_SetString(PyExc_ValueError, "ops: ascending op indices");
            goto done;
        }
        ops[k] = (int)i;
        c->stamp[i] = gen;
        c->pos[i] = (int)k;
    }
#define IN_SET(op) ((op) >= 0 && c->stamp[op] == gen)
    rows = PyTuple_New(n);
    if (!rows) goto done;
    int n_ext = 0, first_out = -1;
    for (Py_ssize_t k = 0; k < n; k++) {
        int i = ops[k];
        int a = c->in_at[i], b = c->in_at[i + 1];
        PyObject *refs = PyTuple_New(b - a);
        if (!refs) goto done;
        for (int j = a; j < b; j++) {
            int t = c->ins[j], p = c->prod[t];
            long ref;
            if (IN_SET(p)) {
                ref = c->pos[p];
            } else {
                if (c->ext_stamp[t] != gen) { c->ext_stamp[t] = gen; c->ext_of[t] = n_ext; ext[n_ext++] = t; }
                ref = -1 - (long)c->ext_of[t];
            }
            PyObject *x = PyLong_FromLong(ref);
            if (!x) { Py_DECREF(refs); goto done; }
            PyTuple_SET_ITEM(refs, j - a, x);
        }
        int o = c->out[i], outside = c->is_out[o];
        for (int j = c->cons_at[o]; j < c->cons_at[o + 1] && !outside; j++)
            if (!IN_SET(c->cons[j])) outside = 1;
        if (outside && first_out < 0) first_out = o;
        PyObject *row = PyTuple_New(3), *dsc = PyLong_FromLong(c->desc[i]);  /* (desc, refs, outside) */
        if (!row || !dsc) { Py_XDECREF(row); Py_XDECREF(dsc); Py_DECREF(refs); goto done; }
        PyTuple_SET_ITEM(row, 0, dsc);
        PyTuple_SET_ITEM(row, 1, refs);
        PyTuple_SET_ITEM(row, 2, Py_NewRef(outside ? Py_True : Py_False));
        PyTuple_SET_ITEM(rows, k, row);
    }
    if (first_out < 0) first_out = c->out[ops[n - 1]];
    flags = PyTuple_New(n_ext);
    ranks = PyTuple_New(n_ext);
    names = PyTuple_New(n_ext);
    if (!flags || !ranks || !names) goto done;
    for (int e = 0; e < n_ext; e++) {
        int t = ext[e], inside = 1;
        for (int j = c->cons_at[t]; j < c->cons_at[t + 1] && inside; j++)
            if (!IN_SET(c->cons[j])) inside = 0;
        PyObject *f = PyTuple_Pack(2, c->is_out[t] ? Py_True : Py_False, inside ? Py_True : Py_False);
        if (!f) goto done;
        PyTuple_SET_ITEM(flags, e, f);
        PyObject *nm = PyTuple_GET_ITEM(c->names, t);
        Py_INCREF(nm);
        PyTuple_SET_ITEM(names, e, nm);
        /* sorted(range(n_ext), key=names.__getitem__): insertion sort (stable; names distinct) */
        int q = e;
        while (q > 0) {
            int cmp = PyUnicode_Compare(PyTuple_GET_ITEM(c->names, ext[rank[q - 1]]), nm);
            if (cmp == -1 && PyErr_Occurred()) goto done;
            if (cmp <= 0) break;
            rank[q] = rank[q - 1];
            q--;
        }
        rank[q] = e;
    }
#undef IN_SET
    for (int e = 0; e < n_ext; e++) {
        PyObject *x = PyLong_FromLong(rank[e]);
        if (!x) goto done;
        PyTuple_SET_ITEM(ranks, e, x);
    }
    key = PyTuple_Pack(3, rows, flags, ranks);
    if (!key) goto done;
    result = PyTuple_Pack(3, key, names, PyTuple_GET_ITEM(c->names, first_out));
done:
    Py_XDECREF(rows); Py_XDECREF(flags); Py_XDECREF(ranks); Py_XDECREF(names); Py_XDECREF(key);
    free(ops); free(ext); free(rank);
    return result;
}

static PyMethodDef methods[] = {
    {"derive", py_derive, METH_VARARGS, "The transfers, chunk DAG, output nodes and order (see the file)."},
    {"make_transfers", py_make_transfers, METH_VARARGS, "The Transfer values derive(..., lazy=1) packed."},
    {"deps_of", py_deps_of, METH_VARARGS, "The chunk DAG derive(..., lazy=1) packed, as a dict."},
    {"class_tables", py_class_tables, METH_VARARGS, "The per-graph tables of class_key (see the function)."},
    {"class_key", py_class_key, METH_VARARGS, "An op set's class key (see the function)."},
    {"blocks", py_blocks, METH_VARARGS, "read_blocks over a recorded assignment (see the function)."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_cdag", NULL, -1, methods,
                                    NULL, NULL, NULL, NULL};

PyMODINIT_FUNC PyInit__cdag(void) {
    for (int k = 0; k < 8; k++)
        if (!tr_field[k] && !(tr_field[k] = PyUnicode_InternFromString(TR_FIELDS[k]))) return NULL;
    if (!kind_str[0] && !(kind_str[0] = PyUnicode_InternFromString("concat"))) return NULL;
    if (!kind_str[1] && !(kind_str[1] = PyUnicode_InternFromString("split"))) return NULL;
    if (!ddr_str && !(ddr_str = PyUnicode_InternFromString("DDR"))) return NULL;
    PyObject *m = PyModule_Create(&module);
    /* derive() takes gout and returns walk_index's tuple (search_space/_ccore.py _NEEDS: a
     * build older than this source is treated as missing) */
    if (m && PyModule_AddIntConstant(m, "WALK_INDEX", 1)) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
