"""``python -m sweep.tune``: validate a tuning config, optimise, write the
history (zarr) and the final design (YAML), log the summary."""
from __future__ import annotations

import logging
import os
import shutil

import numpy as np
import yaml
from omegaconf import DictConfig, OmegaConf

from kernels.model import ModelError
from sweep.core.config import ConfigError
from sweep.tune.optimiser import gradient_check, make_optimizer, optimise, start_points
from sweep.tune.problem import TuneProblem, bounds_text, targets_from, violation

logger = logging.getLogger("sweep.tune")


# --------------------------------------------------------------------------- output

def history_dataset(problem, hist, cfg_yaml):
    import xarray as xr
    from sweep.results.cube import provenance
    obj, cons = problem.objectives, problem.constraints
    n_obj = len(obj)
    J = hist["objective"][-1]
    best = int(np.nanargmin(np.where(np.isfinite(J), J, np.inf)))
    if cons:
        # the best start: every constraint holds, then the lowest objective without the
        # constraint term (J itself holds each start's own multipliers)
        track = problem.tracking(hist["responses"][-1, :, :n_obj])
        holds = np.array([all(h for _, _, h in problem.constraint_report(row))
                          for row in hist["responses"][-1, :, n_obj:]])
        good = holds & np.isfinite(J)
        if good.any():
            best = int(np.argmin(np.where(good, track, np.inf)))
    n_it, n_st = hist["objective"].shape
    tracking = "sum_i w_i ((y_i - target_i) / scale_i)^2"
    data_vars = {
        "objective": (("iteration", "start"), hist["objective"],
                      {"units": "1", "long_name": tracking + (" + constraint term (augmented Lagrangian, "
                                                              "this round's multipliers)" if cons else "")}),
        "parameter_value": (("iteration", "start", "parameter"), hist["theta"],
                            {"units": "1 (scale) or SI (value)", "long_name": "tuned parameter values"}),
        "objective_evaluated": (("iteration", "start"), hist["evaluated"],
                                {"units": "1", "long_name": "objective at the point evaluated in the iteration "
                                                            "(lbfgs: trial point, maybe rejected)"}),
        "grad_norm": (("iteration", "start"), hist["grad_norm"],
                      {"units": "1", "long_name": "|dJ/dz|, z = logit of the position within the bounds"}),
        "response": (("iteration", "start", "objective_name"), hist["responses"][..., :n_obj],
                     {"long_name": "response of each objective (units per objective: attrs units)"}),
        "target": (("objective_name",), np.array([o["target"] for o in obj])),
        "weight": (("objective_name",), np.array([o["weight"] for o in obj])),
        "scale": (("objective_name",), np.array([o["scale"] for o in obj])),
        "units": (("objective_name",), np.array([o["units"] for o in obj])),
        "metric": (("objective_name",), np.array([f"{o['metric']} ({o['side']})" for o in obj]))}
    if cons:
        yc = hist["responses"][..., n_obj:]
        rnd = hist["round"]
        term = np.stack([problem.constraint_term(hist["responses"][i], hist["data"][rnd[i]])
                         for i in range(n_it)])
        data_vars["penalty"] = (("iteration", "start"), term, {
            "units": "1", "long_name": "constraint term of objective: sum_j weight_j [max(0, g_j + sigma_j)^2 "
                                       "- sigma_j^2], g_j = distance outside the bound / scale_j, "
                                       "sigma_j = multiplier / (2 weight_j) of the round"})
        data_vars["round"] = (("iteration",), rnd.astype(np.int64),
                              {"units": "1", "long_name": "augmented-Lagrangian round (multiplier update)"})
        for j, c in enumerate(cons):
            attrs = {"units": c["units"], "long_name": f"constraint {c['name']}: {c['metric']} ({c['side']}) "
                                                       f"{bounds_text(c)} {c['units']}",
                     "metric": c["metric"], "side": c["side"], "weight": c["weight"], "scale": c["scale"],
                     "tolerance": c["tolerance"]}
            attrs.update({k: c[k] for k in ("lower", "upper") if c[k] is not None})
            data_vars[f"constraint_{c['name']}"] = (("iteration", "start"), yc[..., j], attrs)
    ds = xr.Dataset(
        data_vars,
        coords={"iteration": np.arange(n_it), "start": np.arange(n_st),
                "parameter": np.array(problem.pset.names), "objective_name": np.array([o["name"] for o in obj])},
        attrs={"best_start": best, "optimizer": hist["optimizer"], "wall_s": float(hist["wall_s"]),
               "config": cfg_yaml, "model": problem.model.topology.name, **provenance()})
    return ds, best


def final_design(problem, ds, best, last_data=None):
    """The design dict of the best start; ``last_data``: the data of the last
    round (per start, :func:`sweep.tune.optimiser.optimise`'s ``data[-1]``),
    for the constraints' multipliers."""
    last = ds.isel(iteration=-1, start=best)
    design = {
        "objective": float(last.objective),
        "start": best,
        "iterations": int(ds.sizes["iteration"] - 1),
        "parameters": {p: float(v) for p, v in zip(problem.pset.names, last.parameter_value.values)},
        "objectives": {o["name"]: {"metric": o["metric"], "side": o["side"], "units": o["units"],
                                   "target": o["target"], "reached": float(last.response.values[i]),
                                   "initial": float(ds.response.values[0, best, i]), "weight": o["weight"]}
                       for i, o in enumerate(problem.objectives)},
    }
    if problem.constraints:
        design["penalty"] = float(last.penalty)
        design["rounds"] = int(ds["round"].values[-1]) + 1
        mult = problem.multipliers(tuple(a[best] for a in last_data)) if last_data is not None else {}
        design["constraints"] = {}
        for c, v, holds in problem.constraint_report([last[f"constraint_{c['name']}"].values
                                                       for c in problem.constraints]):
            design["constraints"][c["name"]] = {
                "metric": c["metric"], "side": c["side"], "units": c["units"],
                "lower": c["lower"], "upper": c["upper"], "tolerance": c["tolerance"],
                "reached": v, "initial": float(ds[f"constraint_{c['name']}"].values[0, best]),
                "violation": float(violation(c, v)), "holds": holds}
            if c["name"] in mult:
                design["constraints"][c["name"]]["multiplier"] = mult[c["name"]]
    return design


def design_path(path):
    return path.rstrip("/")[:-5] + "_design.yaml"


def log_constraints(problem, y_constraints, log, initial=None):
    """One line per constraint: value, bounds, holds or violated by how much."""
    for j, (c, v, holds) in enumerate(problem.constraint_report(y_constraints)):
        was = "" if initial is None else f"(initial {float(initial[j]):.6g}) "
        state = "holds" if holds else f"VIOLATED by {float(violation(c, v)):.3g}"
        if holds and violation(c, v) > 0:
            state += f" (outside by {float(violation(c, v)):.2g} <= tolerance {c['tolerance']:.2g})"
        log(f"  {c['name']:32s} {v:11.6g} {was}{c['units']}  {c['metric']} ({c['side']}) "
            f"{bounds_text(c)}: {state}")


def run(cfg, cfg_yaml=None, progress=True, log=print):
    """Validate, optimise, write history (zarr) and final design (yaml). Returns the design dict."""
    cfg_yaml = cfg_yaml or OmegaConf.to_yaml(cfg, resolve=True)
    path = str(cfg.output.path)
    if not path.rstrip("/").endswith(".zarr"):
        raise ConfigError(f"output.path = {path!r} must end in .zarr")
    if os.path.exists(path) and not cfg.output.get("overwrite", False):
        raise ConfigError(f"output.path = {path!r} exists; choose another output.path or set output.overwrite=true")
    problem = TuneProblem(cfg)
    oc = OmegaConf.to_container(cfg.optimizer, resolve=True)
    # every optimizer setting is checked before any compilation
    make_optimizer(oc)
    start_points(problem, oc, problem.pset.names)
    if int(oc.get("iterations", 100)) < 0:
        raise ConfigError(f"optimizer.iterations = {oc.get('iterations')} must be >= 0")
    if int(oc.get("constraint_rounds", 1)) < 1:
        raise ConfigError(f"optimizer.constraint_rounds = {oc.get('constraint_rounds')} must be >= 1")
    cons = problem.constraints
    log(f"tuning {len(problem.pset)} parameter(s) of {problem.model.topology.name} "
        f"({', '.join(problem.pset.names)}) for {len(problem.objectives)} objective(s)"
        + (f" and {len(cons)} constraint(s)" if cons else "") +
        f", {oc.get('n_starts', 1)} start(s), optimizer {oc.get('name', 'lbfgs')}")
    synthetic = cfg.get("targets_from")
    synthetic = OmegaConf.to_container(synthetic, resolve=True) if synthetic else {}
    if synthetic:
        targets_from(problem, oc, synthetic, log=log)
    gc = cfg.get("gradient_check")
    gc = OmegaConf.to_container(gc, resolve=True) if gc else {}
    checked = None
    if gc.get("enabled", False):
        h = float(gc.get("step", 1e-4))
        if not h > 0:
            raise ConfigError(f"gradient_check.step = {h} must be > 0")
        log(f"gradient check at start 0, central differences with step {h} in z:")
        checked = gradient_check(problem, oc, h, log=log)
    n_obj = len(problem.objectives)

    def constraints_at_start(y):
        if not cons:
            return
        log("constraints at start 0 (optimizer.start or nominal):")
        log_constraints(problem, y[0, n_obj:], log)
        if len(y) > 1:
            held = sum(all(h for _, _, h in problem.constraint_report(row[n_obj:])) for row in y)
            log(f"  all constraints hold at {held} of {len(y)} start(s)")
    hist = optimise(problem, oc, progress=progress, log=log, on_first=constraints_at_start)
    ds, best = history_dataset(problem, hist, cfg_yaml)
    if checked is not None:
        ds.attrs["gradient_check"] = yaml.safe_dump(checked)
    design = final_design(problem, ds, best, hist["data"][-1])
    ds.attrs["final_design"] = yaml.safe_dump(design, sort_keys=False)
    tmp = path.rstrip("/") + ".partial"
    shutil.rmtree(tmp, ignore_errors=True)
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    ds.to_zarr(tmp, mode="w", zarr_format=2, consolidated=True)
    if os.path.exists(path):
        shutil.rmtree(path)
    os.rename(tmp, path)
    with open(design_path(path), "w") as fh:
        yaml.safe_dump(design, fh, sort_keys=False)
    log(f"best start {best}: objective {design['objective']:.4e} after {design['iterations']} iterations "
        f"({hist['wall_s']:.1f} s)" + (f" in {design['rounds']} round(s), of which constraint term "
                                      f"{design['penalty']:.4e}" if cons else ""))
    for p, v in design["parameters"].items():
        log(f"  {p:32s} {v:.6g}")
    log(f"  {'objective':32s} {'target':>11s} {'reached':>11s} {'initial':>11s}  units")
    for name, o in design["objectives"].items():
        log(f"  {name:32s} {o['target']:11.4g} {o['reached']:11.4g} {o['initial']:11.4g}  {o['units']}")
    if cons:
        log(f"constraints at the end (best start {best}):")
        log_constraints(problem, [c["reached"] for c in design["constraints"].values()], log,
                        initial=[c["initial"] for c in design["constraints"].values()])
    log(f"history: {os.path.abspath(path)}\ndesign: {os.path.abspath(design_path(path))}")
    return design


def main(cfg: DictConfig, progress=True) -> int:
    """Run a tuning config; 0, or 2 after a one-line error (nothing built or written)."""
    from sweep.core.runtime import ensure_console_logging
    from sweep.core.config import ConfigError, check_tune_config
    ensure_console_logging()
    try:
        check_tune_config(cfg)
        run(cfg, progress=progress, log=logger.info)
    except (ConfigError, ModelError) as err:
        logger.error("error: " + " ".join(str(err).split()))
        return 2
    return 0
