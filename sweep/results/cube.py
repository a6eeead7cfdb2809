"""Result cubes: xarray datasets in zarr stores, with the project's public schema.

Schema (checked by :mod:`sweep.results.schema`, the same checks as
the published cube checker): coords variant, time [s],
side = [left, right], axis = [x, y, z], bushing (names), component =
[fx, fy, fz, mx, my, mz]; variables wheel_centre_displacement (variant, time,
side, axis) [m] relative to the static equilibrium, toe and camber (variant,
time, side) [rad, DIN 70000], bushing_force (variant, time, bushing,
component) [N (fx, fy, fz), N m (mx, my, mz): units "none", the unit of each
component in the coordinate component_units; :func:`split_loads` splits it
by unit] on the bushing's first body in the vehicle frame.
Attributes: Conventions (:data:`CF_CONVENTIONS`), n_bodies,
n_force_elements, n_dof, reference_bushing_left/right, config (resolved
YAML) and provenance.

CF and pint (every job kind): every coordinate has a long_name, every data
variable and every coordinate holding quantities a ``units`` attribute that
UDUNITS and pint parse ("1" dimensionless, "rad" / "deg" angles), ``status``
flag_values / flag_meanings instead; a variable whose components have
different units (bushing_force, wheel_load, compliance_matrix, a coefficient
swept over translational and rotational directions) has units "none"
(pint-xarray: not quantified) and says its units in ``comment``. So
``ds.pint.quantify()`` quantifies a whole opened cube, and
``split_loads(ds).pint.quantify()`` the loads too.

Stores are created and written by :mod:`sweep.results.store` and the job pipeline (:mod:`sweep.engine`);
this module holds the provenance attributes and the NMSE report.
"""
from __future__ import annotations

import importlib.metadata
import os
import subprocess
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    import xarray as xr

from kernels.names import AXES, COMPONENTS, SIDES  # noqa: F401  (re-exported)
# the CF version the cubes follow (global attribute ``Conventions``)
CF_CONVENTIONS = "CF-1.10"
# the ``comment`` of a load table over component = fx..mz (its units "none")
LOAD_UNITS_COMMENT = ("mixed units: N (fx, fy, fz), N m (mx, my, mz), per component in the coordinate "
                      "component_units; sweep.results.cube.split_loads(ds) splits it into one variable per unit")
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


def flexible_note(attrs):
    """`` (incl. N modal coordinates of flexible bodies)`` for a cube's model
    attributes with flexible bodies, else empty (the job summaries)."""
    n = int(attrs.get("n_modal_coordinates", 0))
    return f" (and {n} modal coordinates of flexible bodies)" if n else ""


def pooled_signals(ch, model, what, direction=0):
    """The signals of method.md section 3 from a channels dict (leading time axis),
    both sides pooled: ``wheel_displacement`` (longitudinal wheel-centre
    displacement [m]) or ``bushing_force`` (longitudinal force in the
    reference bushings [N]); ``direction`` 1 or 2: the lateral or vertical
    component instead (vehicle frame)."""
    if what == "wheel_displacement":
        return np.concatenate([np.asarray(ch["wheel_centre_displacement"])[:, s, direction] for s in (0, 1)])
    names = model.topology.bushing_names
    idx = [names.index(model.topology.tables["reference_bushings"][s]) for s in SIDES]
    return np.concatenate([np.asarray(ch["bushing_force"])[:, i, direction] for i in idx])


# the load tables split_loads splits: name -> (name of its torque part, what the load is)
SPLIT_LOADS = {"bushing_force": ("bushing_moment", "of the bushing on its first body, vehicle frame"),
               "wheel_load": ("wheel_moment", "applied at the wheel centre, vehicle frame")}


def split_loads(ds):
    """The cube with each load table over ``component`` (fx, fy, fz, mx,
    my, mz; units "none": mixed) split by unit, for unit-aware tools
    (``split_loads(ds).pint.quantify()`` then quantifies the loads too):
    ``bushing_force`` (..., force_component = fx, fy, fz) [N] and
    ``bushing_moment`` (..., moment_component = mx, my, mz) [N m] of a
    time-response cube, ``wheel_load`` [N] and ``wheel_moment`` [N m] of a
    K&C cube. Lazy views of the stored variables (the stored cube keeps one
    variable over ``component``, the public schema; the unit of each
    component is the coordinate ``component_units``). The ``component``
    dimension is dropped when nothing else uses it (a K&C cube's
    ``compliance_matrix`` does: its units are in its ``comment``)."""
    out = ds
    parts = {"force_component": (list(COMPONENTS[:3]), "N", "force"),
             "moment_component": (list(COMPONENTS[3:]), "N m", "torque")}
    for name, (moment, what) in SPLIT_LOADS.items():
        if name not in ds or "component" not in ds[name].dims:
            continue
        da = ds[name]
        attrs = {k: v for k, v in da.attrs.items() if k not in ("units", "long_name", "comment", "coordinates")}
        out = out.drop_vars(name)
        for new, dim in ((name, "force_component"), (moment, "moment_component")):
            comps, units, kind = parts[dim]
            p = da.sel(component=comps).rename(component=dim).drop_vars("component_units", errors="ignore")
            p.attrs = {**attrs, "units": units, "long_name": f"{kind} {what}"}
            out[new] = p
    for dim, (_, _, kind) in parts.items():
        if dim in out.coords:
            out[dim].attrs["long_name"] = f"{kind} component, vehicle frame"
    if not any("component" in out[v].dims for v in out.variables if v not in ("component", "component_units")):
        out = out.drop_vars(["component_units"], errors="ignore").drop_dims("component", errors="ignore")
    return out


def complex_of(ds, name):
    """The complex transfer function ``name`` of a frequency-response cube,
    joined from its stored ``<name>_real`` and ``<name>_imag`` parts (a lazy
    xarray DataArray; ``abs(...)`` its magnitude, ``numpy.angle`` its phase
    [rad]), with the parts' units and long name."""
    re, im = ds[f"{name}_real"], ds[f"{name}_imag"]
    out = re + 1j * im
    out.name = name
    out.attrs = {k: v for k, v in re.attrs.items() if k in ("units", "comment")}
    out.attrs["long_name"] = re.attrs.get("long_name", name).replace(", real part", "")
    return out


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
