"""numpy versions of the structural, indexing and reduction primitives the
generator applies to reference arrays and folds on constants (binding the
JAX primitive eagerly compiles one XLA program per shape: a thousand of
them per axle). Semantics: the XLA operation semantics of each primitive;
checked against ``primitive.bind`` in tests/sweep/codegen/test_codegen.py."""
from __future__ import annotations

import numpy as np


def slice_(x, start_indices, limit_indices, strides=None, **_):
    strides = strides or (1,) * x.ndim
    return x[tuple(slice(int(a), int(b), int(s)) for a, b, s in zip(start_indices, limit_indices, strides))]


def squeeze(x, dimensions, **_):
    return np.squeeze(x, axis=tuple(int(d) for d in dimensions))


def expand_dims(x, dimensions, **_):
    return np.expand_dims(x, tuple(int(d) for d in dimensions))


def broadcast_in_dim(x, shape, broadcast_dimensions, **_):
    shape = tuple(int(s) for s in shape)
    tmp = [1] * len(shape)
    for i, d in enumerate(broadcast_dimensions):
        tmp[int(d)] = x.shape[i]
    return np.broadcast_to(x.reshape(tmp), shape)


def reshape(x, new_sizes, dimensions=None, **_):
    if dimensions is not None:
        x = np.transpose(x, dimensions)
    return np.reshape(x, tuple(int(s) for s in new_sizes))


def transpose(x, permutation, **_):
    return np.transpose(x, tuple(int(p) for p in permutation))


def concatenate(*xs, dimension, **_):
    return np.concatenate(xs, axis=int(dimension))


def stack(*xs, axis, **_):
    return np.stack(xs, axis=int(axis))


def split(x, sizes, axis, **_):
    cuts = np.cumsum([int(s) for s in sizes])[:-1]
    return np.split(x, cuts, axis=int(axis))


def rev(x, dimensions, **_):
    return np.flip(x, axis=tuple(int(d) for d in dimensions))


def pad(x, pv, padding_config, **_):
    out = x
    for ax, (lo, hi, interior) in enumerate(padding_config):
        lo, hi, interior = int(lo), int(hi), int(interior)
        if interior:
            n = out.shape[ax]
            shape = list(out.shape)
            shape[ax] = n + (n - 1) * interior if n else 0
            tmp = np.full(shape, pv, dtype=out.dtype)
            idx = [slice(None)] * out.ndim
            idx[ax] = slice(0, None, interior + 1)
            tmp[tuple(idx)] = out
            out = tmp
        if lo < 0:
            out = np.take(out, range(-lo, out.shape[ax]), axis=ax)
            lo = 0
        if hi < 0:
            out = np.take(out, range(0, out.shape[ax] + hi), axis=ax)
            hi = 0
        widths = [(0, 0)] * out.ndim
        widths[ax] = (lo, hi)
        out = np.pad(out, widths, constant_values=np.asarray(pv, out.dtype))
    return out


STRUCTURAL = {"slice": slice_, "squeeze": squeeze, "expand_dims": expand_dims, "broadcast_in_dim": broadcast_in_dim,
              "reshape": reshape, "transpose": transpose, "concatenate": concatenate, "stack": stack,
              "split": split, "rev": rev}


# ----------------------------------------------------------------------------- gather / scatter
def gather_positions(operand_shape, indices, dimension_numbers, slice_sizes, mode, **_):
    """For every output element the flat operand position it reads, -1 where
    out of bounds in FILL_OR_DROP mode (XLA's gather semantics; the index
    vector is the last axis of ``indices``)."""
    dn = dimension_numbers
    indices = np.asarray(indices)
    batch_shape = indices.shape[:-1]
    offset_dims = [int(d) for d in dn.offset_dims]
    collapsed = [int(d) for d in dn.collapsed_slice_dims]
    obd = [int(d) for d in getattr(dn, "operand_batching_dims", ())]
    sibd = [int(d) for d in getattr(dn, "start_indices_batching_dims", ())]
    sim = [int(d) for d in dn.start_index_map]
    window_dims = [d for d in range(len(operand_shape)) if d not in collapsed and d not in obd]
    win_sizes = [int(slice_sizes[d]) for d in window_dims]
    out_rank = len(batch_shape) + len(offset_dims)
    batch_out_dims = [d for d in range(out_rank) if d not in offset_dims]
    out_shape = [0] * out_rank
    for d, s in zip(batch_out_dims, batch_shape):
        out_shape[d] = s
    for d, s in zip(offset_dims, win_sizes):
        out_shape[d] = s
    fill = "FILL" in str(mode)
    strides = np.cumprod([1] + list(operand_shape[::-1]))[:-1][::-1]
    grid = np.indices(out_shape).reshape(out_rank, -1)          # every output element's index
    g = tuple(grid[d] for d in batch_out_dims)
    svec = indices[g] if indices.ndim > 1 else np.broadcast_to(indices, (grid.shape[1], indices.shape[-1]))
    full = np.zeros((len(operand_shape), grid.shape[1]), np.int64)
    oob = np.zeros(grid.shape[1], bool)
    for k, d in enumerate(sim):
        s = svec[:, k].astype(np.int64)
        hi = operand_shape[d] - int(slice_sizes[d])
        if fill:
            oob |= (s < 0) | (s > hi)
        full[d] = np.clip(s, 0, hi)
    for od, sd in zip(obd, sibd):
        full[od] = g[sd]
    for wd, od in zip(window_dims, offset_dims):
        full[wd] += grid[od]
    pos = (strides[:, None] * full).sum(0) if len(operand_shape) else np.zeros(grid.shape[1], np.int64)
    return np.where(oob, -1, pos).reshape(out_shape)


def gather(x, indices, fill_value=None, **params):
    pos = gather_positions(x.shape, indices, **params)
    flat = x.reshape(-1)
    out = flat[np.maximum(pos, 0)]
    if (pos < 0).any():
        fv = fill_value if fill_value is not None else (np.nan if np.issubdtype(x.dtype, np.floating) else 0)
        out = np.where(pos < 0, fv, out)
    return out


def scatter_targets(operand_shape, indices, updates_shape, dimension_numbers, mode, **_):
    """For every update element the flat operand position it lands on, -1
    where dropped (out of bounds; XLA's scatter semantics)."""
    dn = dimension_numbers
    indices = np.asarray(indices)
    uwd = [int(d) for d in dn.update_window_dims]
    iwd = [int(d) for d in dn.inserted_window_dims]
    obd = [int(d) for d in getattr(dn, "operand_batching_dims", ())]
    sibd = [int(d) for d in getattr(dn, "scatter_indices_batching_dims", ())]
    sdod = [int(d) for d in dn.scatter_dims_to_operand_dims]
    window_dims = [d for d in range(len(operand_shape)) if d not in iwd and d not in obd]
    upd_scatter_dims = [d for d in range(len(updates_shape)) if d not in uwd]
    win_sizes = [updates_shape[d] for d in uwd]
    clip = "CLIP" in str(mode)
    strides = np.cumprod([1] + list(operand_shape[::-1]))[:-1][::-1]
    tgt = np.empty(updates_shape, np.int64)
    for u in np.ndindex(*updates_shape):
        g = tuple(u[d] for d in upd_scatter_dims)
        svec = indices[g] if indices.ndim > 1 else indices
        start = [0] * len(operand_shape)
        for k, d in enumerate(sdod):
            s = int(svec[k])
            if clip:
                s = min(max(s, 0), operand_shape[d] - win_sizes[window_dims.index(d)] if d in window_dims
                        else operand_shape[d] - 1)
            start[d] = s
        for od, sd in zip(obd, sibd):
            start[od] = g[sd]
        full = list(start)
        for wd, ud in zip(window_dims, uwd):
            full[wd] += u[ud]
        ok = all(0 <= f < n for f, n in zip(full, operand_shape))
        # XLA skips the whole update window when any of it is out of bounds
        if ok:
            for k, d in enumerate(sdod):
                ws = win_sizes[window_dims.index(d)] if d in window_dims else 1
                if not 0 <= start[d] <= operand_shape[d] - ws:
                    ok = False
        tgt[u] = int(np.dot(full, strides)) if ok else -1
    return tgt
