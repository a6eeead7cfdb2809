"""The result cube's public schema, checked by the project itself.

The same checks as ``../shared/tools/check_cube.py`` (the schema the cubes
are published with), so that a user's clone without ``../shared`` can check
a cube: used by the tests, ``python -m sweep.verify`` and the app.

Time-response cubes (``python -m sweep``): coordinates ``side`` = [left,
right], ``axis`` = [x, y, z], ``component`` = [fx, fy, fz, mx, my, mz],
``variant``, ``time`` (strictly increasing), ``bushing``; variables
``wheel_centre_displacement`` (variant, time, side, axis), ``toe`` and
``camber`` (variant, time, side), ``bushing_force`` (variant, time, bushing,
component), each with a ``units`` attribute; attributes ``n_bodies``,
``n_force_elements``, ``n_dof`` (= 6 n_bodies), ``reference_bushing_left`` /
``_right`` (bushings of the cube). K&C cubes (``cube_kind = kc``) have their
own layout (:mod:`sweep.kc`); for them only the model attributes are checked.
"""
from __future__ import annotations

import numpy as np

# the public schema, written out on purpose (not kernels.names): this module
# is the independent check of what the engine writes
COORDS = {
    "side": ["left", "right"],
    "axis": ["x", "y", "z"],
    "component": ["fx", "fy", "fz", "mx", "my", "mz"],
}
VARIABLES = {
    "wheel_centre_displacement": ("variant", "time", "side", "axis"),
    "toe": ("variant", "time", "side"),
    "camber": ("variant", "time", "side"),
    "bushing_force": ("variant", "time", "bushing", "component"),
}
ATTRS = ("n_bodies", "n_force_elements", "n_dof",
         "reference_bushing_left", "reference_bushing_right")
KC_ATTRS = ("n_bodies", "n_force_elements", "n_dof")


def problems(ds):
    """Yield one line per deviation of an ``xarray.Dataset`` from the schema."""
    if ds.attrs.get("cube_kind") == "kc":
        yield from _model_attrs(ds, KC_ATTRS)
        return
    for name, values in COORDS.items():
        if name not in ds.coords:
            yield f"missing coordinate {name!r}"
        elif list(ds[name].values.astype(str)) != values:
            yield f"coordinate {name!r} is {list(ds[name].values)}, expected {values}"
    for name in ("variant", "time", "bushing"):
        if name not in ds.coords:
            yield f"missing coordinate {name!r}"
    if "time" in ds.coords and not np.all(np.diff(ds.time.values) > 0):
        yield "time is not strictly increasing"
    for name, dims in VARIABLES.items():
        if name not in ds:
            yield f"missing variable {name!r}"
        elif ds[name].dims != dims:
            yield f"variable {name!r} has dims {ds[name].dims}, expected {dims}"
        elif "units" not in ds[name].attrs:
            yield f"variable {name!r} has no 'units' attribute"
    yield from _model_attrs(ds, ATTRS)
    if "bushing" in ds.coords:
        for side in ("left", "right"):
            ref = ds.attrs.get(f"reference_bushing_{side}")
            if ref is not None and ref not in list(ds.bushing.values.astype(str)):
                yield f"reference_bushing_{side} {ref!r} is not a bushing of the cube"


def _model_attrs(ds, names):
    for name in names:
        if name not in ds.attrs:
            yield f"missing attribute {name!r}"
    if "n_bodies" in ds.attrs and "n_dof" in ds.attrs:
        if int(ds.attrs["n_dof"]) != 6 * int(ds.attrs["n_bodies"]):
            yield "n_dof is not 6 * n_bodies"


def check(path):
    """Problems of the cube at ``path`` (opened with ``xarray.open_zarr``)."""
    import xarray as xr
    with xr.open_zarr(path) as ds:
        return list(problems(ds))
