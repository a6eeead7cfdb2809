"""The time-response job kind: every variant's static equilibrium, then an
integration of the load case with the configured method, channels at every
output sample, into one cube.

What a variant computes (:func:`make_variant`): apply its parameters to the
nominal model, find the static equilibrium under the loads at the start and
integrate the load case - the time-response driver of the kernels
(:func:`kernels.response.driver`, the one that tuning, the tests and the
benchmarks call too, with the plan's :class:`Case` as its problem and
options) - and return the channels of :data:`CHANNELS`, a status code
(:mod:`sweep.results.status`) and the Newton iterations. The method is a value (:data:`kernels.methods.METHODS`): the
fixed-step linear-implicit methods are traced and mapped over the chunk, a
method that runs on the host (the Radau reference) one variant after another
(:class:`sweep.engine.mapping.HostRunner`); nothing here depends on which.

Output channels are declared once, in :data:`CHANNELS`: name, dimensions,
units, long name and the function that computes the channel from the state
at a sample. The stored shapes come from :func:`jax.eval_shape` of those
functions; adding a channel is one entry there (the store, the byte
estimate and the cube follow). A model's added element group that declares
an ``output`` adds its force channel (:func:`channels_of`).
"""
from __future__ import annotations

import dataclasses
import fnmatch
import functools
import logging
import os
from typing import Any, Optional

import jax
import jax.numpy as jnp
import numpy as np
from omegaconf import OmegaConf

from kernels import kc, response
from kernels.methods import METHODS, REFERENCE, TOLERANCES, with_tolerances
from kernels.names import AXES, COMPONENT_UNITS, COMPONENTS, SIDES
from sweep.results import cube
from sweep.results import schema as cube_schema
from sweep.results import status
from sweep.results.cube import CF_CONVENTIONS, NMSE_DEFINITION, flexible_note, provenance
from sweep.study.design import make_design
from sweep.engine import log_split, layout, mapping
from sweep.engine.layout import Channel
from sweep.kinds.base import JobKind, Plan, Runner, static_limits
from sweep.study.loadcase import build_excitation, sample_grid
from sweep.axle.builder import model_from_config
from sweep.axle.params import build_parameters
from sweep.core.config import LOADS, ConfigError, Float, List, Map, Optional as Opt, Str, fail, fmt

log = logging.getLogger("sweep")

NAME = "time_response"


# The channels of a time-response cube, in store order: the driver's outputs
# (kernels.response.OUTPUTS) with their dims, units and long names. One entry
# per channel; its shape is found by jax.eval_shape (channel_shapes).
CHANNELS = [
    Channel("wheel_centre_displacement", ("side", "axis"), "m",
            "wheel-centre displacement from the variant's static equilibrium",
            response.wheel_centre_displacement),
    Channel("toe", ("side",), "rad", "toe angle (DIN 70000, + = toe-in)", response.toe),
    Channel("camber", ("side",), "rad", "camber angle (DIN 70000, + = top out)", response.camber),
    # one variable for the public schema (component = fx..mz) in two units: its
    # units are layout.MIXED_UNITS ("none": pint-xarray leaves it unquantified),
    # the unit of each component the coordinate component_units, and
    # sweep.results.cube.split_loads gives bushing_force [N] and bushing_moment [N m]
    Channel("bushing_force", ("bushing", "component"), layout.MIXED_UNITS,
            "force and torque of the bushing on its first body, vehicle frame", response.bushing_force,
            comment=cube.LOAD_UNITS_COMMENT),
]


def group_channels(model) -> tuple:
    """The force channels of the model's added element groups that declare an
    ``output`` (:class:`kernels.forces.ElementGroup`): ``<group>_force``
    (variant, time, <group>, component) [N, N m], every element of the
    group, like ``bushing_force``."""
    return tuple(
        Channel(f"{g.name}_force", (g.name, "component"), layout.MIXED_UNITS,
                f"force and torque of each {g.name} element on its first body, vehicle frame",
                response.GroupForce(g.name), comment=cube.LOAD_UNITS_COMMENT)
        for g in model.topology.extra_groups if g.output is not None)


def _check_group_names(channels, pset):
    """A group's force channel and its element dimension take names of the
    cube: none may be a name the cube has already (a ConfigError naming it)."""
    taken = {"variant", "time", "side", "axis", "bushing", "component", "component_units", "chunk", "status",
             "equilibrium_iterations", "chunk_done", *(c.name for c in CHANNELS), *(p.name for p in pset.params)}
    for c in channels[len(CHANNELS):]:
        for name in (c.dims[0], c.name):
            if name in taken:
                raise ConfigError(f"model.elements: element group {c.dims[0]!r}: {name!r} is already a name of "
                                  "the time-response cube (a variable, a dimension or a swept parameter); "
                                  "rename the group or the parameter")
            taken.add(name)


def channels_of(model) -> tuple:
    """The channel table of a time response of ``model``: :data:`CHANNELS`,
    then :func:`group_channels`."""
    return tuple(CHANNELS) + group_channels(model)


def make_channels(bushing_idx=None, channels=None):
    """The driver's output function for a channel table (default
    :data:`CHANNELS`): ``channels(model, r, v, r_eq) -> dict``
    (:func:`kernels.response.make_outputs`); ``bushing_idx`` selects the
    stored bushings (default: all)."""
    return response.make_outputs(bushing_idx, {c.name: c.fn for c in (channels or CHANNELS)})


def channel_key(channels=None):
    """What of the channel table enters the trace-cache key (names, dims,
    units, functions; :func:`sweep.core.tracecache.fingerprint`)."""
    return tuple((c.name, c.dims, c.units, c.long_name, c.fn, c.dtype) for c in (channels or CHANNELS))


def run_inputs(model, exc):
    """The tree whose values a lifted runner reads at run time (:mod:`sweep.engine.values`)."""
    return (model, exc)


def select_bushings(patterns, names):
    if patterns is None:
        return list(range(len(names)))
    pats = [patterns] if isinstance(patterns, str) else list(patterns)
    idx = [i for i, n in enumerate(names) if any(fnmatch.fnmatchcase(n, p) for p in pats)]
    if not idx:
        raise ConfigError(f"output.bushings = {patterns!r} matches no bushing")
    return idx


def make_variant(model, pset, case, stages=False, lifted=False):
    """The per-variant function of the time-response kind: ``theta (P,) ->
    (channels, status, equilibrium iterations)``, the driver
    :func:`kernels.response.driver` with the plan's :class:`Case`.

    With an embedded error estimate (ROS34PW2) and ``case.tolerance`` =
    (rtol, atol_coordinates, atol_speeds), a variant whose largest per-step
    estimate exceeds it gets status ``inaccurate`` (values kept). A failed
    equilibrium or a non-finite state gives NaN values. ``case.limits``
    (:class:`kernels.kc.StaticLimits`, None: unchecked): a static
    equilibrium beyond them gets status ``implausible_static_state``
    (values kept; it outranks ``inaccurate``).

    ``stages=True`` returns its two halves instead, ``equilibrium(theta) ->
    (r_eq, converged, iterations, plausible)`` and ``integrate(theta, carry)`` (for
    :class:`sweep.engine.mapping.StagedRunner` / ``HostRunner``); ``variant``
    is their composition.

    ``lifted=True``: the model's and the load case's values are run-time
    inputs (:mod:`sweep.engine.values`): the function takes a row
    ``[theta | values]`` with ``values`` = ``Lifted((model, exc)).vector``
    (:func:`run_inputs`; the runner's key holds its structure).
    Whether a step must be split at a load event is decided from the
    concrete load case (:attr:`Case.options`) and is part of the structure.
    ``lifted = "equilibrium"``: only the equilibrium stage reads the values
    from the row; the integration stage folds them in (the generated backend).
    ``lifted = "shared"``: the function is ``variant(theta, values)``, the
    values unbatched under ``vmap`` (:func:`sweep.engine.mapping.map_variants`,
    ``shared``: a chunk is the pair (thetas, values)); the two stages take such a pair ``(theta, values)``
    in place of a row too."""
    run_time_response = response.driver(case.options, make_channels(case.bidx, channels_of(model)))
    n_params = len(pset)
    limits = case.limits

    def folded(row):
        theta = row[0] if isinstance(row, tuple) else row[:n_params]
        return response.Problem(pset.apply(model, theta), case.exc, case.t0, case.dt)
    if lifted:
        from sweep.engine.values import Lifted
        lift = Lifted(run_inputs(model, case.exc))

        def inputs_of(theta, vec):
            m, e = lift.rebuild(vec)
            return response.Problem(pset.apply(m, theta), e, case.t0, case.dt)

        def inputs(row):
            if isinstance(row, tuple):            # (theta, values): the values unbatched
                return inputs_of(*row)
            return inputs_of(row[:n_params], row[n_params:])
    else:
        inputs = folded
    # the generated integration folds the values into its C (module
    # sweep.codegen.runner: specialised code per model); it reads theta only
    integration_inputs = folded if lifted == "equilibrium" else inputs

    def equilibrium(row):
        problem = inputs(row)
        start = run_time_response.init(problem)
        plausible = (kc.static_state_plausible(problem.model, start.r, limits) if limits is not None
                     else jnp.asarray(True))
        return start.r, start.converged, start.iterations, plausible

    def integrate_from(row, carry):
        r_eq, converged, iterations, plausible = carry
        traj = run_time_response.run(integration_inputs(row), r_eq)
        finite = jnp.all(jnp.stack([jnp.all(jnp.isfinite(a)) for a in jax.tree_util.tree_leaves(traj.outputs)]))
        ok = jnp.where(plausible, jnp.where(traj.max_error > 1.0, status.INACCURATE, status.OK),
                       status.IMPLAUSIBLE)
        code = jnp.where(converged, jnp.where(finite, ok, status.NON_FINITE),
                         status.EQUILIBRIUM_FAILED).astype(jnp.int8)
        outs = jax.tree_util.tree_map(lambda a: jnp.where((code == status.OK) | (code == status.INACCURATE)
                                                          | (code == status.IMPLAUSIBLE),
                                                          a, jnp.nan), traj.outputs)
        return outs, code, iterations

    if stages:
        return equilibrium, integrate_from
    if lifted == "shared":
        return lambda theta, vec: integrate_from((theta, vec), equilibrium((theta, vec)))
    return lambda theta: integrate_from(theta, equilibrium(theta))


def make_chunk_runner(model, pset, case, n_dev=1, micro_batch=None, lifted=False, shared=False, rows_fold=None):
    """The engine's chunk runner: thetas (C, P) -> (channels, status,
    equilibrium iterations) with :func:`make_variant` mapped over the chunk
    (:func:`sweep.engine.mapping.map_variants`, ``micro_batch``). On
    ``n_dev`` > 1 devices the equilibria are solved first on one device and
    only the integration is sharded (:class:`~sweep.engine.mapping.StagedRunner`);
    a method that cannot be traced runs variant by variant on the host
    (:class:`~sweep.engine.mapping.HostRunner`). A chunk of one variant is
    the app's single-variant path. ``case.backend`` = generated: the
    integration as generated C (:class:`sweep.codegen.runner.GeneratedRunner`;
    the same case on XLA is its fallback). ``lifted``: rows ``[theta |
    values]`` in place of thetas (:func:`make_variant`); ``shared``: every
    row has the same values (no hardpoint design), which then stay unbatched
    (one device on XLA: :func:`sweep.engine.mapping.map_variants`).
    ``rows_fold``: a hardpoint design on the generated backend - each row
    its own values, read per variant, the pattern of 0 and +-1 that every
    variant shares compiled in (:func:`sweep.codegen.emit.rows_pattern`)."""
    if not case.method.jittable:
        return mapping.HostRunner(*make_variant(model, pset, case, stages=True, lifted=lifted), micro_batch)
    if case.backend == "generated":
        from sweep.codegen.runner import GeneratedRunner, default_threads
        fallback = make_chunk_runner(model, pset, dataclasses.replace(case, backend="xla"), n_dev, micro_batch,
                                     lifted, shared)
        if lifted and shared:
            # the values read at run time, their pattern compiled in (GeneratedRunner fold)
            first, integrate = make_variant(model, pset, case, stages=True, lifted="shared")
            vec = _values_vector(model, case.exc)
            return GeneratedRunner(first, lambda theta, vec, carry: integrate((theta, vec), carry), fallback,
                                   micro_batch, threads=default_threads(), values_key=_values_pattern(vec=vec),
                                   shared=True, whole=make_variant(model, pset, case, lifted="shared"), fold=vec)
        if lifted and rows_fold is not None:
            from sweep.codegen import emit
            return GeneratedRunner(*make_variant(model, pset, case, stages=True, lifted=True), fallback, micro_batch,
                                   threads=default_threads(), values_key="rows:" + emit.pattern_digest(rows_fold),
                                   whole=make_variant(model, pset, case, lifted=True), rows_fold=rows_fold)
        return GeneratedRunner(*make_variant(model, pset, case, stages=True, lifted=lifted and "equilibrium"),
                               fallback, micro_batch, threads=default_threads(),
                               values_key=_values_digest(model, case.exc) if lifted else "",
                               shared=bool(lifted and shared),
                               whole=make_variant(model, pset, case) if (shared or not lifted) else None)
    if n_dev > 1:
        return mapping.StagedRunner(*make_variant(model, pset, case, stages=True, lifted=lifted), n_dev,
                                    micro_batch)
    if lifted and shared:
        return mapping.map_variants(make_variant(model, pset, case, lifted="shared"), 1, micro_batch,
                                    shared=True)
    return mapping.map_variants(make_variant(model, pset, case, lifted=lifted), 1, micro_batch)


def _values_digest(model, exc):
    """sha256 of the values the generated C folds in (its whole variant, or its integration stage)."""
    import hashlib
    from sweep.engine.values import Lifted
    return hashlib.sha256(Lifted(run_inputs(model, exc)).vector.tobytes()).hexdigest()


class _quiet:
    """Raise a logger's level for a block (a tentative plan's notes unlogged)."""

    def __init__(self, logger):
        self.logger = logger

    def __enter__(self):
        self.level = self.logger.level
        self.logger.setLevel(logging.WARNING + 1)

    def __exit__(self, *exc):
        self.logger.setLevel(self.level)
        return False


def _values_vector(model, exc):
    """The values a lifted runner reads at run time (:mod:`sweep.engine.values`)."""
    from sweep.engine.values import Lifted
    return Lifted(run_inputs(model, exc)).vector


def _values_pattern(model=None, exc=None, vec=None):
    """Digest of the pattern of the values (which are 0 or +-1) that
    the generated C compiles in when it reads the values at run time
    (:func:`sweep.codegen.emit.shared_pattern`); ``vec``: the values vector
    when the caller has it (else built from ``model`` and ``exc``)."""
    from sweep.codegen import emit
    vec = _values_vector(model, exc) if vec is None else vec
    return emit.pattern_digest(emit.shared_pattern((None, vec), (1,)))


def channel_shapes(model, bushing_idx, channels=None):
    """{channel: shape at one sample} by :func:`jax.eval_shape` of the channel
    functions at the design pose (traces only the channel functions)."""
    from sweep.core import tracecache
    r = jax.ShapeDtypeStruct((model.topology.n_bodies, 6), jnp.float64)
    chans = channels or channels_of(model)
    fn = make_channels(bushing_idx, chans)
    # a rerun loads the shapes (the trace is 0.3-0.7 s of start-up; the key holds the model and the source)
    key = (model, None if bushing_idx is None else tuple(bushing_idx), tuple((c.name, c.dims) for c in chans))
    return tracecache.memo("channel_shapes", key,
                           lambda: layout.channel_shapes(chans, lambda m, r: fn(m, r, r, r), model, r))


@dataclasses.dataclass(frozen=True, eq=False)
class Case:
    """The validated load case and integration of a time-response plan: the
    driver's problem values (``exc``, ``t0``, ``dt``) and its options
    (:attr:`options`), the stored bushings, the backend and the static
    state's limits. ``Case(exc, t0, dt, n_samples, ...)`` with the rest at
    their defaults is the case of a script or a test."""
    exc: Any                    # kernels.loads.Excitation
    t0: float                   # s
    dt: float                   # s
    n_samples: int
    every: int = 1
    relin: int = 1
    solver: str = "block"
    bidx: Optional[tuple] = None  # stored bushings (indices), None: all
    method: Any = "lsrt2"       # the method value or name (kernels.methods.METHODS, options applied)
    backend: str = "xla"        # xla | generated (integrator.backend resolved: sweep.codegen.runner)
    tolerance: Optional[tuple] = None  # (rtol, atol_coordinates, atol_speeds) of an error estimate, or None
    limits: Any = None          # kernels.kc.StaticLimits of the static state (config `checks`)
    loadcase_name: str = ""
    prebuild: str = ""          # a short job on XLA: the cache record of its generated code, built after it (sweep.prebuild)
    quick: bool = False         # a short job on XLA: compiled for a quick start (sweep.engine.stream.QUICK_START)

    def __post_init__(self):
        if isinstance(self.method, str):
            object.__setattr__(self, "method", METHODS[self.method])
        if self.bidx is not None:
            object.__setattr__(self, "bidx", tuple(int(i) for i in self.bidx))

    @property
    def t1(self) -> float:
        """End of the run [s]."""
        return self.t0 + (self.n_samples - 1) * self.every * self.dt

    @property
    def times(self) -> np.ndarray:
        """The output samples' times [s]."""
        return self.t0 + np.arange(self.n_samples) * self.every * self.dt

    @functools.cached_property
    def options(self) -> response.Options:
        """The driver's options (:class:`kernels.response.Options`); whether a
        step may be split at a load event decided from the concrete load case."""
        return response.with_split_decided(
            response.Problem(None, self.exc, self.t0, self.dt),
            response.Options(n_samples=self.n_samples, method=self.method, every=self.every,
                             relinearise_every=self.relin, solver=self.solver, tolerance=self.tolerance,
                             # the generated C translates the block solver (dense LU is a LAPACK call)
                             equilibrium_solver="block" if self.backend == "generated" else "dense"))


# error-estimate tolerances of a fixed-step method with an embedded solution
# (configs/integrator/ros34pw2.yaml: the measurements behind them)
ERROR_TOLERANCE_DEFAULTS = (("rtol", 2e-3), ("atol_coordinates", 2e-5), ("atol_speeds", 2e-2))


def method_from_config(integ):
    """(method value, error tolerance or None) from the integrator config: the
    user's tolerances applied to a method that takes them itself (the host
    reference's solver tolerances, :func:`kernels.methods.with_tolerances`),
    and for a method with an embedded error estimate the tolerance its
    status check uses."""
    method = with_tolerances(METHODS[integ["name"]], **{k: integ.get(k) for k in TOLERANCES})
    tolerance = None
    if method.has_error_estimate:
        tolerance = tuple(float(integ.get(k, d)) for k, d in ERROR_TOLERANCE_DEFAULTS)
    return method, tolerance


class TimeResponse(JobKind):
    name = NAME
    channels = tuple(CHANNELS)
    status = (status.NOT_RUN, status.OK, status.EQUILIBRIUM_FAILED, status.NON_FINITE, status.INACCURATE,
              status.IMPLAUSIBLE)
    loadcase = Map({
        "name": Str(), "kind": Str(), "description": Str(),
        "t_start": Float(unit="s"), "t_end": Float(unit="s"), "wheel_loads": LOADS,
        "changes": Opt(List(Map({"time": Float(unit="s"), "duration": Float(ge=0, unit="s"),
                                 "left": Map(values=Float()), "right": Map(values=Float())}))),
        "nmse_window": List(Float(unit="s"), length=2),
    }, strict=True)

    def kept_bushings(self, model) -> list:
        """Bushings the cube always holds, whatever ``output.bushings`` selects
        (besides the reference bushings): none here."""
        return []

    def check(self, job):
        """The integrator is known, dt divides the run and the output thinning
        divides the steps, with the key that set each (``sweep.start`` /
        ``loadcase.t_start``, ``sweep.every`` / ``output.every``)."""
        integ = job.get("integrator") or {}
        if integ.get("name") is not None and integ["name"] not in METHODS:
            raise ConfigError(f"integrator.name = {integ['name']!r} is not one of {', '.join(METHODS)}")
        lc, sw = job.get("loadcase") or {}, job.get("sweep") or {}
        win = lc.get("nmse_window")
        if win is not None and not float(win[0]) < float(win[1]):
            fail("loadcase.nmse_window", list(win), "is reversed or empty (give [start, end] in s, start < end)")
        if "t_end" not in lc:
            return
        t0 = sw["start"] if sw.get("start") is not None else lc.get("t_start", 0.0)
        t0_key = "sweep.start" if sw.get("start") is not None else "loadcase.t_start"
        t1 = lc["t_end"]
        if not t1 > t0:
            fail(t0_key, t0, f"must be before loadcase.t_end = {fmt(float(t1))}")
        every_key = "sweep.every" if sw.get("every") is not None else "output.every"
        every = sw["every"] if sw.get("every") is not None else (job.get("output") or {}).get("every", 1)
        dt = integ.get("dt")
        if dt is not None:
            sample_grid(float(t0), float(t1), float(dt), int(every), every_key=every_key)

    def plan(self, cfg):
        model = model_from_config(cfg.model)
        sw = OmegaConf.to_container(cfg.sweep, resolve=True)
        pset = build_parameters(sw.get("parameters") or {}, model)
        X = make_design(sw, pset)
        lc = OmegaConf.to_container(cfg.loadcase, resolve=True)
        exc, t0, t1 = build_excitation(lc)
        if sw.get("start") is not None:
            t0 = float(sw["start"])
        # the integrator's values were checked with the config (sweep.core.config.check_config:
        # the schema and TimeResponse.check); here they are only read
        integ = OmegaConf.to_container(cfg.integrator, resolve=True)
        method, tolerance = method_from_config(integ)
        dt = float(integ["dt"])
        every = int(sw["every"]) if sw.get("every") is not None else int(cfg.output.every)
        n_samples = sample_grid(t0, t1, dt, every)
        relin = int(integ.get("relinearise_every", 1))
        solver = str(integ.get("solver", "block"))
        names = model.topology.bushing_names
        refs = [names.index(b) for b in (model.topology.tables.get("reference_bushings") or {}).values()]
        bidx = sorted(set(select_bushings(cfg.output.get("bushings"), names)) | set(refs)
                      | {names.index(n) for n in self.kept_bushings(model)})
        channels = channels_of(model)
        _check_group_names(channels, pset)
        shapes = channel_shapes(model, bidx, channels)
        # a traced method maps a chunk over every device (a default CPU job:
        # when large enough); a host method runs one variant at a time on one
        from sweep.codegen.build import record_built
        from sweep.codegen.runner import choose, library_record

        def make_plan(backend, prebuild="", quick=False):
            # the generated backend spreads a chunk over the cores by threads: one device
            shard, nsh, n_dev, C = mapping.chunking(
                sw, len(X), layout.output_bytes(channels, shapes, n_samples), model.topology.n_dof,
                max_devices=None if (method.jittable and backend == "xla") else 1)
            if not method.jittable:
                C = min(C, len(X))
            case = self.finish_case(
                Case(exc=exc, t0=t0, dt=dt, n_samples=n_samples, every=every, relin=relin, solver=solver,
                     bidx=tuple(bidx), method=method, tolerance=tolerance, backend=backend,
                     limits=static_limits(cfg), loadcase_name=str(cfg.loadcase.name), prebuild=prebuild,
                     quick=quick), cfg)
            tc = min(n_samples, max(1, layout.ZARR_CHUNK_BYTES // (C * 6 * 8)))
            coords = {
                "variant": (np.arange(len(X), dtype=np.int64), {}),
                "time": (case.times, {"units": "s"}),
                "side": (np.array(SIDES), {}),
                "axis": (np.array(AXES), {}),
                "bushing": (np.array([names[i] for i in bidx]), {}),
                "component": (np.array(COMPONENTS), {}),
                **{c.dims[0]: (np.array(model.topology.group_names[c.dims[0]]),
                               {"long_name": f"{c.dims[0]} element name"})
                   for c in channels[len(CHANNELS):]},
                # non-dimension coordinate: the unit of each bushing_force component
                "component_units": (np.array(COMPONENT_UNITS), {"long_name": "unit of each component"},
                                    ("component",)),
            }
            return Plan(model=model, model_cfg=cfg.model, pset=pset, X=X, shard=shard, num_shards=nsh, chunk=C,
                        n_dev=n_dev, micro_batch=mapping.micro_batch_of(sw, C, n_dev), channels=channels,
                        shapes=shapes, coords=coords, lead=(("time", n_samples, tc),),
                        iterations_long_name="Newton iterations of the static equilibrium", case=case)

        record = []

        def built():
            # the generated code of this job, built by an earlier run (sweep.prebuild);
            # planned quietly (its chunking notes are the real plan's to log)
            try:
                with _quiet(log):
                    plan = make_plan("generated")
                    record.append(library_record(self.job_key(plan)[0], len(pset),
                                                 _values_pattern(model, plan.case.exc), plan.chunk))
            except OSError as err:       # no cache folder (a read-only home): no built code, no background build
                log.debug(f"generated code cache unavailable: {err}")
                return False
            return record_built(record[0])
        steps = len(X) * (n_samples - 1) * every
        if pset.hardpoints:
            # each variant its own geometry: the generated C reads each
            # variant's values (GeneratedRunner rows_fold); a short design
            # runs on XLA (no background build: the code is keyed on the
            # design's pattern of values, not on the structure alone)
            backend, why = choose(integ.get("backend"), method.jittable, variant_steps=steps)
            return make_plan(backend, quick=why == "short")
        backend, why = choose(integ.get("backend"), method.jittable, variant_steps=steps, built=built)
        # a short job on XLA: its generated code is built after the job, in
        # the background, for the next run of this structure (sweep.prebuild)
        from sweep.core.runtime import cache_in_use
        # and is compiled for a quick start (it runs for seconds: compiling is most of it)
        return make_plan(backend, prebuild=record[0] if why == "short" and record and cache_in_use() else "",
                         quick=why == "short")

    def finish_case(self, case, cfg):
        """The plan's case as the job runs it (a kind built on the time
        response adds its inputs here, e.g. the rough road's harmonics)."""
        return case

    def job_key(self, plan):
        """(key, values, size, shared, pair) of a plan's chunk runner: the
        trace-cache key of its structure (values are run-time inputs), the
        values it reads, their number, whether every variant has the same
        (not a hardpoint design) and whether a chunk is the pair (thetas,
        values)."""
        from sweep.engine.values import run_values
        from sweep.core.tracecache import fingerprint
        c = plan.case
        vals, structure, size = run_values(plan, lambda m: run_inputs(m, c.exc))
        shared = not callable(vals)             # one vector for every variant (not a hardpoint design)
        # the runners of shared values take a chunk as (thetas, values) (make_chunk_runner)
        pair = shared and c.method.jittable and (c.backend == "generated" or plan.n_dev == 1)
        key = fingerprint(NAME, plan.chunk, channel_key(plan.channels), structure, c.options, tuple(c.limits), c.t0, c.dt,
                          c.bidx, plan.n_dev, plan.micro_batch, c.backend, shared, "pair" if pair else "rows",
                          *(("quick start",) if c.quick else ()))
        return key, vals, size, shared, pair

    def runner(self, plan):
        c, topo = plan.case, plan.model.topology
        where = (engine_note(plan.n_dev) if c.method.jittable else "the host, one variant at a time")
        if c.backend == "generated":
            from sweep.codegen.runner import default_threads
            where = f"generated C, {default_threads()} thread(s)"
        what = (f"{c.method.name.upper()} chunk runner: {topo.name} ({topo.n_dof} DOF), "
                f"static equilibrium + {c.n_samples} samples of {c.loadcase_name}, "
                f"{plan.chunk} variant(s) per chunk on {where}"
                + (f" in groups of {plan.micro_batch}" if plan.micro_batch else "")
                + (", compiled for a quick start (XLA optimisation level 0)" if c.quick else ""))
        from sweep.engine.stream import QUICK_START
        from sweep.engine.values import example as values_example
        key, vals, size, shared, pair = self.job_key(plan)
        rows_fold = None
        if c.backend == "generated" and not shared:
            # a hardpoint design: the values' pattern that the nominal and the
            # bounds of the design share (a chunk outside it runs on XLA)
            from sweep.codegen import emit
            probe = vals.probe_thetas()
            rows_fold = emit.rows_pattern(np.concatenate([probe, vals(probe)], axis=1))
            rows_fold[:len(plan.pset)] = np.arange(len(plan.pset))      # the parameters: read, never folded
            what += "; each variant's geometry read at run time"
        return Runner(make_chunk_runner(plan.model, plan.pset, c, plan.n_dev, plan.micro_batch, lifted=True,
                                        shared=shared, rows_fold=rows_fold),
                      values_example(plan.chunk, len(plan.pset), size, pair), what, key=key, values=vals,
                      compile_options=dict(QUICK_START) if c.quick else None)

    def static_state(self, model, cfg):
        """The free static equilibrium under the load case's loads at the start."""
        exc, t0, _ = build_excitation(OmegaConf.to_container(cfg.loadcase, resolve=True))
        if cfg.sweep.get("start") is not None:
            t0 = float(cfg.sweep.start)
        return response.equilibrium(response.Problem(model, exc, t0, float(cfg.integrator.dt))).r, False

    def summary(self, plan):
        c = plan.case
        return {"equilibrium_s": 0.0, "simulated_s": c.t1 - c.t0, "n_samples": c.n_samples, "dt": c.dt,
                "prebuild": c.prebuild}

    def attrs(self, plan, cfg_yaml):
        topo = plan.model.topology
        ref = topo.tables.get("reference_bushings") or {}
        return {
            "n_bodies": int(topo.n_physical_bodies), "n_modal_coordinates": int(topo.n_modal_coordinates), "n_force_elements": int(topo.n_force_elements),
            "n_dof": int(topo.n_dof),
            "reference_bushing_left": ref.get("left", ""), "reference_bushing_right": ref.get("right", ""),
            "Conventions": CF_CONVENTIONS,
            "model": topo.name, "config": cfg_yaml, "nmse_definition": NMSE_DEFINITION,
            "parameters": list(plan.pset.names), "chunk_size": int(plan.chunk),
            **provenance(),
        }

    def report(self, ds, cfg, s):
        report(ds, cfg, s)


def engine_note(n_dev):
    return mapping.devices_note(n_dev)


KIND = TimeResponse()

PUBLISHED_NMSE = {  # method.md section 3, LSRT2 at h = 1 ms
    "double_wishbone": {"wheel_displacement": 0.00243, "bushing_force": 0.00751},
    "multilink": {"wheel_displacement": 0.01286, "bushing_force": 0.01545},
}


def _final_sample(ds, path, name, **at):
    """Channel ``name`` at the last time sample (and at the coordinates
    ``at``, e.g. axis="x"), read from the cube's zarr array directly: xarray's
    indexing would import dask (0.3-0.4 s of a rerun that has nothing else
    to do) to check for dask arrays."""
    import zarr
    da = ds[name]
    idx = tuple(-1 if d == "time" else list(ds[d].values).index(at[d]) if d in at else slice(None)
                for d in da.dims)
    return np.asarray(zarr.open_group(path, mode="r")[name][idx])


def report(ds, cfg, s, step_overview=True):
    """Log the job summary (model, timing, status counts, final displacement,
    NMSE against a Radau cube beside it), check the public cube schema and
    draw the overview PNG beside the cube. ``step_overview=False`` (a load
    case without a load step, e.g. the rough road): neither the final
    longitudinal displacement nor the step overview."""
    a = ds.attrs
    log.info(f"model {a['model']}: {a['n_bodies']} bodies{flexible_note(a)}, {a['n_force_elements']} force elements, "
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
        log_split(log, s)
    codes = ds.status.values
    log.info("status: " + status.counts(codes, KIND.status))
    ok = codes == status.OK
    if ok.any() and step_overview:
        wcd = _final_sample(ds, s["path"], "wheel_centre_displacement", axis="x")[ok] * 1000
        label = "final" if len(codes) == 1 else "final (min / median / max over ok variants)"
        log.info(f"longitudinal wheel-centre displacement, {label}: " +
              " / ".join(f"{v:.3f}" for v in ([wcd[0, 0]] if len(codes) == 1 else
                                              np.percentile(wcd[:, 0], [0, 50, 100]))) + " mm (left)")
    log.info(f"result cube: {os.path.abspath(s['path'])}")
    _nmse_beside(ds, cfg, s["path"])
    cube_schema.warn(ds, KIND.channels)
    if step_overview:
        from sweep.results.plots import draw_beside, overview
        draw_beside(ds, s, overview, "overview plot", log)


def _nmse_beside(ds, cfg, path):
    """NMSE of every method's cube against the reference method's cube beside
    it (``<REFERENCE>.zarr``, :data:`kernels.methods.REFERENCE`), printed by
    whichever of the two runs last."""
    here = os.path.dirname(path)
    this = cfg.integrator.name
    if this == REFERENCE:
        pairs = [(name, os.path.join(here, f"{name}.zarr"), None) for name in METHODS if name != REFERENCE]
    else:
        pairs = [(this, None, os.path.join(here, f"{REFERENCE}.zarr"))]
    window = tuple(cfg.loadcase.get("nmse_window", (4.9, 6.0)))
    pub = PUBLISHED_NMSE.get(ds.attrs["model"], {})
    for name, test_path, ref_path in pairs:
        other = test_path or ref_path
        if not os.path.exists(other):
            continue
        import xarray as xr
        test, ref = (xr.open_zarr(test_path), ds) if test_path else (ds, xr.open_zarr(ref_path))
        if int(ref.status.values[0]) not in status.VALUES_KEPT or \
                int(test.status.values[0]) not in status.VALUES_KEPT:
            continue
        rep = cube.nmse_report(test, ref, window)
        log.info(f"NMSE of {name} against {REFERENCE} (variant 0, {other}), "
                 f"mean((y - y_ref)^2) / mean(y_ref)^2 over {window[0]}-{window[1]} s, sides pooled:")
        for k, v in rep.items():
            p = f" (published for LSRT2: {pub[k]})" if k in pub else ""
            log.info(f"  {k}: {v:.3e}{p}")
