/* A block's groups in C: search_space._build.block_parts over integer tables of the graph
 * (search_space/_cblocks.py fills them once per space from compiler.graph). The Python
 * functions stay the definition: this file repeats search_space._structure.anchor_partition
 * and partition_is_valid (with compiler.derive.group_io's outputs) statement by statement
 * over a block's op range (tests/search_space/test_cblocks.py compares them on every block
 * of several models).
 *
 * partition(tables, lo, hi, mode) -> (mode found, parts)
 *   tables: (preds_ptr, preds, cons_ptr, cons, flags) as int32 bytes: per op its
 *           producers (Graph.preds, in order), the consumers of its output
 *           (Graph.consumers), flags (1: on the NPU, 2: its output is a graph output,
 *           4: an anchor);
 *   lo..hi: the block's ops (inclusive); mode: 0 whole, 1 anchors, 2 ops.
 *   Tries as block_parts does (whole: whole then anchors; anchors: anchors then whole; ops:
 *   nothing) and falls back to one group per op (mode 2).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdlib.h>
#include <string.h>

enum { NPU = 1, GRAPH_OUT = 2, ANCHOR = 4 };

typedef struct {
    const int *pp, *pi, *cp, *ci, *fl;
    int n;
} Tables;

/* anchor_partition: per op of lo..hi the first op (root) of its group */
static void anchor_roots(const Tables *t, int lo, int hi, int *root) {
    for (int i = lo; i <= hi; i++) {
        int inside = -1;
        for (int q = t->pp[i]; q < t->pp[i + 1]; q++) {
            int p = t->pi[q];
            if (p >= lo && p <= hi) { inside = p; break; }  /* the first producer inside */
        }
        if (i == lo || (t->fl[i] & ANCHOR) || inside < 0) root[i - lo] = i;
        else root[i - lo] = root[inside - lo];
    }
}

/* partition_is_valid over parts given by part[i - lo] (0..n_parts - 1): 1, 0, or -1 when
 * out of memory (the dependency sets take n_parts * n_parts bytes) */
static int is_valid(const Tables *t, int lo, int hi, const int *part, int n_parts) {
    int ok = 1;
    /* one zeroed piece for the five int arrays and the dependency sets: on the stack for a
     * few parts (the common case), else one calloc */
    enum { FEW = 32 };
    int few[5 * FEW + (FEW * FEW) / (int)sizeof(int)];
    size_t np = n_parts > 0 ? (size_t)n_parts : 0;
    size_t bytes = sizeof(int) * 5 * np + np * np;
    int *mem = np <= FEW ? few : (int *)calloc(bytes ? bytes : 1, 1);
    if (!mem) return -1;
    if (mem == few) memset(few, 0, bytes);
    int *host = mem, *size = mem + np, *outs = mem + 2 * np, *indeg = mem + 3 * np;
    int *ready = mem + 4 * np;
    unsigned char *dep = (unsigned char *)(mem + 5 * np);
    /* every part mixes no host (CPU) op with NPU ops */
    for (int i = lo; i <= hi; i++) {
        size[part[i - lo]]++;
        if (!(t->fl[i] & NPU)) host[part[i - lo]]++;
    }
    for (int k = 0; k < n_parts; k++)
        if (host[k] && host[k] < size[k]) { ok = 0; goto done; }
    /* one output each (group_io: read by an op outside the part, or a graph output) */
    for (int i = lo; i <= hi; i++) {
        int k = part[i - lo], outside = (t->fl[i] & GRAPH_OUT) != 0;
        for (int q = t->cp[i]; q < t->cp[i + 1] && !outside; q++) {
            int c = t->ci[q];
            outside = c < lo || c > hi || part[c - lo] != k;
        }
        outs[k] += outside;
        for (int q = t->pp[i]; q < t->pp[i + 1]; q++) {
            int p = t->pi[q];
            if (p >= lo && p <= hi && part[p - lo] != k) dep[(size_t)k * n_parts + part[p - lo]] = 1;
        }
    }
    for (int k = 0; k < n_parts; k++)
        if (outs[k] != 1) { ok = 0; goto done; }
    /* no cycle between the parts (Kahn's algorithm) */
    for (int k = 0; k < n_parts; k++)
        for (int o = 0; o < n_parts; o++) indeg[k] += dep[(size_t)k * n_parts + o];
    int n_ready = 0, seen = 0;
    for (int k = 0; k < n_parts; k++) if (!indeg[k]) ready[n_ready++] = k;
    while (n_ready) {
        int k = ready[--n_ready];
        seen++;
        for (int u = 0; u < n_parts; u++)
            if (dep[(size_t)u * n_parts + k] && --indeg[u] == 0) ready[n_ready++] = u;
    }
    ok = seen == n_parts;
done:
    if (mem != few) free(mem);
    return ok;
}

static int buffer(PyObject *tables, int q, Py_buffer *views, const int **out, Py_ssize_t *len) {
    if (PyObject_GetBuffer(PyTuple_GET_ITEM(tables, q), &views[q], PyBUF_SIMPLE)) return -1;
    if (views[q].len % (Py_ssize_t)sizeof(int)) {
        PyBuffer_Release(&views[q]);  /* the caller releases only the views it got */
        PyErr_SetString(PyExc_ValueError, "partition: tables of int32");
        return -1;
    }
    *out = (const int *)views[q].buf;
    *len = views[q].len / (Py_ssize_t)sizeof(int);
    return 0;
}

static PyObject *py_partition(PyObject *self, PyObject *args) {
    PyObject *tables;
    int lo, hi, mode;
    (void)self;
    if (!PyArg_ParseTuple(args, "O!iii", &PyTuple_Type, &tables, &lo, &hi, &mode)) return NULL;
    if (PyTuple_GET_SIZE(tables) != 5) {
        PyErr_SetString(PyExc_ValueError, "partition: five tables");
        return NULL;
    }
    Py_buffer views[5];
    memset(views, 0, sizeof views);
    int got = 0;
    Tables t;
    Py_ssize_t len[5];
    PyObject *result = NULL;
    int *part = NULL, *root = NULL;
    for (; got < 5; got++) {
        const int **dst[5] = {&t.pp, &t.pi, &t.cp, &t.ci, &t.fl};
        if (buffer(tables, got, views, dst[got], &len[got])) goto done;
    }
    t.n = (int)len[4];
    if (len[0] != t.n + 1 || len[2] != t.n + 1 || lo < 0 || hi < lo || hi >= t.n
        || mode < 0 || mode > 2) {
        PyErr_SetString(PyExc_ValueError, "partition: inconsistent tables or range");
        goto done;
    }
    for (int i = lo; i <= hi; i++) {  /* what this block reads of the tables */
        int bad_row = t.pp[i] < 0 || t.pp[i] > t.pp[i + 1] || t.pp[i + 1] > len[1]
                      || t.cp[i] < 0 || t.cp[i] > t.cp[i + 1] || t.cp[i + 1] > len[3];
        for (int q = bad_row ? 0 : t.pp[i]; !bad_row && q < t.pp[i + 1]; q++)
            bad_row = t.pi[q] < 0 || t.pi[q] >= i;  /* producers come first (topological) */
        for (int q = bad_row ? 0 : t.cp[i]; !bad_row && q < t.cp[i + 1]; q++)
            bad_row = t.ci[q] < 0 || t.ci[q] >= t.n;
        if (bad_row) {
            PyErr_SetString(PyExc_ValueError, "partition: inconsistent tables");
            goto done;
        }
    }
    int n = hi - lo + 1;
    part = (int *)malloc(sizeof(int) * (size_t)n);
    root = (int *)malloc(sizeof(int) * (size_t)n);
    if (!part || !root) { PyErr_NoMemory(); goto done; }
    static const int TRIES[3][2] = {{0, 1}, {1, 0}, {-1, -1}};
    int found = 2, n_parts = n;
    for (int q = 0; q < 2 && TRIES[mode][q] >= 0; q++) {
        int m = TRIES[mode][q], np;
        if (m == 0) {
            for (int i = 0; i < n; i++) part[i] = 0;
            np = 1;
        } else {
            anchor_roots(&t, lo, hi, root);
            np = 0;
            for (int i = 0; i < n; i++) part[i] = root[i] == lo + i ? np++ : part[root[i] - lo];
        }
        int v = is_valid(&t, lo, hi, part, np);
        if (v < 0) { PyErr_NoMemory(); goto done; }
        if (v) { found = m; n_parts = np; break; }
    }
    if (found == 2)
        for (int i = 0; i < n; i++) part[i] = i;
    /* parts in order of their first op (anchor_partition sorts by root), ops ascending */
    PyObject *parts = PyTuple_New(n_parts);
    if (!parts) goto done;
    int *count = root;  /* reused: ops per part */
    memset(count, 0, sizeof(int) * (size_t)n);
    for (int i = 0; i < n; i++) count[part[i]]++;
    for (int k = 0; k < n_parts; k++) {
        PyObject *p = PyTuple_New(count[k]);
        if (!p) { Py_DECREF(parts); goto done; }
        PyTuple_SET_ITEM(parts, k, p);
        count[k] = 0;
    }
    for (int i = 0; i < n; i++) {
        PyObject *op = PyLong_FromLong(lo + i);
        if (!op) { Py_DECREF(parts); goto done; }
        PyTuple_SET_ITEM(PyTuple_GET_ITEM(parts, part[i]), count[part[i]]++, op);
    }
    result = Py_BuildValue("(iN)", found, parts);
done:
    for (int q = 0; q < got; q++) PyBuffer_Release(&views[q]);
    free(part);
    free(root);
    return result;
}

static PyMethodDef methods[] = {
    {"partition", py_partition, METH_VARARGS,
     "A block's groups (search_space._build.block_parts; see _cblocks.py)."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_cpart", NULL, -1, methods,
                                    NULL, NULL, NULL, NULL};

PyMODINIT_FUNC PyInit__cpart(void) { return PyModule_Create(&module); }
