"""The result cube's public schema, checked by the project itself.

The same checks as the published cube checker (the schema the cubes are
published with), so that every clone can check a cube itself: used by the tests, ``python -m sweep.verify`` and the app.

Time-response cubes (``python -m sweep``): coordinates ``side`` = [left,
right], ``axis`` = [x, y, z], ``component`` = [fx, fy, fz, mx, my, mz],
``variant``, ``time`` (strictly increasing), ``bushing``; variables
``wheel_centre_displacement`` (variant, time, side, axis), ``toe`` and
``camber`` (variant, time, side), ``bushing_force`` (variant, time, bushing,
component), each with a ``units`` attribute; attributes ``n_bodies``,
``n_force_elements``, ``n_dof`` (= 6 n_bodies + ``n_modal_coordinates``),
``reference_bushing_left`` / ``_right`` (bushings of the cube).

Every cube, of any kind (attribute ``cube_kind``; absent = time response):
the ``variant`` coordinate, a ``status`` (variant,) with the status table of
:mod:`sweep.results.status` in its attributes, the model attributes; and each
variable a kind declares (its :class:`~sweep.engine.layout.Channel` table,
``kinds`` = {name: channel table}) with its dims and units (a cube written
before the units became pint-parseable passes with its old spelling:
:data:`LEGACY_UNITS`).

:func:`cf_problems`: the stricter CF / pint conventions of the cubes written
now (global ``Conventions``, a ``long_name`` on every coordinate, ``units``
or ``flag_values`` on every data variable, every ``units`` parseable by pint
or "none" = mixed units, not quantified), used by the tests; not part of
the published checks, so older cubes still pass :func:`problems`.
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
# units of a channel as cubes spelled them before they became pint-parseable:
# new spelling -> the old ones (still accepted by problems())
LEGACY_UNITS = {
    "none": ("N (fx, fy, fz); N m (mx, my, mz): see component_units",
             "SI: m/N (x,y,z per fx,fy,fz), m/(N m) (x,y,z per mx,my,mz), rad/N (rx,ry,rz per "
             "fx,fy,fz), rad/(N m) (rx,ry,rz per mx,my,mz)"),
    "deg/(hN m)": ("deg/(100 N m)",),
}
# the units value of a variable whose components have different units
# (pint-xarray's mark for "do not quantify")
MIXED_UNITS = "none"


def problems(ds, channels=None):
    """Yield one line per deviation of an ``xarray.Dataset`` from the schema.

    ``channels``: the job kind's channel table (e.g. ``KIND.channels`` or
    the plan's), checked variable by variable (present, dims ending in the
    channel's own dims, units); None: the public time-response table only."""
    yield from _common(ds)
    if channels is not None:
        for ch in channels:
            if ch.name not in ds:
                yield f"missing variable {ch.name!r}"
            elif tuple(ds[ch.name].dims[len(ds[ch.name].dims) - len(ch.dims):]) != tuple(ch.dims) \
                    or ds[ch.name].dims[0] != "variant":
                yield f"variable {ch.name!r} has dims {ds[ch.name].dims}, expected (variant, ..., {ch.dims})"
            elif ds[ch.name].attrs.get("units") != ch.units \
                    and ds[ch.name].attrs.get("units") not in LEGACY_UNITS.get(ch.units, ()):
                yield f"variable {ch.name!r} has units {ds[ch.name].attrs.get('units')!r}, expected {ch.units!r}"
    if ds.attrs.get("cube_kind", "time_response") != "time_response":
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


def cf_problems(ds, quantify=True):
    """Yield one line per deviation of an ``xarray.Dataset`` from the CF /
    pint conventions of the cubes: the global ``Conventions`` (CF-...), a
    ``long_name`` on every coordinate, ``units`` or ``flag_values`` on every
    data variable, every ``units`` attribute parsed by pint's application
    registry (or :data:`MIXED_UNITS`), and, with ``quantify``,
    ``ds.pint.quantify()`` (pint-xarray) without an error."""
    import pint
    conv = str(ds.attrs.get("Conventions", ""))
    if not conv.startswith("CF-"):
        yield f"global attribute 'Conventions' is {ds.attrs.get('Conventions')!r}, expected 'CF-<version>'"
    for name in ds.coords:
        if not str(ds[name].attrs.get("long_name", "")).strip():
            yield f"coordinate {name!r} has no long_name"
    for name in ds.data_vars:
        a = ds[name].attrs
        if "units" not in a and "flag_values" not in a:
            yield f"variable {name!r} has neither units nor flag_values"
    registry = pint.get_application_registry()
    for name in ds.variables:
        units = ds[name].attrs.get("units")
        if units is None or units == MIXED_UNITS:
            continue
        try:
            registry.parse_units(units)
        except Exception as err:  # noqa: BLE001 - pint raises several kinds
            yield f"{name!r}: pint cannot parse units {units!r} ({type(err).__name__})"
    if quantify:
        import pint_xarray  # noqa: F401  (registers the .pint accessor)
        try:
            ds.pint.quantify()
        except Exception as err:  # noqa: BLE001
            yield f"ds.pint.quantify() fails: {str(err).splitlines()[0]}"


def _common(ds):
    """What every cube shares: ``variant``, ``status`` (variant,) and its table."""
    if "variant" not in ds.coords:
        yield "missing coordinate 'variant'"
    if "status" not in ds:
        yield "missing variable 'status'"
        return
    if ds["status"].dims != ("variant",):
        yield f"variable 'status' has dims {ds['status'].dims}, expected ('variant',)"
    meanings = str(ds["status"].attrs.get("flag_meanings", "")).split()
    values = [int(v) for v in np.atleast_1d(ds["status"].attrs.get("flag_values", []))]
    if not meanings or len(meanings) != len(values):
        yield "variable 'status' has no flag_values / flag_meanings table"
    present = set(int(v) for v in np.unique(np.asarray(ds["status"].values)))
    unknown = sorted(present - set(values)) if values else []
    if unknown:
        yield f"variable 'status' holds codes {unknown} that its flag_values do not list"


def _model_attrs(ds, names):
    for name in names:
        if name not in ds.attrs:
            yield f"missing attribute {name!r}"
    if "n_bodies" in ds.attrs and "n_dof" in ds.attrs:
        modal = int(ds.attrs.get("n_modal_coordinates", 0))
        if int(ds.attrs["n_dof"]) != 6 * int(ds.attrs["n_bodies"]) + modal:
            yield "n_dof is not 6 * n_bodies + n_modal_coordinates"


def check(path, channels=None):
    """Problems of the cube at ``path`` (opened with ``xarray.open_zarr``)."""
    import xarray as xr
    with xr.open_zarr(path) as ds:
        return list(problems(ds, channels))


def warn(ds, channels=None):
    """Log every problem of a finished cube as a warning (logger ``sweep``)."""
    import logging
    if not bool(np.all(ds.chunk_done.values)):
        return
    for problem in problems(ds, channels):
        logging.getLogger("sweep").warning(f"warning: cube schema: {problem}")
