"""Typed check of the job and tuning configs, run before anything is built.

Hydra rejects unknown keys when the config is composed; this module checks
the *values*: every key of ``configs/config.yaml`` (and its groups) and of
``configs/tune.yaml`` has a type and, where it matters, a range, declared in
the tables below (:func:`job_schema` with the job kind's load-case table, :data:`TUNE`). A wrong value ends with one
:class:`ConfigError` line ``<key> = <value>: <reason>`` naming the key as it
is written on the command line, before a model is built or anything is
compiled. Semantic checks that need the model (element patterns, bounds
against a design table, curves) stay where the model is (``sweep.axle.params``,
``sweep.design``, ``kernels.model.validate_tables``).

Why an explicit table and not Hydra structured configs: the model configs
are free-form trees (hardpoints, body and element maps), ``sweep.parameters``
and ``objectives`` are user-named maps, and the load-case group holds two
schemas (one per job kind, :mod:`sweep.kinds`); a table keeps the YAML
groups as they are and still rejects every wrong type with the key named.
"""
from __future__ import annotations

import difflib
import math
import os
import tempfile

from kernels.model import ModelError
from kernels.system import SOLVERS


class ConfigError(ModelError):
    """A config value is invalid (not a model table); the message names the
    key and the value (one line). A subclass of :class:`ModelError` so that
    callers catching model errors keep catching it."""


def fmt(value) -> str:
    """A value as a user wrote it: strings quoted, floats without noise."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return repr(value) if math.isfinite(value) else str(value)
    if isinstance(value, str):
        return repr(value)
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(fmt(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k}: {fmt(v)}" for k, v in value.items()) + "}"
    return str(value)


def fail(key, value, reason):
    raise ConfigError(f"{key} = {fmt(value)}: {reason}")


# --------------------------------------------------------------------------- value types

class Spec:
    def check(self, value, key):  # pragma: no cover - interface
        raise NotImplementedError


class Float(Spec):
    """A finite number (int or float, not bool) with optional bounds."""

    def __init__(self, gt=None, ge=None, lt=None, unit=""):
        self.gt, self.ge, self.lt, self.unit = gt, ge, lt, unit

    def check(self, value, key):
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            fail(key, value, "must be a number" + (f" [{self.unit}]" if self.unit else ""))
        if not math.isfinite(value):
            fail(key, value, "must be a finite number")
        if self.gt is not None and not value > self.gt:
            fail(key, value, f"must be > {fmt(self.gt)}")
        if self.ge is not None and not value >= self.ge:
            fail(key, value, f"must be >= {fmt(self.ge)}")
        if self.lt is not None and not value < self.lt:
            fail(key, value, f"must be < {fmt(self.lt)}")
        return float(value)


class Int(Spec):
    """An integer (an integral float such as 1e3 is accepted, 1.5 is not)."""

    def __init__(self, ge=None):
        self.ge = ge

    def check(self, value, key):
        ok = isinstance(value, int) and not isinstance(value, bool)
        if isinstance(value, float) and math.isfinite(value) and value.is_integer():
            ok, value = True, int(value)
        if not ok:
            fail(key, value, "must be an integer" + (f" >= {self.ge}" if self.ge is not None else ""))
        if self.ge is not None and value < self.ge:
            fail(key, value, f"must be >= {self.ge}")
        return value


class Bool(Spec):
    def check(self, value, key):
        if not isinstance(value, bool):
            fail(key, value, "must be true or false")
        return value


class Str(Spec):
    def __init__(self, choices=None, suffix=None):
        self.choices, self.suffix = choices, suffix

    def check(self, value, key):
        if not isinstance(value, str):
            fail(key, value, "must be a string")
        if self.choices is not None and value not in self.choices:
            fail(key, value, f"must be one of {', '.join(self.choices)}")
        if self.suffix and not value.rstrip("/").endswith(self.suffix):
            fail(key, value, f"must end in {self.suffix}")
        return value


class Literal(Spec):
    def __init__(self, *values):
        self.values = values

    def check(self, value, key):
        if value not in self.values or isinstance(value, bool) != isinstance(self.values[0], bool):
            fail(key, value, f"must be {' or '.join(fmt(v) for v in self.values)}")
        return value


class Optional(Spec):
    """null or the inner spec."""

    def __init__(self, inner):
        self.inner = inner

    def check(self, value, key):
        return None if value is None else self.inner.check(value, key)


class Either(Spec):
    """The first alternative that accepts the value; the error names all."""

    def __init__(self, *alternatives, reason):
        self.alternatives, self.reason = alternatives, reason

    def check(self, value, key):
        for alt in self.alternatives:
            try:
                return alt.check(value, key)
            except ConfigError:
                pass
        fail(key, value, self.reason)


class List(Spec):
    """A list of items, optionally of a fixed length."""

    def __init__(self, item, length=None, min_length=0):
        self.item, self.length, self.min_length = item, length, min_length

    def check(self, value, key):
        if not isinstance(value, (list, tuple)):
            fail(key, value, "must be a list" + (f" of {self.length} values" if self.length else ""))
        if self.length is not None and len(value) != self.length:
            fail(key, value, f"must have {self.length} values, has {len(value)}")
        if len(value) < self.min_length:
            fail(key, value, f"must have at least {self.min_length} value(s)")
        return [self.item.check(v, f"{key}[{i}]") for i, v in enumerate(value)]


class Bounds(Spec):
    """[lower, upper]: two finite numbers (the order is checked with the model)."""

    def check(self, value, key):
        if not isinstance(value, (list, tuple)) or len(value) != 2:
            fail(key, value, "must be [lower, upper]")
        for v in value:
            if isinstance(v, bool) or not isinstance(v, (int, float)):
                fail(key, value, "must be [lower, upper], two numbers")
            if not math.isfinite(v):
                fail(key, value, "bounds must be finite numbers")
        return [float(v) for v in value]


class Map(Spec):
    """A mapping with known keys (each with its spec). ``strict``: any other
    key is an error naming it and the closest known key (a misspelt key in
    a config file would otherwise leave the value it meant at its default);
    else other keys are left to the code that uses the mapping."""

    def __init__(self, fields=None, values=None, strict=False):
        self.fields, self.values, self.strict = fields or {}, values, strict

    def check(self, value, key):
        if not isinstance(value, dict):
            fail(key, value, "must be a mapping")
        for k, v in value.items():
            if self.strict and self.values is None and k not in self.fields:
                close = difflib.get_close_matches(str(k), list(self.fields), n=1, cutoff=0.6)
                hint = f"did you mean {close[0]!r}?" if close else f"known: {', '.join(self.fields)}"
                raise ConfigError(f"{key + '.' if key else ''}{k}: unknown key ({hint})")
            spec = self.fields.get(k, self.values)
            if spec is not None:
                spec.check(v, f"{key}.{k}" if key else str(k))
        return value


def Each(fields):
    """A user-named map of mappings, e.g. ``sweep.parameters.<name>``."""
    return Map(values=Map(fields))


# --------------------------------------------------------------------------- the tables

PARAMETER = {
    "target": Str(), "elements": Either(Str(), List(Str(), min_length=1),
                                        reason="must be a pattern or a list of patterns"),
    "directions": Either(Str(), List(Str(), min_length=1), reason="must be a direction or a list of directions"),
    "mode": Str(), "nominal": Float(), "bounds": Bounds(), "scale": Str(),
}
LOADS = Map(values=Map(values=Float()))         # {left: {fx: ...}, right: {...}}

INTEGRATOR = Map({
    "name": Str(), "dt": Float(gt=0, unit="s"), "relinearise_every": Int(ge=1), "solver": Str(choices=SOLVERS),
    "rtol": Float(gt=0), "atol_coordinates": Float(gt=0), "atol_speeds": Float(gt=0),
    "backend": Either(Literal("xla"), Literal("generated"), Literal("auto"),
                      reason="must be xla, generated or auto"),
}, strict=True)
SWEEP = Map({
    "design": Str(), "n_variants": Int(), "seed": Int(ge=0), "parameters": Optional(Each(PARAMETER)),
    "start": Optional(Float(unit="s")), "every": Optional(Int(ge=1)),
    "chunk_size": Either(Literal("auto"), Literal(None), Int(ge=1), reason="must be an integer >= 1 or auto"),
    "memory_budget_gb": Float(gt=0, unit="GiB"), "shard": Int(ge=0), "num_shards": Int(ge=1),
    "micro_batch": Either(Literal("auto"), Literal(None), Int(ge=0),
                          reason="must be an integer >= 0 (0: off) or auto"),
    "progress": Bool(), "verify": Bool(), "table": Str(),
    "n_base": Int(ge=1), "calc_second_order": Bool(),
    "levels": Either(Int(ge=1), List(Int(ge=1), min_length=1),
                     reason="must be an integer >= 1 or one per parameter"),
}, strict=True)
OUTPUT = Map({
    "path": Str(suffix=".zarr"), "every": Int(ge=1), "overwrite": Bool(),
    "bushings": Either(Literal(None), Str(), List(Str(), min_length=1),
                       reason="must be null, a pattern or a list of patterns"),
}, strict=True)
CACHE = Map({"enabled": Bool(), "dir": Optional(Str())}, strict=True)


# plausibility limits of every variant's static state (kernels.kc.StaticLimits)
CHECKS = Map({"wheel_centre_offset": Float(gt=0, unit="m"), "alignment_change_deg": Float(gt=0, unit="deg"),
              "allow_stop_at_rest": Bool()}, strict=True)


def job_schema(loadcase):
    """The job config's table with the job kind's load-case table."""
    return Map({"integrator": INTEGRATOR, "loadcase": loadcase, "sweep": SWEEP, "output": OUTPUT,
                "cache": CACHE, "checks": CHECKS})

OBJECTIVE = {"metric": Str(), "target": Float(), "weight": Float(ge=0), "scale": Optional(Float(gt=0)),
             "side": Str()}
# bounds in the metric's display units (the metric, lower <= upper and "at
# least one bound" are checked by sweep.tune.problem.parse_constraints)
CONSTRAINT = {"metric": Str(), "side": Str(), "lower": Optional(Float()), "upper": Optional(Float()),
              "weight": Float(gt=0), "scale": Optional(Float(gt=0)), "tolerance": Float(ge=0)}
TUNE = Map({
    "parameters": Optional(Each(PARAMETER)),
    "objectives": Optional(Each(OBJECTIVE)),
    "constraints": Optional(Each(CONSTRAINT)),
    "kc": Map({"loaded_radius": Float(gt=0, unit="m"), "brake_lock_stiffness": Float(ge=0),
               "tolerance": Float(gt=0)}, strict=True),
    "time_response": Map({"t_end": Float(gt=0, unit="s"), "step_time": Float(ge=0, unit="s"),
                          "dt": Float(gt=0, unit="s"), "wheel_loads": Map(values=Float()),
                          "step": Map(values=Float()), "settle_window": Float(gt=0, unit="s"),
                          "checkpoint_block": Int(ge=1), "solver": Str(choices=SOLVERS)}, strict=True),
    "optimizer": Map({"name": Str(), "learning_rate": Float(gt=0), "decay": Float(ge=0),
                      "iterations": Int(ge=0), "n_starts": Int(ge=1), "seed": Int(ge=0),
                      "start": Optional(Map(values=Float())), "gtol": Float(ge=0), "memory": Int(ge=1),
                      "constraint_rounds": Int(ge=1)}, strict=True),
    "targets_from": Optional(Map(values=Float())),
    "gradient_check": Map({"enabled": Bool(), "step": Float(gt=0)}, strict=True),
    "output": Map({"path": Str(suffix=".zarr"), "overwrite": Bool()}, strict=True),
    "progress": Bool(), "cache": CACHE,
})

# Model configs are free-form trees; these keys hold numbers wherever they
# occur (bodies, point specs); an element group's section has its group's
# (kernels.forces.ElementGroup.numbers), a bushing type the bushing group's.
BODY_NUMBERS = {"mass": "positive", "radius": "positive", "inertia": "any", "euler_deg": "any",
                "fraction": "any", "distance": "any"}


# --------------------------------------------------------------------------- checks

def plain(cfg):
    """Resolved plain container of an OmegaConf config; an interpolation that
    cannot be resolved is a one-line error naming its key."""
    from omegaconf import DictConfig, OmegaConf
    from omegaconf.errors import OmegaConfBaseException
    if not isinstance(cfg, DictConfig):
        return cfg
    try:
        return OmegaConf.to_container(cfg, resolve=True)
    except OmegaConfBaseException as err:
        key = getattr(err, "full_key", None) or "config"
        msg = str(getattr(err, "msg", err)).splitlines()[0]
        if "HydraConfig was not set" in msg:
            msg = ("refers to Hydra's job config (${hydra:...}), which is set only under "
                   f"python -m sweep; give {key}=... when composing the config in Python")
        raise ConfigError(f"{key}: {msg}") from None


def _numbers(value, key, positive=False, non_negative=False):
    if isinstance(value, (list, tuple)):
        for i, v in enumerate(value):
            _numbers(v, f"{key}[{i}]", positive, non_negative)
        return
    Float(gt=0 if positive else None, ge=0 if non_negative else None).check(value, key)


def model_numbers(groups):
    """The number keys of a model config's sections: {section: {key: kind}}
    (kind any | non_negative | positive, :data:`kernels.forces.NUMBER_KINDS`)
    for every element group's ``table_key`` (its declared ``numbers`` beside
    the body and point-spec keys) and ``bushing_types`` (the bushing
    group's); None: any other section (every known number key, signs only
    where every declaration agrees on it)."""
    out = {g.table_key: {**BODY_NUMBERS, **g.numbers} for g in groups}
    out["bushing_types"] = out.get("bushings", dict(BODY_NUMBERS))
    anywhere = dict(BODY_NUMBERS)
    for g in groups:
        for k, kind in g.numbers.items():
            anywhere[k] = kind if anywhere.get(k, kind) == kind else "any"
    out[None] = anywhere
    return out


def check_model(model, key="model", groups=None, sections=None):
    """Types of a model config: gravity (3 numbers) and every numeric field of
    bodies, bushing types and elements (each element group's declared
    ``numbers``; ``groups``: default the built-in ones). A field that holds
    points or names (``com``, ``at``, ``axis``, ...) is checked when the
    model is built. ``sections``: only these sections of ``per_side`` /
    ``shared`` (an added group's, when the model is built)."""
    from kernels.forces import BUILTIN
    numbers = model_numbers(tuple(BUILTIN if groups is None else groups))
    if not isinstance(model, dict):
        fail(key, model, "must be a mapping (a model config)")
    if "gravity" in model:
        List(Float(unit="m/s^2"), length=3).check(model["gravity"], f"{key}.gravity")
    for name, point in (model.get("hardpoints") or {}).items():
        if isinstance(point, dict):       # a point spec ({along: [A, B], fraction | distance}): the builder checks it
            continue
        List(Float(unit="m"), length=3).check(point, f"{key}.hardpoints.{name}")

    def walk(node, path, keys):
        if isinstance(node, dict):
            for k, v in node.items():
                sub = f"{path}.{k}"
                if k in keys and not isinstance(v, dict):
                    _numbers(v, sub, positive=keys[k] == "positive", non_negative=keys[k] == "non_negative")
                else:
                    walk(v, sub, keys)
        elif isinstance(node, list):
            for i, v in enumerate(node):
                walk(v, f"{path}[{i}]", keys)

    if sections is None and isinstance(model.get("bushing_types"), (dict, list)):
        walk(model["bushing_types"], f"{key}.bushing_types", numbers["bushing_types"])
    for part in ("per_side", "shared"):
        if not isinstance(model.get(part), dict):
            continue
        for name, section in model[part].items():
            if sections is None or name in sections:
                walk(section, f"{key}.{part}.{name}", numbers.get(name, numbers[None]))


def check_output_path(path, key="output.path"):
    """The store can be created: the path (or its first existing ancestor) is
    a directory this process can write in. Creates nothing that stays."""
    Str(suffix=".zarr").check(path, key)
    p = os.path.abspath(path)
    if os.path.exists(p):
        if not os.path.isdir(p):
            fail(key, path, f"{p} exists and is not a directory (a zarr store)")
        return
    ancestor = os.path.dirname(p)
    while not os.path.exists(ancestor):
        ancestor = os.path.dirname(ancestor)
    if not os.path.isdir(ancestor):
        fail(key, path, f"{ancestor} is a file, not a directory")
    try:
        probe = tempfile.mkdtemp(prefix=".axle-write-test-", dir=ancestor)
        os.rmdir(probe)
    except OSError as err:
        fail(key, path, f"cannot create the store under {ancestor} ({err.strerror or err})")


def duration(seconds) -> str:
    """A duration without float noise: 6.0 - 5.8 -> '0.2'."""
    return f"{seconds:.12g}"


def check_config(cfg, kind):
    """Check a job config (``python -m sweep``) of job kind ``kind``
    (:class:`sweep.kinds.base.JobKind`: its load-case table and semantic
    checks) before anything is built. Returns the resolved plain config."""
    job = plain(cfg)
    job_schema(kind.loadcase).check(job, "")
    check_model(job.get("model"))
    kind.check(job)
    check_output_path((job.get("output") or {}).get("path"))
    return job


def check_tune_config(cfg):
    """Check a tuning config (``python -m sweep.tune``) before anything is built."""
    tune = plain(cfg)
    TUNE.check(tune, "")
    check_model(tune.get("model"))
    check_output_path((tune.get("output") or {}).get("path"))
    return tune
