"""Result cubes: xarray datasets in zarr stores, with the project's public schema.

Schema (checked by shared/tools/check_cube.py): coords variant, time [s],
side = [left, right], axis = [x, y, z], bushing (names), component =
[fx, fy, fz, mx, my, mz]; variables wheel_centre_displacement (variant, time,
side, axis) [m] relative to the static equilibrium, toe and camber (variant,
time, side) [rad, DIN 70000], bushing_force (variant, time, bushing,
component) [N, N m] on the bushing's first body in the vehicle frame.
Attributes: n_bodies, n_force_elements, n_dof, reference_bushing_left/right,
config (resolved YAML) and provenance.

Writes are atomic: a cube is written to ``<path>.partial`` and renamed into
place, so a crash never leaves a half-written cube under the final name and
an existing cube is never touched unless the user asks to overwrite it.
"""
from __future__ import annotations

import importlib.metadata
import os
import shutil
import subprocess

import numpy as np
import xarray as xr

SIDES = ["left", "right"]
AXES = ["x", "y", "z"]
COMPONENTS = ["fx", "fy", "fz", "mx", "my", "mz"]
NMSE_DEFINITION = ("NMSE = mean((y - y_ref)^2) / mean(y_ref)^2 over 4.9 s <= t <= 6.0 s, "
                   "both sides pooled (method.md section 3)")


def provenance():
    """Package versions and the project's git revision."""
    info = {}
    for pkg in ("jax", "jaxlib", "numpy", "scipy", "xarray", "zarr", "hydra-core"):
        try:
            info[f"version_{pkg}"] = importlib.metadata.version(pkg)
        except importlib.metadata.PackageNotFoundError:  # pragma: no cover
            pass
    try:
        here = os.path.dirname(os.path.abspath(__file__))
        info["git_revision"] = subprocess.run(
            ["git", "rev-parse", "HEAD"], cwd=here, capture_output=True, text=True,
            timeout=10).stdout.strip() or "unknown"
    except (OSError, subprocess.SubprocessError):  # pragma: no cover
        info["git_revision"] = "unknown"
    return info


def make_dataset(result, config_yaml: str, extra_attrs=None) -> xr.Dataset:
    """Build the cube of a single-variant run (variant = [0])."""
    model = result.model
    topo = model.topology
    ch = result.channels
    ref = topo.tables.get("reference_bushings") or {}
    ds = xr.Dataset(
        {
            "wheel_centre_displacement": (
                ("variant", "time", "side", "axis"), ch["wheel_centre_displacement"][None],
                {"units": "m", "long_name": "wheel-centre displacement from static equilibrium"}),
            "toe": (("variant", "time", "side"), ch["toe"][None],
                    {"units": "rad", "long_name": "toe angle (DIN 70000, + = toe-in)"}),
            "camber": (("variant", "time", "side"), ch["camber"][None],
                       {"units": "rad", "long_name": "camber angle (DIN 70000, + = top out)"}),
            "bushing_force": (
                ("variant", "time", "bushing", "component"), ch["bushing_force"][None],
                {"units": "N (fx, fy, fz), N m (mx, my, mz)",
                 "long_name": "force and torque of the bushing on its first body, vehicle frame"}),
            "status": (("variant",), np.array([0 if np.all(ch["finite"]) else 1], np.int8),
                       {"long_name": "0 = ok, 1 = non-finite state",
                        "flag_values": [0, 1], "flag_meanings": "ok non_finite"}),
        },
        coords={
            "variant": ("variant", np.array([0], np.int64)),
            "time": ("time", np.asarray(result.time, float), {"units": "s"}),
            "side": ("side", SIDES),
            "axis": ("axis", AXES),
            "bushing": ("bushing", list(topo.bushing_names)),
            "component": ("component", COMPONENTS),
        },
        attrs={
            "n_bodies": int(topo.n_bodies),
            "n_force_elements": int(topo.n_force_elements),
            "n_dof": int(topo.n_dof),
            "reference_bushing_left": ref.get("left", ""),
            "reference_bushing_right": ref.get("right", ""),
            "model": topo.name,
            "config": config_yaml,
            "nmse_definition": NMSE_DEFINITION,
            **{k: float(v) for k, v in result.timings.items()},
            "equilibrium_iterations": result.equilibrium.get("iterations", -1),
            "equilibrium_residual_N": result.equilibrium.get("residual_N", float("nan")),
            **provenance(),
            **(extra_attrs or {}),
        },
    )
    return ds


def stored_config(path):
    """The resolved config YAML stored in an existing cube, or None."""
    try:
        return xr.open_zarr(path).attrs.get("config")
    except Exception:  # noqa: BLE001 - an unreadable store has no usable config
        return None


def write_atomic(ds: xr.Dataset, path: str):
    """Write to ``path + '.partial'`` then rename over ``path``."""
    tmp = path.rstrip("/") + ".partial"
    if os.path.exists(tmp):
        shutil.rmtree(tmp)
    parent = os.path.dirname(os.path.abspath(path))
    os.makedirs(parent, exist_ok=True)
    encoding = {v: {"chunks": ds[v].shape} for v in ds.data_vars}
    ds.to_zarr(tmp, mode="w", encoding=encoding, consolidated=True, zarr_format=2)
    if os.path.exists(path):
        old = path.rstrip("/") + ".old"
        if os.path.exists(old):
            shutil.rmtree(old)
        os.rename(path, old)
        os.rename(tmp, path)
        shutil.rmtree(old)
    else:
        os.rename(tmp, path)


def nmse_report(ds: xr.Dataset, ref: xr.Dataset, window=(4.9, 6.0)):
    """NMSE (method.md section 3) of the longitudinal wheel-centre displacement
    and of the longitudinal force in the reference bushings, both sides pooled,
    over the window. The reference is interpolated onto the cube's times."""
    t = ds.time.values
    sel = (t >= window[0] - 1e-9) & (t <= window[1] + 1e-9)
    ts = t[sel]

    def pooled(d, var):
        if var == "disp":
            y = d.wheel_centre_displacement.isel(variant=0).sel(axis="x")
            cols = [y.sel(side=s).values for s in SIDES]
        else:
            bf = d.bushing_force.isel(variant=0).sel(component="fx")
            cols = [bf.sel(bushing=d.attrs[f"reference_bushing_{s}"]).values for s in SIDES]
        tt = d.time.values
        return np.concatenate([np.interp(ts, tt, c) for c in cols])

    out = {}
    for key, var in (("wheel_displacement", "disp"), ("bushing_force", "force")):
        y, y_ref = pooled(ds, var), pooled(ref, var)
        out[key] = float(np.mean((y - y_ref) ** 2) / np.mean(y_ref) ** 2)
    return out
