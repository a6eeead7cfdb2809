"""The time-response job kind: every variant's static equilibrium, then a fixed-step
integration (LSRT2, ROS34PW2, linear-implicit Euler) or Radau, channels at
every output sample, into one cube.

What a variant computes (:func:`make_variant`): apply its parameters to the
nominal model, find the static equilibrium under the loads at the start,
integrate the load case (:func:`response` - the same function the
single-variant path :func:`lsrt2_run` jits) and return the channels of
:data:`CHANNELS`, a status code (:data:`sweep.store.STATUS_MEANINGS`) and the
Newton iterations. Everything around it (chunks, devices, store, resume,
stops) is :mod:`sweep.engine`.

Output channels are declared once, in :data:`CHANNELS`: name, dimensions,
units, long name and the function that computes the channel from the state
at a sample. The stored shapes come from :func:`jax.eval_shape` of those
functions; adding a channel is one entry there (the store, the byte
estimate, the Radau path and the cube follow).
"""
from __future__ import annotations

import fnmatch
import functools
import logging
import os
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import xarray as xr
from omegaconf import OmegaConf

from kernels import integrate, loads, metrics, statics
from kernels.methods import METHODS
from kernels.model import Model
from kernels.names import AXES, COMPONENT_UNITS, COMPONENTS, SIDES
from kernels.system import SOLVERS, model_system
from sweep import engine
from sweep import cube, store as cube_store
from sweep.cube import NMSE_DEFINITION, provenance
from sweep.design import make_design
from sweep.engine import Channel
from sweep.job import model_from_config, sample_grid
from sweep.loadcase import build_excitation
from sweep.params import build_parameters
from sweep.schema import ConfigError

log = logging.getLogger("sweep")

KIND = "time_response"


class Sample(NamedTuple):
    """What a channel function sees at one output sample of one variant."""
    model: Model
    r: jax.Array             # (n_bodies, 6) poses [m, rad]
    v: jax.Array             # (n_bodies, 6) pose rates [m/s, rad/s]
    r_eq: jax.Array          # (n_bodies, 6) the variant's static equilibrium
    bushing_index: object    # stored bushings (numpy index array) or None for all


def _wheel_centre_displacement(s):
    return metrics.wheel_centre_position(s.model, s.r) - metrics.wheel_centre_position(s.model, s.r_eq)


def _bushing_force(s):
    f = metrics.bushing_forces(s.model, s.r, s.v)
    return f if s.bushing_index is None else f[s.bushing_index]


# The channels of a time-response cube, in store order. One entry per
# channel; its shape is found by jax.eval_shape (channel_shapes).
CHANNELS = [
    Channel("wheel_centre_displacement", ("side", "axis"), "m",
            "wheel-centre displacement from the variant's static equilibrium",
            _wheel_centre_displacement),
    Channel("toe", ("side",), "rad", "toe angle (DIN 70000, + = toe-in)",
            lambda s: metrics.toe_camber(s.model, s.r)[0]),
    Channel("camber", ("side",), "rad", "camber angle (DIN 70000, + = top out)",
            lambda s: metrics.toe_camber(s.model, s.r)[1]),
    # one variable for the public schema (component = fx..mz); the unit of each
    # component is the coordinate component_units, and sweep.cube.split_loads
    # gives bushing_force [N] and bushing_moment [N m] (pint-xarray parses both)
    Channel("bushing_force", ("bushing", "component"),
            "N (fx, fy, fz); N m (mx, my, mz): see component_units",
            "force and torque of the bushing on its first body, vehicle frame", _bushing_force),
]


def make_channels(bushing_idx=None, channels=None):
    """Result channels at one state: ``channels(model, r, v, r_eq) -> dict``
    (r, v flat or (n_bodies, 6)), one entry per :data:`CHANNELS` entry
    (``channels`` overrides the table). ``bushing_idx`` selects the stored
    bushings (default: all)."""
    idx = None if bushing_idx is None else np.asarray(bushing_idx)
    table = CHANNELS if channels is None else channels

    def fn(m, r, v, r_eq):
        nb = m.topology.n_bodies
        s = Sample(m, r.reshape(nb, 6), v.reshape(nb, 6), r_eq.reshape(nb, 6), idx)
        return {ch.name: ch.fn(s) for ch in table}
    return fn


def channel_key(channels=None):
    """What of the channel table enters the trace-cache key (names, dims,
    units, functions; :func:`sweep.tracecache.fingerprint`)."""
    return tuple((c.name, c.dims, c.units, c.long_name, c.fn, c.dtype) for c in (channels or CHANNELS))


def response(model, exc, r_eq, t0, h, n_samples, every, relinearise_every, solver="block",
             method="lsrt2", bushing_idx=None, error_norm=None):
    """One variant's time response from rest at the equilibrium ``r_eq``
    (:func:`kernels.integrate.simulate` with ``method`` of
    :data:`kernels.methods.METHODS`, the system of :mod:`kernels.system`):
    a :class:`kernels.integrate.Trajectory` whose ``outputs`` are the channels
    at every output sample. The engine's variant and :func:`lsrt2_run` both
    run this function."""
    system = model_system(model, exc, solver)
    ch = make_channels(bushing_idx)
    out = lambda r, v, t: ch(model, r, v, r_eq)  # noqa: E731
    n = r_eq.size
    return integrate.simulate(METHODS[method], system, r_eq.reshape(-1), jnp.zeros(n, r_eq.dtype), t0, h,
                              n_samples, every, relinearise_every, out, error_norm=error_norm)


@functools.partial(jax.jit, static_argnames=("n_samples", "every", "relinearise_every", "solver", "method"))
def lsrt2_run(model, exc, r_eq, t0, h, n_samples, every, relinearise_every, solver="block", method="lsrt2"):
    """The single-variant path: :func:`response` (LSRT2 or another method),
    every bushing, jitted; returns the channels at every output sample."""
    return response(model, exc, r_eq, t0, h, n_samples, every, relinearise_every, solver, method).outputs


def select_bushings(patterns, names):
    if patterns is None:
        return list(range(len(names)))
    pats = [patterns] if isinstance(patterns, str) else list(patterns)
    idx = [i for i, n in enumerate(names) if any(fnmatch.fnmatchcase(n, p) for p in pats)]
    if not idx:
        raise ConfigError(f"output.bushings = {patterns!r} matches no bushing")
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


def make_variant(model, pset, exc, t0, dt, n_samples, every, relin, bushing_idx, solver="block",
                 method="lsrt2", tolerance=None, stages=False):
    """The per-variant function of the time-response kind: ``theta (P,) ->
    (channels, status, equilibrium iterations)``.

    ``method``: a name of :data:`kernels.methods.METHODS`; with an embedded
    error estimate (ROS34PW2) and ``tolerance`` = (rtol, atol_coordinates,
    atol_speeds), a variant whose largest per-step estimate exceeds it gets
    status 3 ("inaccurate", values kept). A failed equilibrium (1) or a
    non-finite state (2) gives NaN values.

    ``stages=True`` returns its two halves instead, ``equilibrium(theta) ->
    (r_eq, converged, iterations)`` and ``integrate(theta, carry)`` (for
    :class:`sweep.engine.StagedRunner`); ``variant`` is their composition."""
    u0 = loads.u_at(exc, t0)
    meth = METHODS[method]
    norm = error_norm(tolerance) if (tolerance is not None and meth.b_hat is not None) else None

    def equilibrium(theta):
        eq = statics.static_equilibrium(pset.apply(model, theta), u0)
        return eq.r, eq.converged, eq.iterations

    def integrate_from(theta, carry):
        r_eq, converged, iterations = carry
        m = pset.apply(model, theta)
        traj = response(m, exc, r_eq, t0, dt, n_samples, every, relin, solver, method, bushing_idx, norm)
        finite = jnp.all(jnp.stack([jnp.all(jnp.isfinite(a)) for a in jax.tree_util.tree_leaves(traj.outputs)]))
        ok = jnp.where(traj.max_error > 1.0, 3, 0)
        status = jnp.where(converged, jnp.where(finite, ok, 2), 1).astype(jnp.int8)
        outs = jax.tree_util.tree_map(lambda a: jnp.where((status == 0) | (status == 3), a, jnp.nan),
                                      traj.outputs)
        return outs, status, iterations

    if stages:
        return equilibrium, integrate_from
    return lambda theta: integrate_from(theta, equilibrium(theta))


def make_chunk_runner(model, pset, exc, t0, dt, n_samples, every, relin, bushing_idx, solver="block",
                      n_dev=1, method="lsrt2", tolerance=None, micro_batch=None):
    """The engine's chunk runner: thetas (C, P) -> (channels, status,
    equilibrium iterations) with :func:`make_variant` mapped over the chunk
    (:func:`sweep.engine.map_variants`, ``micro_batch``). On ``n_dev`` > 1
    devices the equilibria are solved first on one device and only the
    integration is sharded (:class:`sweep.engine.StagedRunner`). A chunk of
    one variant is the app's single-variant path."""
    args = (model, pset, exc, t0, dt, n_samples, every, relin, bushing_idx, solver, method, tolerance)
    if n_dev > 1:
        return engine.StagedRunner(*make_variant(*args, stages=True), n_dev, micro_batch)
    return engine.map_variants(make_variant(*args), 1, micro_batch)


def channel_shapes(model, bushing_idx, channels=None):
    """{channel: shape at one sample} by :func:`jax.eval_shape` of the channel
    functions at the design pose (traces only the channel functions)."""
    r = jax.ShapeDtypeStruct((model.topology.n_bodies, 6), jnp.float64)
    fn = make_channels(bushing_idx, channels)
    return engine.channel_shapes(channels or CHANNELS, lambda m, r: fn(m, r, r, r), model, r)


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
            raise ConfigError(f"sweep.start = {t0} must be before loadcase.t_end = {t1}")
    integ = cfg.integrator
    if integ.name not in (*METHODS, "radau"):
        raise ConfigError(f"integrator.name = {integ.name!r} is not one of {', '.join((*METHODS, 'radau'))}")
    dt = float(integ.dt)
    if not dt > 0:
        raise ConfigError(f"integrator.dt = {dt} must be positive")
    every = int(sw["every"]) if sw.get("every") is not None else int(cfg.output.every)
    n_samples = sample_grid(t0, t1, dt, every)
    relin = int(integ.get("relinearise_every", 1))
    if relin < 1:
        raise ConfigError(f"integrator.relinearise_every = {relin} must be >= 1")
    solver = str(integ.get("solver", "block"))
    if solver not in SOLVERS:
        raise ConfigError(f"integrator.solver = {solver!r} is not one of {', '.join(SOLVERS)}")
    names = model.topology.bushing_names
    refs = [names.index(b) for b in (model.topology.tables.get("reference_bushings") or {}).values()]
    bidx = sorted(set(select_bushings(cfg.output.get("bushings"), names)) | set(refs))
    shapes = channel_shapes(model, bidx)
    # Radau runs one variant at a time on one device; the fixed-step methods
    # map a chunk over every device (a default CPU job: when large enough)
    shard, nsh, n_dev, C = engine.chunking(sw, len(X), engine.output_bytes(CHANNELS, shapes, n_samples),
                                           model.topology.n_dof, max_devices=1 if integ.name == "radau" else None)
    if integ.name == "radau":
        C = min(C, len(X))
    times = t0 + np.arange(n_samples) * every * dt
    micro = engine.micro_batch_of(sw, C, n_dev)
    tolerance = None
    if integ.name in METHODS and METHODS[integ.name].b_hat is not None:
        tolerance = tuple(float(integ.get(k, d)) for k, d in
                          (("rtol", 1e-2), ("atol_coordinates", 1e-4), ("atol_speeds", 1e-1)))
    return dict(model=model, pset=pset, X=X, exc=exc, t0=t0, t1=t1, dt=dt, every=every,
                n_samples=n_samples, relin=relin, solver=solver, bidx=bidx, shard=shard, num_shards=nsh,
                chunk=C, times=times, n_dev=n_dev, method=integ.name, tolerance=tolerance, micro_batch=micro,
                shapes=shapes)


def store_spec(job):
    """The cube layout: coordinates, one variable per :data:`CHANNELS` entry
    over (variant, time, its dims), parameters and status
    (:func:`sweep.engine.store_spec`). zarr chunks along time: as many
    samples as fit :data:`sweep.engine.ZARR_CHUNK_BYTES` (4 MiB uncompressed,
    C x tc x 6 float64)."""
    topo = job["model"].topology
    n, T, C = len(job["X"]), job["n_samples"], job["chunk"]
    tc = min(T, max(1, engine.ZARR_CHUNK_BYTES // (C * 6 * 8)))
    names = [topo.bushing_names[i] for i in job["bidx"]]
    coords = {
        "variant": (np.arange(n, dtype=np.int64), {}),
        "time": (job["times"], {"units": "s"}),
        "side": (np.array(SIDES), {}),
        "axis": (np.array(AXES), {}),
        "bushing": (np.array(names), {}),
        "component": (np.array(COMPONENTS), {}),
        # non-dimension coordinate: the unit of each bushing_force component
        "component_units": (np.array(COMPONENT_UNITS), {"long_name": "unit of each component"},
                            ("component",)),
    }
    return engine.store_spec(job, coords, CHANNELS, job["shapes"], (("time", T, tc),),
                             cube_store.STATUS_MEANINGS, "Newton iterations of the static equilibrium")


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


def _radau_chunk(job, thetas):
    """Radau reference runs (:func:`sweep.reference.radau`), one variant at a
    time; channels from the same table as the fixed-step runs."""
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
    T = len(job["times"])
    stacked = {c.name: np.stack([o[c.name] if o is not None else np.full((T,) + job["shapes"][c.name], np.nan)
                                 for o in outs]) for c in CHANNELS}
    return stacked, np.array(status, np.int8), np.array(its, np.int32)


def run(cfg, cfg_yaml, progress=None):
    """Run (or resume) a time-response job (a fixed-step method or Radau) into its cube."""
    job = prepare(cfg)
    job["integ"] = OmegaConf.to_container(cfg.integrator, resolve=True)
    pset = job["pset"]
    summary = {"kind": KIND, "equilibrium_s": 0.0, "simulated_s": job["t1"] - job["t0"],
               "n_samples": job["n_samples"], "dt": job["dt"]}

    def build_runner():
        C = job["chunk"]            # after engine.open_job_store: a resumed store keeps its chunks
        if cfg.integrator.name not in METHODS:
            return (lambda thetas, m: _radau_chunk(job, thetas[:m])), 0.0
        args = (job["model"], pset, job["exc"], job["t0"], job["dt"], job["n_samples"], job["every"],
                job["relin"], job["bidx"], job["solver"], job["n_dev"], job["method"], job["tolerance"],
                job["micro_batch"])
        runner = make_chunk_runner(*args)
        label = {"lsrt2": "LSRT2", "ros34pw2": "ROS34PW2"}.get(job["method"], job["method"])
        what = (f"{label} chunk runner: {job['model'].topology.name} "
                f"({job['model'].topology.n_dof} DOF), "
                f"static equilibrium + {job['n_samples']} samples of {cfg.loadcase.name}, "
                f"{C} variant(s) per chunk on {engine.devices_note(job['n_dev'])}"
                + (f" in groups of {job['micro_batch']}" if job["micro_batch"] else ""))
        from sweep.tracecache import fingerprint
        return engine.compile_chunk_runner(runner, np.zeros((C, len(pset))), job["n_dev"], what,
                                           key=fingerprint(KIND, C, channel_key(), *args))
    return engine.run_chunks(cfg, job, store_spec(job), cube_attrs(job, cfg_yaml), engine.job_identity(cfg),
                             summary, build_runner, [c.name for c in CHANNELS], progress)


PUBLISHED_NMSE = {  # method.md section 3, LSRT2 at h = 1 ms
    "double_wishbone": {"wheel_displacement": 0.00243, "bushing_force": 0.00751},
    "multilink": {"wheel_displacement": 0.01286, "bushing_force": 0.01545},
}


def report(ds, cfg, s):
    """Log the job summary (model, timing, status counts, final displacement,
    NMSE against a Radau cube beside it), check the public cube schema and
    draw the overview PNG beside the cube."""
    a = ds.attrs
    log.info(f"model {a['model']}: {a['n_bodies']} bodies, {a['n_force_elements']} force elements, "
          f"{a['n_dof']} DOF; load case {cfg.loadcase.name}; integrator {cfg.integrator.name} "
          f"(dt = {cfg.integrator.dt} s); design {cfg.sweep.design}, {s['n_variants']} variant(s)")
    if not s["variants_run"]:
        log.info(f"{s['path']}: nothing to run for this shard, every chunk is complete")
    else:
        rate = s["variants_run"] / s["run_s"] if s["run_s"] else float("nan")
        steps = (s["n_samples"] - 1) * float(cfg.sweep.every or cfg.output.every)
        rtf = s["run_s"] / (s["simulated_s"] * s["variants_run"])
        log.info(f"wall time: compile {s['compile_s']:.2f} s, run {s['run_s']:.2f} s for "
              f"{s['variants_run']} variant(s) x {s['simulated_s']:.3g} s simulated "
              f"({rate:.2f} variants/s, {rate * steps:.0f} variant-steps/s) -> real-time factor "
              f"{rtf:.3f} per variant; chunks of {s['chunk']} on {s['devices']} device(s)")
    status = ds.status.values
    counts = {cube_store.STATUS_MEANINGS[k]: int(np.sum(status == k)) for k in cube_store.STATUS_MEANINGS}
    log.info("status: " + ", ".join(f"{k} {v}" for k, v in counts.items() if v or k == "ok"))
    ok = status == 0
    if ok.any():
        wcd = ds.wheel_centre_displacement.isel(time=-1).sel(axis="x").values[ok] * 1000
        label = "final" if len(status) == 1 else "final (min / median / max over ok variants)"
        log.info(f"longitudinal wheel-centre displacement, {label}: " +
              " / ".join(f"{v:.3f}" for v in ([wcd[0, 0]] if len(status) == 1 else
                                              np.percentile(wcd[:, 0], [0, 50, 100]))) + " mm (left)")
    log.info(f"result cube: {os.path.abspath(s['path'])}")
    _nmse_beside(ds, cfg, s["path"])
    path = s["path"]
    if bool(np.all(ds.chunk_done.values)):
        from sweep import cube_schema
        for problem in cube_schema.problems(ds):
            log.warning(f"warning: cube schema: {problem}")
    if s["variants_run"] and bool(np.all(ds.chunk_done.values)):
        try:
            from sweep.plots import overview
            png = overview(ds, path.rstrip("/")[:-5] + ".png")
            log.info(f"overview plot: {os.path.abspath(png)}")
        except Exception as err:  # noqa: BLE001 - a plot must never lose a finished cube
            log.warning(f"warning: overview plot failed: {err}")


def _nmse_beside(ds, cfg, path):
    """NMSE of every fixed-step method's cube against a Radau reference cube
    beside it (``radau.zarr``), printed by whichever of the two runs last."""
    from kernels.methods import METHODS
    here = os.path.dirname(path)
    if cfg.integrator.name == "radau":
        pairs = [(name, os.path.join(here, f"{name}.zarr"), None) for name in METHODS]
    else:
        pairs = [(cfg.integrator.name, None, os.path.join(here, "radau.zarr"))]
    window = tuple(cfg.loadcase.get("nmse_window", (4.9, 6.0)))
    pub = PUBLISHED_NMSE.get(ds.attrs["model"], {})
    for name, test_path, ref_path in pairs:
        other = test_path or ref_path
        if not os.path.exists(other):
            continue
        test, ref = (xr.open_zarr(test_path), ds) if test_path else (ds, xr.open_zarr(ref_path))
        if int(ref.status.values[0]) not in (0, 3) or int(test.status.values[0]) not in (0, 3):
            continue
        rep = cube.nmse_report(test, ref, window)
        log.info(f"NMSE of {name} against radau (variant 0, {other}), "
                 f"mean((y - y_ref)^2) / mean(y_ref)^2 over {window[0]}-{window[1]} s, sides pooled:")
        for k, v in rep.items():
            p = f" (published for LSRT2: {pub[k]})" if k in pub else ""
            log.info(f"  {k}: {v:.3e}{p}")
