"""``python -m sweep.verify PATH.zarr [...]``: check result cubes without running anything.

For every store: it opens, follows the cube schema (:mod:`sweep.results.schema`),
and every written chunk (``chunk_done`` = 1) reads back with the checksums
recorded when it was written (:func:`sweep.results.store.verify_store`: a deleted,
truncated or altered chunk file is found). Prints one line per problem and
exits 1 if there is any; otherwise prints one ``ok`` line per store (with
how many chunks are written: an unfinished store is not damaged, a rerun of
its job completes it) and exits 0. Exit 2: usage.

A rerun of a job (``python -m sweep ...``) does the same check on the chunks
it skips and recomputes damaged ones (``sweep.verify=false`` trusts the
flags instead).
"""
from __future__ import annotations

import sys

from sweep.results import schema as cube_schema
from sweep.kinds import kinds
from sweep.results.store import verify_store


def _channels(path):
    """The channel table of the cube's job kind (attribute ``cube_kind``)."""
    import xarray as xr
    with xr.open_zarr(path) as ds:
        kind = kinds().get(ds.attrs.get("cube_kind", "time_response"))
        return kind.cube_channels(ds) if kind is not None else None


def verify(path):
    """(problems, ok line) of one store."""
    problems, s = verify_store(path)
    if s["n_chunks"] == 0 and problems:
        return [f"{path}: {p}" for p in problems], None
    try:
        problems = [f"{path}: {p}" for p in cube_schema.check(path, _channels(path))] + \
                   [f"{path}: {p}" for p in problems]
    except Exception as err:  # noqa: BLE001 - does not open as a dataset
        problems = [f"{path}: does not open with xarray ({type(err).__name__}: {err})"] + problems
    left = s["n_chunks"] - s["done"]
    line = (f"{path}: ok, {s['done']} of {s['n_chunks']} chunk(s) written and verified"
            + (f", {left} not run yet (rerun the job to complete it)" if left else ", complete")
            + (f"; {s['note']}" if s.get("note") else ""))
    return problems, line


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    if not argv or any(a in ("-h", "--help") for a in argv):
        print("usage: python -m sweep.verify PATH.zarr [PATH.zarr ...]", file=sys.stderr)
        return 2
    bad = False
    for path in argv:
        problems, line = verify(path)
        for p in problems:
            print(p)
        if problems:
            bad = True
        else:
            print(line)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
