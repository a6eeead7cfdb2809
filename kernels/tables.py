"""The checks and curve tables every element group's model table shares.

Host-side numpy, run once when a model is built (:func:`kernels.model.build_model`):
:class:`ModelError` names the offending field and value; the checks read
plain table rows (dicts, e.g. from YAML).
"""
from __future__ import annotations

import numpy as np

from kernels import curves
from kernels.names import DIRECTIONS

STOP_LAWS = ("smooth", "switching")


class ModelError(ValueError):
    """A model table is invalid; the message names the offending field and value."""


def where(table, i, row):
    """``table[i] 'name'``: where an error is, for its message."""
    return f"{table}[{i}] {row.get('name', '?')!r}"


def finite(value, what):
    """The value as a float array; an error naming ``what`` if it is not finite numbers."""
    try:
        arr = np.asarray(value, dtype=float)
    except (TypeError, ValueError):
        raise ModelError(f"{what} = {value!r} is not a number (or a list of numbers)") from None
    if not np.all(np.isfinite(arr)):
        raise ModelError(f"{what} = {value!r} is not finite (NaN or inf)")
    return arr


def vector(row, key, n, what, default=None):
    """``row[key]`` as n finite numbers (``default`` where the key is absent, else an error)."""
    if key not in row or row[key] is None:
        if default is None:
            raise ModelError(f"{what}: missing field {key!r}")
        return np.array(default, float)
    arr = finite(row[key], f"{what}.{key}")
    if arr.shape != (n,):
        raise ModelError(f"{what}.{key} = {row[key]!r} must have {n} values")
    return arr


def rows(tables, key):
    """The section's rows and {index: row number}: unique integer indices and names."""
    rows = tables.get(key, [])
    seen = {}
    for i, row in enumerate(rows):
        if "index" not in row:
            raise ModelError(f"{where(key, i, row)}: missing field 'index'")
        idx = row["index"]
        if not isinstance(idx, (int, np.integer)) or isinstance(idx, bool):
            raise ModelError(f"{where(key, i, row)}.index = {idx!r} is not an integer")
        if idx in seen:
            raise ModelError(f"{where(key, i, row)}.index = {idx} duplicates "
                             f"{key}[{seen[idx]}]")
        seen[idx] = i
        if not row.get("name"):
            raise ModelError(f"{key}[{i}] (index {idx}): missing field 'name'")
    names = [r["name"] for r in rows]
    dup = {n for n in names if names.count(n) > 1}
    if dup:
        raise ModelError(f"{key}: duplicate name {sorted(dup)[0]!r}")
    return rows, seen


def check_curve(curve, what):
    """A characteristic {x, y, interpolation}: finite, strictly increasing x, a known interpolation."""
    if not isinstance(curve, dict) or "x" not in curve or "y" not in curve:
        raise ModelError(f"{what} must be a mapping with 'x' and 'y' lists")
    x = finite(curve["x"], f"{what}.x")
    y = finite(curve["y"], f"{what}.y")
    if x.ndim != 1 or x.shape != y.shape or len(x) < 2:
        raise ModelError(f"{what}: 'x' and 'y' must be lists of equal length >= 2 "
                         f"(got {len(np.atleast_1d(x))} and {len(np.atleast_1d(y))})")
    bad = np.nonzero(np.diff(x) <= 0)[0]
    if len(bad):
        i = int(bad[0])
        raise ModelError(f"{what}.x is not strictly increasing: x[{i}] = {x[i]} >= "
                         f"x[{i + 1}] = {x[i + 1]}")
    interp = curve.get("interpolation", "pchip")
    if interp not in curves.INTERPOLATIONS:
        raise ModelError(f"{what}.interpolation = {interp!r} is not one of "
                         f"{', '.join(curves.INTERPOLATIONS)}")
    return x, y


def non_negative(arr, what):
    """Stiffness and damping of a bushing: a negative value feeds energy into the
    axle (a negative linear coefficient; curves carry their own sign)."""
    bad = np.nonzero(arr < 0)[0]
    if len(bad):
        i = int(bad[0])
        raise ModelError(f"{what} = {arr.tolist()}: {DIRECTIONS[i]} = {arr[i]} must be >= 0 "
                         "(a negative stiffness or damping feeds energy into the axle)")
    return arr


def curve_tables(specs, n_knots):
    """Stacked padded tables (:func:`kernels.curves.hermite_table`) of the specs
    (x, y, extrapolation, interpolation), a zero characteristic where a spec is None."""
    zero = (np.array([0.0, 1.0]), np.array([0.0, 0.0]), ("linear", "linear"), "linear")
    tabs = [curves.hermite_table(*(s or zero)[:2], n_knots=n_knots, extrapolate=(s or zero)[2],
                                 interpolation=(s or zero)[3])
            for s in specs]
    return curves.stack_tables(tabs)


