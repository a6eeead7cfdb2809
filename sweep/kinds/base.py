"""The job-kind protocol: what a kind of analysis declares, and the frozen
plan it hands to the engine.

A job kind (:class:`JobKind`) says *what* a variant computes; the engine
(:func:`sweep.engine.run`) does everything around it, the same for every
kind: open / verify / resume the store, compile once, map chunks over the
devices, stream, stop cleanly. A kind declares

* ``name`` (the load case's ``kind``), the status codes that can occur in it
  (of the one table, :mod:`sweep.results.status`), its load-case keys and their
  types (``loadcase``, a :class:`sweep.core.config.Map`), the config it does not use
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

from sweep.core.config import Map


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
    for a runner that takes the parameter rows alone; ``compile_options``:
    XLA compiler options of its program (None: XLA's defaults; e.g.
    :data:`sweep.engine.stream.QUICK_START`)."""
    fn: Any
    example: np.ndarray
    what: str
    key: Any = None
    device: Any = None
    values: Any = None
    compile_options: Any = None


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
    cube_kind: str = ""       # the cube's ``cube_kind`` (its public schema); "" = the kind's name

    def cube_channels(self, ds) -> tuple:
        """The channel table a finished cube of this kind holds (what
        ``sweep.verify`` checks it against): :attr:`channels`, unless the
        plan's table depends on the load case."""
        return self.channels

    def check(self, job: dict) -> None:
        """Semantic checks of the plain job config (after the type checks of
        :mod:`sweep.core.config`), before a model is built."""

    def prepare(self, cfg):
        """The job config as this kind runs it (after the checks, before the
        plan; recorded in the cube): a kind that adds to the model or picks
        a backend for its load case does it here. Default: unchanged."""
        return cfg

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

    def static_state(self, model, cfg):
        """(r (m, 6), held) of a variant's static state, for the summary's
        diagnosis: here the design position (wheel centres held at design
        height, ``held`` True); a kind whose variants start from another
        static state says which."""
        import jax
        from kernels import kc
        return jax.jit(kc.design_position)(model).r, True

    def diagnose(self, ds, cfg, log) -> None:
        """Say why the first variant whose static equilibrium failed failed,
        when the model can tell (:mod:`sweep.axle.diagnose`): the directions of
        that variant's axle that no element restrains (bodies and motions),
        else the body and direction of the largest residual of its design
        position (wheel centres held at design height). Logged as warnings;
        a diagnosis that itself fails is logged and never ends the job."""
        from sweep.results import status
        failed = np.nonzero(ds.status.values == status.EQUILIBRIUM_FAILED)[0]
        if not len(failed):
            return
        v = int(failed[0])
        try:
            model = variant_model(ds, cfg, v)
            from sweep.axle import diagnose
            found = diagnose.unrestrained(model)
            head = (f"variant {v}: the static equilibrium did not converge "
                    f"({len(failed)} of {ds.sizes['variant']} variant(s) alike)")
            if found:
                log.warning(head + "; at the design geometry these directions are held by no element "
                            "(give the elements there a rate in them):")
                for line in diagnose.explain_unrestrained(found):
                    log.warning("  unrestrained: " + line)
                return
            import jax
            from kernels import kc
            eq = jax.jit(kc.design_position)(model)
            body, direction, value = diagnose.largest_residual(model, eq.r, kc.design_loads(eq))
            log.warning(head + f"; every direction is restrained at the design geometry; with the wheel "
                        f"centres held at design height the largest residual is {value:.3g} "
                        f"{'N' if direction[0] == 'f' else 'N m'} on {body} ({direction})"
                        + ("" if bool(eq.converged) else ", and that solve does not converge either"))
        except Exception as err:  # noqa: BLE001 - a diagnosis never takes the job down
            log.warning(f"variant {v}: the static equilibrium did not converge (no diagnosis: "
                        f"{type(err).__name__}: {err})")


def explain_implausible(kind, ds, cfg, log) -> None:
    """Log how far the first variant of status ``implausible_static_state``
    lies from the design (its static state recomputed: :meth:`JobKind.static_state`),
    with the limits of the job's ``checks``; never ends the job."""
    import math
    from sweep.results import status
    bad = np.nonzero(ds.status.values == status.IMPLAUSIBLE)[0]
    if not len(bad):
        return
    v = int(bad[0])
    head = f"variant {v}: implausible static state ({len(bad)} of {ds.sizes['variant']} variant(s) alike)"
    try:
        import jax
        from kernels import kc
        model = variant_model(ds, cfg, v)
        r, held = kind.static_state(model, cfg)
        off, dtoe, dcam, pen = (np.asarray(a) for a in jax.jit(kc.static_state_measures)(model, r))
        lim = static_limits(cfg)
        parts = []
        if not held:
            parts.append(f"wheel centre {off.max() * 1000:.1f} mm from its design position "
                         f"(limit {lim.wheel_centre_offset * 1000:.0f} mm)")
        parts.append(f"toe {math.degrees(dtoe.max()):.2f} deg and camber {math.degrees(dcam.max()):.2f} deg "
                     f"from the design geometry's (limit {math.degrees(lim.alignment_change):.1f} deg)")
        if float(pen) > 0:
            parts.append(f"a stop engaged {float(pen) * 1000:.1f} mm at rest")
        log.warning(head + ": " + "; ".join(parts) + " - a spring that cannot hold the load, a wrong preload "
                    "or unit? (limits: checks.wheel_centre_offset, checks.alignment_change_deg, "
                    "checks.allow_stop_at_rest)")
    except Exception as err:  # noqa: BLE001 - a diagnosis never takes the job down
        log.warning(f"{head} (no detail: {type(err).__name__}: {err})")


def rig_from_load_case(cfg, log):
    """``cfg`` with ``model.tyres`` set from ``loadcase.tyre`` and
    ``model.sprung_body`` from ``loadcase.sprung_body``, each unless the
    model file sets it (the road load cases' :meth:`JobKind.prepare`)."""
    from omegaconf import OmegaConf, open_dict
    from sweep.axle.builder import sprung_mass, tyre_values
    lc = OmegaConf.to_container(cfg.loadcase, resolve=True)
    if lc.get("tyre") is not None:
        tyre_values(lc["tyre"], "loadcase.tyre")
    if lc.get("sprung_body") is not None:
        sprung_mass(lc["sprung_body"], lc.get("tyre") or cfg.model.get("tyres"), "loadcase.sprung_body")
    for lc_key, model_key in (("tyre", "tyres"), ("sprung_body", "sprung_body")):
        if lc.get(lc_key) is None:
            continue
        with open_dict(cfg):
            if cfg.model.get(model_key) is None:
                cfg.model[model_key] = OmegaConf.create(OmegaConf.to_container(cfg.loadcase[lc_key], resolve=True))
            else:
                log.info(f"model.{model_key} is set in the model: loadcase.{lc_key} is not used")
    return cfg


def static_limits(cfg):
    """The plausibility limits of a job's static states from its ``checks``
    section (:class:`kernels.kc.StaticLimits`; defaults where absent)."""
    import math
    from kernels.kc import StaticLimits
    c = cfg.get("checks") or {}
    d = StaticLimits()
    return StaticLimits(wheel_centre_offset=float(c.get("wheel_centre_offset", d.wheel_centre_offset)),
                        alignment_change=math.radians(float(c.get("alignment_change_deg",
                                                                  math.degrees(d.alignment_change)))),
                        stop_penetration=None if c.get("allow_stop_at_rest", False) else d.stop_penetration)


def variant_model(ds, cfg, v):
    """The model of variant ``v`` of a cube: the job's model with the
    variant's parameter values (``ds[<parameter>]``) - hardpoints moved in
    the build (and the alignment solved again where a hardpoint parameter
    says ``alignment: realign``; the file's where that fails), the rest
    applied (:meth:`sweep.axle.params.ParameterSet.apply`)."""
    from omegaconf import OmegaConf
    from sweep.axle.builder import model_from_config
    from sweep.axle.params import build_parameters
    nominal = model_from_config(cfg.model)
    spec = OmegaConf.to_container(cfg.sweep, resolve=True).get("parameters") or {}
    pset = build_parameters(spec, nominal)
    theta = np.array([float(ds[p.name].values[v]) for p in pset.params])
    model = nominal
    if pset.hardpoints:
        from sweep.axle.alignment import variant_config
        from sweep.axle.builder import _plain
        mcfg, offsets, _ = variant_config(_plain(cfg.model), pset, theta)
        model = model_from_config(mcfg if mcfg is not None else cfg.model, hardpoint_offsets=offsets or ())
    return pset.apply(model, theta)
