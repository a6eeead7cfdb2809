"""The store side of a run: open (or resume) the store, compile the chunk
runner once, stream each finished chunk into the store.

A crash loses nothing written (each chunk is written whole, checksummed and
flagged by :mod:`sweep.results.store`); a rerun verifies the finished chunks and runs
the rest. A variant whose equilibrium fails or whose state goes non-finite
gets a status code and NaN values; the others in its chunk are unaffected
(no coupling between variants).
"""
from __future__ import annotations

import dataclasses
import logging
import os
import time

import jax
import numpy as np

from sweep.results import store as cube_store
from sweep.engine import mapping, values
from sweep.core.config import ConfigError

log = logging.getLogger("sweep")


def oserror_text(err):
    return (f"{err.strerror} ({err.filename})" if err.strerror and err.filename
            else err.strerror or str(err)).splitlines()[0]


def open_store(ctx, cfg, plan, spec, attrs, identity):
    """Lock, create or reopen the job's store (``output.overwrite`` replaces a
    store of another job) and list this shard's chunks to run: the unfinished
    ones and, unless ``sweep.verify=false``, the finished ones whose data no
    longer match their checksums (reported, then recomputed).

    A store created with another chunk size (the auto chunk depends on the
    device count, which is not part of the job's identity) is resumed in its
    own chunks: the plan returned has that chunk size.

    Returns (path, store, created, todo chunk indices, plan)."""
    path = str(cfg.output.path)
    if not path.rstrip("/").endswith(".zarr"):
        raise ConfigError(f"output.path = {path!r} must end in .zarr")
    try:
        lock = cube_store.StoreLock(path, plan.shard, plan.num_shards).acquire()
    except OSError as err:
        raise cube_store.StoreError(f"output.path = {path!r} cannot be used: {oserror_text(err)}") from None
    ctx.locks.append(lock)
    ctx.path = path
    try:
        cube_store.clean_stale_init(path)
        if os.path.exists(path) and cfg.output.get("overwrite", False):
            try:
                same = cube_store.CubeStore(path).attrs.get("job_identity") == identity
            except Exception:  # noqa: BLE001 - unreadable store: replace it
                same = False
            if not same:
                cube_store.remove(path)
        store, created = cube_store.create_store(path, spec, attrs, identity, chunk=plan.chunk)
    except OSError as err:
        raise cube_store.StoreError(f"output.path = {path!r} cannot be created: {oserror_text(err)}") from None
    ctx.store = store
    if not created and store.chunk != plan.chunk:
        old = plan.chunk
        n_dev, micro = mapping.adopt_chunk(dict(cfg.sweep), store.chunk, plan.n_dev)
        plan = dataclasses.replace(plan, chunk=store.chunk, n_dev=n_dev, micro_batch=micro)
        log.info("%s: resuming in the store's chunks of %d variant(s) (this run would use %d: another "
                 "device count or machine)", path, store.chunk, old)
    n_chunks = -(-len(plan.X) // plan.chunk)
    done = store.done()
    mine = [k for k in range(n_chunks) if k % plan.num_shards == plan.shard]
    if not created and bool(cfg.sweep.get("verify", True)):
        damaged = []
        for k in (k for k in mine if done[k]):
            problems = store.check_chunk(k)
            if problems:
                a, b = store.region(k)
                log.warning("%s: chunk %d (variants %d-%d) is damaged (%s); recomputing it",
                            path, k, a, b - 1, "; ".join(problems))
                store.mark_undone(k)
                done[k] = False
                damaged.append(k)
        n_ok = sum(1 for k in mine if done[k])
        if n_ok or damaged:
            log.info("%s: %d finished chunk(s) verified against their checksums%s", path, n_ok,
                     f", {len(damaged)} damaged chunk(s) to recompute" if damaged else "")
    todo = [k for k in mine if not done[k]]
    return path, store, created, todo, plan


class Programs:
    """Compiled chunk runners kept in memory between the jobs of one process
    (:class:`sweep.workbench.Workbench`): a job whose runner has the same
    structural key (:func:`sweep.core.tracecache.fingerprint`: values are run-time
    inputs, so a changed load, rate, mass or hardpoint has the same key), the
    same devices and chunk shape runs the program compiled for an earlier one
    - no trace, no load from the cache, no compile. A runner without a key
    (``key`` None) is never kept (one whose closure the fingerprint cannot
    hash has a key of its own process: kept, never found again). The
    generated backend's C holds the pattern of the values (which are 0 or
    +-1) or, for a design whose values differ per variant, the values
    themselves, so its runners are kept per digest of those, the latest of a
    structure only. At most
    ``size`` programs, the least recently used dropped first (each holds its
    executable and, on the generated backend, its workspaces)."""

    def __init__(self, size=4):
        import collections
        self.size = int(size)
        self._kept = collections.OrderedDict()

    def __len__(self):
        return len(self._kept)

    def clear(self):
        self._kept.clear()

    @staticmethod
    def key(runner, n_dev):
        """The memory key of ``runner`` run on ``n_dev`` devices, or None."""
        if runner.key is None:
            return None
        host = getattr(runner.fn, "host", False)
        shapes = jax.tree_util.tree_map(lambda a: (np.shape(a), str(np.asarray(a).dtype)), runner.example)
        return (runner.key, int(n_dev), str(runner.device), repr(shapes),
                repr(getattr(runner, "compile_options", None)),
                getattr(runner.fn, "values_key", None) if host else None)     # last: put() reads it

    def get(self, key):
        if key is None or key not in self._kept:
            return None
        self._kept.move_to_end(key)
        return self._kept[key]

    def put(self, key, entry):
        if key is None or self.size <= 0:
            return
        if isinstance(key, tuple) and key[-1] is not None:      # generated code: the latest pattern or values per structure
            for old in [k for k in self._kept if isinstance(k, tuple) and k[-1] is not None
                        and k[:-1] == key[:-1]]:
                del self._kept[old]
        self._kept[key] = entry
        self._kept.move_to_end(key)
        while len(self._kept) > self.size:
            self._kept.popitem(last=False)


def _holds_values(runner):
    """Whether the runner's compiled code holds the values (generated C
    built with the values folded in, :class:`sweep.codegen.runner.GeneratedRunner`
    without ``fold`` or ``rows_fold``) rather than reading them at run time."""
    fn = runner.fn
    return bool(getattr(fn, "host", False) and getattr(fn, "values_key", "")
                and getattr(fn, "fold", None) is None and getattr(fn, "rows_fold", None) is None)


# XLA compiler options of a short job's program (a job that runs for a few
# seconds; sweep.codegen.runner.choose): LLVM optimisation level 0 and XLA's
# elemental emitter for fusions instead of its MLIR fusion emitters - a
# shorter compile for a slower run, which pays where compiling is most of
# the job (BENCHMARKS.md, "The suite's compiles, and a short job compiled
# for a quick start"). The floating-point semantics are the same (no
# fast-math): the results are the optimised program's to round-off. Part
# of the compilation cache's key: a rerun of the short job loads this
# program, a long job compiles its own.
QUICK_START = {"xla_backend_optimization_level": 0, "xla_cpu_use_fusion_emitters": False}


def compile_runner(ctx, runner, n_dev, programs=None):
    """Compile a chunk runner (:class:`sweep.kinds.base.Runner`) once for the
    padded chunk shape (logging "compiling <what> ..." first; a SIGINT /
    SIGTERM meanwhile stops the job). Its ``key`` (from
    :func:`sweep.core.tracecache.fingerprint`) lets a rerun skip tracing (one
    device; :mod:`sweep.core.tracecache`); its ``device``: run on this one device
    (e.g. the host CPU for a stage XLA implements only there). Returns
    (``run_chunk(thetas, m)`` for :func:`stream_chunks`, compile seconds).
    ``programs``: a :class:`Programs` memory of earlier jobs' compiled
    runners in this process (None: compile, or load from the caches)."""
    from sweep.core import tracecache
    device = runner.device
    place = (lambda t: jax.device_put(t if isinstance(t, tuple) else np.asarray(t), device)) \
        if device is not None else (lambda t: mapping.place(t, n_dev))
    thetas = runner.example
    pair = isinstance(thetas, tuple)            # a runner of shared values: (thetas, values)
    as_arrays = (lambda t: tuple(np.asarray(a) for a in t)) if pair else np.asarray
    log.info("compiling %s (once per job) ...", runner.what)
    tic = time.perf_counter()

    def build():
        if getattr(runner.fn, "host", False):       # runs on the host; the generated backend keys its cache
            compiled = runner.fn.lower(as_arrays(thetas), key=runner.key if n_dev == 1 else None).compile()
            return compiled, bool(getattr(runner.fn, "info", {}).get("trace_skipped"))
        fn, loaded = tracecache.traced(runner.fn, (as_arrays(thetas),), runner.key if n_dev == 1 else None)
        return fn.lower(place(thetas)).compile(getattr(runner, "compile_options", None)), loaded
    memo = Programs.key(runner, n_dev) if programs is not None else None
    kept = programs.get(memo) if programs is not None else None
    if kept is not None:
        compiled, info = kept
        if info is not None:                  # the kept program reports its split into its own record
            runner.fn.info = info
            for k in info.get("split", {}):
                info["split"][k] = 0.0
        compile_s = time.perf_counter() - tic
        log.info("compiled in %.1f s (reused: kept in memory from an earlier job of this structure in this "
                 "process; %s)", compile_s, "the same values, which the generated C holds" if _holds_values(runner)
                 else "values are run-time inputs")
    else:
        compiled, loaded = ctx.wait(build, doing="the compilation")
        compile_s = time.perf_counter() - tic
        reused = (" (reused: the generated code of an earlier run with these values)" if _holds_values(runner)
                  else " (reused: the generated code of an earlier run of this structure; values are run-time "
                  "inputs)" if getattr(runner.fn, "host", False) else
                  " (reused: the traced program of an earlier run of this structure; values are run-time inputs)")
        log.info("compiled in %.1f s%s", compile_s, reused if loaded else "")
        if programs is not None:
            programs.put(memo, (compiled, getattr(runner.fn, "info", None)
                                if getattr(runner.fn, "host", False) else None))

    vec = runner.values
    host = getattr(runner.fn, "host", False)

    def run_chunk(thetas, m, next_thetas=None):
        rows = values.rows(thetas, vec, pair)
        if next_thetas is not None and hasattr(vec, "prefetch"):
            vec.prefetch(next_thetas)        # per-variant values: the next chunk's built meanwhile
        return compiled(rows, m) if host else jax.device_get(compiled(place(rows)))
    return run_chunk, compile_s


def stream_chunks(ctx, plan, store, todo, run_chunk, names, progress, summary):
    """Run this shard's unfinished chunks and write each to the store as soon
    as it finishes (what was written survives a crash; a rerun skips it).

    ``run_chunk(thetas, m, next_thetas)`` runs one padded chunk (rows past
    ``m`` are the nominal axle; ``next_thetas``: the next chunk's, or None,
    for values built ahead) and returns (outputs dict, status, equilibrium
    iterations).
    A chunk is written by a writer thread while the next one is computed
    (at most one write in flight: the cube writes no longer add to the
    computing time, BENCHMARKS.md "Generated backend"); a stop signal
    during that write still finishes it first (:meth:`RunContext.exit`).
    A tqdm bar shows variants done, variants/s and ETA. A write error (disk
    full, ...) ends the job with one line (:class:`sweep.results.store.StoreError`);
    the chunk being written is not flagged, the store stays consistent.
    Updates and returns ``summary`` (variants_run, run_s; the split
    compute_s, write_s, write_wait_s)."""
    from concurrent.futures import ThreadPoolExecutor
    X, C, pset = plan.X, plan.chunk, plan.pset
    n = len(X)
    bar = None
    if progress is not False:
        from tqdm import tqdm
        bar = tqdm(total=sum(min(C, n - k * C) for k in todo), unit="variant", desc="variants",
                   disable=progress is None and not os.isatty(2) and os.environ.get("CI") is not None,
                   dynamic_ncols=True)
    ctx.bar = bar
    tic = time.perf_counter()
    writer = ThreadPoolExecutor(1, thread_name_prefix="sweep-writer")
    pending = None
    # the time split of the run (seconds): chunks computing (the runner,
    # incl. host-side work it waits for), the writer thread writing, and the
    # main thread waiting for a write to finish (what the overlap did not hide)
    for key in ("compute_s", "write_s", "write_wait_s"):
        summary.setdefault(key, 0.0)

    def timed_write(k, a, data):
        t0 = time.perf_counter()
        try:
            return store.write_chunk(k, a, data)
        finally:
            summary["write_s"] += time.perf_counter() - t0

    def finish(p):
        """Wait for the write of a chunk, then count it (bar, summary, test hook)."""
        fut, k, a, b, written = p
        t0 = time.perf_counter()
        try:
            ctx.wait(fut.result, doing="the chunk being written")
        except OSError as err:
            saved = int(store.done().sum()) if _readable(store) else "the finished"
            raise cube_store.StoreError(
                f"writing chunk {k} (variants {a}-{b - 1}) to {store.path} failed: {oserror_text(err)}; "
                f"{saved} of {-(-n // C)} chunk(s) are saved and the store is consistent "
                "(this chunk is not flagged); fix the cause and run the same command again "
                "to resume") from None
        finally:
            ctx.pending_write = None
            summary["write_wait_s"] += time.perf_counter() - t0
        summary["variants_run"] += b - a
        if bar is not None:
            bar.update(b - a)
        if ctx.on_chunk_written is not None:
            ctx.on_chunk_written(written)
        ctx.checkpoint()

    def chunk_thetas(k):
        a, b = k * C, min(n, (k + 1) * C)
        thetas = np.tile(pset.nominal, (C, 1))          # padding rows run the nominal axle
        thetas[: b - a] = X[a:b]
        return a, b, thetas

    try:
        for written, k in enumerate(todo, 1):
            a, b, thetas = chunk_thetas(k)
            after = chunk_thetas(todo[written])[2] if written < len(todo) else None
            t0 = time.perf_counter()
            outs, status, its = ctx.wait(run_chunk, thetas, b - a, after)
            data = {name: np.asarray(outs[name])[: b - a] for name in names}     # waits for the device
            summary["compute_s"] += time.perf_counter() - t0
            data.update({p.name: X[a:b, i] for i, p in enumerate(pset.params)})
            data["status"] = np.asarray(status)[: b - a]
            data["equilibrium_iterations"] = np.asarray(its)[: b - a]
            if pending is not None:
                p, pending = pending, None
                finish(p)
            fut = writer.submit(timed_write, k, a, data)
            ctx.pending_write = fut
            pending = (fut, k, a, b, written)
        if pending is not None:
            p, pending = pending, None
            finish(p)
    finally:
        if pending is not None:          # an error while computing: the chunk before it still lands
            try:
                pending[0].result()
            except Exception as err:  # noqa: BLE001 - the first error is the one raised
                log.warning("writing chunk %d failed too: %s", pending[1], err)
        ctx.pending_write = None
        writer.shutdown(wait=True)
        ctx.bar = None
        if bar is not None:
            bar.close()
    summary["run_s"] = time.perf_counter() - tic
    return summary


def stage_split(runner, summary):
    """Copy a staged runner's time split (the generated backend's
    equilibria and integration seconds) into the job's summary."""
    split = (getattr(runner.fn, "info", None) or {}).get("split")
    if split:
        summary.update({k: float(v) for k, v in split.items()})


def _readable(store):
    try:
        store.done()
        return True
    except Exception:  # noqa: BLE001
        return False
