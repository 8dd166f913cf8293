/* Small helpers the compiled search core's modules share (search_space/_cdag.c, _cwalk.c,
 * search_space/_canalyse.c): one definition each, included as static functions (every
 * extension module is its own shared object, so nothing is exported). */
#ifndef GRAPHTUNE_CUTIL_H
#define GRAPHTUNE_CUTIL_H

#include <Python.h>
#include <limits.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* alloc_n not zeroed (every entry written before it is read) */
static inline void *alloc_raw(Py_ssize_t n, size_t sz) {
    if (n < 0 || (size_t)n + 1 > SIZE_MAX / sz) return NULL;
    return malloc(((size_t)n + 1) * sz);
}

/* PyLong_AsLong, read in place for an exact int of at most one digit (CPython 3.11's layout:
 * the tables' ints are small); anything else (larger, a subclass, another version) through
 * PyLong_AsLong itself: the same value or the same error */
static inline long as_long(PyObject *o) {
#if PY_VERSION_HEX >= 0x030B0000 && PY_VERSION_HEX < 0x030C0000
    if (PyLong_CheckExact(o)) {
        Py_ssize_t sz = Py_SIZE(o);
        if (sz == 0) return 0;
        if (sz == 1) return (long)((PyLongObject *)o)->ob_digit[0];
        if (sz == -1) return -(long)((PyLongObject *)o)->ob_digit[0];
    }
#endif
    return PyLong_AsLong(o);
}

/* The recorder's mark of a read (search_space._space._Recorder: active[rep[d]] = 1): f is
 * rep[d], a free parameter's index; active a bytearray of one byte per free parameter.
 * Its size is read at every call (the caller may have run Python since). */
static inline int mark_read(PyObject *active, PyObject *f) {
    if (!PyLong_Check(f)) {  /* an int: no Python code runs here (no __index__) */
        PyErr_SetString(PyExc_TypeError, "a free parameter's index: an int");
        return -1;
    }
    long i = as_long(f);
    if (i == -1 && PyErr_Occurred()) return -1;
    if (i < 0 || i >= PyByteArray_GET_SIZE(active)) {
        PyErr_SetString(PyExc_ValueError, "a read outside the recorder's free parameters");
        return -1;
    }
    PyByteArray_AS_STRING(active)[i] = 1;
    return 0;
}

/* n + 1 zeroed items of sz bytes (one more: a zero-length table is still a pointer), NULL
 * when n is negative or the size overflows */
static inline void *alloc_n(Py_ssize_t n, size_t sz) {
    if (n < 0 || (size_t)n + 1 > SIZE_MAX / sz) return NULL;
    return calloc((size_t)n + 1, sz);
}

/* A call's memory: its arrays carved from blocks (one malloc per block, not per array),
 * freed at once (ar_free). The largest block is kept for the next call (arena_spare; the
 * GIL is held throughout, and a call made while another holds it mallocs its own). Each
 * module that includes this has its own spare. */
typedef struct ArenaBlock {
    struct ArenaBlock *next;
    size_t cap, used;
} ArenaBlock;
typedef struct {
    ArenaBlock *head;
} Arena;
#define ARENA_HDR ((sizeof(ArenaBlock) + 15) & ~(size_t)15)
static ArenaBlock *arena_spare = NULL;

/* n bytes, 16-byte aligned, not zeroed; NULL when out of memory (no error set) */
static inline void *ar_alloc(Arena *a, size_t n) {
    if (n > ((size_t)1 << 40)) return NULL;
    n = n ? (n + 15) & ~(size_t)15 : 16;
    ArenaBlock *b = a->head;
    if (!b || b->cap - b->used < n) {
        size_t cap = b ? b->cap * 2 : ((size_t)1 << 15);
        if (cap < n) cap = n;
        ArenaBlock *nb;
        if (arena_spare && arena_spare->cap >= cap) {
            nb = arena_spare;
            arena_spare = NULL;
        } else {
            nb = (ArenaBlock *)malloc(ARENA_HDR + cap);
            if (!nb) return NULL;
            nb->cap = cap;
        }
        nb->next = b;
        nb->used = 0;
        a->head = b = nb;
    }
    void *p = (char *)b + ARENA_HDR + b->used;
    b->used += n;
    return p;
}

/* alloc_n from the arena: n + 1 zeroed items of sz bytes, NULL as alloc_n */
static inline void *ar_calloc(Arena *a, Py_ssize_t n, size_t sz) {
    if (n < 0 || (size_t)n + 1 > SIZE_MAX / sz) return NULL;
    void *p = ar_alloc(a, ((size_t)n + 1) * sz);
    if (p) memset(p, 0, ((size_t)n + 1) * sz);
    return p;
}

/* every block freed but the largest, kept as the spare; a call that needed more than one
 * block leaves one block as large as they were together (the next call needs one) */
static inline void ar_free(Arena *a) {
    ArenaBlock *b = a->head;
    if (b && b->next) {
        size_t total = 0;
        for (ArenaBlock *q = b; q; q = q->next) total += q->cap;
        while (b) {
            ArenaBlock *next = b->next;
            free(b);
            b = next;
        }
        a->head = NULL;
        if (!arena_spare || arena_spare->cap < total) {
            ArenaBlock *nb = (ArenaBlock *)malloc(ARENA_HDR + total);
            if (nb) {
                nb->cap = total;
                free(arena_spare);
                arena_spare = nb;
            }
        }
        return;
    }
    while (b) {
        ArenaBlock *next = b->next;
        if (!arena_spare || arena_spare->cap < b->cap) {
            free(arena_spare);
            arena_spare = b;
        } else {
            free(b);
        }
        b = next;
    }
    a->head = NULL;
}

/* int32 array from a sequence of ints in [lo, hi); want >= 0: that length. A ValueError
 * (an entry out of range, past a C long too, or the wrong length), or the sequence's own
 * error; *n_out the length when not NULL. The caller frees it. Reads a snapshot (a tuple):
 * an item's __index__ that changes the caller's list cannot change what is read. */
static inline int *int_array(PyObject *obj, Py_ssize_t want, long lo, long hi, Py_ssize_t *n_out) {
    PyObject *seq = PySequence_Tuple(obj);
    if (!seq) return NULL;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
    if ((want >= 0 && n != want) || n > INT_MAX / 2) {
        PyErr_SetString(PyExc_ValueError, "a table of the wrong length");
        Py_DECREF(seq);
        return NULL;
    }
    int *v = alloc_n(n, sizeof(int));
    if (!v) { Py_DECREF(seq); PyErr_NoMemory(); return NULL; }
    for (Py_ssize_t i = 0; i < n; i++) {
        long x = PyLong_AsLong(PySequence_Fast_GET_ITEM(seq, i));
        if ((x == -1 && PyErr_Occurred()) || x < lo || x >= hi) {
            if (!PyErr_Occurred() || PyErr_ExceptionMatches(PyExc_OverflowError)) {
                PyErr_Clear();
                PyErr_SetString(PyExc_ValueError, "a table entry out of range");
            }
            free(v);
            Py_DECREF(seq);
            return NULL;
        }
        v[i] = (int)x;
    }
    Py_DECREF(seq);
    if (n_out) *n_out = n;
    return v;
}

/* CSR offsets: n + 1 ascending entries from 0 to m */
static inline int offsets_ok(const int *at, int n, Py_ssize_t m) {
    if (at[0] != 0 || at[n] != m) return 0;
    for (int i = 0; i < n; i++) if (at[i] > at[i + 1]) return 0;
    return 1;
}

#endif
