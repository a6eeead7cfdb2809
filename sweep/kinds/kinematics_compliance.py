"""K&C load cases as sweep jobs: a design of variants -> one K&C cube.

A load case with ``kind: kc`` (``configs/loadcase/kc_*.yaml``) runs, for every
variant of the design, the rig analysis of :mod:`kernels.kc`: the design
position (wheel centres at design height), all K&C metrics there (exact
derivatives), and the nonlinear curve of the load case's analysis (wheel
travel, or a force / torque in steps). Variants run in vmapped chunks
through the one job pipeline (:func:`sweep.engine.run`; store
:mod:`sweep.results.store`): created atomically before any compute, each finished
chunk checksummed and flagged, reruns verify and skip finished chunks
(damaged ones are recomputed), shards share a store, a lock file keeps a
second process off it, SIGINT / SIGTERM stop cleanly.

Run as ``python -m sweep loadcase=kc_wheel_travel ...`` (the job kind
``kc``, :data:`KIND`).

Cube (``xarray.open_zarr``): dims ``variant``, the step dimension ``travel``
[m] (wheel travel), ``force`` [N] or ``torque`` [N m] (force analyses), ``side``,
``axis``, ``component``, ``dof``. Variables: ``wheel_centre_displacement``
(variant, step, side, axis) [m] from the design position; ``toe``,
``camber`` (variant, step, side) [rad, DIN 70000]; ``wheel_load`` (variant,
step, side, component) [N, N m] applied at the wheel centre (wheel travel:
the vertical force found); the geometry at every step
(:data:`kernels.kc.GEOMETRY_CHANNELS`: ``caster``, ``kingpin_inclination``
[rad], ``caster_trail``, ``scrub_radius``, ``half_track_change`` (variant,
step, side) [m], ``roll_centre_height`` (variant, step) [m]); ``converged``
(variant, step); one variable per metric (variant, side) in engineering units
(:data:`kernels.kc.METRICS`) and per axle metric (variant)
(:data:`kernels.kc.AXLE_METRICS`: roll-centre height and lateral position,
the axle's lateral compliance and roll steer coefficient);
``compliance_matrix`` (variant, side, dof, component) [SI]; ``status``,
``equilibrium_iterations``; one variable per swept parameter.
"""
from __future__ import annotations

import logging
import os

import jax
import jax.numpy as jnp
import numpy as np
from omegaconf import OmegaConf

from kernels import kc
from kernels.names import AXES, COMPONENT_UNITS, DIRECTIONS
from sweep.results import schema as cube_schema
from sweep.results import status
from sweep.results.cube import CF_CONVENTIONS, LOAD_UNITS_COMMENT, flexible_note, provenance
from sweep.study.design import make_design
from sweep.engine import layout, log_run, mapping
from sweep.engine.layout import Channel
from sweep.kinds.base import JobKind, Plan, Runner, static_limits
from sweep.axle.builder import model_from_config
from sweep.axle.params import build_parameters
from sweep.core.config import ConfigError, Float, Int, List, Map, Str

log = logging.getLogger("sweep")

NAME = "kc"

KNOWN_KEYS = {"name", "kind", "analysis", "mode", "travel", "load", "rack", "steps", "loaded_radius", "ride_load",
              "brake_lock_stiffness", "tolerance", "max_iterations", "description"}
CONVENTIONS = (
    "vehicle frame x forward, y left, z up; toe (+ = toe-in) and camber (+ = top out) per DIN 70000; "
    "design position = wheel centres at design height (vertical forces found), gravity only; "
    "wheel travel: wheel-centre heights prescribed (bump > 0; opposite: left +s, right -s); "
    "force analyses: loads on both wheels in each side's own sense (lateral_force inboard at the "
    "contact patch, traction_force forward at the wheel centre, braking_force rearward at the "
    "contact patch, aligning_torque in the toe-out sense), vertical wheel loads held; steering: rack "
    "travel (+ = left) moves the steering joints' rack-side markers along y, wheel heights held, "
    "steer angles (ISO, + = left turn) = -toe left, +toe right; contact patch "
    "= wheel centre - loaded_radius * e_z; brakes locked (wheel bearing stiffened about the spin axis); "
    "compliance_matrix: one wheel loaded, d(x,y,z,rx,ry,rz)/d(fx,fy,fz,mx,my,mz) at the wheel "
    "centre, SI. See docs/kc_and_tuning.md.")


def _range(lc, key, unit):
    val = lc.get(key)
    if val is None or len(val) != 2:
        raise ConfigError(f"loadcase.{key} = {val!r} must be [lower, upper] in {unit}")
    lo, hi = float(val[0]), float(val[1])
    if not (np.isfinite(lo) and np.isfinite(hi)) or lo > hi:
        raise ConfigError(f"loadcase.{key} = [{lo}, {hi}] must be finite with lower <= upper")
    return lo, hi


def load_case(lc: dict) -> dict:
    """Validate a K&C load-case config; one-line :class:`ConfigError` naming the field."""
    for key in lc:
        if key not in KNOWN_KEYS:
            raise ConfigError(f"loadcase.{key}: unknown key for a K&C load case "
                             f"(known: {', '.join(sorted(KNOWN_KEYS))})")
    analysis = lc.get("analysis")
    if analysis not in kc.ANALYSES:
        raise ConfigError(f"loadcase.analysis = {analysis!r} is not one of {', '.join(kc.ANALYSES)}")
    steps = lc.get("steps", 1)
    if not isinstance(steps, int) or steps < 1:
        raise ConfigError(f"loadcase.steps = {steps!r} must be >= 1")
    R = float(lc.get("loaded_radius", kc.DEFAULT_LOADED_RADIUS))
    if not (np.isfinite(R) and R > 0):
        raise ConfigError(f"loadcase.loaded_radius = {lc.get('loaded_radius')} must be > 0 [m]")
    lock = float(lc.get("brake_lock_stiffness", kc.DEFAULT_BRAKE_LOCK))
    if not (np.isfinite(lock) and lock >= 0):
        raise ConfigError(f"loadcase.brake_lock_stiffness = {lc.get('brake_lock_stiffness')} must be >= 0 [N m/rad]")
    tol = float(lc.get("tolerance", 1e-6))
    if not tol > 0:
        raise ConfigError(f"loadcase.tolerance = {lc.get('tolerance')} must be > 0 [N]")
    max_iter = int(lc.get("max_iterations", 60))
    if max_iter < 1:
        raise ConfigError(f"loadcase.max_iterations = {max_iter} must be >= 1")
    ride = lc.get("ride_load", "design")
    if ride is None:
        ride = "design"
    if not (ride in ("design", "kerb", "laden") or (isinstance(ride, (int, float)) and not isinstance(ride, bool)
                                                    and np.isfinite(ride) and ride > 0)):
        raise ConfigError(f"loadcase.ride_load = {ride!r} must be design, kerb, laden or a vertical wheel "
                          "load > 0 [N]")
    out = dict(analysis=analysis, steps=steps, loaded_radius=R, brake_lock=lock, tol=tol,
               max_iter=max_iter, mode=None, ride=ride)
    if analysis == "wheel_travel":
        mode = lc.get("mode", "parallel")
        if mode not in kc.TRAVEL_MODES:
            raise ConfigError(f"loadcase.mode = {mode!r} is not one of {', '.join(kc.TRAVEL_MODES)}")
        lo, hi = _range(lc, "travel", "m")
        out.update(mode=mode, dim="travel", units="m",
                   long_name=f"wheel-centre travel from design height ({mode}; bump > 0)")
    elif analysis == "steering":
        lo, hi = _range(lc, "rack", "m")
        out.update(dim="rack_travel", units="m",
                   long_name="rack travel from centre (+ = to the left: both steering joints' rack-side "
                             "markers along vehicle y), wheel heights held")
    else:
        lo, hi = _range(lc, "load", "N or N m")
        torque = analysis == "aligning_torque"
        out.update(dim="torque" if torque else "force", units="N m" if torque else "N",
                   long_name=f"{analysis.replace('_', ' ')} per wheel, each side's positive sense")
    out["amplitudes"] = np.linspace(lo, hi, steps) if steps > 1 else np.array([hi])
    return out


def ride_wheel_load(ride, model):
    """Vertical wheel load [N] of the K&C start position, or None for the
    design position (wheel centres at design height)."""
    if ride == "design":
        return None
    if ride in ("kerb", "laden"):
        veh = kc.vehicle_data(model) or {}
        if f"{ride}_wheel_load" not in veh:
            raise ConfigError(f"loadcase.ride_load = {ride}: model {model.topology.name!r} has no "
                              f"vehicle.{ride}_wheel_load")
        return float(veh[f"{ride}_wheel_load"])
    return float(ride)


def start_position(m, lc):
    """The K&C start position of a load case: design height, or the ride
    height under the load case's wheel load (kerb, laden)."""
    if lc["ride_wheel_load"] is None:
        return kc.design_position(m, tol=lc["tol"], max_iter=lc["max_iter"])
    return kc.ride_position(m, lc["ride_wheel_load"], tol=lc["tol"], max_iter=lc["max_iter"])


def _plan(cfg) -> Plan:
    """Everything a K&C job needs, validated before any compute."""
    lc = load_case(OmegaConf.to_container(cfg.loadcase, resolve=True))
    model = model_from_config(cfg.model)
    lc["ride_wheel_load"] = ride_wheel_load(lc["ride"], model)
    if lc["analysis"] == "steering" and kc.steering_joints(model) is None:
        raise ConfigError(f"loadcase.analysis = steering: model {model.topology.name!r} names no "
                          "steering_joint (the bushing whose rack-side marker the rack moves)")
    sw = OmegaConf.to_container(cfg.sweep, resolve=True)
    pset = build_parameters(sw.get("parameters") or {}, model)
    X = make_design(sw, pset)
    lc["lock_index"] = kc.brake_lock_index(model)
    lc["limits"] = static_limits(cfg)      # values of the plausibility check (read at run time)
    shapes = channel_shapes()
    S = len(lc["amplitudes"])
    shard, nsh, n_dev, C = mapping.chunking(sw, len(X), layout.output_bytes(CHANNELS, shapes, S),
                                            model.topology.n_dof + 2)
    dim = lc["dim"]
    coords = {
        "variant": (np.arange(len(X), dtype=np.int64), {}),
        dim: (np.asarray(lc["amplitudes"], float), {"units": lc["units"], "long_name": lc["long_name"]}),
        "side": (np.array(list(kc.SIDES)), {}),
        "axis": (np.array(AXES), {}),
        "component": (np.array(list(kc.LOADS)), {}),
        "component_units": (np.array(COMPONENT_UNITS), {"long_name": "unit of each component"},
                            ("component",)),
        "dof": (np.array(list(DIRECTIONS)), {"long_name": "wheel-centre translation x, y, z [m] and "
                                                         "small rotation rx, ry, rz [rad], vehicle frame"}),
    }
    # one device: the design-position Newton loop inside a multi-device
    # computation stalled XLA's CPU client (sweep.engine.mapping.StagedRunner)
    return Plan(model=model, model_cfg=cfg.model, pset=pset, X=X, shard=shard, num_shards=nsh, chunk=C, n_dev=1, micro_batch=None,
                channels=tuple(CHANNELS), shapes=shapes, coords=coords, lead=((dim, S, S),),
                iterations_long_name="Newton iterations of the design position", case=lc)


def run_inputs(model, lc):
    """The tree whose values a lifted K&C runner reads at run time: the
    model and the load case, its steps a :class:`kernels.kc.Steps` (the
    marching order is structure)."""
    return (model, {**lc, "amplitudes": kc.Steps(lc["amplitudes"])})


def make_kc_runner(model, pset, lc, lock_index, n_dev=1, lifted=False, shared=False):
    """jit(vmap(variant)) : thetas (C, P) -> (outputs, status, design iterations),
    each of ``n_dev`` devices mapping its own slice (:func:`sweep.engine.mapping.map_variants`).
    ``lifted``: rows ``[theta | values]`` in place of thetas, ``values`` =
    ``Lifted(run_inputs(model, lc)).vector`` - the model's values, the amplitudes,
    loaded radius, brake-lock stiffness and ride load read at run time
    (:mod:`sweep.engine.values`); ``shared``: every row has the same values
    (no hardpoint design), which then stay unbatched
    (:func:`sweep.engine.mapping.map_variants`, ``shared``: a chunk is the pair (thetas, values))."""
    P = len(pset)
    if lifted:
        from sweep.engine.values import Lifted
        lift = Lifted(run_inputs(model, lc))
    else:
        lift = None

    def variant(row):
        if lift is None:
            theta, (mdl, case) = row, (model, lc)
        else:
            theta, (mdl, case) = lift.split(row, P)
        return _variant(mdl, case, theta)

    def _variant(model, lc, theta):
        R = lc["loaded_radius"]
        amps = lc["amplitudes"]
        m = kc.lock_brakes(pset.apply(model, theta), lc["brake_lock"], lock_index)
        eq = start_position(m, lc)
        met = kc.kc_metrics(m, eq, R)
        met.pop("compliance_full")
        if lc["analysis"] == "wheel_travel":
            curve = kc.travel_curve(m, eq, amps, lc["mode"], tol=lc["tol"], max_iter=lc["max_iter"],
                                    loaded_radius=R)
        elif lc["analysis"] == "steering":
            curve = kc.steering_curve(m, eq, amps, tol=lc["tol"], max_iter=lc["max_iter"], loaded_radius=R)
        else:
            curve = kc.force_curve(m, eq, amps, kc.load_direction(lc["analysis"], R),
                                   tol=lc["tol"], max_iter=lc["max_iter"], loaded_radius=R)
        # a metric the model cannot define (no steering joint, no spring, no
        # vehicle data) is NaN by design, not a failure
        finite = jnp.all(jnp.stack([jnp.all(jnp.isfinite(a)) for k, a in met.items()
                                    if k not in kc.OPTIONAL_METRICS]))
        # the start position's plausibility (wheel centres held: toe, camber, stops)
        plausible = kc.static_state_plausible(m, eq.r, lc["limits"], held=True)
        code = jnp.where(~eq.converged, status.EQUILIBRIUM_FAILED, jnp.where(~finite, status.NON_FINITE, jnp.where(
            ~plausible, status.IMPLAUSIBLE, jnp.where(
                jnp.all(curve["converged"]), status.OK, status.LOAD_STEP_FAILED)))).astype(jnp.int8)
        good = (code == status.OK) | (code == status.LOAD_STEP_FAILED) | (code == status.IMPLAUSIBLE)
        met = jax.tree_util.tree_map(lambda a: jnp.where(good, a, jnp.nan), met)
        ok_step = curve.pop("converged") & good
        curve = {k: jnp.where(ok_step.reshape((-1,) + (1,) * (v.ndim - 1)), v, jnp.nan)
                 for k, v in curve.items()}
        return {**met, **curve, "converged": ok_step.astype(jnp.int8)}, code, eq.iterations

    if lift is not None and shared:
        return mapping.map_variants(lambda theta, vec: _variant(*lift.rebuild(vec), theta), n_dev, shared=True)
    return mapping.map_variants(variant, n_dev)


# the metric units of kernels.kc as the cube writes them: spellings that
# UDUNITS and pint parse (pint takes no number in a unit: "deg/(100 N m)" is
# degrees per hectonewton metre); kernels.kc's own text stays in the job summary
PARSEABLE_UNITS = {"deg/(100 N m)": "deg/(hN m)"}


def parseable_units(units):
    return PARSEABLE_UNITS.get(units, units)


# The channels of a K&C cube, in store order: the curves along the load
# case's step dimension, then the design-position metrics (kernels.kc.METRICS)
# and the compliance matrix, one value per variant and side.
CHANNELS = [
    Channel("wheel_centre_displacement", ("side", "axis"), "m",
            "wheel-centre displacement from the design position"),
    Channel("toe", ("side",), "rad", "toe angle (DIN 70000, + = toe-in)"),
    Channel("camber", ("side",), "rad", "camber angle (DIN 70000, + = top out)"),
    Channel("wheel_load", ("side", "component"), layout.MIXED_UNITS,
            "load applied at the wheel centre, vehicle frame (wheel travel: vertical force found)",
            comment=LOAD_UNITS_COMMENT),
    *(Channel(name, dims, units, long_name) for name, (dims, units, long_name) in kc.GEOMETRY_CHANNELS.items()),
    Channel("converged", (), "1", "load step converged (1), failed (0), not run (-1)", dtype="i1"),
    *(Channel(name, ("side",), parseable_units(units), long_name, per_step=False)
      for name, (units, long_name) in kc.METRICS.items()),
    *(Channel(name, (), parseable_units(units), long_name, per_step=False)
      for name, (units, long_name) in kc.AXLE_METRICS.items()),
    Channel("compliance_matrix", ("side", "dof", "component"), layout.MIXED_UNITS,
            "wheel-centre compliance matrix at the design position, one wheel loaded "
            "(rows dof, columns load component)", per_step=False, comment=f"mixed units, {kc.COMPLIANCE_UNITS}"),
]
SIZES = {"side": len(kc.SIDES), "axis": len(AXES), "component": len(kc.LOADS), "dof": len(kc.DOFS)}


def channel_shapes():
    """{channel: shape after the variant and step dims}, from the coordinate
    sizes of each channel's dims (the K&C outputs are fixed-size tables)."""
    return {c.name: tuple(SIZES[d] for d in c.dims) for c in CHANNELS}


def report(ds, cfg, s):
    """Log the K&C job summary (logger ``sweep``; console and Hydra job log):
    status counts and the metrics of the first good variant."""
    a = ds.attrs
    mode = f" ({a['travel_mode']})" if a.get("travel_mode") else ""
    log.info(f"model {a['model']}: {a['n_bodies']} bodies{flexible_note(a)}, {a['n_force_elements']} force elements, "
             f"{a['n_dof']} DOF; K&C load case {cfg.loadcase.name}: {a['analysis']}{mode}, "
             f"{s.get('steps')} steps; design "
             f"{cfg.sweep.design}, {s['n_variants']} variant(s)")
    codes = ds.status.values
    log_run(log, s, codes, KIND.status)
    ok = np.nonzero(np.isin(codes, (status.OK, status.LOAD_STEP_FAILED, status.IMPLAUSIBLE)))[0]
    if len(ok):
        v = int(ok[0])
        log.info(f"K&C metrics of variant {v} (left / right):")
        for name, (units, _) in kc.METRICS.items():
            lr = ds[name].values[v]
            log.info(f"  {name:34s} {lr[0]:11.4g} / {lr[1]:11.4g}  {units}")
        for name, (units, _) in kc.AXLE_METRICS.items():
            log.info(f"  {name:34s} {float(ds[name].values[v]):11.4g}  (axle)  {units}")
    log.info(f"result cube: {os.path.abspath(s['path'])}")
    cube_schema.warn(ds, KIND.channels)
    from sweep.results.plots import draw_beside, kc_sheet
    draw_beside(ds, s, kc_sheet, "K&C sheet", log)




class KinematicsAndCompliance(JobKind):
    name = NAME
    channels = tuple(CHANNELS)
    status = (status.NOT_RUN, status.OK, status.EQUILIBRIUM_FAILED, status.NON_FINITE, status.LOAD_STEP_FAILED,
              status.IMPLAUSIBLE)
    # types only: load_case checks the ranges, with the model's K&C conventions
    loadcase = Map({
        "name": Str(), "kind": Str(), "description": Str(),
        "analysis": Str(), "mode": Str(), "travel": List(Float(unit="m"), length=2),
        "load": List(Float(), length=2), "steps": Int(), "loaded_radius": Float(unit="m"),
        "brake_lock_stiffness": Float(), "tolerance": Float(), "max_iterations": Int(),
    })
    unused = ("start", "every")     # no time axis
    drop = ("integrator",)     # no time integration in a K&C job

    def plan(self, cfg):
        return _plan(cfg)

    def runner(self, plan):
        lc, topo = plan.case, plan.model.topology
        what = (f"K&C chunk runner: {topo.name} ({topo.n_dof} DOF), "
                f"design position + {lc['analysis']} ({len(lc['amplitudes'])} steps), "
                f"{plan.chunk} variant(s) per chunk on {plan.n_dev} device(s)")
        from sweep.engine.values import example as values_example, run_values
        from sweep.core.tracecache import fingerprint
        vals, structure, size = run_values(plan, lambda m: run_inputs(m, lc))
        shared = not callable(vals)             # one vector for every variant (not a hardpoint design)
        fn = make_kc_runner(plan.model, plan.pset, lc, lc["lock_index"], plan.n_dev, lifted=True, shared=shared)
        # keyed on structure: the values are the rows' tail (the brake-lock
        # rows follow from the nominal geometry and are part of the structure)
        key = fingerprint(NAME, plan.chunk, structure, lc["lock_index"], plan.n_dev, shared,
                          "pair" if shared else "rows")
        return Runner(fn, values_example(plan.chunk, len(plan.pset), size, shared), what, key=key, values=vals)

    def summary(self, plan):
        return {"analysis": plan.case["analysis"], "steps": len(plan.case["amplitudes"])}

    def attrs(self, plan, cfg_yaml):
        topo = plan.model.topology
        lc = plan.case
        rows, _ = lc["lock_index"]
        return {
            "n_bodies": int(topo.n_physical_bodies), "n_modal_coordinates": int(topo.n_modal_coordinates), "n_force_elements": int(topo.n_force_elements),
            "n_dof": int(topo.n_dof), "model": topo.name, "config": cfg_yaml,
            "cube_kind": NAME, "analysis": lc["analysis"], "travel_mode": lc["mode"] or "",
            "loaded_radius_m": lc["loaded_radius"], "brake_lock_stiffness_Nm_per_rad": lc["brake_lock"],
            "brake_locked_bushings": [topo.bushing_names[i] for i in rows],
            "steering_rack": topo.tables.get("steering_rack") or "off: the steering joints act on the body / "
                                                                 "subframe (no steering compliance)",
            "steering_joints": list((topo.tables.get("steering_joints") or {}).values()),
            "ride_load": (f"{lc['ride']}: start at the static equilibrium under {lc['ride_wheel_load']:.1f} N per "
                          "wheel, its wheel-centre heights held" if lc["ride_wheel_load"] is not None
                          else "design: wheel centres at design height, vertical wheel loads found"),
            "conventions": CONVENTIONS, "Conventions": CF_CONVENTIONS, "parameters": list(plan.pset.names),
            "chunk_size": int(plan.chunk), **provenance(),
        }

    def report(self, ds, cfg, s):
        report(ds, cfg, s)


KIND = KinematicsAndCompliance()
