"""Sobol' sensitivity indices of a ``sweep=saltelli`` cube (SALib.analyze.sobol).

A Saltelli cube (:mod:`sweep.study.design`, design ``saltelli``) holds N base
samples, each a block of N(2D+2) (or N(D+2) without second order) variants in
Saltelli's order. :func:`sobol_indices` takes any per-variant scalar of the
cube - a K&C metric such as ``bump_steer`` (variant, side), an axle metric,
or a reduction of a time series given as a callable - and returns the
first-order (S1), total (ST) and, when the design has them, second-order
(S2) indices with their confidence intervals (bootstrap, ``conf_level``),
per output and parameter, as an xarray Dataset::

    from sweep.sensitivity import sobol_indices
    si = sobol_indices("outputs/.../saltelli.zarr", ["bump_steer", "wheel_rate"], side="left")
    si.S1.sel(output="bump_steer")                # by parameter
    si = sobol_indices(cube, {"peak_fx": lambda ds: abs(ds.bushing_force.sel(
        bushing="longitudinal_link_body_left", component="fx")).max("time")})

The indices are those of the design's input distribution: every parameter
uniform over its bounds - in its logarithm for a log-scaled parameter.

Failed variants (``status`` != 0, or a non-finite output value) break the
design: the estimators need every row of a base sample's block. They are an
error naming how many failed, unless ``fill`` says what to do - never
dropped silently:

* ``fill="drop_blocks"``: leave out the base samples whose block holds a
  failed variant (the estimators stay exact on the blocks left; the
  result's ``n_base_used`` says how many);
* ``fill="mean"``: a failed variant's value is the mean of the good ones;
* ``fill=<number>``: that value.
"""
from __future__ import annotations

import os

import numpy as np

from sweep.results import status as status_table
from sweep.study.design import saltelli_settings, saltelli_size
from sweep.core.config import ConfigError

FILLS = ("drop_blocks", "mean")


class SensitivityError(ValueError):
    """The cube or the outputs cannot give Sobol' indices (one line: what and why)."""


def saltelli_design(ds) -> dict:
    """What the analysis needs of a Saltelli cube, from what the job recorded:
    the job config (attribute ``config``: ``sweep.design``, ``n_base``,
    ``calc_second_order``, ``seed``) and the parameter order (attribute
    ``parameters``). Checks that the cube has the design's size and that its
    parameter columns are in Saltelli's order (row AB_j of a block equals row
    A but in parameter j)."""
    import yaml
    try:
        cfg = yaml.safe_load(ds.attrs.get("config", "")) or {}
    except yaml.YAMLError as err:
        raise SensitivityError(f"the cube's config attribute is not YAML ({err})") from None
    sw = cfg.get("sweep") or {}
    design = sw.get("design", "nominal")
    if design != "saltelli":
        raise SensitivityError(f"the cube's design is {design!r}, not saltelli: Sobol' indices need a "
                               "Saltelli design (python -m sweep ... sweep=saltelli)")
    try:
        n_base, second = saltelli_settings(sw)
    except ConfigError as err:
        raise SensitivityError(f"the cube's config: {err}") from None
    names = [str(p) for p in ds.attrs.get("parameters", [])]
    if not names:
        raise SensitivityError("the cube names no parameters (attribute parameters)")
    n = int(ds.sizes["variant"])
    want = saltelli_size(n_base, len(names), second)
    if n != want:
        raise SensitivityError(f"the cube has {n} variants, its Saltelli design {want} (N = {n_base}, "
                               f"D = {len(names)}, calc_second_order = {second})")
    if all(p in ds.variables for p in names):
        X = np.stack([np.asarray(ds[p].values, float) for p in names], 1).reshape(n_base, -1, len(names))
        A = X[:, 0]
        for j in range(len(names)):
            other = np.arange(len(names)) != j
            if not np.array_equal(X[:, 1 + j][:, other], A[:, other]):
                raise SensitivityError(f"the cube's parameter values are not in Saltelli's order (rows A and "
                                       f"AB_{j + 1} differ in more than {names[j]!r})")
    return {"parameters": names, "n_base": n_base, "calc_second_order": second,
            "seed": sw.get("seed", 0), "n_variants": n}


def _open(cube):
    if isinstance(cube, (str, os.PathLike)):
        import xarray as xr
        return xr.open_zarr(cube), os.fspath(cube)
    return cube, cube.encoding.get("source", "") if hasattr(cube, "encoding") else ""


def _specs(outputs):
    """[(label, spec)] of the ``outputs`` argument."""
    if isinstance(outputs, dict):
        return [(str(k), v) for k, v in outputs.items()]
    if isinstance(outputs, (str, bytes)) or callable(outputs) or hasattr(outputs, "dims"):
        outputs = [outputs]
    out = []
    for spec in outputs:
        if isinstance(spec, str):
            out.append((spec, spec))
        elif hasattr(spec, "dims"):
            out.append((str(spec.name or f"output_{len(out)}"), spec))
        elif callable(spec):
            out.append((getattr(spec, "__name__", f"output_{len(out)}").replace("<lambda>", f"output_{len(out)}"),
                        spec))
        else:
            raise SensitivityError(f"output {spec!r}: give a variable name, a callable (cube -> DataArray over "
                                   "variant) or a DataArray")
    return out


def _scalars(ds, label, spec, side):
    """[(label, units, (n_variants,) values)] of one output: a variable, a
    callable's or a DataArray's values, one entry per side when it has a
    ``side`` dimension and ``side`` is None."""
    if isinstance(spec, str):
        if spec not in ds.variables:
            scalars = [k for k, v in ds.data_vars.items() if v.dims and v.dims[0] == "variant"
                       and set(v.dims) <= {"variant", "side"} and k not in ds.attrs.get("parameters", [])]
            raise SensitivityError(f"output {spec!r} is not a variable of the cube (per-variant ones: "
                                   f"{', '.join(scalars)}; or give a callable that reduces one)")
        da = ds[spec]
    elif callable(spec) and not hasattr(spec, "dims"):
        da = spec(ds)
        if not hasattr(da, "dims"):
            raise SensitivityError(f"output {label!r}: the callable returned {type(da).__name__}, not an "
                                   "xarray DataArray over variant")
    else:
        da = spec
    if "variant" not in da.dims:
        raise SensitivityError(f"output {label!r} has no variant dimension (dims {da.dims})")
    if "side" in da.dims and side is not None:
        da = da.sel(side=side)
    rest = [d for d in da.dims if d not in ("variant", "side")]
    if rest:
        raise SensitivityError(f"output {label!r} has the dimension(s) {', '.join(rest)} besides variant: "
                               "select or reduce them, e.g. {'peak': lambda ds: abs(ds.x.sel(...)).max('time')}")
    units = str(da.attrs.get("units", ""))
    if "side" in da.dims:
        return [(f"{label}[{s}]", units, np.asarray(da.sel(side=s).transpose("variant").values, float))
                for s in da["side"].values.tolist()]
    return [(label, units, np.asarray(da.values, float))]


def sobol_indices(cube, outputs, *, side=None, fill=None, num_resamples=100, conf_level=0.95, seed=0):
    """Sobol' indices of ``outputs`` over the parameters of a Saltelli cube.

    ``cube``: a path (zarr store) or an opened cube. ``outputs``: a variable
    name, a callable ``cube -> DataArray`` over ``variant`` (a reduction of a
    time series, say), a DataArray, or a list of them, or a dict label ->
    one of them. An output with a ``side`` dimension gives one output per
    side (``bump_steer[left]``, ``bump_steer[right]``) unless ``side``
    selects one. ``fill``: what to do with failed variants (module doc);
    None: an error naming how many failed. ``num_resamples``,
    ``conf_level``: the bootstrap of the confidence intervals (seeded:
    ``seed``, the same for every output).

    Returns a Dataset over (output, parameter): ``S1``, ``S1_conf``, ``ST``,
    ``ST_conf`` (the conf: half-width of the ``conf_level`` interval), and
    with a second-order design ``S2``, ``S2_conf`` over (output, parameter,
    parameter_2) (upper triangle, NaN elsewhere); per output ``n_failed``,
    ``n_base_used`` and the ``variance`` of the output, its ``units`` as a
    coordinate. An output that is the same in every variant has no indices
    (NaN)."""
    import xarray as xr
    from SALib.analyze import sobol as salib_sobol
    ds, source = _open(cube)
    d = saltelli_design(ds)
    names, N, second = d["parameters"], d["n_base"], d["calc_second_order"]
    D, n = len(names), d["n_variants"]
    step = n // N
    if not (fill is None or fill in FILLS or (isinstance(fill, (int, float)) and not isinstance(fill, bool)
                                              and np.isfinite(fill))):
        raise SensitivityError(f"fill = {fill!r} must be None, {', '.join(map(repr, FILLS))} or a finite number")
    if not 0 < conf_level < 1:
        raise SensitivityError(f"conf_level = {conf_level!r} must be in (0, 1)")
    codes = np.asarray(ds["status"].values) if "status" in ds.variables else np.zeros(n, np.int8)
    bad_status = codes != status_table.OK
    scalars = [s for label, spec in _specs(outputs) for s in _scalars(ds, label, spec, side)]
    if not scalars:
        raise SensitivityError("no outputs given")
    labels = [s[0] for s in scalars]
    if len(set(labels)) != len(labels):
        raise SensitivityError(f"outputs: a label appears twice ({labels})")
    if fill is None and bad_status.any():
        raise SensitivityError(
            f"{int(bad_status.sum())} of {n} variants failed ({status_table.counts(codes)}): Saltelli's "
            "estimators need every variant of the design; pass fill='drop_blocks' (leave out their base "
            "samples), fill='mean' or a number to analyse the rest")
    problem = {"num_vars": D, "names": names, "bounds": [[0.0, 1.0]] * D}
    res = {k: np.full((len(scalars), D), np.nan) for k in ("S1", "S1_conf", "ST", "ST_conf")}
    if second:
        res.update({k: np.full((len(scalars), D, D), np.nan) for k in ("S2", "S2_conf")})
    n_failed, n_used, variance = [], [], []
    for i, (label, _units, y) in enumerate(scalars):
        if y.shape != (n,):
            raise SensitivityError(f"output {label!r} has shape {y.shape}, not one value per variant ({n})")
        failed = bad_status | ~np.isfinite(y)
        if failed.all():
            raise SensitivityError(f"output {label!r} has no finite value in a variant with status ok (a metric "
                                   "the model does not define is NaN in every variant)")
        if failed.any() and fill is None:
            raise SensitivityError(f"output {label!r} is not finite in {int((failed & ~bad_status).sum())} of {n} "
                                   "variants with status ok: Saltelli's estimators need every variant of the "
                                   "design; pass fill='drop_blocks', fill='mean' or a number")
        y = y.copy()
        blocks = np.arange(N)
        if failed.any():
            if fill == "drop_blocks":
                blocks = np.flatnonzero(~failed.reshape(N, step).any(1))
                if len(blocks) < 2:
                    raise SensitivityError(f"output {label!r}: fill='drop_blocks' leaves {len(blocks)} of {N} base "
                                           "samples (at least 2 needed)")
            else:
                y[failed] = np.mean(y[~failed]) if fill == "mean" else float(fill)
        y = y.reshape(N, step)[blocks].ravel()
        n_failed.append(int(failed.sum()))
        n_used.append(len(blocks))
        variance.append(float(np.var(y)))
        if not np.std(y) > 1e-14 * np.max(np.abs(y)):       # the same in every variant: no indices
            continue
        si = salib_sobol.analyze(problem, y, calc_second_order=second, num_resamples=num_resamples,
                                 conf_level=conf_level, seed=np.random.default_rng(seed))
        for k in res:
            res[k][i] = np.asarray(si[k], float)
    coords = {"output": labels, "parameter": names,
              "units": ("output", [s[1] for s in scalars], {"long_name": "the output's units"})}
    data = {k: (("output", "parameter"), res[k]) for k in ("S1", "S1_conf", "ST", "ST_conf")}
    if second:
        coords["parameter_2"] = names
        data.update({k: (("output", "parameter", "parameter_2"), res[k]) for k in ("S2", "S2_conf")})
    data.update({"n_failed": ("output", np.array(n_failed)), "n_base_used": ("output", np.array(n_used)),
                 "variance": ("output", np.array(variance))})
    out = xr.Dataset(data, coords=coords)
    long = {"S1": "first-order Sobol' index", "ST": "total Sobol' index", "S2": "second-order Sobol' index"}
    for k in list(out.data_vars):
        if k in long:
            out[k].attrs["long_name"] = long[k]
        elif k.endswith("_conf"):
            out[k].attrs["long_name"] = f"half-width of the {conf_level:.0%} confidence interval of {k[:-5]}"
    out["n_failed"].attrs["long_name"] = "failed variants (status != 0 or not finite)"
    out["n_base_used"].attrs["long_name"] = "base samples analysed (of n_base)"
    out["variance"].attrs["long_name"] = "variance of the output over the analysed variants"
    out.attrs.update({"design": "saltelli", "n_base": N, "calc_second_order": int(second),
                      "n_variants": n, "conf_level": conf_level, "num_resamples": num_resamples, "seed": seed,
                      "fill": "none" if fill is None else str(fill), "source": str(source),
                      "model": str(ds.attrs.get("model", "")),
                      "distribution": "every parameter uniform over its bounds (log-scaled ones in their "
                                      "logarithm)",
                      "method": "SALib.analyze.sobol (Saltelli 2010 first / total order, Saltelli 2002 "
                                "second order); confidence intervals by bootstrap"})
    return out
