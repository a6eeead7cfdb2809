"""The job-kind protocol: what a kind of analysis declares, and the frozen
plan it hands to the engine.

A job kind (:class:`JobKind`) says *what* a variant computes; the engine
(:func:`sweep.engine.run`) does everything around it, the same for every
kind: open / verify / resume the store, compile once, map chunks over the
devices, stream, stop cleanly. A kind declares

* ``name`` (the load case's ``kind``), the status codes that can occur in it
  (of the one table, :mod:`sweep.status`), its load-case keys and their
  types (``loadcase``, a :class:`sweep.schema.Map`), the config it does not use
  (``drop``: sections, ``unused``: ``sweep`` keys; not part of its cubes' identity);
* ``check(job)``: semantic checks of the plain config before anything is built;
* ``plan(cfg) -> Plan``: the model, the design, the chunking and the cube
  layout (channels, coordinates, leading dimensions), validated, frozen;
* ``runner(plan) -> Runner``: the per-variant function mapped over a chunk,
  what the log calls it and its trace-cache key;
* ``attrs(plan, cfg_yaml)``: the cube's attributes; ``summary(plan)``: the
  kind's entries of the run summary; ``report(ds, cfg, summary)``: log the
  summary, check the cube, draw its pictures.

A new kind is one module in ``sweep/kinds/`` defining ``KIND`` (a
:class:`JobKind` instance) plus one load-case config with ``kind: <name>``.
"""
from __future__ import annotations

import dataclasses
from typing import Any, Optional

import numpy as np

from sweep.schema import Map


@dataclasses.dataclass(frozen=True)
class Plan:
    """Everything a run needs, validated before anything compiles.

    ``X`` (n_variants, n_parameters) the design; ``chunk`` variants per
    compiled chunk on ``n_dev`` devices (``max_devices``: the most the kind
    can map a chunk over, None = all), ``micro_batch`` variants per
    ``lax.map`` group or None; the cube layout: ``channels`` (the kind's
    :class:`sweep.engine.layout.Channel` table), ``shapes`` {channel:
    trailing shape}, ``coords`` {name: (values, attrs[, dims])}, ``lead``
    ((dim, length, zarr chunk), ...) after ``variant``; ``case``: the kind's
    own validated data (load case, integrator, ...)."""
    model: Any
    pset: Any
    X: np.ndarray
    shard: int
    num_shards: int
    chunk: int
    n_dev: int
    micro_batch: Optional[int]
    channels: tuple
    shapes: dict
    coords: dict
    lead: tuple
    iterations_long_name: str
    case: Any = None
    model_cfg: Any = None     # the model config, for designs that rebuild it per variant (hardpoints)


@dataclasses.dataclass(frozen=True)
class Runner:
    """A chunk runner to compile: ``fn`` (jitted, a
    :class:`sweep.engine.mapping.StagedRunner` or a host runner) lowered for
    ``example`` thetas (the padded chunk shape); ``what`` names it in the
    log; ``key`` for the trace cache (None: always trace); ``device``: run on
    this one device; ``values``: the run-time values vector
    (:class:`sweep.engine.values.Lifted`) appended to every parameter row
    before the runner sees it (``example`` is then the rows' shape), None
    for a runner that takes the parameter rows alone."""
    fn: Any
    example: np.ndarray
    what: str
    key: Any = None
    device: Any = None
    values: Any = None


class JobKind:
    """Base of the job kinds (module doc). Subclasses set the class
    attributes and implement :meth:`plan`, :meth:`runner`, :meth:`attrs`
    and :meth:`report`."""
    name: str = ""
    channels: tuple = ()      # the cube's channel table (sweep.engine.layout.Channel), for its checks
    status: tuple = ()
    loadcase: Map = Map()
    drop: tuple = ()          # config sections the kind does not use (not part of its identity)
    unused: tuple = ()        # sweep keys the kind does not use (e.g. start, every without a time axis)

    def check(self, job: dict) -> None:
        """Semantic checks of the plain job config (after the type checks of
        :mod:`sweep.schema`), before a model is built."""

    def plan(self, cfg) -> Plan:
        raise NotImplementedError

    def runner(self, plan: Plan) -> Runner:
        raise NotImplementedError

    def attrs(self, plan: Plan, cfg_yaml: str) -> dict:
        raise NotImplementedError

    def summary(self, plan: Plan) -> dict:
        return {}

    def report(self, ds, cfg, summary) -> None:
        raise NotImplementedError
