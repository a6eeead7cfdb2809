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
import math
import os
import time

import jax
import jax.numpy as jnp
import numpy as np
from omegaconf import OmegaConf

from kernels import loads, lsrt2, statics
from kernels.model import ModelError
from kernels.system import SOLVERS, model_system
from sweep import store as cube_store
from sweep.cube import NMSE_DEFINITION, provenance
from sweep.design import make_design
from sweep.job import make_channels, model_from_config, sample_grid
from sweep.loadcase import build_excitation
from sweep.params import build_parameters

CHANNELS = ("wheel_centre_displacement", "toe", "camber", "bushing_force")
UNITS = {
    "wheel_centre_displacement": ("m", "wheel-centre displacement from the variant's static equilibrium"),
    "toe": ("rad", "toe angle (DIN 70000, + = toe-in)"),
    "camber": ("rad", "camber angle (DIN 70000, + = top out)"),
    "bushing_force": ("N (fx, fy, fz), N m (mx, my, mz)",
                      "force and torque of the bushing on its first body, vehicle frame"),
}
# keys that do not change the results: shards and bookkeeping
VOLATILE = ("shard", "num_shards", "progress")


def select_bushings(patterns, names):
    if patterns is None:
        return list(range(len(names)))
    pats = [patterns] if isinstance(patterns, str) else list(patterns)
    idx = [i for i, n in enumerate(names) if any(fnmatch.fnmatchcase(n, p) for p in pats)]
    if not idx:
        raise ModelError(f"output.bushings = {patterns!r} matches no bushing")
    return idx


def make_chunk_runner(model, pset, exc, t0, dt, n_samples, every, relin, bushing_idx, solver="block",
                      n_dev=1):
    """jit(vmap(variant)) : thetas (C, P) -> (channels, status, eq_iterations),
    each of ``n_dev`` devices mapping its own slice (:func:`map_variants`)."""
    channels = make_channels(bushing_idx)
    u0 = loads.u_at(exc, t0)

    def variant(theta):
        m = pset.apply(model, theta)
        eq = statics.static_equilibrium(m, u0)
        system = model_system(m, exc, solver)
        out = lambda r, v, t: channels(m, r, v, eq.r)  # noqa: E731
        traj = lsrt2.simulate(system, eq.r.reshape(-1), jnp.zeros(eq.r.size), t0, dt,
                              n_samples, every, relin, out)
        finite = jnp.all(jnp.stack([jnp.all(jnp.isfinite(a)) for a in jax.tree_util.tree_leaves(traj.outputs)]))
        status = jnp.where(eq.converged, jnp.where(finite, 0, 2), 1).astype(jnp.int8)
        outs = jax.tree_util.tree_map(lambda a: jnp.where(status == 0, a, jnp.nan), traj.outputs)
        return outs, status, eq.iterations

    return map_variants(variant, n_dev)


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


def job_identity(cfg):
    """The resolved config text that defines a job's results (shard settings excluded)."""
    c = OmegaConf.to_container(cfg, resolve=True)
    for k in VOLATILE:
        c.get("sweep", {}).pop(k, None)
    c.get("output", {}).pop("overwrite", None)
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
    if integ.name not in ("lsrt2", "radau"):
        raise ModelError(f"integrator.name = {integ.name!r} is not one of lsrt2, radau")
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
    return dict(model=model, pset=pset, X=X, exc=exc, t0=t0, t1=t1, dt=dt, every=every,
                n_samples=n_samples, relin=relin, solver=solver, bidx=bidx, shard=shard, num_shards=nsh,
                chunk=C, times=times, n_dev=n_dev)


def store_spec(job):
    model, pset, X = job["model"], job["pset"], job["X"]
    topo = model.topology
    n, T, C = len(X), job["n_samples"], job["chunk"]
    tc = min(T, max(1, 2 ** 22 // max(1, C * 6 * len(job["bidx"]) * 8) or 1))  # ~32 MB chunks
    names = [topo.bushing_names[i] for i in job["bidx"]]
    coords = {
        "variant": (np.arange(n, dtype=np.int64), {}),
        "time": (job["times"], {"units": "s"}),
        "side": (np.array(["left", "right"]), {}),
        "axis": (np.array(["x", "y", "z"]), {}),
        "bushing": (np.array(names), {}),
        "component": (np.array(["fx", "fy", "fz", "mx", "my", "mz"]), {}),
    }
    spec = {"__coords__": coords}
    for i, p in enumerate(pset.params):
        spec[p.name] = (("variant",), (n,), "f8", (C,), np.nan,
                        {"long_name": f"{p.target} ({p.mode}) of {p.name}", "units": "1" if p.mode == "scale" else "SI",
                         "bounds": [p.lower, p.upper], "nominal": p.nominal, "scale": p.scale})
    shapes = {
        "wheel_centre_displacement": (("variant", "time", "side", "axis"), (n, T, 2, 3), (C, tc, 2, 3)),
        "toe": (("variant", "time", "side"), (n, T, 2), (C, tc, 2)),
        "camber": (("variant", "time", "side"), (n, T, 2), (C, tc, 2)),
        "bushing_force": (("variant", "time", "bushing", "component"), (n, T, len(names), 6),
                          (C, tc, len(names), 6)),
    }
    for name, (dims, shape, chunks) in shapes.items():
        units, long_name = UNITS[name]
        spec[name] = (dims, shape, "f8", chunks, np.nan, {"units": units, "long_name": long_name})
    spec["status"] = (("variant",), (n,), "i1", (C,), -1,
                      {"long_name": "variant status", "flag_values": list(cube_store.STATUS_MEANINGS),
                       "flag_meanings": " ".join(cube_store.STATUS_MEANINGS.values())})
    spec["equilibrium_iterations"] = (("variant",), (n,), "i4", (C,), -1,
                                      {"long_name": "Newton iterations of the static equilibrium"})
    n_chunks = -(-n // C)
    spec["chunk_done"] = (("chunk",), (n_chunks,), "i1", (1,), 0,
                          {"long_name": "1 = compute chunk written completely"})
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


def map_variants(variant, n_dev=1):
    """``jit(vmap(variant))`` over the leading axis; on ``n_dev`` > 1 devices
    every device maps its own slice of the chunk (``jax.shard_map``).

    Why shard_map and not a plain jit of sharded inputs: a vmapped
    ``while_loop`` (the Newton iteration of the static equilibrium) stops when
    *no* variant of the batch wants another iteration, a reduction over
    ``variant``. Left to the SPMD partitioner that becomes an all-reduce
    across devices in every iteration; with shard_map each device tests only
    its own variants, there is no cross-device communication at all (and on
    XLA's CPU client the cross-device all-reduce inside a while loop was
    measured to hang a 4096-variant job). Results per variant are the same."""
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
    ``time_response`` (LSRT2 / Radau, below)."""
    from sweep import kc as kc_jobs
    if kc_jobs.is_kc(cfg):
        return kc_jobs.run_kc_job(cfg, cfg_yaml, progress)
    return run_time_response_job(cfg, cfg_yaml, progress)


def open_job_store(cfg, job, spec, attrs, identity):
    """Create or reopen the job's store (``output.overwrite`` replaces a store
    of another job) and list this shard's unfinished chunks.

    Returns (path, store, created, todo chunk indices)."""
    path = str(cfg.output.path)
    if not path.rstrip("/").endswith(".zarr"):
        raise ModelError(f"output.path = {path!r} must end in .zarr")
    if os.path.exists(path) and cfg.output.get("overwrite", False):
        try:
            same = cube_store.CubeStore(path).attrs.get("job_identity") == identity
        except Exception:  # noqa: BLE001 - unreadable store: replace it
            same = False
        if not same:
            cube_store.remove(path)
    store, created = cube_store.create_store(path, spec, attrs, identity)
    n_chunks = -(-len(job["X"]) // job["chunk"])
    done = store.done()
    todo = [k for k in range(n_chunks) if k % job["num_shards"] == job["shard"] and not done[k]]
    return path, store, created, todo


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
    if cfg.integrator.name == "lsrt2":
        runner = make_chunk_runner(job["model"], pset, job["exc"], job["t0"], job["dt"],
                                   job["n_samples"], job["every"], job["relin"], job["bidx"],
                                   job["solver"], job["n_dev"])
        run_chunk, summary["compile_s"] = compile_chunk_runner(runner, np.zeros((C, len(pset))), job["n_dev"])
    else:
        def run_chunk(thetas, m):
            return _radau_chunk(job, thetas[:m])
    return stream_chunks(job, store, todo, run_chunk, CHANNELS, progress, summary)


def compile_chunk_runner(runner, thetas, n_dev):
    """Compile a chunk runner (from :func:`map_variants`) once for the padded
    chunk shape of ``thetas``. Returns (``run_chunk(thetas, m)`` for
    :func:`stream_chunks`, compile seconds)."""
    tic = time.perf_counter()
    compiled = runner.lower(_place(thetas, n_dev)).compile()
    compile_s = time.perf_counter() - tic

    def run_chunk(thetas, m):
        return jax.device_get(compiled(_place(thetas, n_dev)))
    return run_chunk, compile_s


def stream_chunks(job, store, todo, run_chunk, names, progress, summary):
    """Run this shard's unfinished chunks and write each to the store as soon
    as it finishes (what was written survives a crash; a rerun skips it).

    ``run_chunk(thetas, m)`` runs one padded chunk (rows past ``m`` are the
    nominal axle) and returns (outputs dict, status, equilibrium iterations).
    A tqdm bar shows variants done, variants/s and ETA. Updates and returns
    ``summary`` (variants_run, run_s)."""
    X, C, pset = job["X"], job["chunk"], job["pset"]
    n = len(X)
    bar = None
    if progress is not False:
        from tqdm import tqdm
        bar = tqdm(total=sum(min(C, n - k * C) for k in todo), unit="variant", desc="variants",
                   disable=progress is None and not os.isatty(2) and os.environ.get("CI") is not None,
                   dynamic_ncols=True)
    tic = time.perf_counter()
    for k in todo:
        a, b = k * C, min(n, (k + 1) * C)
        thetas = np.tile(pset.nominal, (C, 1))          # padding rows run the nominal axle
        thetas[: b - a] = X[a:b]
        outs, status, its = run_chunk(thetas, b - a)
        data = {name: np.asarray(outs[name])[: b - a] for name in names}
        data.update({p.name: X[a:b, i] for i, p in enumerate(pset.params)})
        data["status"] = np.asarray(status)[: b - a]
        data["equilibrium_iterations"] = np.asarray(its)[: b - a]
        store.write_chunk(k, a, data)
        summary["variants_run"] += b - a
        if bar is not None:
            bar.update(b - a)
    summary["run_s"] = time.perf_counter() - tic
    if bar is not None:
        bar.close()
    return summary
