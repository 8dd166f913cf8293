/* The compiled chunk DAG of search-space decoding (search_space/_cderive.py drives it).
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
 * derive(groups, n_ops, n_tensors, graph_outputs, order, lookahead, topo)
 *   groups: sequence of (name, split, inputs, outputs, ops); inputs a flat tuple of
 *           (tensor code, batched, producer op or -1) triples, outputs tensor codes
 *   graph_outputs: flat tuple of (tensor code, batched, producer op) triples
 *   order: 0 = depth (with lookahead), 1 = breadth (topo: group indices)
 * -> (transfers, deps, outs, order, reads): transfers as (name, kind, tensor code, src factor,
 *    dst factor, src chunks, dst chunks, bind group, bind chunk) in the final order
 *    (bind group -1: core 0); deps a dict node -> list of nodes; nodes are the tuples
 *    ("g", group name, chunk) and ("t", transfer name, 0); reads per order position
 *    the positions of its dependencies.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdlib.h>
#include <string.h>

enum { CONCAT = 0, SPLIT = 1 };

typedef struct { int n, cap; int *v; } IntVec;

static int iv_push(IntVec *a, int x) {
    if (a->n == a->cap) {
        int cap = a->cap ? a->cap * 2 : 8;
        int *v = realloc(a->v, sizeof(int) * (size_t)cap);
        if (!v) return -1;
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
    IntVec src, dst;
    int bind_g, bind_c;
} Tr;

typedef struct {
    int n_groups, n_tensors, n_ops, n_group_nodes;
    int *split, *gbase;           /* per group: split, first node id */
    int *owner;                   /* per op: group index or -1 */
    unsigned char *batched;       /* per tensor code */
    int *prod;                    /* per tensor code: producer op or -1 */
    ProvVec *prov;                /* per tensor code: providers (f, c) -> node */
    IntVec *deps;                 /* per node */
    IntVec ins;                   /* nodes in the deps dict's insertion order */
    Tr *tr;
    int n_tr, cap_tr;
    int err;
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
        int cap = p->cap ? p->cap * 2 : 8;
        Prov *v = realloc(p->v, sizeof(Prov) * (size_t)cap);
        if (!v) { d->err = 1; return; }
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
        Tr *v = realloc(d->tr, sizeof(Tr) * (size_t)cap);
        IntVec *dv = realloc(d->deps, sizeof(IntVec) * (size_t)(d->n_group_nodes + cap));
        if (v) d->tr = v;
        if (dv) d->deps = dv;
        if (!v || !dv) { d->err = 1; return; }
        memset(d->deps + d->n_group_nodes + d->cap_tr, 0, sizeof(IntVec) * (size_t)(cap - d->cap_tr));
        d->cap_tr = cap;
    }
    int tmp = d->n_tr++;  /* the counter advances before the sources are provided */
    Tr *tr = &d->tr[tmp];
    memset(tr, 0, sizeof(Tr));
    tr->kind = kind; tr->tensor = t; tr->sf = sf; tr->df = df;
    for (int i = s0; i < s1; i++)
        if (iv_push(&d->tr[tmp].src, i)) { d->err = 1; return; }
    for (int i = d0; i < d1; i++)
        if (iv_push(&d->tr[tmp].dst, i)) { d->err = 1; return; }
    int node = d->n_group_nodes + tmp;
    int first_g = -1, first_c = 0;  /* src_places[0]: the first source that is a group chunk */
    for (int i = s0; i < s1; i++) {
        int n = provide(d, t, sf, i, -1);
        if (d->err) return;
        if (n < 0) continue;
        if (iv_push(&d->deps[node], n)) { d->err = 1; return; }
        if (first_g < 0 && n < d->n_group_nodes) {
            int g = 0;
            while (g + 1 < d->n_groups && d->gbase[g + 1] <= n) g++;
            first_g = g;
            first_c = n - d->gbase[g];
        }
    }
    if (iv_push(&d->ins, node)) { d->err = 1; return; }
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
    unsigned char *seen = calloc((size_t)n_nodes, 1);
    int *st_n = malloc(sizeof(int) * (size_t)(n_nodes + 1));
    int *st_i = malloc(sizeof(int) * (size_t)(n_nodes + 1));
    if (!seen || !st_n || !st_i) { free(seen); free(st_n); free(st_i); return -1; }
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
                int g = 0;
                while (g + 1 < d->n_groups && d->gbase[g + 1] <= n) g++;
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
    free(seen); free(st_n); free(st_i);
    return 0;
}

/* search_space._order.breadth_order: every chunk of each group in topo order, each
 * after what it needs, then the dict's other keys */
static int breadth_order(D *d, const int *topo, int n_topo, int n_nodes, int *out, int *n_out) {
    unsigned char *placed = calloc((size_t)n_nodes, 1);
    IntVec sn = {0, 0, NULL}, si = {0, 0, NULL};
    if (!placed) return -1;
    int k = 0, rc = 0;
    int n_seeds = 0;
    for (int q = 0; q < n_topo; q++) n_seeds += d->split[topo[q]];
    for (int r = 0; r < n_seeds + d->ins.n && !rc; r++) {
        int root;
        if (r < n_seeds) {
            int q = 0, rem = r;
            while (rem >= d->split[topo[q]]) { rem -= d->split[topo[q]]; q++; }
            root = d->gbase[topo[q]] + rem;
        } else {
            root = d->ins.v[r - n_seeds];
        }
        if (placed[root]) continue;
        sn.n = si.n = 0;
        if (iv_push(&sn, root) || iv_push(&si, 0)) { rc = -1; break; }
        while (sn.n) {
            sn.n--; si.n--;
            int m = sn.v[sn.n], i = si.v[si.n];
            IntVec *ds = &d->deps[m];
            if (i < ds->n) {
                if (iv_push(&sn, m) || iv_push(&si, i + 1)) { rc = -1; break; }
                if (!placed[ds->v[i]])
                    if (iv_push(&sn, ds->v[i]) || iv_push(&si, 0)) { rc = -1; break; }
                continue;
            }
            if (!placed[m]) { placed[m] = 1; out[k++] = m; }
        }
    }
    *n_out = k;
    free(placed); free(sn.v); free(si.v);
    return rc;
}

static int get_int(PyObject *seq, Py_ssize_t i, int *v) {
    long x = PyLong_AsLong(PySequence_Fast_GET_ITEM(seq, i));
    if (x == -1 && PyErr_Occurred()) return -1;
    *v = (int)x;
    return 0;
}

static void free_d(D *d) {
    free(d->split); free(d->gbase); free(d->owner); free(d->batched); free(d->prod);
    if (d->prov) for (int t = 0; t < d->n_tensors; t++) free(d->prov[t].v);
    free(d->prov);
    if (d->deps) for (int n = 0; n < d->n_group_nodes + d->cap_tr; n++) free(d->deps[n].v);
    free(d->deps);
    if (d->tr) for (int i = 0; i < d->n_tr; i++) { free(d->tr[i].src.v); free(d->tr[i].dst.v); }
    free(d->tr);
    free(d->ins.v);
}

/* tensor triples (code, batched, producer op) into the tables; the codes in `codes` */
static int read_triples(D *d, PyObject *flat, IntVec *codes) {
    Py_ssize_t n = PySequence_Fast_GET_SIZE(flat);
    if (n % 3) { PyErr_SetString(PyExc_ValueError, "tensor triples expected"); return -1; }
    for (Py_ssize_t i = 0; i < n; i += 3) {
        int t, b, p;
        if (get_int(flat, i, &t) || get_int(flat, i + 1, &b) || get_int(flat, i + 2, &p)) return -1;
        if (t < 0 || t >= d->n_tensors) { PyErr_SetString(PyExc_ValueError, "bad tensor code"); return -1; }
        d->batched[t] = (unsigned char)(b != 0);
        d->prod[t] = p;
        if (iv_push(codes, t)) { PyErr_NoMemory(); return -1; }
    }
    return 0;
}

static PyObject *py_derive(PyObject *self, PyObject *args) {
    PyObject *groups, *gouts, *topo_obj;
    int n_ops, n_tensors, order, lookahead;
    (void)self;
    if (!PyArg_ParseTuple(args, "OiiOiiO", &groups, &n_ops, &n_tensors, &gouts, &order, &lookahead,
                          &topo_obj))
        return NULL;
    PyObject *gs = PySequence_Fast(groups, "groups: a sequence");
    if (!gs) return NULL;
    PyObject *go = NULL, *tp = NULL, *result = NULL;
    PyObject **node_obj = NULL, **names = NULL;
    PyObject **gin = NULL;
    IntVec *in_codes = NULL;
    IntVec out_codes = {0, 0, NULL}, outs = {0, 0, NULL};
    int *order_v = NULL, *num = NULL;
    int n_nodes = 0;
    D d;
    memset(&d, 0, sizeof(d));
    int G = (int)PySequence_Fast_GET_SIZE(gs);
    d.n_groups = G; d.n_ops = n_ops; d.n_tensors = n_tensors;
    d.split = calloc((size_t)G + 1, sizeof(int));
    d.gbase = calloc((size_t)G + 1, sizeof(int));
    d.owner = malloc(sizeof(int) * ((size_t)n_ops + 1));
    d.batched = calloc((size_t)n_tensors + 1, 1);
    d.prod = malloc(sizeof(int) * ((size_t)n_tensors + 1));
    d.prov = calloc((size_t)n_tensors + 1, sizeof(ProvVec));
    gin = calloc((size_t)G + 1, sizeof(PyObject *));
    in_codes = calloc((size_t)G + 1, sizeof(IntVec));
    if (!d.split || !d.gbase || !d.owner || !d.batched || !d.prod || !d.prov || !gin || !in_codes) {
        PyErr_NoMemory();
        goto done;
    }
    for (int i = 0; i < n_ops; i++) d.owner[i] = -1;
    for (int t = 0; t < n_tensors; t++) d.prod[t] = -1;
    names = calloc((size_t)G + 1, sizeof(PyObject *));
    if (!names) { PyErr_NoMemory(); goto done; }
    int base = 0;
    for (int g = 0; g < G; g++) {
        PyObject *row = PySequence_Fast_GET_ITEM(gs, g);
        if (!PyTuple_Check(row) || PyTuple_GET_SIZE(row) != 5) {
            PyErr_SetString(PyExc_ValueError, "group: (name, split, inputs, outputs, ops)");
            goto done;
        }
        names[g] = PyTuple_GET_ITEM(row, 0);
        long split = PyLong_AsLong(PyTuple_GET_ITEM(row, 1));
        if (split < 1) { if (!PyErr_Occurred()) PyErr_SetString(PyExc_ValueError, "split < 1"); goto done; }
        d.split[g] = (int)split;
        d.gbase[g] = base;
        base += (int)split;
        gin[g] = PySequence_Fast(PyTuple_GET_ITEM(row, 2), "inputs: a sequence");
        if (!gin[g] || read_triples(&d, gin[g], &in_codes[g])) goto done;
        PyObject *ops = PySequence_Fast(PyTuple_GET_ITEM(row, 4), "ops: a sequence");
        if (!ops) goto done;
        for (Py_ssize_t i = 0; i < PySequence_Fast_GET_SIZE(ops); i++) {
            int op;
            if (get_int(ops, i, &op)) { Py_DECREF(ops); goto done; }
            if (op >= 0 && op < n_ops) d.owner[op] = g;
        }
        Py_DECREF(ops);
        /* group_io outputs: every chunk of the group provides them */
        PyObject *outs_t = PySequence_Fast(PyTuple_GET_ITEM(row, 3), "outputs: a sequence");
        if (!outs_t) goto done;
        for (Py_ssize_t i = 0; i < PySequence_Fast_GET_SIZE(outs_t); i++) {
            int t;
            if (get_int(outs_t, i, &t) || t < 0 || t >= n_tensors) {
                if (!PyErr_Occurred()) PyErr_SetString(PyExc_ValueError, "bad tensor code");
                Py_DECREF(outs_t);
                goto done;
            }
            if (iv_push(&out_codes, g) || iv_push(&out_codes, t)) { Py_DECREF(outs_t); PyErr_NoMemory(); goto done; }
        }
        Py_DECREF(outs_t);
    }
    d.n_group_nodes = base;
    d.deps = calloc((size_t)base + 1, sizeof(IntVec));
    if (!d.deps) { PyErr_NoMemory(); goto done; }
    go = PySequence_Fast(gouts, "graph outputs: a sequence");
    if (!go) goto done;
    IntVec go_codes = {0, 0, NULL};
    if (read_triples(&d, go, &go_codes)) { free(go_codes.v); goto done; }
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
                if (!dup && iv_push(&d.deps[node], p)) d.err = 1;
            }
            if (!d.err && iv_push(&d.ins, node)) d.err = 1;
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
        if (!dup && iv_push(&outs, p)) d.err = 1;
    }
    free(go_codes.v);
    if (d.err) { PyErr_NoMemory(); goto done; }
    n_nodes = d.n_group_nodes + d.n_tr;
    order_v = malloc(sizeof(int) * ((size_t)n_nodes + 1));
    num = malloc(sizeof(int) * ((size_t)d.n_tr + 1));
    node_obj = calloc((size_t)n_nodes + 1, sizeof(PyObject *));
    if (!order_v || !num || !node_obj) { PyErr_NoMemory(); goto done; }
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
    /* node tuples */
    for (int g = 0; g < G; g++)
        for (int c = 0; c < d.split[g]; c++) {
            PyObject *t = Py_BuildValue("(sOi)", "g", names[g], c);
            if (!t) goto done;
            node_obj[d.gbase[g] + c] = t;
        }
    PyObject *transfers = PyList_New(d.n_tr);
    if (!transfers) goto done;
    for (int i = 0; i < d.n_tr; i++) {
        Tr *tr = &d.tr[i];
        const char *kind = tr->kind == CONCAT ? "concat" : "split";
        PyObject *name = PyUnicode_FromFormat("%s_%d", kind, num[i]);
        PyObject *src = PyTuple_New(tr->src.n), *dst = PyTuple_New(tr->dst.n);
        PyObject *node = name ? Py_BuildValue("(sOi)", "t", name, 0) : NULL;
        if (!name || !src || !dst || !node) {
            Py_XDECREF(name); Py_XDECREF(src); Py_XDECREF(dst); Py_XDECREF(node);
            Py_DECREF(transfers);
            goto done;
        }
        for (int k = 0; k < tr->src.n; k++) PyTuple_SET_ITEM(src, k, PyLong_FromLong(tr->src.v[k]));
        for (int k = 0; k < tr->dst.n; k++) PyTuple_SET_ITEM(dst, k, PyLong_FromLong(tr->dst.v[k]));
        node_obj[d.n_group_nodes + i] = node;
        /* transfers.sort(key=(kind, number)): concat_0.. then split_0.. */
        int at = tr->kind == CONCAT ? num[i] : counts[CONCAT] + num[i];
        PyObject *row = Py_BuildValue("(NsiiiNNii)", name, kind, tr->tensor, tr->sf, tr->df, src, dst,
                                      tr->bind_g, tr->bind_c);
        if (!row) { Py_DECREF(transfers); goto done; }
        PyList_SET_ITEM(transfers, at, row);
    }
    PyObject *deps = PyDict_New();
    PyObject *outs_l = PyList_New(outs.n);
    if (!deps || !outs_l) { Py_XDECREF(deps); Py_XDECREF(outs_l); Py_DECREF(transfers); goto done; }
    for (int i = 0; i < d.ins.n; i++) {
        int n = d.ins.v[i];
        PyObject *l = PyList_New(d.deps[n].n);
        if (!l) { Py_DECREF(deps); Py_DECREF(outs_l); Py_DECREF(transfers); goto done; }
        for (int k = 0; k < d.deps[n].n; k++) {
            PyObject *o = node_obj[d.deps[n].v[k]];
            Py_INCREF(o);
            PyList_SET_ITEM(l, k, o);
        }
        int rc = PyDict_SetItem(deps, node_obj[n], l);
        Py_DECREF(l);
        if (rc) { Py_DECREF(deps); Py_DECREF(outs_l); Py_DECREF(transfers); goto done; }
    }
    for (int i = 0; i < outs.n; i++) {
        Py_INCREF(node_obj[outs.v[i]]);
        PyList_SET_ITEM(outs_l, i, node_obj[outs.v[i]]);
    }
    /* the order: depth-first (look-ahead 0 is the naming post-order itself) or breadth-first */
    int n_ord = n_post;
    if (order == 0 && lookahead > 0) {
        if (postorder(&d, outs.v, outs.n, n_nodes, lookahead, order_v, &n_ord)) {
            PyErr_NoMemory(); Py_DECREF(deps); Py_DECREF(outs_l); Py_DECREF(transfers); goto done;
        }
    } else if (order == 1) {
        tp = PySequence_Fast(topo_obj, "topo: a sequence");
        int nt = tp ? (int)PySequence_Fast_GET_SIZE(tp) : 0;
        int *topo = tp ? malloc(sizeof(int) * ((size_t)nt + 1)) : NULL;
        int bad_topo = !topo;
        for (int i = 0; i < nt && !bad_topo; i++)
            if (get_int(tp, i, &topo[i]) || topo[i] < 0 || topo[i] >= G) bad_topo = 1;
        if (bad_topo || breadth_order(&d, topo, nt, n_nodes, order_v, &n_ord)) {
            free(topo);
            if (!PyErr_Occurred()) PyErr_SetString(PyExc_ValueError, "bad topo");
            Py_DECREF(deps); Py_DECREF(outs_l); Py_DECREF(transfers); goto done;
        }
        free(topo);
    }
    PyObject *ord_l = PyList_New(n_ord);
    if (!ord_l) { Py_DECREF(deps); Py_DECREF(outs_l); Py_DECREF(transfers); goto done; }
    for (int i = 0; i < n_ord; i++) {
        Py_INCREF(node_obj[order_v[i]]);
        PyList_SET_ITEM(ord_l, i, node_obj[order_v[i]]);
    }
    /* per order position, the positions of the steps it reads (CapacityWalk.reads) */
    PyObject *reads_l = PyList_New(n_ord);
    int *pos = reads_l ? malloc(sizeof(int) * ((size_t)n_nodes + 1)) : NULL;
    if (!reads_l || !pos) {
        free(pos); Py_XDECREF(reads_l); Py_DECREF(ord_l);
        Py_DECREF(deps); Py_DECREF(outs_l); Py_DECREF(transfers);
        if (!PyErr_Occurred()) PyErr_NoMemory();
        goto done;
    }
    for (int i = 0; i < n_ord; i++) pos[order_v[i]] = i;
    for (int i = 0; i < n_ord; i++) {
        IntVec *ds = &d.deps[order_v[i]];
        PyObject *l = PyList_New(ds->n);
        if (!l) break;
        for (int k = 0; k < ds->n; k++) PyList_SET_ITEM(l, k, PyLong_FromLong(pos[ds->v[k]]));
        PyList_SET_ITEM(reads_l, i, l);
    }
    free(pos);
    if (PyErr_Occurred()) {
        Py_DECREF(reads_l); Py_DECREF(ord_l);
        Py_DECREF(deps); Py_DECREF(outs_l); Py_DECREF(transfers);
        goto done;
    }
    result = Py_BuildValue("(NNNNN)", transfers, deps, outs_l, ord_l, reads_l);
done:
    if (node_obj) for (int i = 0; i < n_nodes; i++) Py_XDECREF(node_obj[i]);
    free(node_obj);
    free(order_v); free(num);
    if (gin) for (int g = 0; g < G; g++) Py_XDECREF(gin[g]);
    free(gin);
    if (in_codes) for (int g = 0; g < G; g++) free(in_codes[g].v);
    free(in_codes);
    free(names);
    free(out_codes.v); free(outs.v);
    Py_XDECREF(go); Py_XDECREF(tp);
    Py_DECREF(gs);
    free_d(&d);
    return result;
}

static PyMethodDef methods[] = {
    {"derive", py_derive, METH_VARARGS, "The transfers, chunk DAG, output nodes and order (see the file)."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_cdag", NULL, -1, methods,
                                    NULL, NULL, NULL, NULL};

PyMODINIT_FUNC PyInit__cdag(void) { return PyModule_Create(&module); }
