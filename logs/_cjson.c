/* A schedule's JSON pieces as the log line's text, in one C call (logs/_text.py's `text_of`).
 *
 * text(obj) -> str, or None when obj holds a value this writer does not take.
 *
 * The reference is json.dumps(obj, separators=(",", ":"), ensure_ascii=False) (the log
 * line's settings, autotune/running/_texts.py's encoder): the same text for the values a
 * schedule's JSON is made of: dicts with str keys (in their order), lists and tuples,
 * exact ints, None, True, False and str of printable ASCII without '"' or '\\'. Anything
 * else (a float, a str to escape or not ASCII, an int subclass, another type, nesting past
 * MAX_DEPTH) gives None: the caller then uses the json encoder. The differential test is
 * tests/logs/test_cjson.py.
 *
 * Written straight into one growing buffer: the json module's C encoder makes a str per
 * key, value and separator and joins them (~1.6 us a BERT-base transfer).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <string.h>

enum { MAX_DEPTH = 32 };

typedef struct {
    char *p;
    Py_ssize_t n, cap;
} Buf;

static int grow(Buf *b, Py_ssize_t more) {
    if (b->n + more <= b->cap)
        return 0;
    Py_ssize_t cap = b->cap ? b->cap : 1024;
    while (cap < b->n + more) {
        if (cap > PY_SSIZE_T_MAX / 2)
            return -1;
        cap *= 2;
    }
    char *p = PyMem_Realloc(b->p, (size_t)cap);
    if (p == NULL)
        return -1;
    b->p = p;
    b->cap = cap;
    return 0;
}

static int put(Buf *b, const char *s, Py_ssize_t n) {
    if (grow(b, n) < 0)
        return -1;
    memcpy(b->p + b->n, s, (size_t)n);
    b->n += n;
    return 0;
}

/* 1 written, 0 not taken, -1 error (memory) */
static int put_str(Buf *b, PyObject *s) {
    if (!PyUnicode_IS_ASCII(s))
        return 0;
    Py_ssize_t n = PyUnicode_GET_LENGTH(s);
    const unsigned char *c = PyUnicode_1BYTE_DATA(s);
    for (Py_ssize_t i = 0; i < n; i++)
        if (c[i] < 0x20 || c[i] == '"' || c[i] == '\\' || c[i] == 0x7f)
            return 0;
    if (grow(b, n + 2) < 0)
        return -1;
    b->p[b->n++] = '"';
    memcpy(b->p + b->n, c, (size_t)n);
    b->n += n;
    b->p[b->n++] = '"';
    return 1;
}

static int put_int(Buf *b, PyObject *o) {
    int overflow = 0;
    long long v = PyLong_AsLongLongAndOverflow(o, &overflow);
    if (overflow)
        return 0;
    if (v == -1 && PyErr_Occurred())
        return -1;
    char tmp[24], *e = tmp + sizeof tmp, *q = e;
    unsigned long long u = v < 0 ? 0ULL - (unsigned long long)v : (unsigned long long)v;
    do {
        *--q = (char)('0' + u % 10);
        u /= 10;
    } while (u);
    if (v < 0)
        *--q = '-';
    return put(b, q, e - q) < 0 ? -1 : 1;
}

static int put_value(Buf *b, PyObject *o, int depth) {
    if (depth > MAX_DEPTH)
        return 0;
    if (o == Py_None)
        return put(b, "null", 4) < 0 ? -1 : 1;
    if (o == Py_True)
        return put(b, "true", 4) < 0 ? -1 : 1;
    if (o == Py_False)
        return put(b, "false", 5) < 0 ? -1 : 1;
    if (PyLong_CheckExact(o))
        return put_int(b, o);
    if (PyUnicode_CheckExact(o))
        return put_str(b, o);
    if (PyList_CheckExact(o) || PyTuple_CheckExact(o)) {
        PyObject *seq = o;  /* a list's items read by index: the list may not change here */
        Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
        if (put(b, "[", 1) < 0)
            return -1;
        for (Py_ssize_t i = 0; i < n; i++) {
            if (i && put(b, ",", 1) < 0)
                return -1;
            PyObject *item = PySequence_Fast_GET_ITEM(seq, i);
            Py_INCREF(item);
            int r = put_value(b, item, depth + 1);
            Py_DECREF(item);
            if (r <= 0)
                return r;
            if (n != PySequence_Fast_GET_SIZE(seq))
                return 0;  /* changed under us */
        }
        return put(b, "]", 1) < 0 ? -1 : 1;
    }
    if (PyDict_CheckExact(o)) {
        Py_ssize_t pos = 0, i = 0;
        PyObject *k, *v;
        if (put(b, "{", 1) < 0)
            return -1;
        while (PyDict_Next(o, &pos, &k, &v)) {
            if (!PyUnicode_CheckExact(k))
                return 0;
            if (i++ && put(b, ",", 1) < 0)
                return -1;
            int r = put_str(b, k);
            if (r <= 0)
                return r;
            if (put(b, ":", 1) < 0)
                return -1;
            Py_INCREF(v);
            r = put_value(b, v, depth + 1);
            Py_DECREF(v);
            if (r <= 0)
                return r;
        }
        return put(b, "}", 1) < 0 ? -1 : 1;
    }
    return 0;
}

static PyObject *text(PyObject *self, PyObject *obj) {
    Buf b = {NULL, 0, 0};
    int r = put_value(&b, obj, 0);
    PyObject *out;
    if (r < 0) {
        if (!PyErr_Occurred())
            PyErr_NoMemory();
        out = NULL;
    } else if (r == 0) {
        out = Py_NewRef(Py_None);
    } else {
        out = PyUnicode_FromKindAndData(PyUnicode_1BYTE_KIND, b.p, b.n);
    }
    PyMem_Free(b.p);
    return out;
}

static PyMethodDef methods[] = {
    {"text", text, METH_O, "text(obj) -> the compact JSON text of obj, or None (see the module)"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_cjson", NULL, -1, methods,
                                    NULL, NULL, NULL, NULL};

PyMODINIT_FUNC PyInit__cjson(void) { return PyModule_Create(&module); }
