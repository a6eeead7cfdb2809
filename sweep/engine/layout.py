"""Channel tables and the store layout of a job: what a cube holds and how it is chunked.

A job kind declares its outputs as a table of :class:`Channel` entries; this
module turns a plan (:class:`sweep.kinds.Plan`) and that table into the
store specification :func:`sweep.results.store.create_store` builds: coordinates,
one variable per channel, one per swept parameter, ``status`` (the whole
table of :mod:`sweep.results.status`) and the Newton iterations. It also defines
what of a config is a job's identity (:func:`job_identity`): the resolved
config without the keys that do not change results.
"""
from __future__ import annotations

import dataclasses
from typing import Callable, Optional

import jax
import numpy as np
from omegaconf import OmegaConf

from sweep.results import status as status_table

# sweep keys that never change a job's results: shards and bookkeeping
VOLATILE = ("shard", "num_shards", "progress", "verify")
# bytes of one zarr chunk (uncompressed) that the time chunking aims at
ZARR_CHUNK_BYTES = 2 ** 22


@dataclasses.dataclass(frozen=True)
class Channel:
    """One output channel of a job kind: a variable of its cube.

    ``dims``: the channel's own dimensions (after the job's leading
    dimensions ``variant`` and, e.g., ``time``), each a coordinate of the
    cube; ``units`` (a UDUNITS / pint spelling that pint parses, "1" for a
    dimensionless value; :data:`MIXED_UNITS` for a table of components in
    different units, whose units ``comment`` spells out) and ``long_name``
    become the variable's attributes (with ``comment``, when given); ``fn``
    (optional) computes the channel's value from the job kind's per-sample
    context. The stored shape is never
    written down: it comes from :func:`jax.eval_shape` of the channel
    functions (:func:`channel_shapes`) or from the coordinate sizes of
    ``dims``. ``per_step`` False: one value per variant (a design-position
    metric), no leading dimensions."""
    name: str
    dims: tuple
    units: str
    long_name: str
    fn: Optional[Callable] = None
    dtype: str = "f8"
    per_step: bool = True
    comment: str = ""

    def attrs(self):
        """The variable's attributes: units, long_name (and comment)."""
        a = {"units": self.units, "long_name": self.long_name}
        if self.comment:
            a["comment"] = self.comment
        return a


# The units attribute of a variable whose components have different units
# (bushing_force, wheel_load: N and N m; the compliance matrix; a swept
# coefficient over translational and rotational directions). No single unit
# is honest there; "none" is pint-xarray's mark for "do not quantify" (its
# ``no_unit_values``), so ``ds.pint.quantify()`` leaves the variable a plain
# array and quantifies the rest. The unit of each component is in the
# variable's ``comment`` and, per component, in the coordinate
# ``component_units``; ``sweep.results.cube.split_loads`` splits the loads by unit.
MIXED_UNITS = "none"

# Attributes of the coordinates the job kinds share (CF: every coordinate a
# long_name; units where the values are quantities; string labels none). A
# kind's own attributes of a coordinate (sweep.kinds.*: plan coords) win.
COORD_ATTRS = {
    "variant": {"long_name": "variant number (row of the design)", "units": "1"},
    "time": {"long_name": "load-case time", "standard_name": "time", "axis": "T"},
    "side": {"long_name": "side of the axle"},
    "axis": {"long_name": "vehicle-frame axis (x forward, y left, z up)"},
    "bushing": {"long_name": "bushing name"},
    "body": {"long_name": "body name"},
    "component": {"long_name": "load component: force fx, fy, fz and torque mx, my, mz, vehicle frame"},
    "component_units": {"long_name": "unit of each load component"},
    "mode": {"long_name": "mode number, by increasing frequency", "units": "1"},
}


def channel_shapes(channels, fn, *example):
    """{name: shape} of the channel values that ``fn(*example)`` returns
    (a dict keyed by channel name), by :func:`jax.eval_shape` (traced, not
    run); every channel of the table must be there with one axis per dim."""
    out = jax.eval_shape(fn, *example)
    shapes = {}
    for ch in channels:
        if ch.name not in out:
            raise KeyError(f"channel {ch.name!r} is declared but not computed")
        shape = tuple(out[ch.name].shape)
        if len(shape) != len(ch.dims):
            raise ValueError(f"channel {ch.name!r}: value shape {shape} does not match dims {ch.dims}")
        shapes[ch.name] = shape
    return shapes


def parameter_units(p):
    """Units of a swept parameter's values: "1" for scale factors; in value
    mode the unit its target declares (``kernels.forces.Target.value_units``;
    per direction: translational / rotational)."""
    if p.mode == "scale":
        return "1"
    if p.target == "hardpoint":             # an offset of hardpoints along one axis
        return "m"
    if isinstance(p.units, str):            # the target's unit (kernels.forces.Target.value_units)
        return p.units
    cols = set(int(c) for c in np.asarray(p.index[1]).ravel())
    trans, rot = p.units                    # per direction: translational, rotational
    if cols <= {0, 1, 2}:
        return trans
    if cols <= {3, 4, 5}:
        return rot
    return MIXED_UNITS


def parameter_attrs(p):
    """A swept parameter's attributes. Its design range is CF's
    ``valid_range`` (CF reserves ``bounds`` for the name of a cell-boundary
    variable); a coefficient over translational and rotational directions
    has :data:`MIXED_UNITS` and says its units in ``comment``."""
    a = {"long_name": f"{p.target} ({p.mode}) of {p.name}", "units": parameter_units(p),
         "valid_range": [p.lower, p.upper], "nominal": p.nominal, "scale": p.scale}
    if a["units"] == MIXED_UNITS:
        k = p.target == "bushing.stiffness"
        trans, rot = ("N/m", "N m/rad") if k else ("N s/m", "N m s/rad")
        a["comment"] = f"mixed units: {trans} (x, y, z), {rot} (rx, ry, rz)"
    return a


def coord_attrs(name, attrs):
    """A coordinate's attributes: :data:`COORD_ATTRS` of its name under the
    kind's own."""
    return {**COORD_ATTRS.get(name, {}), **dict(attrs)}


def store_spec(plan):
    """The store layout of a plan (:func:`sweep.results.store.create_store`).

    From the plan: ``coords`` {name: (values, attrs[, dims])}, the
    :class:`Channel` table ``channels`` with ``shapes`` {name: trailing
    shape}, the leading dimensions ``lead`` after ``variant`` as ((name,
    length, zarr chunk length), ...), e.g. (("time", T, tc),). Adds one
    variable per swept parameter, ``status`` (:mod:`sweep.results.status`) and
    ``equilibrium_iterations``; the swept parameters are CF ``coordinates``
    of every result variable. zarr chunks: the compute chunk along
    ``variant`` (a chunk is written whole, shards never share a file); a
    channel's first own dimension that is ``bushing`` is chunked one bushing
    per zarr chunk (one bushing across all variants reads only its bytes)."""
    pset, n, C = plan.pset, len(plan.X), plan.chunk
    ldims = tuple(d for d, _, _ in plan.lead)
    lshape = tuple(s for _, s, _ in plan.lead)
    lchunk = tuple(c for _, _, c in plan.lead)
    spec = {"__coords__": {name: (values, coord_attrs(name, a), *dims)
                           for name, (values, a, *dims) in plan.coords.items()}}
    for p in pset.params:
        spec[p.name] = (("variant",), (n,), "f8", (C,), np.nan, parameter_attrs(p))
    for ch in plan.channels:
        shape = tuple(plan.shapes[ch.name])
        chunks = tuple(1 if d == "bushing" else s for d, s in zip(ch.dims, shape))
        fill = np.nan if ch.dtype.startswith("f") else -1
        ld, ls, lc = (ldims, lshape, lchunk) if ch.per_step else ((), (), ())
        spec[ch.name] = (("variant",) + ld + tuple(ch.dims), (n,) + ls + shape, ch.dtype,
                         (C,) + lc + chunks, fill, ch.attrs())
    spec["status"] = (("variant",), (n,), "i1", (C,), -1, status_table.attrs())
    spec["equilibrium_iterations"] = (("variant",), (n,), "i4", (C,), -1,
                                      {"long_name": plan.iterations_long_name, "units": "1"})
    # chunk_done (dim chunk, a coordinate) and the chunk checksums are added by sweep.results.store
    if pset.params:  # the varied parameters are coordinates along variant (CF attribute)
        for ch in plan.channels:
            spec[ch.name][5]["coordinates"] = " ".join(pset.names)
        for name in ("status", "equilibrium_iterations"):
            spec[name][5]["coordinates"] = " ".join(pset.names)
    return spec


def output_bytes(channels, shapes, n_lead=1, itemsize=8):
    """Bytes of one variant's outputs: channel shapes, times the leading
    length (time samples or load steps) for per-step channels."""
    return itemsize * sum(int(np.prod(shapes[c.name])) * (n_lead if c.per_step else 1) for c in channels)


def job_identity(cfg, drop=(), unused=()):
    """The resolved config text that defines a job's results: without the
    shard settings and bookkeeping (:data:`VOLATILE` keys of ``sweep``), the
    compilation cache, where the store lies (``output.path``: a store copied
    or moved elsewhere resumes there), and what the job kind does not use:
    the top-level sections ``drop`` and the ``sweep`` keys ``unused``."""
    c = OmegaConf.to_container(cfg, resolve=True)
    c.pop("cache", None)
    for k in drop:
        c.pop(k, None)
    for k in VOLATILE + tuple(unused):
        c.get("sweep", {}).pop(k, None)
    for k in ("overwrite", "path"):
        c.get("output", {}).pop(k, None)
    return OmegaConf.to_yaml(OmegaConf.create(c))
