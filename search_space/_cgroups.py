"""Pass 1 of decoding in C: the groups, their shapes and cores (``search_space/_cshape.c``).

:func:`search_space._build.decode_groups` forms the groups of the blocks
(``Decoding.add_blocks``: their facts, dependencies, consumers and topological order),
then, producers first, reads each group's samples per part, cores per part, parts, core
order and spread, fits the shape (``Decoding.fit``) and binds its chunks
(``Decoding.set_binding``). That loop, about five reader calls and a dozen dictionary
look-ups per group (BERT-large has ~130 groups per candidate), runs here in one C call
per candidate over tables this module fills from the Python definitions:

* per space (:func:`_tables`): the choices of the slot parameters (the same for every
  slot, checked) and each ``perm`` choice's core order
  (:func:`search_space._dims.perm_order`; ``reuse``: None);
* per batch: the samples per part each ``samples`` choice asks for (the Python loop's
  expression);
* per (batch, block): each group's row (:func:`_block_rows`): its name, first op, slot,
  facts (``Decoding.info``: the same :class:`~search_space._structure.GroupInfo` the
  Python path finds) and their ``shared`` cache, input and output tensor codes.

The C loop reads the fit's answers from the op set's fit table (a bytearray of int32
triples by choice indices, shared by op sets alike: no key, hash or dict look-up on a hit),
filling an entry the first time from the ``shared`` cache (where ``Decoding.fit`` keeps
them; on a miss ``Decoding.fit``'s search runs in C, ``fit_c``, asking ``Decoding.fits_l1``
for a shape whose answer is not in the ``shared`` cache yet, and keeps its answer there as
``Decoding.fit`` does; for an op set whose parts are kept, that miss itself runs in C,
``fits_fast``, given what :func:`_c_fit` hands it), and the bindings from the space's cache (where
:func:`search_space._build.bind_set` keeps them), and calls those Python definitions on a
miss (and :func:`search_space._dims.unshuffle` for a ``reuse`` core order): so every
number is the Python code's. It asks the recorder the same parameters in the same order.
The differential tests (``tests/search_space/test_cgroups.py``) compare the groups field
by field with the Python loop's on several models.

Used when the reader is a recorder over a whole assignment (``Space.sample``/``decode``);
a trial or a projection, ``GRAPHTUNE_PURE_PYTHON=1`` or a missing extension (warned once,
:func:`search_space._ccore.missing`) take the Python loop.
"""

from __future__ import annotations

from functools import partial
from typing import Any

from search_space._ccore import _FIT_STREAMED, _fill, _shape_tables, load_extension, tensor_codes
from search_space._ccore import _load as _load_walk
from search_space._cfoot import halo_values
from search_space._cglue import c_values
from search_space._crows import _cut_sides
from search_space._dims import perm_order, unshuffle

Decoding = Any  # a search_space._build.Decoding (importing it back would close a circle)

STATS = {"c": 0}
_KINDS = ("samples", "cpp", "parts", "perm", "spread")


def _load() -> Any:
    return load_extension("_cshape")


def available() -> bool:
    """Whether pass 1's group loop runs in C (built, importable and not disabled)."""
    return _load() is not None


def _tables(space: Any) -> tuple[Any, ...] | None:
    """Per space: the slot parameters' choices (samples, cpp, parts, perm orders, spread),
    or None when two slots' choices differ (the C loop reads one table per kind)."""
    hit: tuple[Any, ...] | None = getattr(space, "_cgroup_tables", None)
    if hit is not None:
        return hit[0]  # type: ignore[no-any-return]
    dims = space.dims
    n = space.target.chip.cores_per_cluster
    found: list[tuple[Any, ...]] = []
    ok = bool(space.slot)
    for off, kind in enumerate(_KINDS):
        seen = {dims[d + off].choices for d in space.slot.values()}
        if len(seen) != 1 or any(dims[d + off].kind != kind for d in space.slot.values()):
            ok = False
            break
        found.append(next(iter(seen)))
    tabs = None
    if ok:
        samples, cpp, parts, perms, spread = found
        tabs = (samples, tuple(cpp), tuple(parts),
                tuple(None if p == "reuse" else perm_order(p, n) for p in perms), tuple(spread))
    space._cgroup_tables = (tabs,)
    return tabs


def _spp_of(space: Any, batch: int, divs: list[int], samples: tuple[int, ...]) -> tuple[int, ...]:
    """Per ``samples`` choice, the samples per part decode_groups' loop asks for at ``batch``."""
    cache: dict[int, tuple[int, ...]] | None = getattr(space, "_cgroup_spp", None)
    if cache is None:
        cache = space._cgroup_spp = {}
    hit = cache.get(batch)
    if hit is None:
        hit = cache[batch] = tuple(max(d for d in divs if d <= want) if want >= 1 else 1
                                   for want in samples)
    return hit


def _c_fit(dec: Decoding, fit: Any, space: Any, batch: int) -> tuple[Any, ...]:
    """What the C loop runs ``Decoding.fit`` with (``fit_c`` in ``_cshape.c``): the decode's
    ``fits_l1`` and the batch's divisors, when ``fit`` is the decode's own ``Decoding.fit``
    (another callable, even one patched on the class or a subclass's, is called as it is;
    so is the reference at a batch with more than ``FIT_DIVS`` divisors)."""
    own: Any = getattr(fit, "__self__", None)
    func: Any = getattr(fit, "__func__", None)
    if own is not dec or func is not _reference_fit() or len(own.divs) > FIT_DIVS:
        return ()
    fits = own.fits_l1
    walk = _load_walk()  # (None: the compiled walk missing, its fits with it: fits_l1 asked)
    if walk is None or len(_REFERENCE) < 2 or getattr(fits, "__func__", None) is not _REFERENCE[1]:
        return fits, _divs_of(space, batch, own.divs)  # another fits_l1: called as it is
    # Decoding.fits_l1's miss in C (fits_fast in _cshape.c) for an op set whose parts are kept
    return fits, _divs_of(space, batch, own.divs), (
        dec.mem, _shape_tables(space), float(dec.l1), walk.fits, _fill, partial, _cut_sides,
        halo_values, _FIT_STREAMED)


FIT_DIVS = 64
"""Divisors of the batch ``fit_c`` takes at most (a fixed array in ``_cshape.c``): 10,080
has 72; past it the decode calls ``Decoding.fit``."""

_REFERENCE: list[Any] = []


def set_reference_fit(fit: Any, fits_l1: Any = None) -> None:
    """``search_space._build`` names its ``Decoding.fit`` and ``Decoding.fits_l1`` here when
    it is imported (``REFERENCE_FIT``; importing ``_build`` here would close a circle)."""
    _REFERENCE[:] = [fit, fits_l1]


def _reference_fit() -> Any:
    """The reference ``Decoding.fit`` (None before ``search_space._build`` is imported)."""
    return _REFERENCE[0] if _REFERENCE else None


def _divs_of(space: Any, batch: int, divs: list[int]) -> tuple[int, ...]:
    """The batch's divisors as a tuple (``Decoding.divs``), kept per batch: what the C fit
    (``fit_c`` in ``_cshape.c``) searches."""
    cache: dict[int, tuple[int, ...]] | None = getattr(space, "_cgroup_divs", None)
    if cache is None:
        cache = space._cgroup_divs = {}
    hit = cache.get(batch)
    if hit is None:
        hit = cache[batch] = tuple(divs)
    return hit


def _block_rows(dec: Decoding, blk: Any, codes: dict[str, int], fit_key: tuple[Any, ...],
                by_ops: dict[int, tuple[Any, ...]]) -> tuple[tuple[Any, ...], ...]:
    """Each group's row of a block: (its op set's row, slot op, slot parameter); an op set's
    row (name, first op, facts, their shared cache, separable, output code, input codes,
    output name, the fit's table) kept in its facts' cache (see ``groups`` in ``_cshape.c``).

    The fit's table (``fit_entry`` in ``_cshape.c``) holds ``Decoding.fit``'s answers by
    choice indices (samples or "not split", cores per part, parts: 3 int32 each, 0 unknown),
    filled by the C loop from the ``shared`` cache or ``Decoding.fit`` the first time a
    group asks; kept in the ``shared`` cache (op sets alike share it) under ``fit_key``
    (the choices it is indexed by). ``by_ops`` (per space and batch) finds an op set's rows
    by slot from the op set's identity."""
    slot_of = dec.space.slot
    rows = []
    slots = blk.slots
    for k, ops in enumerate(blk.parts):
        # the rows of an op set by slot, found by the op set's identity (the space's one
        # tuple per op set, Block.parts): a new block of known op sets (~13 a BERT-large
        # candidate at warm 100, ~8 parts each) costs two look-ups a part, not the ~8 and the
        # op-set tuple's hash of Decoding.info and the facts' caches below (issue 20)
        hit = by_ops.get(id(ops))
        if hit is not None and hit[0] is ops:
            row = hit[1].get(slots[k])
            if row is not None:
                rows.append(row)
                continue
        info = dec.info(blk, k)
        base = info.cache.get("cshape")
        if base is None:
            start = ops[0]
            table = info.shared.get(fit_key)
            if table is None:
                _, spp, cpp, parts = fit_key
                table = info.shared[fit_key] = bytearray(12 * (len(spp) + 1) * len(cpp) * len(parts))
            base = info.cache["cshape"] = (
                f"g{start}", start, info, info.shared, 1 if info.separable else 0,
                codes.setdefault(info.output, len(codes)),
                tuple(codes.setdefault(t, len(codes)) for t in info.inputs), info.output, table)
        slot = blk.slots[k]
        # one row per (op set, slot) kept beside its base: blocks that share the part share
        # it (fewer objects the caches grow by per new block, issue 20)
        by_slot = info.cache.get("cshape_rows")
        if by_slot is None or by_slot[0] is not base:
            by_slot = info.cache["cshape_rows"] = (base, {})
        row = by_slot[1].get(slot)
        if row is None:
            row = by_slot[1][slot] = (base, slot, slot_of[slot])
        if hit is None or hit[0] is not ops or hit[1] is not by_slot[1]:
            by_ops[id(ops)] = (ops, by_slot[1])  # keeps ops alive: its id stays its own
        rows.append(row)
    return tuple(rows)


def decode_groups(dec: Decoding, get: Any, blocks: list[Any], fit: Any, bind_set: Any,
                  g_type: type) -> bool:
    """Set ``dec``'s groups (shaped and bound), ``by_name``, ``by_out`` and ``topo`` as
    ``Decoding.add_blocks`` and decode_groups' loop do; False (nothing set) when the C loop
    is not available or ``get`` is not a recorder over a whole assignment."""
    values, rep, active = (getattr(get, a, None) for a in ("values", "rep", "active"))
    values = c_values(values)
    if values is None or type(rep) is not list or type(active) is not bytearray:
        return False
    mod = _load()
    if mod is None:
        return False
    space = dec.space
    tabs = _tables(space)
    if tabs is None:
        return False
    samples, cpp, parts, perms, spread = tabs
    batch = dec.batch
    known: dict[int, dict[int, tuple[Any, ...]]] | None = getattr(space, "_cgroup_rows", None)
    if known is None:
        known = space._cgroup_rows = {}
    per = known.get(batch)
    if per is None:
        per = known[batch] = {}
    ops_rows: dict[int, dict[int, tuple[Any, ...]]] = space.__dict__.setdefault("_cgroup_ops", {})
    by_ops = ops_rows.get(batch)  # the batch's op-set rows by the op set's identity (_block_rows)
    if by_ops is None:
        by_ops = ops_rows[batch] = {}
    codes = tensor_codes(space)
    spp = _spp_of(space, batch, dec.divs, samples)
    rows = []
    for blk in blocks:
        hit = per.get(id(blk))
        if hit is None or hit[0] is not blk:  # keyed by identity: the row keeps its block
            # a new block of known op sets: its rows found in C (block_rows in _cshape.c, the
            # loop's hit path: ~13 new blocks a BERT-large candidate at warm 100), else the loop
            brows = mod.block_rows(blk.parts, blk.slots, by_ops) \
                if type(blk.parts) is tuple and type(blk.slots) is tuple else None
            if brows is None:
                brows = _block_rows(dec, blk, codes, ("cfit", spp, cpp, parts), by_ops)
            hit = per[id(blk)] = (blk, brows)
        rows.append(hit[1])
    groups, by_name, by_out, topo, flat = mod.groups(
        values, rep, active, rows, len(codes), batch, dec.n,
        spp, len(dec.divs) > 1, cpp, parts, perms, spread,
        fit, unshuffle, bind_set, _bind_sets(space), g_type, "fit",
        *_c_fit(dec, fit, space, batch))
    dec.groups, dec.by_name, dec.by_out, dec.topo = groups, by_name, by_out, topo
    dec.flat = flat  # flat_groups(groups), made in C (what the schedule keeps, _lazy.Decoded)
    dec.waves = True  # each group's wave too (Decoding.derive's loop, in C)
    STATS["c"] += 1
    return True


def _bind_sets(space: Any) -> dict[tuple[Any, ...], Any]:
    """The space's chunk bindings by (perm, cores, parts, split, spread)
    (:func:`search_space._build.bind_set` fills it)."""
    sets: dict[tuple[Any, ...], Any] | None = getattr(space, "_bind_sets", None)
    if sets is None:
        sets = space._bind_sets = {}
    return sets


def unit_slots(space: Any, parts: Any) -> tuple[int, ...] | None:
    """:func:`search_space._build.unit_slots` in C (``_cshape.unit_slots``), or None when
    the extension is not available (the caller runs the Python function)."""
    mod = _load()
    if mod is None:
        return None
    st = space.structure
    firsts: tuple[int, ...] | None = getattr(space, "_cseg_first", None)
    if firsts is None:
        firsts = space._cseg_first = tuple(a for a, _ in st.segments)
    return mod.unit_slots(st.seg_of_op, firsts, parts)  # type: ignore[no-any-return]
