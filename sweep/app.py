"""The main job behind ``python -m sweep``: run the design into its cube, summarise, plot."""
from __future__ import annotations

import os
import sys

import numpy as np
import xarray as xr
from omegaconf import DictConfig, OmegaConf

from kernels.model import ModelError
from sweep import cube
from sweep.engine import run_job
from sweep.job import JobError
from sweep.store import STATUS_MEANINGS

PUBLISHED_NMSE = {  # method.md section 3, LSRT2 at h = 1 ms
    "double_wishbone": {"wheel_displacement": 0.00243, "bushing_force": 0.00751},
    "multilink": {"wheel_displacement": 0.01286, "bushing_force": 0.01545},
}


def main(cfg: DictConfig, progress=None) -> int:
    config_yaml = OmegaConf.to_yaml(cfg, resolve=True)
    try:
        summary = run_job(cfg, config_yaml, progress=progress if progress is not None
                          else bool(cfg.sweep.get("progress", True)))
    except (ModelError, JobError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    path = summary["path"]
    ds = xr.open_zarr(path)
    if summary.get("kind") == "kc":              # quasi-static K&C cube (sweep/kc.py)
        from sweep import kc as kc_jobs
        kc_jobs.report(ds, cfg, summary)
        return 0
    report(ds, cfg, summary)
    if summary["variants_run"] and bool(np.all(ds.chunk_done.values)):
        try:
            from sweep.plots import overview
            png = overview(ds, path.rstrip("/")[:-5] + ".png")
            print(f"overview plot: {os.path.abspath(png)}")
        except Exception as err:  # noqa: BLE001 - a plot must never lose a finished cube
            print(f"warning: overview plot failed: {err}", file=sys.stderr)
    return 0


def report(ds, cfg, s):
    a = ds.attrs
    print(f"model {a['model']}: {a['n_bodies']} bodies, {a['n_force_elements']} force elements, "
          f"{a['n_dof']} DOF; load case {cfg.loadcase.name}; integrator {cfg.integrator.name} "
          f"(dt = {cfg.integrator.dt} s); design {cfg.sweep.design}, {s['n_variants']} variant(s)")
    if not s["variants_run"]:
        print(f"{s['path']}: nothing to run for this shard, every chunk is complete")
    else:
        rate = s["variants_run"] / s["run_s"] if s["run_s"] else float("nan")
        steps = (s["n_samples"] - 1) * float(cfg.sweep.every or cfg.output.every)
        rtf = s["run_s"] / (s["simulated_s"] * s["variants_run"])
        print(f"wall time: compile {s['compile_s']:.2f} s, run {s['run_s']:.2f} s for "
              f"{s['variants_run']} variant(s) x {s['simulated_s']:.3g} s simulated "
              f"({rate:.2f} variants/s, {rate * steps:.0f} variant-steps/s) -> real-time factor "
              f"{rtf:.3f} per variant; chunks of {s['chunk']} on {s['devices']} device(s)")
    status = ds.status.values
    counts = {STATUS_MEANINGS[k]: int(np.sum(status == k)) for k in STATUS_MEANINGS}
    print("status: " + ", ".join(f"{k} {v}" for k, v in counts.items() if v or k == "ok"))
    ok = status == 0
    if ok.any():
        wcd = ds.wheel_centre_displacement.isel(time=-1).sel(axis="x").values[ok] * 1000
        label = "final" if len(status) == 1 else "final (min / median / max over ok variants)"
        print(f"longitudinal wheel-centre displacement, {label}: " +
              " / ".join(f"{v:.3f}" for v in ([wcd[0, 0]] if len(status) == 1 else
                                              np.percentile(wcd[:, 0], [0, 50, 100]))) + " mm (left)")
    print(f"result cube: {os.path.abspath(s['path'])}")
    _nmse_beside(ds, cfg, s["path"])


def _nmse_beside(ds, cfg, path):
    other = "radau" if cfg.integrator.name != "radau" else "lsrt2"
    beside = os.path.join(os.path.dirname(path), f"{other}.zarr")
    if not os.path.exists(beside):
        return
    ref, test = (xr.open_zarr(beside), ds) if other == "radau" else (ds, xr.open_zarr(beside))
    if int(ref.status.values[0]) != 0 or int(test.status.values[0]) != 0:
        return
    window = tuple(cfg.loadcase.get("nmse_window", (4.9, 6.0)))
    rep = cube.nmse_report(test, ref, window)
    pub = PUBLISHED_NMSE.get(ds.attrs["model"], {})
    print(f"NMSE of lsrt2 against radau (variant 0, {beside}), "
          f"mean((y - y_ref)^2) / mean(y_ref)^2 over {window[0]}-{window[1]} s, sides pooled:")
    for k, v in rep.items():
        p = f" (published: {pub[k]})" if k in pub else ""
        print(f"  {k}: {v:.3e}{p}")
