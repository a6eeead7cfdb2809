"""Resumable result-cube stores (zarr format 2, read with ``xarray.open_zarr``).

Layout: one zarr array per cube variable, chunked along ``variant`` with the
job's chunk size (and along time), compressed; the metadata (all arrays,
coordinates, attributes) is created and consolidated once, atomically, before
any compute. Each finished compute chunk writes its own whole zarr chunks and
then sets its flag in ``chunk_done`` (one zarr chunk per flag), so

- a job killed at any moment leaves a store that opens, with every chunk
  whose flag is set complete (unfinished variants read as NaN with
  ``status = -1``);
- a rerun skips flagged chunks and completes the rest;
- shards of one job write disjoint chunks of the same store.
"""
from __future__ import annotations

import os
import shutil
import uuid

import numpy as np
import zarr

from kernels.model import ModelError

STATUS_MEANINGS = {-1: "not_run", 0: "ok", 1: "equilibrium_failed", 2: "non_finite"}


class CubeStore:
    def __init__(self, path):
        self.path = path
        self.group = zarr.open_group(path, mode="r+", zarr_format=2)

    @property
    def attrs(self):
        return self.group.attrs

    def done(self):
        return np.asarray(self.group["chunk_done"][:]).astype(bool)

    def write_chunk(self, k, start, data: dict):
        """Write the arrays of compute chunk k (variants start..start+n) and flag it done."""
        for name, arr in data.items():
            self.group[name][start:start + arr.shape[0]] = arr
        self.group["chunk_done"][k] = 1


def _dims(arr, dims):
    arr.attrs["_ARRAY_DIMENSIONS"] = list(dims)


def create_store(path, spec, attrs, identity):
    """Create the store atomically, or check that an existing one is the same job.

    ``spec``: {name: (dims, shape, dtype, chunks, fill, attrs)} for data
    variables; ``spec['__coords__']``: {name: (values, attrs)}.
    ``identity``: the job's config text; an existing store with another
    identity raises :class:`ModelError`.
    Returns (CubeStore, created: bool).
    """
    if os.path.exists(path):
        return _existing(path, identity), False
    tmp = f"{path.rstrip('/')}.init-{uuid.uuid4().hex[:8]}"
    parent = os.path.dirname(os.path.abspath(path))
    os.makedirs(parent, exist_ok=True)
    g = zarr.open_group(tmp, mode="w", zarr_format=2)
    for name, (values, a) in spec["__coords__"].items():
        values = np.asarray(values)
        arr = g.create_array(name, shape=values.shape, dtype=values.dtype, chunks=values.shape,
                             fill_value=None)
        arr[...] = values
        _dims(arr, [name])
        arr.attrs.update(a)
    for name, (dims, shape, dtype, chunks, fill, a) in spec.items():
        if name == "__coords__":
            continue
        if np.dtype(dtype).kind in "iu":
            # integers get no fill value (xarray would mask it as missing and
            # turn the array into floats); their initial value is written once
            arr = g.create_array(name, shape=shape, dtype=dtype, chunks=chunks, fill_value=None)
            arr[...] = np.full(shape, fill, dtype)
        else:
            arr = g.create_array(name, shape=shape, dtype=dtype, chunks=chunks, fill_value=fill)
        _dims(arr, dims)
        arr.attrs.update(a)
    g.attrs.update(attrs)
    g.attrs["job_identity"] = identity
    zarr.consolidate_metadata(tmp, zarr_format=2)
    try:
        os.rename(tmp, path)
        created = True
    except OSError:  # another shard created it first
        shutil.rmtree(tmp, ignore_errors=True)
        created = False
    return _existing(path, identity), created


def _existing(path, identity):
    try:
        store = CubeStore(path)
        old = store.attrs.get("job_identity")
    except Exception:  # noqa: BLE001 - not a cube of ours
        old = None
    if old != identity:
        raise ModelError(f"output.path = {path!r} exists and holds a cube of another config; "
                         "choose another output.path or set output.overwrite=true")
    return store


def remove(path):
    if os.path.exists(path):
        shutil.rmtree(path)
