"""The main job behind ``python -m sweep``: run the design into its cube, summarise, plot."""
from __future__ import annotations

import copy
import logging
import os

import numpy as np
import xarray as xr
from omegaconf import DictConfig, OmegaConf, open_dict

from kernels.model import ModelError
from sweep import cube
from sweep.engine import run_job
from sweep.entry import ensure_console_logging
from sweep.job import JobError
from sweep.schema import ConfigError, check_config
from sweep.store import STATUS_MEANINGS

log = logging.getLogger(__name__)

PUBLISHED_NMSE = {  # method.md section 3, LSRT2 at h = 1 ms
    "double_wishbone": {"wheel_displacement": 0.00243, "bushing_force": 0.00751},
    "multilink": {"wheel_displacement": 0.01286, "bushing_force": 0.01545},
}


def job_config(cfg: DictConfig) -> DictConfig:
    """The config a job runs and records: ``output.path`` resolved and
    normalised (the default path holds the override dirname, empty in a plain
    run), the entry-point settings (``cache``) left out."""
    cfg = copy.deepcopy(cfg)
    with open_dict(cfg):
        cfg.output.path = os.path.normpath(str(cfg.output.path))
        cfg.pop("cache", None)
    return cfg


def main(cfg: DictConfig, progress=None) -> int:
    """Run the job of ``cfg``; 0, or 2 after a one-line error (bad config or
    model: nothing is built, compiled or written)."""
    ensure_console_logging()
    try:
        check_config(cfg)
        cfg = job_config(cfg)
        config_yaml = OmegaConf.to_yaml(cfg, resolve=True)
        summary = run_job(cfg, config_yaml, progress=progress if progress is not None
                          else bool(cfg.sweep.get("progress", True)))
    except (ConfigError, ModelError, JobError) as err:
        log.error("error: " + " ".join(str(err).split()))
        return 2
    path = summary["path"]
    ds = xr.open_zarr(path)
    if summary.get("kind") == "kc":              # quasi-static K&C cube (sweep/kc.py)
        from sweep import kc as kc_jobs
        kc_jobs.report(ds, cfg, summary)
        return 0
    report(ds, cfg, summary)
    if bool(np.all(ds.chunk_done.values)):
        from sweep import cube_schema
        for problem in cube_schema.problems(ds):
            log.warning(f"warning: cube schema: {problem}")
    if summary["variants_run"] and bool(np.all(ds.chunk_done.values)):
        try:
            from sweep.plots import overview
            png = overview(ds, path.rstrip("/")[:-5] + ".png")
            log.info(f"overview plot: {os.path.abspath(png)}")
        except Exception as err:  # noqa: BLE001 - a plot must never lose a finished cube
            log.warning(f"warning: overview plot failed: {err}")
    return 0


def report(ds, cfg, s):
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
    counts = {STATUS_MEANINGS[k]: int(np.sum(status == k)) for k in STATUS_MEANINGS}
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
