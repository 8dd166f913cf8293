/* The profile walk of an op set (compiler.footprint._profile) over packed chain rows, and
 * the halo / attention terms compiler.capacity._work adds to a chunk shape's working set.
 * Linked into search_space._cwalk (see _cprofile.c; search_space/_cfoot.py packs the rows). */
#ifndef GRAPHTUNE_CPROFILE_H
#define GRAPHTUNE_CPROFILE_H

#include <Python.h>

/* Chains of a pack (its header), -1 when it is malformed. */
int cprof_chains(const long long *p, Py_ssize_t n);

/* The walk for (streamed mask, output streamed out, held): per chain (during sample bytes,
 * during fixed bytes) into raw (2 * chains). Returns 0, -1 when the pack is malformed. */
int cprof_walk(const long long *p, Py_ssize_t n, unsigned long long mask, int off, int held,
               long long *raw);

/* compiler.footprint._prune of n raw points: the pairs kept, written to out (2 * n room);
 * returns how many. Sorts raw in place. */
Py_ssize_t cprof_prune(long long *raw, Py_ssize_t n, long long *out);

/* compiler.capacity._work's halo / attention loop over the raw points of `mask`, starting
 * from `work` (the profile's peak as a float): the largest of work and every point's bytes
 * with its chain's halo and attention terms (halo_v / attn_v: per slot, the shape's
 * halo_bytes_per_core / attention_excess_bytes). -1.0 when the pack is malformed. */
double cprof_halo(const long long *p, Py_ssize_t n, unsigned long long mask, const long long *raw,
                  long long spp, long long cpp, const double *halo_v, const double *attn_v,
                  Py_ssize_t n_slots, double work);

/* profile(pack, mask, off, held) -> (raw points, pruned profile): for the tests. */
PyObject *cprof_py_profile(PyObject *self, PyObject *args);

#endif
