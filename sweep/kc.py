"""K&C load cases as sweep jobs: a design of variants -> one K&C cube.

A load case with ``kind: kc`` (``configs/loadcase/kc_*.yaml``) runs, for every
variant of the design, the rig analysis of :mod:`kernels.kc`: the design
position (wheel centres at design height), all K&C metrics there (exact
derivatives), and the nonlinear curve of the load case's analysis (wheel
travel, or a force / torque in steps). Variants run in vmapped chunks
through the same resumable store machinery as time-response jobs
(:mod:`sweep.store`): created atomically before any compute, each finished
chunk checksummed and flagged, reruns verify and skip finished chunks
(damaged ones are recomputed), shards share a store, a lock file keeps a
second process off it, SIGINT / SIGTERM stop cleanly.

Entry points: ``python -m sweep loadcase=kc_wheel_travel ...`` (dispatch in
:func:`sweep.jobs.run_job`) and ``python -m sweep.kc loadcase=...`` (this
module's Hydra app, which also prints the K&C summary).

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
(:data:`kernels.kc.AXLE_METRICS`: roll-centre height and lateral position);
``compliance_matrix`` (variant, side, dof, component) [SI]; ``status``,
``equilibrium_iterations``; one variable per swept parameter.
"""
from __future__ import annotations

import logging
import os
import sys

import jax
import jax.numpy as jnp
import numpy as np
from omegaconf import DictConfig, OmegaConf

from kernels import kc
from kernels.model import ModelError
from kernels.names import AXES, COMPONENT_UNITS, DIRECTIONS
from sweep import engine
from sweep.cube import provenance
from sweep.design import make_design
from sweep.engine import Channel
from sweep.job import model_from_config
from sweep.params import build_parameters
from sweep.schema import ConfigError

log = logging.getLogger("sweep")

KIND = "kc"

STATUS = {-1: "not_run", 0: "ok", 1: "equilibrium_failed", 2: "non_finite", 3: "load_step_failed"}
KNOWN_KEYS = {"name", "kind", "analysis", "mode", "travel", "load", "rack", "steps", "loaded_radius", "ride_load",
              "brake_lock_stiffness", "tolerance", "max_iterations", "description"}
VOLATILE = ("shard", "num_shards", "progress", "start", "every", "verify")
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


def is_kc(cfg) -> bool:
    from sweep.jobs import kind_name
    return kind_name(cfg) == KIND


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


def prepare_kc(cfg) -> dict:
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
    lock_index = kc.brake_lock_index(model)
    shapes = channel_shapes()
    shard, nsh, n_dev, C = engine.chunking(sw, len(X), engine.output_bytes(CHANNELS, shapes, len(lc["amplitudes"])),
                                           model.topology.n_dof + 2)
    # one device: the design-position Newton loop inside a multi-device
    # computation stalled XLA's CPU client (sweep.engine.StagedRunner)
    return dict(model=model, pset=pset, X=X, lc=lc, lock_index=lock_index, shard=shard,
                num_shards=nsh, chunk=C, n_dev=1, shapes=shapes)


def make_kc_runner(model, pset, lc, lock_index, n_dev=1):
    """jit(vmap(variant)) : thetas (C, P) -> (outputs, status, design iterations),
    each of ``n_dev`` devices mapping its own slice (``sweep.engine.map_variants``)."""
    R = lc["loaded_radius"]
    amps = lc["amplitudes"]

    def variant(theta):
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
        status = jnp.where(~eq.converged, 1, jnp.where(~finite, 2, jnp.where(
            jnp.all(curve["converged"]), 0, 3))).astype(jnp.int8)
        good = (status == 0) | (status == 3)
        met = jax.tree_util.tree_map(lambda a: jnp.where(good, a, jnp.nan), met)
        ok_step = curve.pop("converged") & good
        curve = {k: jnp.where(ok_step.reshape((-1,) + (1,) * (v.ndim - 1)), v, jnp.nan)
                 for k, v in curve.items()}
        return {**met, **curve, "converged": ok_step.astype(jnp.int8)}, status, eq.iterations

    return engine.map_variants(variant, n_dev)


def job_identity(cfg):
    """The resolved config text that defines a K&C job's results (as
    :func:`sweep.engine.job_identity`, also without the integrator: no time
    integration in a K&C job)."""
    return engine.job_identity(cfg, VOLATILE, drop=("integrator",))


# The channels of a K&C cube, in store order: the curves along the load
# case's step dimension, then the design-position metrics (kernels.kc.METRICS)
# and the compliance matrix, one value per variant and side.
CHANNELS = [
    Channel("wheel_centre_displacement", ("side", "axis"), "m",
            "wheel-centre displacement from the design position"),
    Channel("toe", ("side",), "rad", "toe angle (DIN 70000, + = toe-in)"),
    Channel("camber", ("side",), "rad", "camber angle (DIN 70000, + = top out)"),
    Channel("wheel_load", ("side", "component"), "N (fx, fy, fz); N m (mx, my, mz): see component_units",
            "load applied at the wheel centre, vehicle frame (wheel travel: vertical force found)"),
    *(Channel(name, dims, units, long_name) for name, (dims, units, long_name) in kc.GEOMETRY_CHANNELS.items()),
    Channel("converged", (), "1", "load step converged (1), failed (0), not run (-1)", dtype="i1"),
    *(Channel(name, ("side",), units, long_name, per_step=False)
      for name, (units, long_name) in kc.METRICS.items()),
    *(Channel(name, (), units, long_name, per_step=False)
      for name, (units, long_name) in kc.AXLE_METRICS.items()),
    Channel("compliance_matrix", ("side", "dof", "component"), kc.COMPLIANCE_UNITS,
            "wheel-centre compliance matrix at the design position, one wheel loaded "
            "(rows dof, columns load component)", per_step=False),
]
SIZES = {"side": len(kc.SIDES), "axis": len(AXES), "component": len(kc.LOADS), "dof": len(kc.DOFS)}


def channel_shapes():
    """{channel: shape after the variant and step dims}, from the coordinate
    sizes of each channel's dims (the K&C outputs are fixed-size tables)."""
    return {c.name: tuple(SIZES[d] for d in c.dims) for c in CHANNELS}


def store_spec(job):
    X, lc = job["X"], job["lc"]
    n, S = len(X), len(lc["amplitudes"])
    dim = lc["dim"]
    coords = {
        "variant": (np.arange(n, dtype=np.int64), {}),
        dim: (np.asarray(lc["amplitudes"], float), {"units": lc["units"], "long_name": lc["long_name"]}),
        "side": (np.array(list(kc.SIDES)), {}),
        "axis": (np.array(AXES), {}),
        "component": (np.array(list(kc.LOADS)), {}),
        "component_units": (np.array(COMPONENT_UNITS), {"long_name": "unit of each component"},
                            ("component",)),
        "dof": (np.array(list(DIRECTIONS)), {"long_name": "wheel-centre translation x, y, z [m] and "
                                                         "small rotation rx, ry, rz [rad], vehicle frame"}),
    }
    return engine.store_spec(job, coords, CHANNELS, job["shapes"], ((dim, S, S),), STATUS,
                             "Newton iterations of the design position")


def cube_attrs(job, cfg_yaml):
    topo = job["model"].topology
    lc = job["lc"]
    rows, _ = job["lock_index"]
    return {
        "n_bodies": int(topo.n_bodies), "n_force_elements": int(topo.n_force_elements),
        "n_dof": int(topo.n_dof), "model": topo.name, "config": cfg_yaml,
        "cube_kind": "kc", "analysis": lc["analysis"], "travel_mode": lc["mode"] or "",
        "loaded_radius_m": lc["loaded_radius"], "brake_lock_stiffness_Nm_per_rad": lc["brake_lock"],
        "brake_locked_bushings": [topo.bushing_names[i] for i in rows],
        "steering_rack": topo.tables.get("steering_rack") or "off: the steering joints act on the body / subframe "
                                                             "(no steering compliance)",
        "steering_joints": list((topo.tables.get("steering_joints") or {}).values()),
        "ride_load": (f"{lc['ride']}: start at the static equilibrium under {lc['ride_wheel_load']:.1f} N per "
                      "wheel, its wheel-centre heights held" if lc["ride_wheel_load"] is not None
                      else "design: wheel centres at design height, vertical wheel loads found"),
        "conventions": CONVENTIONS, "parameters": list(job["pset"].names),
        "chunk_size": int(job["chunk"]), **provenance(),
    }


def run(cfg, cfg_yaml, progress=None):
    """Run (or resume) a K&C job into its cube. Returns a summary dict."""
    job = prepare_kc(cfg)
    pset = job["pset"]
    summary = {"kind": KIND, "analysis": job["lc"]["analysis"], "steps": len(job["lc"]["amplitudes"])}

    def build_runner():
        C = job["chunk"]            # after engine.open_job_store: a resumed store keeps its chunks
        runner = make_kc_runner(job["model"], pset, job["lc"], job["lock_index"], job["n_dev"])
        what = (f"K&C chunk runner: {job['model'].topology.name} ({job['model'].topology.n_dof} DOF), "
                f"design position + {job['lc']['analysis']} ({len(job['lc']['amplitudes'])} steps), "
                f"{C} variant(s) per chunk on {job['n_dev']} device(s)")
        from sweep.tracecache import fingerprint
        key = fingerprint(KIND, C, job["model"], pset, job["lc"], job["lock_index"], job["n_dev"])
        return engine.compile_chunk_runner(runner, np.tile(pset.nominal, (C, 1)), job["n_dev"], what, key=key)
    return engine.run_chunks(cfg, job, store_spec(job), cube_attrs(job, cfg_yaml), job_identity(cfg), summary,
                             build_runner, [c.name for c in CHANNELS], progress)


def report(ds, cfg, s):
    """Log the K&C job summary (logger ``sweep``; console and Hydra job log):
    status counts and the metrics of the first good variant."""
    engine.ensure_console()
    a = ds.attrs
    mode = f" ({a['travel_mode']})" if a.get("travel_mode") else ""
    log.info(f"model {a['model']}: {a['n_bodies']} bodies, {a['n_force_elements']} force elements, "
             f"{a['n_dof']} DOF; K&C load case {cfg.loadcase.name}: {a['analysis']}{mode}, "
             f"{s.get('steps')} steps; design "
             f"{cfg.sweep.design}, {s['n_variants']} variant(s)")
    status = ds.status.values
    engine.log_run(s, status, STATUS)
    ok = np.nonzero((status == 0) | (status == 3))[0]
    if len(ok):
        v = int(ok[0])
        log.info(f"K&C metrics of variant {v} (left / right):")
        for name, (units, _) in kc.METRICS.items():
            lr = ds[name].values[v]
            log.info(f"  {name:34s} {lr[0]:11.4g} / {lr[1]:11.4g}  {units}")
        for name, (units, _) in kc.AXLE_METRICS.items():
            log.info(f"  {name:34s} {float(ds[name].values[v]):11.4g}  (axle)  {units}")
    log.info(f"result cube: {os.path.abspath(s['path'])}")
    if s.get("variants_run") and bool(np.all(ds.chunk_done.values)):
        try:
            from sweep.plots import kc_sheet
            png = kc_sheet(ds, s["path"].rstrip("/")[:-5] + ".png")
            log.info(f"K&C sheet: {os.path.abspath(png)}")
        except Exception as err:  # noqa: BLE001 - a plot must never lose a finished cube
            log.warning(f"warning: K&C sheet failed: {err}")


def main(cfg: DictConfig, progress=None) -> int:
    """Run a K&C job (``loadcase.kind: kc``) and print its summary; 2 on a bad config."""
    import xarray as xr
    config_yaml = OmegaConf.to_yaml(cfg, resolve=True)
    try:
        if not is_kc(cfg):
            raise ConfigError(f"loadcase.kind = {cfg.loadcase.get('kind', 'time_response')!r}: "
                             "python -m sweep.kc runs K&C load cases (loadcase=kc_*)")
        from sweep.jobs import run_job
        summary = run_job(cfg, config_yaml, progress=progress if progress is not None
                                 else bool(cfg.sweep.get("progress", True)))
    except ModelError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    report(xr.open_zarr(summary["path"]), cfg, summary)
    return 0


if __name__ == "__main__":
    from sweep.entry import hydra_app
    hydra_app(main, "config")()
