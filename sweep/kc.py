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
:func:`sweep.engine.run_job`) and ``python -m sweep.kc loadcase=...`` (this
module's Hydra app, which also prints the K&C summary).

Cube (``xarray.open_zarr``): dims ``variant``, the step dimension ``travel``
[m] (wheel travel), ``force`` [N] or ``torque`` [N m] (force analyses), ``side``,
``axis``, ``component``, ``dof``. Variables: ``wheel_centre_displacement``
(variant, step, side, axis) [m] from the design position; ``toe``,
``camber`` (variant, step, side) [rad, DIN 70000]; ``wheel_load`` (variant,
step, side, component) [N, N m] applied at the wheel centre (wheel travel:
the vertical force found); ``converged`` (variant, step); one variable per
metric (variant, side) in engineering units (:data:`kernels.kc.METRICS`);
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
from sweep.cube import provenance
from sweep.design import make_design
from sweep import engine
from sweep.tracecache import fingerprint
from sweep.engine import chunking, map_variants, open_job_store, parameter_attrs
from sweep.job import model_from_config
from sweep.params import build_parameters

log = logging.getLogger("sweep")

STATUS = {-1: "not_run", 0: "ok", 1: "equilibrium_failed", 2: "non_finite", 3: "load_step_failed"}
KNOWN_KEYS = {"name", "kind", "analysis", "mode", "travel", "load", "steps", "loaded_radius",
              "brake_lock_stiffness", "tolerance", "max_iterations", "description"}
VOLATILE = ("shard", "num_shards", "progress", "start", "every", "verify")
CONVENTIONS = (
    "vehicle frame x forward, y left, z up; toe (+ = toe-in) and camber (+ = top out) per DIN 70000; "
    "design position = wheel centres at design height (vertical forces found), gravity only; "
    "wheel travel: wheel-centre heights prescribed (bump > 0; opposite: left +s, right -s); "
    "force analyses: loads on both wheels in each side's own sense (lateral_force inboard at the "
    "contact patch, traction_force forward at the wheel centre, braking_force rearward at the "
    "contact patch, aligning_torque in the toe-out sense), vertical wheel loads held; contact patch "
    "= wheel centre - loaded_radius * e_z; brakes locked (wheel bearing stiffened about the spin axis); "
    "compliance_matrix: one wheel loaded, d(x,y,z,rx,ry,rz)/d(fx,fy,fz,mx,my,mz) at the wheel "
    "centre, SI. See docs/kc_and_tuning.md.")


def is_kc(cfg) -> bool:
    kind = cfg.loadcase.get("kind", "time_response")
    if kind not in ("time_response", "kc"):
        raise ModelError(f"loadcase.kind = {kind!r} is not one of time_response, kc")
    return kind == "kc"


def _range(lc, key, unit):
    val = lc.get(key)
    if val is None or len(val) != 2:
        raise ModelError(f"loadcase.{key} = {val!r} must be [lower, upper] in {unit}")
    lo, hi = float(val[0]), float(val[1])
    if not (np.isfinite(lo) and np.isfinite(hi)) or lo > hi:
        raise ModelError(f"loadcase.{key} = [{lo}, {hi}] must be finite with lower <= upper")
    return lo, hi


def load_case(lc: dict) -> dict:
    """Validate a K&C load-case config; one-line :class:`ModelError` naming the field."""
    for key in lc:
        if key not in KNOWN_KEYS:
            raise ModelError(f"loadcase.{key}: unknown key for a K&C load case "
                             f"(known: {', '.join(sorted(KNOWN_KEYS))})")
    analysis = lc.get("analysis")
    if analysis not in kc.ANALYSES:
        raise ModelError(f"loadcase.analysis = {analysis!r} is not one of {', '.join(kc.ANALYSES)}")
    steps = lc.get("steps", 1)
    if not isinstance(steps, int) or steps < 1:
        raise ModelError(f"loadcase.steps = {steps!r} must be >= 1")
    R = float(lc.get("loaded_radius", kc.DEFAULT_LOADED_RADIUS))
    if not (np.isfinite(R) and R > 0):
        raise ModelError(f"loadcase.loaded_radius = {lc.get('loaded_radius')} must be > 0 [m]")
    lock = float(lc.get("brake_lock_stiffness", kc.DEFAULT_BRAKE_LOCK))
    if not (np.isfinite(lock) and lock >= 0):
        raise ModelError(f"loadcase.brake_lock_stiffness = {lc.get('brake_lock_stiffness')} must be >= 0 [N m/rad]")
    tol = float(lc.get("tolerance", 1e-6))
    if not tol > 0:
        raise ModelError(f"loadcase.tolerance = {lc.get('tolerance')} must be > 0 [N]")
    max_iter = int(lc.get("max_iterations", 60))
    if max_iter < 1:
        raise ModelError(f"loadcase.max_iterations = {max_iter} must be >= 1")
    out = dict(analysis=analysis, steps=steps, loaded_radius=R, brake_lock=lock, tol=tol,
               max_iter=max_iter, mode=None)
    if analysis == "wheel_travel":
        mode = lc.get("mode", "parallel")
        if mode not in kc.TRAVEL_MODES:
            raise ModelError(f"loadcase.mode = {mode!r} is not one of {', '.join(kc.TRAVEL_MODES)}")
        lo, hi = _range(lc, "travel", "m")
        out.update(mode=mode, dim="travel", units="m",
                   long_name=f"wheel-centre travel from design height ({mode}; bump > 0)")
    else:
        lo, hi = _range(lc, "load", "N or N m")
        torque = analysis == "aligning_torque"
        out.update(dim="torque" if torque else "force", units="N m" if torque else "N",
                   long_name=f"{analysis.replace('_', ' ')} per wheel, each side's positive sense")
    out["amplitudes"] = np.linspace(lo, hi, steps) if steps > 1 else np.array([hi])
    return out


def prepare_kc(cfg) -> dict:
    """Everything a K&C job needs, validated before any compute."""
    lc = load_case(OmegaConf.to_container(cfg.loadcase, resolve=True))
    model = model_from_config(cfg.model)
    sw = OmegaConf.to_container(cfg.sweep, resolve=True)
    pset = build_parameters(sw.get("parameters") or {}, model)
    X = make_design(sw, pset)
    lock_index = kc.brake_lock_index(model)
    shard, nsh, n_dev, C = chunking(sw, len(X), len(lc["amplitudes"]), 0, model.topology.n_dof + 2)
    return dict(model=model, pset=pset, X=X, lc=lc, lock_index=lock_index, shard=shard,
                num_shards=nsh, chunk=C, n_dev=n_dev)


def make_kc_runner(model, pset, lc, lock_index, n_dev=1):
    """jit(vmap(variant)) : thetas (C, P) -> (outputs, status, design iterations),
    each of ``n_dev`` devices mapping its own slice (``sweep.engine.map_variants``)."""
    R = lc["loaded_radius"]
    amps = lc["amplitudes"]

    def variant(theta):
        m = kc.lock_brakes(pset.apply(model, theta), lc["brake_lock"], lock_index)
        eq = kc.design_position(m, tol=lc["tol"], max_iter=lc["max_iter"])
        met = kc.kc_metrics(m, eq, R)
        met.pop("compliance_full")
        if lc["analysis"] == "wheel_travel":
            curve = kc.travel_curve(m, eq, amps, lc["mode"], tol=lc["tol"], max_iter=lc["max_iter"])
        else:
            curve = kc.force_curve(m, eq, amps, kc.load_direction(lc["analysis"], R),
                                   tol=lc["tol"], max_iter=lc["max_iter"])
        finite = jnp.all(jnp.stack([jnp.all(jnp.isfinite(a)) for a in jax.tree_util.tree_leaves(met)]))
        status = jnp.where(~eq.converged, 1, jnp.where(~finite, 2, jnp.where(
            jnp.all(curve["converged"]), 0, 3))).astype(jnp.int8)
        good = (status == 0) | (status == 3)
        met = jax.tree_util.tree_map(lambda a: jnp.where(good, a, jnp.nan), met)
        ok_step = curve.pop("converged") & good
        curve = {k: jnp.where(ok_step.reshape((-1,) + (1,) * (v.ndim - 1)), v, jnp.nan)
                 for k, v in curve.items()}
        return {**met, **curve, "converged": ok_step.astype(jnp.int8)}, status, eq.iterations

    return map_variants(variant, n_dev)


def job_identity(cfg):
    """The resolved config text that defines a K&C job's results (as
    :func:`sweep.engine.job_identity`, also without the integrator: no time
    integration in a K&C job)."""
    c = OmegaConf.create(OmegaConf.to_container(cfg, resolve=True))
    c.pop("integrator", None)
    return engine.job_identity(c, VOLATILE)


CURVES = {
    "wheel_centre_displacement": (("side", "axis"), "m", "wheel-centre displacement from the design position"),
    "toe": (("side",), "rad", "toe angle (DIN 70000, + = toe-in)"),
    "camber": (("side",), "rad", "camber angle (DIN 70000, + = top out)"),
    "wheel_load": (("side", "component"), "N (fx, fy, fz); N m (mx, my, mz): see component_units",
                   "load applied at the wheel centre, vehicle frame (wheel travel: vertical force found)"),
}


def store_spec(job):
    pset, X, lc = job["pset"], job["X"], job["lc"]
    n, C, S = len(X), job["chunk"], len(lc["amplitudes"])
    dim = lc["dim"]
    sizes = {"side": 2, "axis": 3, "component": 6, "dof": 6}
    coords = {
        "variant": (np.arange(n, dtype=np.int64), {}),
        dim: (np.asarray(lc["amplitudes"], float), {"units": lc["units"], "long_name": lc["long_name"]}),
        "side": (np.array(list(kc.SIDES)), {}),
        "axis": (np.array(["x", "y", "z"]), {}),
        "component": (np.array(list(kc.LOADS)), {}),
        "component_units": (np.array(engine.COMPONENT_UNITS), {"long_name": "unit of each component"},
                            ("component",)),
        "dof": (np.array(list(kc.DOFS)), {"long_name": "wheel-centre translation x, y, z [m] and "
                                                      "small rotation rx, ry, rz [rad], vehicle frame"}),
    }
    spec = {"__coords__": coords}
    for p in pset.params:
        spec[p.name] = (("variant",), (n,), "f8", (C,), np.nan, parameter_attrs(p))
    for name, (dims, units, long_name) in CURVES.items():
        shape = tuple(sizes[d] for d in dims)
        spec[name] = (("variant", dim) + dims, (n, S) + shape, "f8", (C, S) + shape, np.nan,
                      {"units": units, "long_name": long_name})
    spec["converged"] = (("variant", dim), (n, S), "i1", (C, S), -1,
                         {"long_name": "load step converged (1), failed (0), not run (-1)"})
    for name, (units, long_name) in kc.METRICS.items():
        spec[name] = (("variant", "side"), (n, 2), "f8", (C, 2), np.nan,
                      {"units": units, "long_name": long_name})
    spec["compliance_matrix"] = (("variant", "side", "dof", "component"), (n, 2, 6, 6), "f8",
                                 (C, 2, 6, 6), np.nan,
                                 {"units": kc.COMPLIANCE_UNITS,
                                  "long_name": "wheel-centre compliance matrix at the design position, "
                                               "one wheel loaded (rows dof, columns load component)"})
    spec["status"] = (("variant",), (n,), "i1", (C,), -1,
                      {"long_name": "variant status", "flag_values": list(STATUS),
                       "flag_meanings": " ".join(STATUS.values())})
    spec["equilibrium_iterations"] = (("variant",), (n,), "i4", (C,), -1,
                                      {"long_name": "Newton iterations of the design position"})
    # chunk_done (dim chunk, a coordinate) and the chunk checksums are added by sweep.store
    if pset.params:
        for name in spec:
            if name not in ("__coords__", "chunk_done", *pset.names):
                spec[name][5]["coordinates"] = " ".join(pset.names)
    return spec


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
        "conventions": CONVENTIONS, "parameters": list(job["pset"].names),
        "chunk_size": int(job["chunk"]), **provenance(),
    }


def run_kc_job(cfg, cfg_yaml, progress=None):
    """Run (or resume) a K&C job into its cube. Returns a summary dict."""
    job = prepare_kc(cfg)
    path, store, _, todo = open_job_store(cfg, job, store_spec(job), cube_attrs(job, cfg_yaml),
                                          job_identity(cfg))
    X, C, pset = job["X"], job["chunk"], job["pset"]
    n = len(X)
    n_chunks = -(-n // C)
    summary = {"path": path, "n_variants": n, "chunk": C, "n_chunks": n_chunks, "todo": len(todo),
               "compile_s": 0.0, "run_s": 0.0, "variants_run": 0, "devices": job["n_dev"],
               "kind": "kc", "analysis": job["lc"]["analysis"], "steps": len(job["lc"]["amplitudes"])}
    if not todo:
        return summary
    runner = make_kc_runner(job["model"], pset, job["lc"], job["lock_index"], job["n_dev"])
    what = (f"K&C chunk runner: {job['model'].topology.name} ({job['model'].topology.n_dof} DOF), "
            f"design position + {job['lc']['analysis']} ({len(job['lc']['amplitudes'])} steps), "
            f"{C} variant(s) per chunk on {job['n_dev']} device(s)")
    key = fingerprint("kc", C, job["model"], pset, job["lc"], job["lock_index"], job["n_dev"])
    run_chunk, summary["compile_s"] = engine.compile_chunk_runner(runner, np.tile(pset.nominal, (C, 1)),
                                                                  job["n_dev"], what, key=key)
    names = [*CURVES, "converged", *kc.METRICS, "compliance_matrix"]
    return engine.stream_chunks(job, store, todo, run_chunk, names, progress, summary)


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
    if s["variants_run"]:
        rate = s["variants_run"] / s["run_s"] if s["run_s"] else float("nan")
        log.info(f"wall time: compile {s['compile_s']:.2f} s, run {s['run_s']:.2f} s for "
                 f"{s['variants_run']} variant(s) ({rate:.2f} variants/s); chunks of {s['chunk']} "
                 f"on {s['devices']} device(s)")
    else:
        log.info(f"{s['path']}: nothing to run for this shard, every chunk is complete")
    status = ds.status.values
    log.info("status: " + ", ".join(f"{v} {int(np.sum(status == k))}" for k, v in STATUS.items()
                                    if np.sum(status == k) or k == 0))
    ok = np.nonzero((status == 0) | (status == 3))[0]
    if len(ok):
        v = int(ok[0])
        log.info(f"K&C metrics of variant {v} (left / right):")
        for name, (units, _) in kc.METRICS.items():
            lr = ds[name].values[v]
            log.info(f"  {name:34s} {lr[0]:11.4g} / {lr[1]:11.4g}  {units}")
    log.info(f"result cube: {os.path.abspath(s['path'])}")


def main(cfg: DictConfig, progress=None) -> int:
    """Run a K&C job (``loadcase.kind: kc``) and print its summary; 2 on a bad config."""
    import xarray as xr
    config_yaml = OmegaConf.to_yaml(cfg, resolve=True)
    try:
        if not is_kc(cfg):
            raise ModelError(f"loadcase.kind = {cfg.loadcase.get('kind', 'time_response')!r}: "
                             "python -m sweep.kc runs K&C load cases (loadcase=kc_*)")
        summary = engine.run_job(cfg, config_yaml, progress=progress if progress is not None
                                 else bool(cfg.sweep.get("progress", True)))
    except ModelError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    report(xr.open_zarr(summary["path"]), cfg, summary)
    return 0


if __name__ == "__main__":
    from sweep.entry import hydra_app
    hydra_app(main, "config")()
