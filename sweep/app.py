"""The main job behind ``python -m sweep``: run, write the cube, print a summary."""
from __future__ import annotations

import os
import sys

import xarray as xr
from omegaconf import DictConfig, OmegaConf

from kernels.model import ModelError
from sweep import cube
from sweep.job import JobError, run

PUBLISHED_NMSE = {  # method.md section 3, LSRT2 at h = 1 ms
    "double_wishbone": {"wheel_displacement": 0.00243, "bushing_force": 0.00751},
    "multilink": {"wheel_displacement": 0.01286, "bushing_force": 0.01545},
}


def _check_output(cfg, config_yaml):
    path = str(cfg.output.path)
    if not path.rstrip("/").endswith(".zarr"):
        raise ModelError(f"output.path = {path!r} must end in .zarr")
    if os.path.exists(path):
        old = cube.stored_config(path)
        if old == config_yaml:
            return "complete"
        if not cfg.output.get("overwrite", False):
            raise ModelError(f"output.path = {path!r} exists and holds a cube of another config; "
                             "choose another output.path or set output.overwrite=true")
    return "new"


def main(cfg: DictConfig) -> int:
    config_yaml = OmegaConf.to_yaml(cfg, resolve=True)
    try:
        state = _check_output(cfg, config_yaml)
        path = str(cfg.output.path)
        if state == "complete":
            print(f"{path}: already complete for this config, nothing to run")
            ds = xr.open_zarr(path)
        else:
            result = run(cfg)
            ds = cube.make_dataset(result, config_yaml)
            cube.write_atomic(ds, path)
    except (ModelError, JobError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    summary(ds, cfg, path)
    return 0


def summary(ds, cfg, path):
    a = ds.attrs
    print(f"model {a['model']}: {a['n_bodies']} bodies, {a['n_force_elements']} force elements, "
          f"{a['n_dof']} DOF; load case {cfg.loadcase.name}; integrator {cfg.integrator.name} "
          f"(dt = {cfg.integrator.dt} s)")
    print(f"wall time: equilibrium {a.get('equilibrium_s', 0):.2f} s, compile "
          f"{a.get('compile_s', 0):.2f} s, integration {a.get('run_s', 0):.2f} s for "
          f"{a.get('simulated_s', 0):.3g} s simulated -> real-time factor "
          f"{a.get('real_time_factor', float('nan')):.3f}")
    status = int(ds.status.values[0])
    print("status: ok" if status == 0 else "status: NON-FINITE STATE (diverged)")
    wcd = ds.wheel_centre_displacement.isel(variant=0, time=-1).sel(axis="x").values * 1000
    print(f"final longitudinal wheel-centre displacement: left {wcd[0]:.3f} mm, right {wcd[1]:.3f} mm")
    print(f"result cube: {os.path.abspath(path)}")
    other = "radau" if cfg.integrator.name != "radau" else "lsrt2"
    beside = os.path.join(os.path.dirname(path), f"{other}.zarr")
    if os.path.exists(beside):
        ref, test = (xr.open_zarr(beside), ds) if other == "radau" else (ds, xr.open_zarr(beside))
        window = tuple(cfg.loadcase.get("nmse_window", (4.9, 6.0)))
        rep = cube.nmse_report(test, ref, window)
        pub = PUBLISHED_NMSE.get(a["model"], {})
        print(f"NMSE of lsrt2 against radau ({beside if other == 'radau' else path}), "
              f"mean((y - y_ref)^2) / mean(y_ref)^2 over {window[0]}-{window[1]} s, sides pooled:")
        for k, v in rep.items():
            p = f" (published: {pub[k]})" if k in pub else ""
            print(f"  {k}: {v:.3e}{p}")
