"""The modes job kind: eigenfrequencies, damping ratios and mode participation
of every variant, linearised at its design position, into one cube.

``python -m sweep loadcase=modes sweep=lhs sweep.n_variants=256``

Per variant (:func:`make_variant`): apply the parameters, find the design
position (wheel centres at design height, gravity only, the vertical wheel
loads found: :func:`kernels.kc.design_position`, the same state the K&C jobs
start from), linearise eq. (1) there at rest and solve the state matrix's
eigenproblem (:func:`kernels.modes.modes`): the lowest ``loadcase.n_modes``
oscillatory modes by frequency, each with its undamped natural frequency
[Hz], damping ratio [-], the kinetic-energy share of every body and the
elastic-energy share of every bushing (which parts move, which bushings
work). A variant with fewer oscillatory modes gets NaN in the rest.

Cube: dims ``variant``, ``mode`` (0 = lowest frequency), ``body``,
``bushing``; variables ``frequency``, ``damping_ratio`` (variant, mode),
``eigenvalue_real``, ``eigenvalue_imag`` [1/s], ``body_energy`` (variant,
mode, body), ``bushing_energy`` (variant, mode, bushing), ``n_overdamped``
(variant), ``status``, ``equilibrium_iterations``, one variable per swept
parameter. Everything around it (chunks, store, resume, stops) is the one
job pipeline, :func:`sweep.engine.run`.

The nonsymmetric eigensolver (``jnp.linalg.eig``) is XLA's CPU routine: on an
accelerator the chunk runner of this kind runs on the host CPU (its inputs are
placed there). Cost: BENCHMARKS.md ("Modes job").
"""
from __future__ import annotations

import logging
import os

import jax
import jax.numpy as jnp
import numpy as np
from omegaconf import OmegaConf

from kernels import kc
from kernels import modes as kmodes
from sweep.results import schema as cube_schema
from sweep.results import status
from sweep.results.cube import CF_CONVENTIONS, flexible_note, provenance
from sweep.study.design import make_design
from sweep.engine import layout, log_run, mapping
from sweep.engine.layout import Channel
from sweep.kinds.base import JobKind, Plan, Runner, static_limits
from sweep.axle.builder import model_from_config
from sweep.axle.params import build_parameters
from sweep.core.config import ConfigError, Int, Map, Str

log = logging.getLogger("sweep")

NAME = "modes"
KNOWN_KEYS = {"name", "kind", "n_modes", "tolerance", "max_iterations", "mirror", "description"}

CHANNELS = [
    Channel("frequency", (), "Hz", "undamped natural frequency |lambda| / 2 pi of the mode"),
    Channel("damping_ratio", (), "1", "damping ratio -Re(lambda) / |lambda| of the mode"),
    Channel("eigenvalue_real", (), "1/s", "real part of the mode's eigenvalue lambda"),
    Channel("eigenvalue_imag", (), "1/s", "imaginary part of the mode's eigenvalue lambda (> 0)"),
    Channel("body_energy", ("body",), "1", "share of each body in the mode's kinetic energy"),
    Channel("bushing_energy", ("bushing",), "1", "share of each bushing in the mode's elastic energy"),
    Channel("symmetry", (), "1", "mirror symmetry of the mode: +1 parallel (both sides move as mirror "
            "images), -1 opposite, between: mixed (an asymmetric variant)"),
    Channel("n_overdamped", (), "1", "number of real eigenvalues (overdamped or static modes)",
            per_step=False),
    Channel("mirror_split", (), "1", "1 where the eigenproblem was split into its parallel and opposite "
            "halves (a mirror-symmetric variant, exact), 0 where it was solved whole", per_step=False),
]


def load_case(lc: dict) -> dict:
    """Validate a modes load case; one-line :class:`ConfigError` naming the key."""
    for key in lc:
        if key not in KNOWN_KEYS:
            raise ConfigError(f"loadcase.{key}: unknown key for a modes load case "
                              f"(known: {', '.join(sorted(KNOWN_KEYS))})")
    n = lc.get("n_modes", 30)
    if not isinstance(n, int) or n < 1:
        raise ConfigError(f"loadcase.n_modes = {n!r} must be an integer >= 1")
    tol = float(lc.get("tolerance", 1e-6))
    if not tol > 0:
        raise ConfigError(f"loadcase.tolerance = {lc.get('tolerance')} must be > 0 [N]")
    max_iter = lc.get("max_iterations", 60)
    if not isinstance(max_iter, int) or max_iter < 1:
        raise ConfigError(f"loadcase.max_iterations = {max_iter!r} must be an integer >= 1")
    mirror = lc.get("mirror", True)
    if not isinstance(mirror, bool):
        raise ConfigError(f"loadcase.mirror = {mirror!r} must be true or false")
    return dict(n_modes=n, tol=tol, max_iter=max_iter, mirror=mirror)


def channel_shapes(model, n_modes):
    sizes = {"body": model.topology.n_bodies, "bushing": len(model.topology.bushing_names)}
    return {c.name: tuple(sizes[d] for d in c.dims) for c in CHANNELS}


def _plan(cfg) -> Plan:
    lc = load_case(OmegaConf.to_container(cfg.loadcase, resolve=True))
    lc["limits"] = static_limits(cfg)
    model = model_from_config(cfg.model)
    n = model.topology.n_dof
    if lc["n_modes"] > n:
        raise ConfigError(f"loadcase.n_modes = {lc['n_modes']} exceeds the model's {n} degrees of freedom")
    sw = OmegaConf.to_container(cfg.sweep, resolve=True)
    pset = build_parameters(sw.get("parameters") or {}, model)
    X = make_design(sw, pset)
    shapes = channel_shapes(model, lc["n_modes"])
    # working set: ~12 (2n)^2 float64 matrices (state matrix, eigenvectors
    # as real and imaginary parts, LAPACK workspace)
    # the eigen solve runs on the host CPU (see the module docstring): the
    # chunk is split over the CPU devices where JAX's default backend is the
    # CPU (default: one per core, at most two), else it runs on one CPU core
    cpu_job = jax.default_backend() == "cpu"
    shard, nsh, n_dev, C = mapping.chunking(sw, len(X), layout.output_bytes(CHANNELS, shapes, lc["n_modes"]),
                                            2 * n, max_devices=None if cpu_job else 1)
    topo = model.topology
    K = lc["n_modes"]
    coords = {
        "variant": (np.arange(len(X), dtype=np.int64), {}),
        "mode": (np.arange(K, dtype=np.int64), {"long_name": "mode number, by increasing frequency"}),
        "body": (np.array(topo.body_names), {}),
        "bushing": (np.array(topo.bushing_names), {}),
    }
    return Plan(model=model, model_cfg=cfg.model, pset=pset, X=X, shard=shard, num_shards=nsh, chunk=C, n_dev=n_dev,
                micro_batch=None, channels=tuple(CHANNELS), shapes=shapes, coords=coords, lead=(("mode", K, K),),
                iterations_long_name="Newton iterations of the design position", case=lc)


def make_variant(model, pset, lc, start=None):
    """theta (P,) -> (modal outputs, status, Newton iterations of the design position).

    ``start``: (r, fz) of the nominal axle's design position, where every
    variant's Newton iteration starts (a variant is near the nominal axle:
    3-4 iterations instead of 8-9 from the hardpoint geometry; the same
    solution to round-off)."""
    n_modes = lc["n_modes"]
    r0, fz0 = start if start is not None else (None, None)

    def variant(theta):
        m = pset.apply(model, theta)
        eq = kc.design_position(m, tol=lc["tol"], max_iter=lc["max_iter"], r_start=r0, fz_start=fz0)
        md = kmodes.modes(m, eq.r, kc.design_loads(eq), n_modes=n_modes, mirror=lc.get("mirror", True))
        out = {"frequency": md.frequency, "damping_ratio": md.damping_ratio,
               "eigenvalue_real": jnp.real(md.eigenvalue), "eigenvalue_imag": jnp.imag(md.eigenvalue),
               "body_energy": md.body_energy, "bushing_energy": md.bushing_energy,
               "symmetry": md.symmetry, "n_overdamped": md.n_overdamped.astype(jnp.float64),
               "mirror_split": md.mirror.astype(jnp.float64)}
        finite = jnp.all(jnp.isfinite(md.frequency[:1]))
        plausible = kc.static_state_plausible(m, eq.r, lc["limits"], held=True)
        code = jnp.where(eq.converged, jnp.where(finite, jnp.where(plausible, status.OK, status.IMPLAUSIBLE),
                                                 status.NON_FINITE),
                         status.EQUILIBRIUM_FAILED).astype(jnp.int8)
        out = jax.tree_util.tree_map(lambda a: jnp.where((code == status.OK) | (code == status.IMPLAUSIBLE),
                                                         a, jnp.nan), out)
        return out, code, eq.iterations
    return variant


def chunk_runner(model, pset, lc, n_dev=1, lifted=False):
    """jit(thetas (C, P) -> stacked outputs of :func:`make_variant`); on
    ``n_dev`` > 1 (CPU) devices each maps its own slice (``shard_map``, no
    communication; each device solves the nominal start itself).

    Variants run one after another (``lax.map`` without batching), not
    vmapped: the eigen solve is one LAPACK call per matrix either way, the
    Newton iterations cost the same (measured), and only unbatched does the
    mirror split's ``lax.cond`` run just the branch a variant takes (under
    vmap both would run). The nominal axle's design position, solved once
    per chunk, is every variant's Newton start.

    ``lifted``: rows ``[theta | values]`` in place of thetas, ``values`` =
    ``Lifted(model).vector`` (:mod:`sweep.engine.values`); the nominal start
    is solved for the first row's model."""
    from sweep.engine.values import Lifted
    lift, n_params = (Lifted(model) if lifted else None), len(pset)

    def run(rows):
        mdl = model if lift is None else lift.rebuild(rows[0, n_params:])
        eq0 = kc.design_position(mdl, tol=lc["tol"], max_iter=lc["max_iter"])
        start = (jnp.where(eq0.converged, eq0.r, mdl.r_design), jnp.where(eq0.converged, eq0.fz, 0.0))
        if lift is None:
            return jax.lax.map(make_variant(model, pset, lc, start), rows)
        return jax.lax.map(lambda row: make_variant(lift.rebuild(row[n_params:]), pset, lc, start)(row[:n_params]),
                           rows)
    if n_dev > 1:
        from jax.sharding import PartitionSpec as P
        run = jax.shard_map(run, mesh=mapping.mesh(n_dev), in_specs=P("variant"), out_specs=P("variant"),
                            check_vma=False)
    return jax.jit(run)


def report(ds, cfg, s):
    """Log the modes job summary: timing, status counts, the first good variant's modes."""
    a = ds.attrs
    log.info(f"model {a['model']}: {a['n_bodies']} bodies{flexible_note(a)}, {a['n_force_elements']} force elements, "
             f"{a['n_dof']} DOF; modes at the design position, {s['n_modes']} lowest; design "
             f"{cfg.sweep.design}, {s['n_variants']} variant(s)")
    codes = ds.status.values
    log_run(log, s, codes, KIND.status)
    ok = np.nonzero(np.isin(codes, (status.OK, status.IMPLAUSIBLE)))[0]
    if len(ok):
        v = int(ok[0])
        d = ds.isel(variant=v)
        log.info(f"modes of variant {v}: frequency [Hz], damping ratio [-], body with the largest "
                 "kinetic-energy share, bushing with the largest elastic-energy share")
        for k in range(ds.sizes["mode"]):
            f = float(d.frequency[k])
            if not np.isfinite(f):
                break
            b = d.body_energy[k].values
            e = d.bushing_energy[k].values
            log.info(f"  {k:3d} {f:9.2f} {float(d.damping_ratio[k]):8.3f}  "
                     f"{str(ds.body.values[int(np.nanargmax(b))]):28s} {np.nanmax(b):5.2f}  "
                     f"{str(ds.bushing.values[int(np.nanargmax(e))]):32s} {np.nanmax(e):5.2f}")
    log.info(f"result cube: {os.path.abspath(s['path'])}")
    cube_schema.warn(ds, KIND.channels)


class Modes(JobKind):
    name = NAME
    channels = tuple(CHANNELS)
    status = (status.NOT_RUN, status.OK, status.EQUILIBRIUM_FAILED, status.NON_FINITE, status.IMPLAUSIBLE)
    # types only: load_case checks the ranges
    loadcase = Map({"name": Str(), "kind": Str(), "description": Str(), "n_modes": Int(),
                    "max_iterations": Int()})
    unused = ("start", "every")     # no time axis
    drop = ("integrator",)     # no time integration in a modes job

    def plan(self, cfg):
        return _plan(cfg)

    def runner(self, plan):
        lc, topo, n_dev = plan.case, plan.model.topology, plan.n_dev
        fn = chunk_runner(plan.model, plan.pset, lc, n_dev, lifted=True)
        what = (f"modes chunk runner: {topo.name} ({topo.n_dof} DOF), "
                f"design position + {2 * topo.n_dof}-state eigenproblem"
                f"{' (split by mirror symmetry where a variant is symmetric)' if lc['mirror'] else ''}, "
                f"{plan.chunk} variant(s) per chunk on "
                + (mapping.devices_note(n_dev) if n_dev > 1 else "the CPU"))
        from sweep.engine.values import run_values
        from sweep.core.tracecache import fingerprint
        vals, structure, size = run_values(plan, lambda m: m)   # keyed on structure: values are the rows' tail
        key = fingerprint(NAME, plan.chunk, structure, lc, "sequential-v2")
        return Runner(fn, np.zeros((plan.chunk, len(plan.pset) + size)), what, key=key,
                      device=None if n_dev > 1 else jax.devices("cpu")[0], values=vals)

    def summary(self, plan):
        return {"n_modes": plan.case["n_modes"]}

    def attrs(self, plan, cfg_yaml):
        topo = plan.model.topology
        return {"n_bodies": int(topo.n_physical_bodies), "n_modal_coordinates": int(topo.n_modal_coordinates), "n_force_elements": int(topo.n_force_elements),
                "n_dof": int(topo.n_dof), "model": topo.name, "config": cfg_yaml, "cube_kind": NAME,
                "Conventions": CF_CONVENTIONS,
                "linearised_at": "design position: wheel centres at design height, gravity only, "
                                  "vertical wheel loads found (kernels.kc.design_position), at rest",
                "parameters": list(plan.pset.names), "chunk_size": int(plan.chunk), **provenance()}

    def report(self, ds, cfg, s):
        report(ds, cfg, s)


KIND = Modes()
