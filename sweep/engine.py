"""The sweep engine: a design of variants, run in vmapped chunks, streamed into one cube.

One compilation per job: every chunk has the same (padded) size, so the
vmapped chunk runner compiles once and is reused. Each variant applies its
parameters to the nominal model, finds its own static equilibrium, and is
integrated with LSRT2 (or, for reference runs, Radau one variant at a time).
A variant whose equilibrium fails or whose state goes non-finite gets a
status code and NaN values; the others in its chunk are unaffected (vmap has
no coupling between variants). With several JAX devices a chunk is sharded
across them along the variant axis.
"""
from __future__ import annotations

import fnmatch
import logging
import math
import os
import signal
import sys
import threading
import time

import jax
import jax.numpy as jnp
import numpy as np
from omegaconf import OmegaConf

from kernels import integrate, loads, statics
from kernels.methods import METHODS
from kernels.model import ModelError
from kernels.system import SOLVERS, model_system
from sweep import store as cube_store
from sweep.cube import NMSE_DEFINITION, provenance
from sweep.design import make_design
from sweep.job import make_channels, model_from_config, sample_grid
from sweep.loadcase import build_excitation
from sweep.params import build_parameters

log = logging.getLogger("sweep")

CHANNELS = ("wheel_centre_displacement", "toe", "camber", "bushing_force")
COMPONENT_UNITS = ["N", "N", "N", "N m", "N m", "N m"]     # fx fy fz mx my mz
UNITS = {
    "wheel_centre_displacement": ("m", "wheel-centre displacement from the variant's static equilibrium"),
    "toe": ("rad", "toe angle (DIN 70000, + = toe-in)"),
    "camber": ("rad", "camber angle (DIN 70000, + = top out)"),
    # one variable for the public schema (component = fx..mz); the unit of each
    # component is the coordinate component_units, and sweep.cube.split_loads
    # gives bushing_force [N] and bushing_moment [N m] (pint-xarray parses both)
    "bushing_force": ("N (fx, fy, fz); N m (mx, my, mz): see component_units",
                      "force and torque of the bushing on its first body, vehicle frame"),
}
# keys that do not change the results: shards and bookkeeping
VOLATILE = ("shard", "num_shards", "progress", "verify")
# bytes of one zarr chunk (uncompressed) that the time chunking aims at
ZARR_CHUNK_BYTES = 2 ** 22


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


def select_bushings(patterns, names):
    if patterns is None:
        return list(range(len(names)))
    pats = [patterns] if isinstance(patterns, str) else list(patterns)
    idx = [i for i, n in enumerate(names) if any(fnmatch.fnmatchcase(n, p) for p in pats)]
    if not idx:
        raise ModelError(f"output.bushings = {patterns!r} matches no bushing")
    return idx


def error_norm(tolerance):
    """RMS of the embedded error estimate, each component scaled by atol + rtol |y|
    (coordinates and speeds with their own atol): <= 1 means the step's local
    error is within ``tolerance`` = (rtol, atol_coordinates, atol_speeds)."""
    rtol, atol_r, atol_v = tolerance

    def norm(err_r, err_v, r, v):
        sr = err_r / (atol_r + rtol * jnp.abs(r))
        sv = err_v / (atol_v + rtol * jnp.abs(v))
        return jnp.sqrt(jnp.mean(jnp.concatenate([sr, sv]) ** 2))
    return norm


def make_chunk_runner(model, pset, exc, t0, dt, n_samples, every, relin, bushing_idx, solver="block",
                      n_dev=1, method="lsrt2", tolerance=None, micro_batch=None):
    """jit(vmap(variant)) : thetas (C, P) -> (channels, status, eq_iterations),
    each of ``n_dev`` devices mapping its own slice (:func:`map_variants`).

    ``method``: a name of :data:`kernels.methods.METHODS`; with an embedded
    error estimate (ROS34PW2) and ``tolerance`` = (rtol, atol_coordinates,
    atol_speeds), a variant whose largest per-step estimate exceeds it gets
    status 3 ("inaccurate", values kept)."""
    channels = make_channels(bushing_idx)
    u0 = loads.u_at(exc, t0)
    meth = METHODS[method]
    norm = error_norm(tolerance) if (tolerance is not None and meth.b_hat is not None) else None

    def variant(theta):
        m = pset.apply(model, theta)
        eq = statics.static_equilibrium(m, u0)
        system = model_system(m, exc, solver)
        out = lambda r, v, t: channels(m, r, v, eq.r)  # noqa: E731
        traj = integrate.simulate(meth, system, eq.r.reshape(-1), jnp.zeros(eq.r.size), t0, dt,
                                  n_samples, every, relin, out, error_norm=norm)
        finite = jnp.all(jnp.stack([jnp.all(jnp.isfinite(a)) for a in jax.tree_util.tree_leaves(traj.outputs)]))
        ok = jnp.where(traj.max_error > 1.0, 3, 0)
        status = jnp.where(eq.converged, jnp.where(finite, ok, 2), 1).astype(jnp.int8)
        outs = jax.tree_util.tree_map(lambda a: jnp.where((status == 0) | (status == 3), a, jnp.nan),
                                      traj.outputs)
        return outs, status, eq.iterations

    return map_variants(variant, n_dev, micro_batch)


# Largest auto chunk per device. On a CPU the throughput peaks near 256
# variants per computation and falls beyond (working set out of cache;
# BENCHMARKS.md: block solver, double wishbone, ~6,000 variant-steps/s at
# batch 64-256, ~3,800 at 1024); accelerators keep gaining with larger batches.
MAX_AUTO_CHUNK_CPU = 256
MAX_AUTO_CHUNK_ACCELERATOR = 1024


def estimate_chunk(n_variants, n_samples, n_bush, n_dof, budget_gb, n_dev, platform=None):
    """Chunk size from a memory budget: outputs plus the per-variant working set,
    capped per device at the batch where throughput stops growing
    (``MAX_AUTO_CHUNK_*``; ``platform`` defaults to JAX's default backend)."""
    out_bytes = 8 * n_samples * (6 + 2 + 2 + 6 * n_bush)
    work_bytes = 8 * n_dof * n_dof * 12          # J_r, J_v, A, LU, blocks, temporaries
    per_variant = out_bytes + work_bytes
    platform = platform or jax.default_backend()
    cap = (MAX_AUTO_CHUNK_CPU if platform == "cpu" else MAX_AUTO_CHUNK_ACCELERATOR) * n_dev
    c = int(budget_gb * 2 ** 30 // per_variant)
    c = max(1, min(c, cap, n_variants))
    c = int(math.ceil(c / n_dev) * n_dev)
    return c, per_variant


def chunking(sw, n_variants, n_samples, n_bush, n_dof):
    """(shard, num_shards, devices, chunk) from the ``sweep`` config: the
    shard settings checked, the chunk from ``sweep.chunk_size`` (rounded up to
    a multiple of the device count) or, when ``auto``, from the memory budget
    (:func:`estimate_chunk`)."""
    shard, nsh = int(sw.get("shard", 0)), int(sw.get("num_shards", 1))
    if nsh < 1 or not 0 <= shard < nsh:
        raise ModelError(f"sweep.shard = {shard} must be in [0, sweep.num_shards = {nsh})")
    n_dev = jax.device_count()
    if sw.get("chunk_size", "auto") in ("auto", None):
        C, _ = estimate_chunk(n_variants, n_samples, n_bush, n_dof,
                              float(sw.get("memory_budget_gb", 2.0)), n_dev)
    else:
        C = int(sw["chunk_size"])
        if C < 1:
            raise ModelError(f"sweep.chunk_size = {C} must be >= 1 or auto")
        C = int(math.ceil(C / n_dev) * n_dev)
    return shard, nsh, n_dev, C


def job_identity(cfg, volatile=VOLATILE):
    """The resolved config text that defines a job's results: shard settings,
    bookkeeping (progress, verification, the compilation cache) and where the
    store lies (``output.path``: a store copied or moved elsewhere resumes
    there) excluded."""
    c = OmegaConf.to_container(cfg, resolve=True)
    c.pop("cache", None)
    for k in volatile:
        c.get("sweep", {}).pop(k, None)
    for k in ("overwrite", "path"):
        c.get("output", {}).pop(k, None)
    return OmegaConf.to_yaml(OmegaConf.create(c))


def prepare(cfg):
    """Everything a job needs, validated before any compute."""
    model = model_from_config(cfg.model)
    sw = OmegaConf.to_container(cfg.sweep, resolve=True)
    pset = build_parameters(sw.get("parameters") or {}, model)
    X = make_design(sw, pset)
    exc, t0, t1 = build_excitation(OmegaConf.to_container(cfg.loadcase, resolve=True))
    if sw.get("start") is not None:
        t0 = float(sw["start"])
        if not t0 < t1:
            raise ModelError(f"sweep.start = {t0} must be before loadcase.t_end = {t1}")
    integ = cfg.integrator
    if integ.name not in (*METHODS, "radau"):
        raise ModelError(f"integrator.name = {integ.name!r} is not one of {', '.join((*METHODS, 'radau'))}")
    dt = float(integ.dt)
    if not dt > 0:
        raise ModelError(f"integrator.dt = {dt} must be positive")
    every = int(sw["every"]) if sw.get("every") is not None else int(cfg.output.every)
    n_samples = sample_grid(t0, t1, dt, every)
    relin = int(integ.get("relinearise_every", 1))
    if relin < 1:
        raise ModelError(f"integrator.relinearise_every = {relin} must be >= 1")
    solver = str(integ.get("solver", "block"))
    if solver not in SOLVERS:
        raise ModelError(f"integrator.solver = {solver!r} is not one of {', '.join(SOLVERS)}")
    names = model.topology.bushing_names
    refs = [names.index(b) for b in (model.topology.tables.get("reference_bushings") or {}).values()]
    bidx = sorted(set(select_bushings(cfg.output.get("bushings"), names)) | set(refs))
    shard, nsh, n_dev, C = chunking(sw, len(X), n_samples, len(bidx), model.topology.n_dof)
    if integ.name == "radau":
        C = min(C, len(X))
    times = t0 + np.arange(n_samples) * every * dt
    micro = micro_batch_of(sw, C, n_dev)
    tolerance = None
    if integ.name in METHODS and METHODS[integ.name].b_hat is not None:
        tolerance = tuple(float(integ.get(k, d)) for k, d in
                          (("rtol", 1e-2), ("atol_coordinates", 1e-4), ("atol_speeds", 1e-1)))
    return dict(model=model, pset=pset, X=X, exc=exc, t0=t0, t1=t1, dt=dt, every=every,
                n_samples=n_samples, relin=relin, solver=solver, bidx=bidx, shard=shard, num_shards=nsh,
                chunk=C, times=times, n_dev=n_dev, method=integ.name, tolerance=tolerance, micro_batch=micro)


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


def store_spec(job):
    model, pset, X = job["model"], job["pset"], job["X"]
    topo = model.topology
    n, T, C = len(X), job["n_samples"], job["chunk"]
    # zarr chunks: the compute chunk along variant (a chunk is written whole,
    # shards never share a file), one bushing each (one bushing across all
    # variants reads only that bushing's bytes), and as many time samples as
    # fit ZARR_CHUNK_BYTES = 4 MiB uncompressed (C x tc x 6 float64)
    tc = min(T, max(1, ZARR_CHUNK_BYTES // (C * 6 * 8)))
    names = [topo.bushing_names[i] for i in job["bidx"]]
    coords = {
        "variant": (np.arange(n, dtype=np.int64), {}),
        "time": (job["times"], {"units": "s"}),
        "side": (np.array(["left", "right"]), {}),
        "axis": (np.array(["x", "y", "z"]), {}),
        "bushing": (np.array(names), {}),
        "component": (np.array(["fx", "fy", "fz", "mx", "my", "mz"]), {}),
        # non-dimension coordinate: the unit of each bushing_force component
        "component_units": (np.array(COMPONENT_UNITS), {"long_name": "unit of each component"},
                            ("component",)),
    }
    spec = {"__coords__": coords}
    for i, p in enumerate(pset.params):
        spec[p.name] = (("variant",), (n,), "f8", (C,), np.nan, parameter_attrs(p))
    shapes = {
        "wheel_centre_displacement": (("variant", "time", "side", "axis"), (n, T, 2, 3), (C, tc, 2, 3)),
        "toe": (("variant", "time", "side"), (n, T, 2), (C, tc, 2)),
        "camber": (("variant", "time", "side"), (n, T, 2), (C, tc, 2)),
        "bushing_force": (("variant", "time", "bushing", "component"), (n, T, len(names), 6),
                          (C, tc, 1, 6)),
    }
    for name, (dims, shape, chunks) in shapes.items():
        units, long_name = UNITS[name]
        spec[name] = (dims, shape, "f8", chunks, np.nan, {"units": units, "long_name": long_name})
    spec["status"] = (("variant",), (n,), "i1", (C,), -1,
                      {"long_name": "variant status", "flag_values": list(cube_store.STATUS_MEANINGS),
                       "flag_meanings": " ".join(cube_store.STATUS_MEANINGS.values())})
    spec["equilibrium_iterations"] = (("variant",), (n,), "i4", (C,), -1,
                                      {"long_name": "Newton iterations of the static equilibrium"})
    # chunk_done (dim chunk, a coordinate) and the chunk checksums are added by sweep.store
    if pset.params:  # the varied parameters are coordinates along variant (CF attribute)
        for name in (*CHANNELS, "status", "equilibrium_iterations"):
            spec[name][5]["coordinates"] = " ".join(pset.names)
    return spec


def cube_attrs(job, cfg_yaml):
    topo = job["model"].topology
    ref = topo.tables.get("reference_bushings") or {}
    return {
        "n_bodies": int(topo.n_bodies), "n_force_elements": int(topo.n_force_elements),
        "n_dof": int(topo.n_dof),
        "reference_bushing_left": ref.get("left", ""), "reference_bushing_right": ref.get("right", ""),
        "model": topo.name, "config": cfg_yaml, "nmse_definition": NMSE_DEFINITION,
        "parameters": list(job["pset"].names), "chunk_size": int(job["chunk"]),
        **provenance(),
    }


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


def _radau_chunk(job, thetas):
    from sweep.reference import radau
    model, pset, exc = job["model"], job["pset"], job["exc"]
    if "radau_fns" not in job:  # compiled once per job, reused by every chunk
        job["radau_fns"] = (jax.jit(jax.vmap(make_channels(job["bidx"]), in_axes=(None, 0, 0, None))),
                            jax.jit(pset.apply), jax.jit(statics.static_equilibrium))
    channels, apply, eqf = job["radau_fns"]
    outs, status, its = [], [], []
    for theta in thetas:
        m = apply(model, jnp.asarray(theta))
        eq = eqf(m, loads.u_at(exc, job["t0"]))
        ch = None
        st = 1
        if bool(eq.converged):
            try:
                _, r, v = radau(m, exc, eq.r, jnp.zeros_like(eq.r), job["times"],
                                rtol=float(job["integ"].get("rtol", 1e-8)),
                                atol_coordinates=float(job["integ"].get("atol_coordinates", 1e-10)),
                                atol_speeds=float(job["integ"].get("atol_speeds", 1e-8)))
                ch = jax.device_get(channels(m, jnp.asarray(r), jnp.asarray(v), eq.r))
                st = 0 if all(np.all(np.isfinite(a)) for a in ch.values()) else 2
            except RuntimeError:
                st = 2
        if st != 0:
            ch = None
        outs.append(ch)
        status.append(st)
        its.append(int(eq.iterations))
    template = next((o for o in outs if o is not None), None)
    if template is None:  # every variant failed: shapes from the spec
        T, nb = len(job["times"]), len(job["bidx"])
        template = {"wheel_centre_displacement": np.zeros((T, 2, 3)), "toe": np.zeros((T, 2)),
                    "camber": np.zeros((T, 2)), "bushing_force": np.zeros((T, nb, 6))}
    stacked = {k: np.stack([o[k] if o is not None else np.full_like(template[k], np.nan) for o in outs])
               for k in template}
    return stacked, np.array(status, np.int8), np.array(its, np.int32)


def run_job(cfg, cfg_yaml, progress=None):
    """Run (or resume) a job into its cube. Returns a summary dict.

    Dispatch on the load case's kind: ``kind: kc`` (quasi-static K&C rig
    analyses, :mod:`sweep.kc`, its own cube schema) or the default
    ``time_response`` (LSRT2 / Radau, below).

    SIGINT / SIGTERM during the job stop it cleanly (:class:`Stop`): one line
    on stderr saying what is saved and how to resume, exit status 130 / 143;
    the store stays resumable. The store's lock (:class:`sweep.store.StoreLock`)
    is held for the whole job."""
    from sweep import kc as kc_jobs
    ensure_console()
    stop = Stop().install()
    try:
        if kc_jobs.is_kc(cfg):
            summary = kc_jobs.run_kc_job(cfg, cfg_yaml, progress)
        else:
            summary = run_time_response_job(cfg, cfg_yaml, progress)
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
        raise ModelError(f"output.path = {path!r} must end in .zarr")
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


def _oserror(err):
    return (f"{err.strerror} ({err.filename})" if err.strerror and err.filename
            else err.strerror or str(err)).splitlines()[0]


def run_time_response_job(cfg, cfg_yaml, progress=None):
    """Run (or resume) a time-response job (LSRT2 or Radau) into its cube."""
    job = prepare(cfg)
    job["integ"] = OmegaConf.to_container(cfg.integrator, resolve=True)
    path, store, created, todo = open_job_store(cfg, job, store_spec(job), cube_attrs(job, cfg_yaml),
                                                job_identity(cfg))
    X, C = job["X"], job["chunk"]
    n = len(X)
    n_chunks = -(-n // C)
    summary = {"path": path, "n_variants": n, "chunk": C, "n_chunks": n_chunks, "todo": len(todo),
               "compile_s": 0.0, "run_s": 0.0, "variants_run": 0, "equilibrium_s": 0.0,
               "simulated_s": job["t1"] - job["t0"], "n_samples": job["n_samples"], "dt": job["dt"],
               "devices": job["n_dev"]}
    if not todo:
        return summary
    pset = job["pset"]
    if cfg.integrator.name in METHODS:
        args = (job["model"], pset, job["exc"], job["t0"], job["dt"], job["n_samples"], job["every"],
                job["relin"], job["bidx"], job["solver"], job["n_dev"], job["method"], job["tolerance"],
                job["micro_batch"])
        runner = make_chunk_runner(*args)
        label = {"lsrt2": "LSRT2", "ros34pw2": "ROS34PW2"}.get(job["method"], job["method"])
        what = (f"{label} chunk runner: {job['model'].topology.name} "
                f"({job['model'].topology.n_dof} DOF), "
                f"static equilibrium + {job['n_samples']} samples of {cfg.loadcase.name}, "
                f"{C} variant(s) per chunk on {job['n_dev']} device(s)"
                + (f" in groups of {job['micro_batch']}" if job["micro_batch"] else ""))
        from sweep.tracecache import fingerprint
        run_chunk, summary["compile_s"] = compile_chunk_runner(
            runner, np.zeros((C, len(pset))), job["n_dev"], what,
            key=fingerprint("time_response", C, *args))
    else:
        def run_chunk(thetas, m):
            return _radau_chunk(job, thetas[:m])
    return stream_chunks(job, store, todo, run_chunk, CHANNELS, progress, summary)


def compile_chunk_runner(runner, thetas, n_dev, what="the chunk runner", key=None):
    """Compile a chunk runner (from :func:`map_variants`) once for the padded
    chunk shape of ``thetas`` (logging "compiling <what> ..." first; a
    SIGINT / SIGTERM meanwhile stops the job). ``key`` (from
    :func:`sweep.tracecache.fingerprint` of the runner factory's arguments)
    lets a rerun skip tracing (one device; see :mod:`sweep.tracecache`).
    Returns (``run_chunk(thetas, m)`` for :func:`stream_chunks`, compile
    seconds)."""
    from sweep import tracecache
    log.info("compiling %s (once per job) ...", what)
    tic = time.perf_counter()

    def build():
        fn, loaded = tracecache.traced(runner, (np.asarray(thetas),), key if n_dev == 1 else None)
        return fn.lower(_place(thetas, n_dev)).compile(), loaded
    compiled, loaded = _stop().wait(build, doing="the compilation")
    compile_s = time.perf_counter() - tic
    log.info("compiled in %.1f s%s", compile_s, " (traced program from the trace cache)" if loaded else "")

    def run_chunk(thetas, m):
        return jax.device_get(compiled(_place(thetas, n_dev)))
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
