"""The generic chunk engine: a design of variants, run in compiled chunks, streamed into one cube.

Job kinds (:mod:`sweep.jobs` lists them: :mod:`sweep.time_response`,
:mod:`sweep.kc`) say *what* a variant computes - a pure per-variant function
``theta -> (outputs, status, iterations)`` and a table of the output
channels it returns (:class:`Channel`); this module does everything around
it, the same for every kind:

* chunking (:func:`chunking`: chunk size from a memory budget or the config,
  padded to a multiple of the device count; the devices from
  :func:`job_devices`: on a CPU by default every core, at most two, but one
  for a chunk too small to profit) and device mapping
  (:func:`map_variants`: ``vmap``, ``lax.map`` micro-batches, ``shard_map``
  over several devices);
* the store (:func:`store_spec` builds the cube's variables from the channel
  table, the swept parameters and the status flags; :func:`open_job_store`
  locks, creates or reopens it and verifies finished chunks);
* compile once per job (:func:`compile_chunk_runner`, with the trace cache of
  :mod:`sweep.tracecache`), stream each finished chunk into the store
  (:func:`stream_chunks`: a crash loses nothing written, a rerun resumes);
* clean stops and lock release (:func:`run_guarded`, :class:`Stop`).

One compilation per job: every chunk has the same (padded) size. A variant
whose equilibrium fails or whose state goes non-finite gets a status code
and NaN values; the others in its chunk are unaffected (no coupling between
variants).
"""
from __future__ import annotations

import dataclasses
import logging
import math
import os
import signal
import sys
import threading
import time
from typing import Callable, Optional

import jax
import jax.numpy as jnp
import numpy as np
from omegaconf import OmegaConf


from sweep import store as cube_store
from sweep.entry import DEVICES_ENV, cpu_devices_are_default
from sweep.schema import ConfigError

log = logging.getLogger("sweep")

# keys that do not change the results: shards and bookkeeping
VOLATILE = ("shard", "num_shards", "progress", "verify")
# bytes of one zarr chunk (uncompressed) that the time chunking aims at
ZARR_CHUNK_BYTES = 2 ** 22


@dataclasses.dataclass(frozen=True)
class Channel:
    """One output channel of a job kind: a variable of its cube.

    ``dims``: the channel's own dimensions (after the job's leading
    dimensions ``variant`` and, for a time response, ``time``), each a
    coordinate of the cube; ``units`` (CF / pint spelling) and ``long_name``
    become the variable's attributes; ``fn`` (optional) computes the
    channel's value from the job kind's per-sample context (e.g.
    ``fn(ctx) -> array`` for the time response, :mod:`sweep.time_response`).
    The stored shape is never written down: it comes from
    :func:`jax.eval_shape` of the channel functions (:func:`channel_shapes`)
    or from the coordinate sizes of ``dims``. ``per_step`` False: one value
    per variant (a design-position metric), no leading dimensions."""
    name: str
    dims: tuple
    units: str
    long_name: str
    fn: Optional[Callable] = None
    dtype: str = "f8"
    per_step: bool = True       # along the job's leading dims (time samples, load steps); False: per variant


def channel_shapes(channels, fn, *example):
    """{name: shape} of the channel values that ``fn(*example)`` returns
    (a dict keyed by channel name), by :func:`jax.eval_shape` (traced, not
    run); every channel of the table must be there with one axis per dim."""
    out = jax.eval_shape(fn, *example)
    shapes = {}
    for ch in channels:
        if ch.name not in out:
            raise KeyError(f"channel {ch.name!r} is declared but not computed")
        shape = tuple(out[ch.name].shape)
        if len(shape) != len(ch.dims):
            raise ValueError(f"channel {ch.name!r}: value shape {shape} does not match dims {ch.dims}")
        shapes[ch.name] = shape
    return shapes


def parameter_units(p):
    """Units of a swept parameter's values: "1" for scale factors; the linear
    coefficient's unit in value mode (translational / rotational directions)."""
    if p.mode == "scale":
        return "1"
    cols = set(int(c) for c in np.asarray(p.index[1]).ravel())
    k = p.target == "bushing.stiffness"
    trans, rot = ("N/m", "N m/rad") if k else ("N s/m", "N m s/rad")
    if cols <= {0, 1, 2}:
        return trans
    if cols <= {3, 4, 5}:
        return rot
    return f"{trans} (x, y, z); {rot} (rx, ry, rz)"


def parameter_attrs(p):
    return {"long_name": f"{p.target} ({p.mode}) of {p.name}", "units": parameter_units(p),
            "bounds": [p.lower, p.upper], "nominal": p.nominal, "scale": p.scale}


def store_spec(job, coords, channels, shapes, lead, status_meanings, iterations_long_name):
    """The store layout of a job (:func:`sweep.store.create_store`).

    ``coords``: {name: (values, attrs[, dims])}; ``channels``: the job kind's
    :class:`Channel` table with ``shapes`` {name: trailing shape} (from
    :func:`channel_shapes` or the coordinate sizes); ``lead``: the leading
    dimensions after ``variant`` as ((name, length, zarr chunk length), ...),
    e.g. (("time", T, tc),). Adds one variable per swept parameter, ``status``
    (flag values and meanings of the kind) and ``equilibrium_iterations``;
    the swept parameters are CF ``coordinates`` of every result variable.
    zarr chunks: the compute chunk along ``variant`` (a chunk is written
    whole, shards never share a file); a channel's first own dimension that
    is ``bushing`` is chunked one bushing per zarr chunk (one bushing across
    all variants reads only that bushing's bytes)."""
    pset, n, C = job["pset"], len(job["X"]), job["chunk"]
    ldims = tuple(d for d, _, _ in lead)
    lshape = tuple(s for _, s, _ in lead)
    lchunk = tuple(c for _, _, c in lead)
    spec = {"__coords__": coords}
    for p in pset.params:
        spec[p.name] = (("variant",), (n,), "f8", (C,), np.nan, parameter_attrs(p))
    for ch in channels:
        shape = tuple(shapes[ch.name])
        chunks = tuple(1 if d == "bushing" else s for d, s in zip(ch.dims, shape))
        fill = np.nan if ch.dtype.startswith("f") else -1
        ld, ls, lc = (ldims, lshape, lchunk) if ch.per_step else ((), (), ())
        spec[ch.name] = (("variant",) + ld + tuple(ch.dims), (n,) + ls + shape, ch.dtype,
                         (C,) + lc + chunks, fill, {"units": ch.units, "long_name": ch.long_name})
    spec["status"] = (("variant",), (n,), "i1", (C,), -1,
                      {"long_name": "variant status", "flag_values": list(status_meanings),
                       "flag_meanings": " ".join(status_meanings.values())})
    spec["equilibrium_iterations"] = (("variant",), (n,), "i4", (C,), -1,
                                      {"long_name": iterations_long_name})
    # chunk_done (dim chunk, a coordinate) and the chunk checksums are added by sweep.store
    if pset.params:  # the varied parameters are coordinates along variant (CF attribute)
        for ch in channels:
            spec[ch.name][5]["coordinates"] = " ".join(pset.names)
        for name in ("status", "equilibrium_iterations"):
            spec[name][5]["coordinates"] = " ".join(pset.names)
    return spec


def output_bytes(channels, shapes, n_lead=1, itemsize=8):
    """Bytes of one variant's outputs: channel shapes, times the leading
    length (time samples or load steps) for per-step channels."""
    return itemsize * sum(int(np.prod(shapes[c.name])) * (n_lead if c.per_step else 1) for c in channels)


# Largest auto chunk per device. On a CPU the throughput peaks near 256
# variants per computation and falls beyond (working set out of cache;
# BENCHMARKS.md: block solver, double wishbone, ~6,000 variant-steps/s at
# batch 64-256, ~3,800 at 1024); accelerators keep gaining with larger batches.
MAX_AUTO_CHUNK_CPU = 256
MAX_AUTO_CHUNK_ACCELERATOR = 1024


def estimate_chunk(n_variants, out_bytes, n_dof, budget_gb, n_dev, platform=None):
    """Chunk size from a memory budget: a variant's outputs (``out_bytes``,
    :func:`output_bytes`) plus its working set (~12 dense ``n_dof``-square
    float64 matrices: J_r, J_v, A, LU, blocks, temporaries), capped per
    device at the batch where throughput stops growing (``MAX_AUTO_CHUNK_*``;
    ``platform`` defaults to JAX's default backend), rounded up to a multiple
    of ``n_dev``. Returns (chunk, bytes per variant)."""
    work_bytes = 8 * n_dof * n_dof * 12
    per_variant = int(out_bytes) + work_bytes
    platform = platform or jax.default_backend()
    cap = (MAX_AUTO_CHUNK_CPU if platform == "cpu" else MAX_AUTO_CHUNK_ACCELERATOR) * n_dev
    c = int(budget_gb * 2 ** 30 // per_variant)
    c = max(1, min(c, cap, n_variants))
    c = int(math.ceil(c / n_dev) * n_dev)
    return c, per_variant


# A default job (CPU device count from sweep.entry.xla_flags_from_env, not
# chosen by the user) splits a chunk over its CPU devices only when every
# device gets at least this many variants; smaller chunks run on one device.
# Below it, the second device's share of the run does not pay for the extra
# work of a multi-device job (two programs to compile, and a re-trace on
# every run: the trace cache is for one device) - BENCHMARKS.md, "Two CPU
# devices".
MIN_VARIANTS_PER_CPU_DEVICE = 128


def job_devices(chunk=None, max_devices=None, platform=None):
    """Devices a job maps a chunk of ``chunk`` variants over: every JAX
    device (at most ``max_devices``), except for a default CPU job whose
    chunk is too small to profit (:data:`MIN_VARIANTS_PER_CPU_DEVICE`):
    there as many devices as get that many variants each, at least one.
    ``chunk`` None: every device."""
    n = jax.device_count() if max_devices is None else max(1, min(int(max_devices), jax.device_count()))
    platform = platform or jax.default_backend()
    if chunk is not None and n > 1 and platform == "cpu" and cpu_devices_are_default():
        n = max(1, min(n, int(chunk) // MIN_VARIANTS_PER_CPU_DEVICE))
    return n


def devices_note(n_dev, platform=None):
    """The devices a job maps a chunk over, for its log: e.g. "2 CPU devices
    (default; AXLE_CPU_DEVICES=1 for one)"."""
    platform = platform or jax.default_backend()
    if platform != "cpu":
        return f"{n_dev} {platform.upper()} device(s)"
    total = jax.device_count()
    what = f"{n_dev} CPU device{'s' if n_dev != 1 else ''}" + (f" of {total}" if n_dev < total else "")
    if cpu_devices_are_default():
        if n_dev < total:
            return (f"{what} (default; chunks of {MIN_VARIANTS_PER_CPU_DEVICE * total}+ variants "
                    f"are split over {total})")
        return f"{what} (default; {DEVICES_ENV}=1 for one)" if n_dev > 1 else f"{what} (one usable core)"
    if os.environ.get(DEVICES_ENV):
        return f"{what} ({DEVICES_ENV}={os.environ[DEVICES_ENV]})"
    return f"{what} (XLA_FLAGS)" if total > 1 else what


def chunking(sw, n_variants, out_bytes, n_dof, max_devices=1):
    """(shard, num_shards, devices, chunk) from the ``sweep`` config: the
    shard settings checked, the devices (:func:`job_devices`; ``max_devices``:
    the most the job kind can map a chunk over, None = all; 1, the default,
    for kinds that run a chunk on one device), the chunk from
    ``sweep.chunk_size`` (rounded up to a multiple of the device count) or,
    when ``auto``, from the memory budget (:func:`estimate_chunk`)."""
    shard, nsh = int(sw.get("shard", 0)), int(sw.get("num_shards", 1))
    if nsh < 1 or not 0 <= shard < nsh:
        raise ConfigError(f"sweep.shard = {shard} must be in [0, sweep.num_shards = {nsh})")
    if sw.get("chunk_size", "auto") in ("auto", None):
        budget = float(sw.get("memory_budget_gb", 2.0))
        every = job_devices(None, max_devices)          # the chunk if every device took part
        n_dev = job_devices(min(n_variants, estimate_chunk(n_variants, out_bytes, n_dof, budget, every)[0]),
                            max_devices)
        C, _ = estimate_chunk(n_variants, out_bytes, n_dof, budget, n_dev)
    else:
        C = int(sw["chunk_size"])
        if C < 1:
            raise ConfigError(f"sweep.chunk_size = {C} must be >= 1 or auto")
        n_dev = job_devices(C, max_devices)
        C = int(math.ceil(C / n_dev) * n_dev)
    return shard, nsh, n_dev, C


def job_identity(cfg, volatile=VOLATILE, drop=()):
    """The resolved config text that defines a job's results: shard settings,
    bookkeeping (progress, verification, the compilation cache), where the
    store lies (``output.path``: a store copied or moved elsewhere resumes
    there) and the top-level sections ``drop`` that the job kind does not
    use excluded."""
    c = OmegaConf.to_container(cfg, resolve=True)
    c.pop("cache", None)
    for k in drop:
        c.pop(k, None)
    for k in volatile:
        c.get("sweep", {}).pop(k, None)
    for k in ("overwrite", "path"):
        c.get("output", {}).pop(k, None)
    return OmegaConf.to_yaml(OmegaConf.create(c))


# Variants per micro-batch on a CPU (sweep.micro_batch: auto). Measured in
# BENCHMARKS.md ("Micro-batching"): lax.map over groups of 32 keeps a group's
# working set in the caches, so large chunks no longer fall off a cliff.
AUTO_MICRO_BATCH_CPU = 32


def micro_batch_of(sw, chunk, n_dev, platform=None):
    """Variants per ``lax.map`` group inside a device's slice of a chunk, or
    None for one vmap over the slice: ``sweep.micro_batch`` = auto (the
    default: :data:`AUTO_MICRO_BATCH_CPU` on a CPU when a device's slice is
    larger, None on accelerators, which want wide batches), 0 (off) or an
    integer."""
    mb = sw.get("micro_batch", "auto")
    per_dev = -(-chunk // n_dev)
    if mb in ("auto", None):
        platform = platform or jax.default_backend()
        mb = AUTO_MICRO_BATCH_CPU if platform == "cpu" else 0
    mb = int(mb)
    return mb if 0 < mb < per_dev else None


def log_run(s, status, meanings):
    """Log what a job run did (wall time, or that nothing was left) and the
    status counts of its cube (``status`` values, ``meanings`` {code: name})."""
    if s["variants_run"]:
        rate = s["variants_run"] / s["run_s"] if s["run_s"] else float("nan")
        log.info(f"wall time: compile {s['compile_s']:.2f} s, run {s['run_s']:.2f} s for "
                 f"{s['variants_run']} variant(s) ({rate:.2f} variants/s); chunks of {s['chunk']} "
                 f"on {s['devices']} device(s)")
    else:
        log.info(f"{s['path']}: nothing to run for this shard, every chunk is complete")
    log.info("status: " + ", ".join(f"{v} {int(np.sum(status == k))}" for k, v in meanings.items()
                                    if np.sum(status == k) or k == 0))


def run_chunks(cfg, job, spec, attrs, identity, summary, build_runner, names, progress=None):
    """The part every job kind shares: open (or resume) the store, and when
    chunks are left, compile the chunk runner once (``build_runner()`` ->
    (``run_chunk(thetas, m)``, compile seconds), e.g. from
    :func:`compile_chunk_runner`) and stream the chunks (:func:`stream_chunks`,
    writing the outputs ``names``). Returns ``summary`` updated (path, todo,
    compile_s, run_s, variants_run)."""
    path, store, _, todo = open_job_store(cfg, job, spec, attrs, identity)
    n, C = len(job["X"]), job["chunk"]
    summary.update(path=path, n_variants=n, chunk=C, n_chunks=-(-n // C), todo=len(todo),
                   compile_s=0.0, run_s=0.0, variants_run=0, devices=job["n_dev"])
    if not todo:
        return summary
    run_chunk, summary["compile_s"] = build_runner()
    return stream_chunks(job, store, todo, run_chunk, names, progress, summary)


def _mesh(n_dev):
    from jax.sharding import Mesh
    return Mesh(np.array(jax.devices()[:n_dev]), ("variant",))


def _place(thetas, n_dev):
    """Put a chunk's parameter rows on the devices, split along ``variant``."""
    if n_dev <= 1:
        return jnp.asarray(thetas)
    from jax.sharding import NamedSharding, PartitionSpec
    return jax.device_put(jnp.asarray(thetas), NamedSharding(_mesh(n_dev), PartitionSpec("variant")))


def map_variants(variant, n_dev=1, micro_batch=None):
    """``jit(vmap(variant))`` over the leading axis; on ``n_dev`` > 1 devices
    every device maps its own slice of the chunk (``jax.shard_map``).

    Why shard_map and not a plain jit of sharded inputs: a vmapped
    ``while_loop`` (the Newton iteration of the static equilibrium) stops when
    *no* variant of the batch wants another iteration, a reduction over
    ``variant``. Left to the SPMD partitioner that becomes an all-reduce
    across devices in every iteration; with shard_map each device tests only
    its own variants, there is no cross-device communication at all (and on
    XLA's CPU client the cross-device all-reduce inside a while loop was
    measured to hang a 4096-variant job). Results per variant are the same.

    ``micro_batch`` = B: each device runs its slice as ``lax.map`` over groups
    of B variants, vmapped inside (the working set of a group stays in the
    CPU caches; issue 16, BENCHMARKS.md). None or 0: one vmap over the slice."""
    if micro_batch:
        f = lambda thetas: jax.lax.map(variant, thetas, batch_size=int(micro_batch))  # noqa: E731
    else:
        f = jax.vmap(variant)
    if n_dev > 1:
        from jax.sharding import PartitionSpec as P
        # check_vma=False: the kernels know nothing of meshes (no pcast of loop
        # carries); every value is per-device anyway
        f = jax.shard_map(f, mesh=_mesh(n_dev), in_specs=P("variant"), out_specs=P("variant"),
                          check_vma=False)
    return jax.jit(f)


class StagedRunner:
    """A chunk runner in two stages for several devices: ``first(theta) ->
    carry`` for the whole chunk on ONE device (e.g. the static-equilibrium
    Newton loop), then ``second(theta, carry) -> outputs`` with the chunk
    sharded over ``n_dev`` devices (:func:`map_variants`; e.g. the time
    integration, a fixed number of steps).

    Why: on XLA's CPU client a chunk runner that has the vmapped Newton
    ``while_loop`` inside a multi-device computation stalled (issue 16:
    ``AXLE_CPU_DEVICES=2``, chunks of 128+ variants never finished), while the
    sharded fixed-step integration alone runs. The first stage is cheap (a
    few Newton iterations against thousands of steps). (The stall's likely
    root cause, found later: jaxlib 0.10's batched LAPACK solves deadlock
    XLA's CPU thread pool - kernels/linalg.py; the split is kept, measured.)

    Used like a jitted function by :func:`compile_chunk_runner`:
    ``runner.lower(thetas).compile()(thetas)``."""

    def __init__(self, first, second, n_dev, micro_batch=None):
        self.n_dev = n_dev
        self.first = map_variants(first, 1, micro_batch)
        self.second = map_variants(lambda a: second(*a), n_dev, micro_batch)

    def lower(self, thetas):
        return _StagedLowered(self, thetas)


class _StagedLowered:
    def __init__(self, runner, thetas):
        self.runner, self.thetas = runner, thetas

    def compile(self):
        r = self.runner
        dev0 = jax.devices()[0]
        t0 = jax.device_put(self.thetas, dev0)
        first = r.first.lower(t0).compile()
        carry = jax.eval_shape(r.first, t0)
        from jax.sharding import NamedSharding, PartitionSpec
        sharding = NamedSharding(_mesh(r.n_dev), PartitionSpec("variant"))
        spec = lambda a: jax.ShapeDtypeStruct(a.shape, a.dtype, sharding=sharding)  # noqa: E731
        second = r.second.lower((spec(self.thetas), jax.tree_util.tree_map(spec, carry))).compile()

        def run(thetas):
            c = first(jax.device_put(thetas, dev0))
            return second((jax.device_put(thetas, sharding), jax.device_put(c, sharding)))
        return run


def run_guarded(run, cfg, cfg_yaml, progress=None):
    """``run(cfg, cfg_yaml, progress)`` (a job kind's ``run``, see
    :mod:`sweep.jobs`) with the engine's guards: console logging, clean stops
    on SIGINT / SIGTERM (:class:`Stop`: one line on stderr saying what is
    saved and how to resume, exit status 130 / 143; the store stays
    resumable), and the store locks (:class:`sweep.store.StoreLock`) released
    at the end whatever happens."""
    ensure_console()
    stop = Stop().install()
    try:
        summary = run(cfg, cfg_yaml, progress)
        stop.checkpoint()
        return summary
    finally:
        stop.restore()
        _release_locks()


class _Stdout(logging.StreamHandler):
    """A console handler that writes to whatever ``sys.stdout`` is at the time."""

    @property
    def stream(self):
        return sys.stdout

    @stream.setter
    def stream(self, value):
        pass


def _has_console(logger):
    consoles = (sys.stdout, sys.stderr, sys.__stdout__, sys.__stderr__)
    while logger is not None:
        for h in logger.handlers:
            if isinstance(h, _Stdout) or (type(h) is logging.StreamHandler
                                          and getattr(h, "stream", None) in consoles):
                return True
        if not logger.propagate:
            break
        logger = logger.parent
    return False


def ensure_console():
    """The ``sweep`` logger's INFO records (summaries, "compiling ...",
    verification) reach the console also outside a Hydra app (which
    configures a console and a job-log handler itself): plain messages on
    stdout, as the prints they replace (``sweep.entry``'s console handler
    where it exists)."""
    try:
        from sweep.entry import ensure_console_logging
    except ImportError:
        ensure_console_logging = None
    if ensure_console_logging is not None:
        ensure_console_logging()
        return
    if log.getEffectiveLevel() > logging.INFO:
        log.setLevel(logging.INFO)
    if not _has_console(log):
        h = _Stdout()
        h.setFormatter(logging.Formatter("%(message)s"))
        log.addHandler(h)


# the job in progress, for the stop message and the locks to release
_CURRENT = {"path": None, "store": None, "locks": []}


def _release_locks():
    while _CURRENT["locks"]:
        _CURRENT["locks"].pop().release()
    _CURRENT.update(path=None, store=None)


class Stop:
    """Clean stops on SIGINT / SIGTERM.

    The handler only records the signal. Compilation and the computation of
    a chunk run in a worker thread that the main thread waits on; a signal
    during that wait abandons the chunk in flight (nothing of it is written),
    a signal while a chunk is being written stops right after the write (its
    flag set). Either way :meth:`exit` prints one line (what is saved, how to
    resume), releases the store lock and ends the process with 128 + signal
    (130 SIGINT, 143 SIGTERM) without unwinding through JAX. Outside the main
    thread (no signal handlers possible) nothing is installed."""

    current = None

    def __init__(self):
        self.signum = None
        self.old = {}

    def install(self):
        if threading.current_thread() is threading.main_thread():
            for s in (signal.SIGINT, signal.SIGTERM):
                self.old[s] = signal.signal(s, self._handler)
        Stop.current = self
        return self

    def restore(self):
        for s, h in self.old.items():
            signal.signal(s, h)
        self.old = {}
        Stop.current = None

    def _handler(self, signum, frame):
        self.signum = signum

    def checkpoint(self, abandoned=None):
        if self.signum is not None:
            self.exit(abandoned)

    def wait(self, fn, *args, doing="the chunk in flight"):
        """fn(*args) in a worker thread; returns its result, re-raises its
        exception, or exits (abandoning ``doing``) when a signal arrives meanwhile."""
        box = {}

        def work():
            try:
                box["result"] = fn(*args)
            except BaseException as err:  # noqa: BLE001 - handed to the main thread
                box["error"] = err
        t = threading.Thread(target=work, daemon=True, name="sweep-worker")
        t.start()
        while t.is_alive():
            t.join(0.1)
            if self.signum is not None:
                self.exit(abandoned=doing)
        if "error" in box:
            raise box["error"]
        return box["result"]

    def exit(self, abandoned=None):
        name = signal.Signals(self.signum).name
        path, store = _CURRENT["path"], _CURRENT["store"]
        if store is None:
            msg = f"interrupted by {name} before any result was written; nothing to resume"
        else:
            try:
                done = store.done()
                saved = f"{int(done.sum())} of {len(done)} chunk(s) are saved in {path}"
            except Exception:  # noqa: BLE001
                saved = f"the finished chunks are saved in {path}"
            msg = (f"interrupted by {name}: {saved}"
                   + (f" ({abandoned} was abandoned)" if abandoned else "")
                   + "; run the same command again to resume")
        if _CURRENT.get("bar") is not None:
            try:
                _CURRENT["bar"].close()
            except Exception:  # noqa: BLE001
                pass
        _release_locks()
        try:
            sys.stdout.flush()
        except Exception:  # noqa: BLE001
            pass
        log.warning(msg)             # the console handler writes warnings to stderr
        for h in logging.getLogger().handlers + log.handlers:
            try:
                h.flush()
            except Exception:  # noqa: BLE001
                pass
        os._exit(128 + self.signum)


def _stop():
    return Stop.current or Stop()


def open_job_store(cfg, job, spec, attrs, identity):
    """Lock, create or reopen the job's store (``output.overwrite`` replaces a
    store of another job) and list this shard's chunks to run: the unfinished
    ones and, unless ``sweep.verify=false``, the finished ones whose data no
    longer match their checksums (reported, then recomputed).

    Returns (path, store, created, todo chunk indices)."""
    path = str(cfg.output.path)
    if not path.rstrip("/").endswith(".zarr"):
        raise ConfigError(f"output.path = {path!r} must end in .zarr")
    try:
        lock = cube_store.StoreLock(path, job["shard"], job["num_shards"]).acquire()
    except OSError as err:
        raise cube_store.StoreError(f"output.path = {path!r} cannot be used: {_oserror(err)}") from None
    _CURRENT["locks"].append(lock)
    _CURRENT["path"] = path
    try:
        cube_store.clean_stale_init(path)
        if os.path.exists(path) and cfg.output.get("overwrite", False):
            try:
                same = cube_store.CubeStore(path).attrs.get("job_identity") == identity
            except Exception:  # noqa: BLE001 - unreadable store: replace it
                same = False
            if not same:
                cube_store.remove(path)
        store, created = cube_store.create_store(path, spec, attrs, identity, chunk=job["chunk"])
    except OSError as err:
        raise cube_store.StoreError(f"output.path = {path!r} cannot be created: {_oserror(err)}") from None
    _CURRENT["store"] = store
    if not created and store.chunk != job["chunk"]:
        _adopt_chunk(cfg, job, store.chunk, path)
    n_chunks = -(-len(job["X"]) // job["chunk"])
    done = store.done()
    mine = [k for k in range(n_chunks) if k % job["num_shards"] == job["shard"]]
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
    return path, store, created, todo


def _adopt_chunk(cfg, job, C, path):
    """Resume an existing store in its own chunks of ``C`` variants: the
    auto chunk depends on the device count (one CPU device before, two now
    by default; another machine), which is not part of the job's identity.
    The job's devices drop to a number that divides ``C``."""
    old = job["chunk"]
    n_dev = job_devices(C, max_devices=job["n_dev"])
    while C % n_dev:
        n_dev -= 1
    job.update(chunk=C, n_dev=n_dev)
    if "micro_batch" in job:
        job["micro_batch"] = micro_batch_of(OmegaConf.to_container(cfg.sweep, resolve=True), C, n_dev)
    log.info("%s: resuming in the store's chunks of %d variant(s) (this run would use %d: another "
             "device count or machine)", path, C, old)


def _oserror(err):
    return (f"{err.strerror} ({err.filename})" if err.strerror and err.filename
            else err.strerror or str(err)).splitlines()[0]


def compile_chunk_runner(runner, thetas, n_dev, what="the chunk runner", key=None, device=None):
    """Compile a chunk runner (from :func:`map_variants`) once for the padded
    chunk shape of ``thetas`` (logging "compiling <what> ..." first; a
    SIGINT / SIGTERM meanwhile stops the job). ``key`` (from
    :func:`sweep.tracecache.fingerprint` of the runner factory's arguments)
    lets a rerun skip tracing (one device; see :mod:`sweep.tracecache`).
    ``device``: run on this one device (its inputs are placed there; e.g. the
    host CPU for a stage XLA implements only there). Returns
    (``run_chunk(thetas, m)`` for :func:`stream_chunks`, compile seconds)."""
    place = (lambda t: jax.device_put(np.asarray(t), device)) if device is not None else \
        (lambda t: _place(t, n_dev))
    from sweep import tracecache
    log.info("compiling %s (once per job) ...", what)
    tic = time.perf_counter()

    def build():
        fn, loaded = tracecache.traced(runner, (np.asarray(thetas),), key if n_dev == 1 else None)
        return fn.lower(place(thetas)).compile(), loaded
    compiled, loaded = _stop().wait(build, doing="the compilation")
    compile_s = time.perf_counter() - tic
    log.info("compiled in %.1f s%s", compile_s, " (traced program from the trace cache)" if loaded else "")

    def run_chunk(thetas, m):
        return jax.device_get(compiled(place(thetas)))
    return run_chunk, compile_s


def _test_kill_hook(written):
    """Test hook: ``AXLE_TEST_KILL_AFTER_CHUNKS=N`` makes the process send
    itself ``AXLE_TEST_KILL_SIGNAL`` (KILL default, TERM, INT) once it has
    written N chunks - deterministic fault tests without clocks."""
    n = os.environ.get("AXLE_TEST_KILL_AFTER_CHUNKS")
    if n and written == int(n):
        sig = getattr(signal, "SIG" + os.environ.get("AXLE_TEST_KILL_SIGNAL", "KILL").upper())
        os.kill(os.getpid(), sig)
        if sig == signal.SIGKILL:  # pragma: no cover - not reached
            time.sleep(60)


def stream_chunks(job, store, todo, run_chunk, names, progress, summary):
    """Run this shard's unfinished chunks and write each to the store as soon
    as it finishes (what was written survives a crash; a rerun skips it).

    ``run_chunk(thetas, m)`` runs one padded chunk (rows past ``m`` are the
    nominal axle) and returns (outputs dict, status, equilibrium iterations).
    A tqdm bar shows variants done, variants/s and ETA. A write error (disk
    full, ...) ends the job with one line (:class:`sweep.store.StoreError`);
    the chunk being written is not flagged, the store stays consistent.
    Updates and returns ``summary`` (variants_run, run_s)."""
    X, C, pset = job["X"], job["chunk"], job["pset"]
    n = len(X)
    stop = _stop()
    bar = None
    if progress is not False:
        from tqdm import tqdm
        bar = tqdm(total=sum(min(C, n - k * C) for k in todo), unit="variant", desc="variants",
                   disable=progress is None and not os.isatty(2) and os.environ.get("CI") is not None,
                   dynamic_ncols=True)
    _CURRENT["bar"] = bar
    tic = time.perf_counter()
    try:
        for written, k in enumerate(todo, 1):
            a, b = k * C, min(n, (k + 1) * C)
            thetas = np.tile(pset.nominal, (C, 1))          # padding rows run the nominal axle
            thetas[: b - a] = X[a:b]
            outs, status, its = stop.wait(run_chunk, thetas, b - a)
            data = {name: np.asarray(outs[name])[: b - a] for name in names}
            data.update({p.name: X[a:b, i] for i, p in enumerate(pset.params)})
            data["status"] = np.asarray(status)[: b - a]
            data["equilibrium_iterations"] = np.asarray(its)[: b - a]
            try:
                store.write_chunk(k, a, data)
            except OSError as err:
                saved = int(store.done().sum()) if _readable(store) else "the finished"
                raise cube_store.StoreError(
                    f"writing chunk {k} (variants {a}-{b - 1}) to {store.path} failed: {_oserror(err)}; "
                    f"{saved} of {-(-n // C)} chunk(s) are saved and the store is consistent "
                    "(this chunk is not flagged); fix the cause and run the same command again "
                    "to resume") from None
            summary["variants_run"] += b - a
            if bar is not None:
                bar.update(b - a)
            _test_kill_hook(written)
            stop.checkpoint()
    finally:
        _CURRENT["bar"] = None
        if bar is not None:
            bar.close()
    summary["run_s"] = time.perf_counter() - tic
    return summary


def _readable(store):
    try:
        store.done()
        return True
    except Exception:  # noqa: BLE001
        return False
