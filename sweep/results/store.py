"""Resumable result-cube stores (zarr format 2, read with ``xarray.open_zarr``).

Layout of ``<path>`` (a zarr v2 directory store, filled in place):

- one zarr array per cube variable, chunked along ``variant`` with the job's
  compute-chunk size (so a compute chunk owns whole zarr chunks and shards
  never write the same file), compressed;
- ``chunk_done`` (dim ``chunk``, a *coordinate*, so ``ds.where(...)`` does
  not broadcast it): 1 = compute chunk written completely and checksummed;
- ``_integrity/digest`` (a zarr sub-group that ``xarray.open_zarr`` does not
  show): per compute chunk, one 64-bit BLAKE2b digest per per-variant array
  of the values written (in the array's dtype, C order; taken beside the
  writes, so a chunk is not read back while the job runs) (``_integrity``
  attrs: the array names, chunk size, variants);
- the metadata (all arrays, coordinates, attributes) is created and
  consolidated once, atomically (built in ``<path>.init-<host>.<pid>.<id>``
  and renamed), before any compute.

Each finished compute chunk writes its arrays (concurrently, each array's
digest taken beside its write) and records their digests, and only then
sets its flag, so

- a job killed at any moment leaves a store that opens, with every chunk
  whose flag is set complete (unfinished variants read as NaN with
  ``status = -1``);
- a rerun verifies the chunks it skips against their digests (a deleted,
  truncated or altered chunk file is found, reported and recomputed) and
  completes the rest; :func:`verify_store` / ``python -m sweep.verify``
  checks a store without running anything;
- shards of one job write disjoint chunks of the same store.

A lock file ``<path>.lock`` beside the store lists the processes working on
it (pid, host, shard). A process refuses to start while another live process
works on overlapping chunks (two non-shard runs, or a non-shard run and any
shard, or two runs of the same shard); shards with disjoint chunks run
together. Entries of dead processes on this host are taken over.
"""
from __future__ import annotations

import contextlib
import glob
import hashlib
import json
import logging
import math
import os
import shutil
import socket
import time
import uuid

import numpy as np
import zarr

from kernels.model import ModelError
from sweep.results.status import NOT_RUN

try:  # POSIX only; without it the lock file is read and written unguarded
    import fcntl
except ImportError:  # pragma: no cover
    fcntl = None

log = logging.getLogger("sweep")

INTEGRITY = "_integrity"
STALE_INIT_S = 3600.0       # an .init-* folder of another host older than this is abandoned


class StoreError(ModelError):
    """A store cannot be used (locked, unreadable, write failed); one line."""


def digest(values) -> int:
    """64-bit BLAKE2b of an array's C-order bytes (never 0: 0 means 'no
    digest'). Hashes the array's own buffer (no copy; hashlib releases the
    GIL on it, so digests of several arrays run in parallel threads)."""
    a = np.ascontiguousarray(values)
    h = hashlib.blake2b(memoryview(a.reshape(-1).view(np.uint8)) if a.size else b"", digest_size=8).digest()
    return int.from_bytes(h, "little") or 1


# threads that write a chunk's arrays and take their digests: compression
# (Blosc) and BLAKE2b release the GIL, so a chunk's arrays are written in
# parallel on a many-core host, beside the next chunk's computing
WRITE_THREADS = max(1, min(8, os.cpu_count() or 1))


class CubeStore:
    def __init__(self, path, mode="r+"):
        self.path = path
        self.group = zarr.open_group(path, mode=mode, zarr_format=2)
        self._integrity = None
        try:
            self._integrity = self.group[INTEGRITY]["digest"]
        except KeyError:                      # a store of an older version: flags only
            pass

    @property
    def attrs(self):
        return self.group.attrs

    @property
    def n_chunks(self):
        return int(self.group["chunk_done"].shape[0])

    @property
    def arrays(self):
        return list(self._integrity.attrs["arrays"]) if self._integrity is not None else []

    @property
    def chunk(self):
        """The compute-chunk size (variants) the store was created with."""
        if self._integrity is not None:
            return int(self._integrity.attrs["chunk"])
        return int(self.attrs["chunk_size"])

    def region(self, k):
        """Variants (a, b) of compute chunk k."""
        if self._integrity is not None:
            C, n = int(self._integrity.attrs["chunk"]), int(self._integrity.attrs["n_variants"])
        else:
            C, n = int(self.attrs["chunk_size"]), int(self.group["variant"].shape[0])
        return k * C, min(n, (k + 1) * C)

    def done(self):
        """Flags as booleans; an unreadable flag counts as not done."""
        arr = self.group["chunk_done"]
        try:
            return np.asarray(arr[:]).astype(bool)
        except Exception:  # noqa: BLE001 - a damaged flag file: read one by one
            out = np.zeros(arr.shape[0], bool)
            for k in range(arr.shape[0]):
                try:
                    out[k] = bool(arr[k])
                except Exception:  # noqa: BLE001
                    out[k] = False
            return out

    def write_chunk(self, k, start, data: dict):
        """Write the arrays of compute chunk k (variants start..start+n) and
        record their digests (of the values written, in the store's dtypes),
        then flag the chunk done; a failed write raises before any flag."""
        from concurrent.futures import ThreadPoolExecutor
        n = next(np.shape(v)[0] for v in data.values() if np.ndim(v))      # variants of this chunk
        arrays = {name: self.group[name] for name in data}
        values = {}
        for name, arr in data.items():      # as the store holds them: its dtype, the region's shape
            z = arrays[name]
            values[name] = np.ascontiguousarray(np.broadcast_to(np.asarray(arr, dtype=z.dtype),
                                                                (n, *z.shape[1:])))

        def put(name):
            arrays[name][start:start + n] = values[name]

        def digest_of(name):      # an array of the cube not in this chunk's data: what the store holds
            return digest(values[name]) if name in values else digest(self.group[name][start:start + n])
        names = self.arrays if self._integrity is not None else []
        with ThreadPoolExecutor(min(WRITE_THREADS, len(data) + len(names))) as ex:
            writes = [ex.submit(put, name) for name in sorted(data, key=lambda m: -values[m].nbytes)]
            digests = [ex.submit(digest_of, name) for name in names]
            for f in writes:
                f.result()                  # a failed write raises here, before any flag
            row = np.array([f.result() for f in digests], np.uint64)
        if self._integrity is not None:
            self._integrity[k] = row
        self.group["chunk_done"][k] = 1

    def mark_undone(self, k):
        """Chunk k is to be recomputed: its variants' status set to not run
        first, then its flag cleared - a kill in between leaves a flagged chunk
        whose status no longer matches its checksum (found and recomputed
        again), never ``status = 0`` rows holding damaged values."""
        a, b = self.region(k)
        try:
            self.group["status"][a:b] = np.full(b - a, NOT_RUN, self.group["status"].dtype)
        except Exception as err:  # noqa: BLE001 - the flag below is what matters; say why
            log.warning("%s: chunk %d: status could not be reset to not run (%s)", self.path, k, _short(err))
        self.group["chunk_done"][k] = 0

    def check_chunk(self, k):
        """Problems of a flagged chunk k (empty list = intact): each per-variant
        array read back and compared with the digest recorded when it was written."""
        a, b = self.region(k)
        if self._integrity is None:
            return self._check_chunk_without_digests(a, b)
        try:
            want = np.asarray(self._integrity[k])
        except Exception as err:  # noqa: BLE001
            return [f"its checksums cannot be read ({_short(err)})"]
        if not np.all(want):
            return ["it has no checksums (flagged but never checksummed)"]
        problems = []
        for name, w in zip(self.arrays, want):
            try:
                got = digest(self.group[name][a:b])
            except Exception as err:  # noqa: BLE001 - missing/truncated/corrupt chunk file
                problems.append(f"{name} cannot be read ({_short(err)})")
                continue
            if got != int(w):
                problems.append(f"{name} does not match its checksum")
        return problems

    def _check_chunk_without_digests(self, a, b):
        """Older stores: every array must decode, and ok variants must be finite."""
        problems = []
        status = None
        try:
            status = np.asarray(self.group["status"][a:b])
        except Exception as err:  # noqa: BLE001
            problems.append(f"status cannot be read ({_short(err)})")
        for name, arr in self.group.arrays():
            if name in ("chunk_done", "variant") or len(arr.shape) == 0:
                continue
            dims = arr.attrs.get("_ARRAY_DIMENSIONS", [])
            if not dims or dims[0] != "variant":
                continue
            try:
                v = np.asarray(arr[a:b])
            except Exception as err:  # noqa: BLE001
                problems.append(f"{name} cannot be read ({_short(err)})")
                continue
            if status is not None and v.dtype.kind == "f" and v.ndim > 1:
                ok = status == 0
                if ok.any() and not np.all(np.isfinite(v[ok])):
                    problems.append(f"{name} holds NaN for variants with status 0 (missing chunk file?)")
        return problems


def _short(err):
    return f"{type(err).__name__}: {err}".splitlines()[0][:200]


def _with_dims(attrs, dims):
    """An array's attributes with xarray's ``_ARRAY_DIMENSIONS`` (zarr format 2)."""
    return {"_ARRAY_DIMENSIONS": list(dims), **dict(attrs)}


# --------------------------------------------------------------------------- creation

def _host():
    return socket.gethostname().replace(".", "_")


def _pid_alive(pid):
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return False
    except (PermissionError, ValueError, OverflowError):
        return True
    return True


def _proc_start(pid):
    """Start time of a process (Linux /proc), to tell a reused pid apart; None elsewhere."""
    try:
        with open(f"/proc/{int(pid)}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[19]
    except (OSError, IndexError, ValueError):
        return None


def clean_stale_init(path):
    """Remove ``<path>.init-*`` folders left by runs killed while creating the
    store: those of dead processes on this host, and any older than an hour."""
    base = path.rstrip("/")
    removed = []
    for tmp in glob.glob(glob.escape(base) + ".init-*"):
        tag = tmp[len(base) + len(".init-"):]
        parts = tag.rsplit(".", 2)
        try:
            age = time.time() - os.path.getmtime(tmp)
        except OSError:
            continue
        if len(parts) == 3 and parts[0] == _host():
            stale = not _pid_alive(parts[1]) or int(parts[1]) == os.getpid()
        else:                                   # another host, or an older naming: by age
            stale = age > (STALE_INIT_S if len(parts) == 3 else 60.0)
        if stale:
            shutil.rmtree(tmp, ignore_errors=True)
            removed.append(tmp)
    if removed:
        log.info("removed %d unfinished store creation folder(s) of an interrupted run: %s",
                 len(removed), ", ".join(os.path.basename(r) for r in removed))
    return removed


def create_store(path, spec, attrs, identity, chunk=None):
    """Create the store atomically, or check that an existing one is the same job.

    ``spec``: {name: (dims, shape, dtype, chunks, fill, attrs)} for data
    variables; ``spec['__coords__']``: {name: (values, attrs)}.
    ``chunk``: the compute-chunk size along ``variant`` (default: the
    ``variant`` chunk of the first per-variant variable); the store adds
    ``chunk_done`` and the ``_integrity`` digests.
    ``identity``: the job's config text; an existing store with another
    identity raises :class:`StoreError`.
    Returns (CubeStore, created: bool).
    """
    if os.path.exists(path):
        return _existing(path, identity), False
    variables = {k: v for k, v in spec.items() if k not in ("__coords__", "chunk_done")}
    n = len(spec["__coords__"]["variant"][0])
    if chunk is None:
        chunk = next(v[3][0] for v in variables.values() if v[0][0] == "variant")
    n_chunks = -(-n // chunk)
    tmp = f"{path.rstrip('/')}.init-{_host()}.{os.getpid()}.{uuid.uuid4().hex[:8]}"
    parent = os.path.dirname(os.path.abspath(path))
    os.makedirs(parent, exist_ok=True)
    try:
        g = zarr.open_group(tmp, mode="w", zarr_format=2)
        extra_coords = []
        # every array's attributes (with xarray's dimension names) are written with
        # the array, not one update after another (each a file write: a rerun's
        # start-up, BENCHMARKS.md "Generated backend, fifth session")
        for name, (values, a, *dims) in spec["__coords__"].items():
            values = np.asarray(values)
            arr = g.create_array(name, shape=values.shape, dtype=values.dtype, chunks=values.shape,
                                 fill_value=None, attributes=_with_dims(a, dims[0] if dims else [name]))
            arr[...] = values
            if dims and list(dims[0]) != [name]:
                extra_coords.append(name)
        for name, (dims, shape, dtype, chunks, fill, a) in variables.items():
            if np.dtype(dtype).kind in "iu":
                # integers get no fill value (xarray would mask it as missing and
                # turn the array into floats); their initial value is written once
                arr = g.create_array(name, shape=shape, dtype=dtype, chunks=chunks, fill_value=None,
                                     attributes=_with_dims(a, dims))
                arr[...] = np.full(shape, fill, dtype)
            else:
                g.create_array(name, shape=shape, dtype=dtype, chunks=chunks, fill_value=fill,
                               attributes=_with_dims(a, dims))
        done = g.create_array("chunk_done", shape=(n_chunks,), dtype="i1", chunks=(1,), fill_value=None,
                              attributes=_with_dims({"long_name": "1 = compute chunk written completely and "
                                                                  "checksummed"}, ["chunk"]))
        done[...] = 0
        per_variant = sorted(k for k, v in variables.items() if v[0][0] == "variant")
        integ = g.create_group(INTEGRITY)
        dg = integ.create_array("digest", shape=(n_chunks, len(per_variant)), dtype="u8",
                                chunks=(1, len(per_variant)), fill_value=0)
        dg.attrs.update({"arrays": per_variant, "chunk": int(chunk), "n_variants": int(n),
                         "algorithm": "blake2b-64 of the C-order bytes of the values written"})
        g.attrs.update(attrs)
        g.attrs["job_identity"] = identity
        # coordinates, not data variables (ds.where does not broadcast them)
        g.attrs["coordinates"] = " ".join(["chunk_done", *extra_coords])
        zarr.consolidate_metadata(tmp, zarr_format=2)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    try:
        os.rename(tmp, path)
        created = True
    except OSError:  # another shard created it first
        shutil.rmtree(tmp, ignore_errors=True)
        created = False
    return _existing(path, identity), created


def _existing(path, identity):
    for repair in heal_metadata(path):
        log.warning("%s: %s", path, repair)
    try:
        store = CubeStore(path)
        old = store.attrs.get("job_identity")
    except Exception as err:  # noqa: BLE001 - not a cube of ours, or damaged metadata
        raise StoreError(f"output.path = {path!r} exists but is not a readable result cube "
                         f"({_short(err)}); choose another output.path or set output.overwrite=true "
                         "to replace it") from None
    if old != identity:
        raise StoreError(f"output.path = {path!r} exists and holds a cube of another config; "
                         "choose another output.path or set output.overwrite=true")
    return store


def remove(path):
    if os.path.exists(path):
        shutil.rmtree(path)


# --------------------------------------------------------------------------- metadata
ZMETADATA = ".zmetadata"
META_FILES = (".zarray", ".zattrs", ".zgroup")


def _read_json(path):
    """(parsed JSON or None, problem or None) of a metadata file."""
    try:
        with open(path) as f:
            return json.load(f), None
    except FileNotFoundError:
        return None, "is missing"
    except (OSError, ValueError) as err:
        return None, f"cannot be read ({_short(err)})"


def _norm(meta):
    """A metadata document as the per-array file holds it: zarr-python 3
    adds a ``consolidated_metadata`` entry to the consolidated copy of a
    sub-group's ``.zgroup`` that the group's own file does not have."""
    if isinstance(meta, dict):
        return {k: v for k, v in meta.items() if k != "consolidated_metadata"}
    return meta


def _consolidated(path):
    meta, problem = _read_json(os.path.join(path, ZMETADATA))
    if problem is None and not (isinstance(meta, dict) and isinstance(meta.get("metadata"), dict)):
        meta, problem = None, "is not consolidated zarr metadata"
    return (meta["metadata"] if meta else None), problem


def metadata_problems(path):
    """The store's metadata checked without reading data: the consolidated
    copy (``.zmetadata``, what xarray reads) and every per-array file
    (``.zarray`` / ``.zattrs`` / ``.zgroup``) must be readable and agree
    (both are written once, together, when the store is created), and
    every per-variant array must have the shape and compute chunks that
    ``_integrity`` records. One line per problem (empty: intact)."""
    cons, problem = _consolidated(path)
    if problem:
        return [f"{ZMETADATA} {problem}"]
    problems = []
    for key, want in sorted(cons.items()):
        if not key.endswith(META_FILES):
            continue
        own, problem = _read_json(os.path.join(path, key))
        own, want = _norm(own), _norm(want)
        if problem:
            problems.append(f"{key} {problem}")
        elif own != want:
            diff = sorted(k for k in set(own) | set(want) if own.get(k) != want.get(k)) \
                if isinstance(own, dict) and isinstance(want, dict) else []
            problems.append(f"{key} differs from the consolidated metadata" +
                            (f" ({', '.join(diff)})" if diff else ""))
    integ = cons.get(f"{INTEGRITY}/digest/.zattrs") or {}
    if "n_variants" in integ:
        n, chunk = int(integ["n_variants"]), int(integ["chunk"])
        for name in integ.get("arrays", []):
            z = cons.get(f"{name}/.zarray")
            if z is None:
                problems.append(f"{name}: no metadata")
            elif z["shape"][0] != n or z["chunks"][0] != chunk:
                problems.append(f"{name}: shape {z['shape']} / chunks {z['chunks']} do not match the store's "
                                f"{n} variants in chunks of {chunk}")
    return problems


def heal_metadata(path):
    """Repair the metadata of an existing store where one copy is intact (no
    data is touched, nothing recomputed) and return what was done:

    * damaged or missing consolidated metadata, every per-array file
      readable: ``.zmetadata`` rebuilt from them (``zarr.consolidate_metadata``);
    * a per-array file missing, unreadable or different from the
      consolidated copy: rewritten from the consolidated copy.

    What cannot be repaired is left for the caller's open to report."""
    if not os.path.isdir(path):
        return []
    cons, problem = _consolidated(path)
    done = []
    if problem:
        own = {}
        for root, _dirs, files in os.walk(path):
            for f in files:
                if f in META_FILES:
                    meta, bad = _read_json(os.path.join(root, f))
                    if bad:
                        return []               # neither copy is whole: nothing to rebuild from
                    own[os.path.relpath(os.path.join(root, f), path)] = meta
        if ".zgroup" not in own:
            return []
        try:
            zarr.consolidate_metadata(path, zarr_format=2)
        except Exception:  # noqa: BLE001 - not rebuildable; the open reports it
            return []
        return [f"the consolidated metadata ({ZMETADATA}) {problem}: rebuilt from the per-array "
                "metadata (no data touched)"]
    for key, want in sorted(cons.items()):
        if not key.endswith(META_FILES):
            continue
        f = os.path.join(path, key)
        own, bad = _read_json(f)
        want = _norm(want)
        if bad or _norm(own) != want:
            tmp = f"{f}.heal-{os.getpid()}"
            os.makedirs(os.path.dirname(f), exist_ok=True)
            with open(tmp, "w") as fh:
                json.dump(want, fh, indent=2, sort_keys=False)
            os.replace(tmp, f)
            done.append(f"{key} {bad or 'differed from the consolidated metadata'}: rewritten from "
                        "the consolidated metadata (no data touched)")
    return done


# --------------------------------------------------------------------------- verification

def verify_store(path, chunks=None):
    """Check a store's written chunks against their digests.

    Returns (problems, summary): one line per problem (chunk and variable),
    and a dict with ``n_chunks``, ``done``, ``checked``, ``damaged`` (list of
    chunk indices). ``chunks``: restrict to these chunk indices."""
    meta = metadata_problems(path) if os.path.isdir(path) else []
    healable = ("; a rerun of the job repairs it from the intact copy (no recompute)"
                if meta and _healable(path) else "")
    meta = [f"metadata: {p}{healable}" for p in meta]
    try:
        store = CubeStore(path, mode="r")
        flags = store.done()
    except Exception as err:  # noqa: BLE001
        return meta + [f"not a readable result cube ({_short(err)})"], \
            {"n_chunks": 0, "done": 0, "checked": 0, "damaged": []}
    problems, damaged = list(meta), []
    ks = [k for k in (range(len(flags)) if chunks is None else chunks) if flags[k]]
    for k in ks:
        found = store.check_chunk(k)
        if found:
            a, b = store.region(k)
            damaged.append(k)
            problems += [f"chunk {k} (variants {a}-{b - 1}): {p}" for p in found]
    if store._integrity is None:
        problems_note = "no checksums (store written by an older version): flagged chunks checked " \
                        "for readability and finite ok variants only"
    else:
        problems_note = ""
    return problems, {"n_chunks": len(flags), "done": int(flags.sum()), "checked": len(ks),
                      "damaged": damaged, "note": problems_note}


def _healable(path):
    """Whether :func:`heal_metadata` would repair the store (checked on a
    copy of its metadata files, the store untouched)."""
    import tempfile
    with tempfile.TemporaryDirectory() as tmp:
        copy = os.path.join(tmp, "copy.zarr")
        for root, _dirs, files in os.walk(path):
            for f in files:
                if f in META_FILES or f == ZMETADATA:
                    dst = os.path.join(copy, os.path.relpath(os.path.join(root, f), path))
                    os.makedirs(os.path.dirname(dst), exist_ok=True)
                    shutil.copyfile(os.path.join(root, f), dst)
        if not os.path.isdir(copy):
            return False
        heal_metadata(copy)
        return not metadata_problems(copy)


# --------------------------------------------------------------------------- lock

class StoreLock:
    """``<path>.lock``: one JSON line per process working on the store.

    Shards (i of n) and (j of m) overlap when some chunk k has k % n == i and
    k % m == j, i.e. when i == j modulo gcd(n, m); a non-shard run is 0 of 1
    and overlaps everything. :meth:`acquire` refuses (StoreError) while a live
    process holds an overlapping entry, and takes over entries of processes
    that no longer exist on this host."""

    def __init__(self, path, shard=0, num_shards=1):
        self.path = path
        self.file = path.rstrip("/") + ".lock"
        self.entry = {"pid": os.getpid(), "host": _host(), "start": _proc_start(os.getpid()),
                      "shard": int(shard), "num_shards": int(num_shards),
                      "since": time.strftime("%Y-%m-%d %H:%M:%S")}
        self.held = False

    @contextlib.contextmanager
    def _guard(self):
        """The lock file, opened and exclusively flock'ed (re-opened if another
        process removed it meanwhile)."""
        while True:
            f = open(self.file, "a+")
            if fcntl is not None:
                fcntl.flock(f.fileno(), fcntl.LOCK_EX)
            try:
                same = os.path.exists(self.file) and os.stat(self.file).st_ino == os.fstat(f.fileno()).st_ino
            except OSError:
                same = False
            if same:
                break
            f.close()
        try:
            yield f
        finally:
            f.close()                                   # releases the flock

    @staticmethod
    def _read(f):
        f.seek(0)
        out = []
        for line in f.read().splitlines():
            try:
                out.append(json.loads(line))
            except ValueError:
                continue
        return out

    def _alive(self, e):
        if e.get("host") != _host():
            return True                                 # cannot tell: assume it runs
        if int(e.get("pid", -1)) == os.getpid():
            return False                                # our own leftover
        if not _pid_alive(e.get("pid", -1)):
            return False
        start = _proc_start(e["pid"])
        return not (start and e.get("start") and start != e["start"])   # pid reused -> stale

    @staticmethod
    def _overlap(a, b):
        g = math.gcd(int(a["num_shards"]), int(b["num_shards"]))
        return (int(a["shard"]) - int(b["shard"])) % g == 0

    def acquire(self):
        os.makedirs(os.path.dirname(os.path.abspath(self.file)), exist_ok=True)
        with self._guard() as f:
            entries = self._read(f)
            live = [e for e in entries if self._alive(e)]
            for e in entries:
                if e not in live and int(e.get("pid", -1)) != os.getpid():
                    log.info("taking over the lock of process %s (no longer running) on %s",
                             e.get("pid"), self.path)
            for e in live:
                if self._overlap(e, self.entry):
                    who = (f"process {e.get('pid')} on {e.get('host')}"
                           + (f" (sweep.shard={e['shard']} of sweep.num_shards={e['num_shards']})"
                              if int(e.get("num_shards", 1)) > 1 else "")
                           + f" since {e.get('since')}")
                    raise StoreError(
                        f"output.path = {self.path!r} is in use by {who}; wait for it to finish or "
                        f"run a different shard (if that process is gone, delete {self.file})")
            f.seek(0)
            f.truncate()
            for e in live + [self.entry]:
                f.write(json.dumps(e) + "\n")
            f.flush()
        self.held = True
        return self

    def release(self):
        if not self.held:
            return
        self.held = False
        try:
            with self._guard() as f:
                rest = [e for e in self._read(f) if not (int(e.get("pid", -1)) == os.getpid()
                                                          and e.get("host") == _host())]
                if rest:
                    f.seek(0)
                    f.truncate()
                    for e in rest:
                        f.write(json.dumps(e) + "\n")
                    f.flush()
                else:
                    os.unlink(self.file)
        except OSError:  # pragma: no cover - best effort; a stale entry is taken over later
            pass
