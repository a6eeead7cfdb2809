"""The tuning problem of a ``configs/tune.yaml`` config: objectives and
constraints parsed from the config, the responses of the axle (K&C metrics,
time-response figures) and the objective J(z) as pure JAX functions.

Responses (``objectives.<name>.metric``, ``constraints.<name>.metric``):

* any K&C metric of :data:`kernels.kc.METRICS` (engineering units), per
  ``side``: left, right or mean; an axle-level one of
  :data:`kernels.kc.AXLE_METRICS` (one value for the axle, e.g.
  ``axle_roll_steer``; ``side`` does not matter);
* ``compliance.<dof>.<component>``: an entry of the 6 x 6 wheel-centre
  compliance matrix [SI];
* ``peak_bushing_force`` [kN]: max |Fx| (vehicle frame) of the model's
  reference bushing (longitudinal link / body) after the step of the time
  response;
* ``settling_displacement`` [mm]: mean longitudinal wheel-centre
  displacement from the initial equilibrium over the last
  ``time_response.settle_window`` seconds (x forward: a rearward step gives
  a negative value).
"""
from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np
import yaml
from omegaconf import OmegaConf

from kernels import kc, loads, metrics, response
from kernels.model import ModelError
from sweep.axle.builder import model_from_config
from sweep.axle.params import build_parameters, check_keys
from sweep.core.config import ConfigError, Float, fmt

TIME_METRICS = {"peak_bushing_force": "kN", "settling_displacement": "mm"}
OBJECTIVE_KEYS = {"metric", "side", "target", "weight", "scale"}
CONSTRAINT_KEYS = {"metric", "side", "lower", "upper", "weight", "scale", "tolerance"}
SIDE_CHOICES = ("left", "right", "mean")
CONSTRAINT_WEIGHT = 1.0e2         # default weight rho_j of a constraint (see TuneProblem.objective)
CONSTRAINT_TOLERANCE = 1.0e-3     # default tolerance, as a fraction of the constraint's scale


def _kc_metric(metric):
    return metric in kc.METRICS or metric in kc.AXLE_METRICS


def metric_units(metric):
    if metric in kc.METRICS:
        return kc.METRICS[metric][0]
    if metric in kc.AXLE_METRICS:
        return kc.AXLE_METRICS[metric][0]
    if metric in TIME_METRICS:
        return TIME_METRICS[metric]
    return "SI"


# --------------------------------------------------------------------------- config

def _parse_metric(what, o):
    """(metric, side, compliance index or None) of an objective or constraint
    entry; a one-line ConfigError naming ``what.metric`` / ``what.side``."""
    metric = o.get("metric")
    comp = None
    if isinstance(metric, str) and metric.startswith("compliance."):
        parts = metric.split(".")
        if len(parts) != 3 or parts[1] not in kc.DOFS or parts[2] not in kc.LOADS:
            raise ConfigError(f"{what}.metric = {metric!r}: use compliance.<{'|'.join(kc.DOFS)}>."
                              f"<{'|'.join(kc.LOADS)}>")
        comp = (kc.DOFS.index(parts[1]), kc.LOADS.index(parts[2]))
    elif not _kc_metric(metric) and metric not in TIME_METRICS:
        raise ConfigError(f"{what}.metric = {metric!r} is not a K&C metric "
                          f"({', '.join([*kc.METRICS, *kc.AXLE_METRICS])}), "
                          f"compliance.<dof>.<load>, or a time response ({', '.join(TIME_METRICS)})")
    side = o.get("side", "mean")
    if side not in SIDE_CHOICES:
        raise ConfigError(f"{what}.side = {side!r} is not one of {', '.join(SIDE_CHOICES)}")
    return metric, side, comp


def parse_objectives(spec) -> list:
    """``objectives`` mapping -> list of dicts; one-line error naming the field."""
    if not spec:
        raise ConfigError("objectives: give at least one objective (metric, target)")
    out = []
    for name, o in spec.items():
        what = f"objectives.{name}"
        if not isinstance(o, dict):
            raise ConfigError(f"{what} must be a mapping with metric and target")
        check_keys(what, o, OBJECTIVE_KEYS)
        metric, side, comp = _parse_metric(what, o)
        if o.get("target") is None:
            raise ConfigError(f"{what}.target is missing")
        target = Float().check(o["target"], f"{what}.target")
        weight = Float(ge=0).check(o.get("weight", 1.0), f"{what}.weight")
        scale = o.get("scale")
        from_target = scale is None
        scale = abs(target) if scale is None else Float().check(scale, f"{what}.scale")
        if not (np.isfinite(scale) and scale > 0):
            raise ConfigError(f"{what}.scale = {o.get('scale')}: needs a positive normalisation "
                             "(give scale when the target is 0)")
        out.append(dict(name=name, metric=metric, side=side, target=target, weight=weight,
                        scale=scale, scale_from_target=from_target, compliance=comp, kind="time" if metric in TIME_METRICS else "kc",
                        units=metric_units(metric)))
    return out


def parse_constraints(spec, objective_names=()) -> list:
    """``constraints`` mapping -> list of dicts (may be empty).

    Each entry: ``metric`` and ``side`` as for objectives; ``lower`` and/or
    ``upper`` [the metric's display units]; ``weight`` (rho of the
    augmented Lagrangian, :meth:`TuneProblem.objective`, default
    :data:`CONSTRAINT_WEIGHT`) [1]; ``scale`` (normalisation of the
    violation, default the largest |bound| given); ``tolerance`` (how far
    outside a bound still counts as holding in the reports, default
    :data:`CONSTRAINT_TOLERANCE` x scale) [display units]. A one-line
    :class:`ConfigError` names the key: an unknown metric, no bound,
    lower > upper, a non-finite value, a name taken by an objective."""
    out = []
    for name, c in (spec or {}).items():
        what = f"constraints.{name}"
        if not isinstance(c, dict):
            raise ConfigError(f"{what} = {fmt(c)}: must be a mapping with metric and lower and/or upper")
        check_keys(what, c, CONSTRAINT_KEYS)
        if name in objective_names:
            raise ConfigError(f"{what}: the name is taken by objectives.{name}; give the constraint "
                              "another name")
        metric, side, comp = _parse_metric(what, c)
        lower = None if c.get("lower") is None else Float().check(c["lower"], f"{what}.lower")
        upper = None if c.get("upper") is None else Float().check(c["upper"], f"{what}.upper")
        if lower is None and upper is None:
            raise ConfigError(f"{what}: give lower and/or upper (bounds in {metric_units(metric)})")
        if lower is not None and upper is not None and lower > upper:
            raise ConfigError(f"{what}.lower = {fmt(lower)}: must be <= {what}.upper = {fmt(upper)}")
        weight = Float(gt=0).check(c.get("weight", CONSTRAINT_WEIGHT), f"{what}.weight")
        if c.get("scale") is None:
            scale = max(abs(b) for b in (lower, upper) if b is not None)
            if not scale > 0:
                raise ConfigError(f"{what}.scale = null: the bounds are 0, give scale (the "
                                  f"normalisation of a violation, {metric_units(metric)})")
        else:
            scale = Float(gt=0).check(c["scale"], f"{what}.scale")
        tol = c.get("tolerance")
        tol = CONSTRAINT_TOLERANCE * scale if tol is None else Float(ge=0).check(tol, f"{what}.tolerance")
        out.append(dict(name=name, metric=metric, side=side, lower=lower, upper=upper, weight=weight,
                        scale=scale, tolerance=tol, compliance=comp,
                        kind="time" if metric in TIME_METRICS else "kc", units=metric_units(metric)))
    return out


def bounds_text(c):
    """'in [lo, hi]', '>= lo' or '<= hi' (display units)."""
    if c["lower"] is not None and c["upper"] is not None:
        return f"in [{c['lower']:g}, {c['upper']:g}]"
    return f">= {c['lower']:g}" if c["lower"] is not None else f"<= {c['upper']:g}"


def violation(c, values):
    """How far ``values`` lie outside the constraint's bounds (0 inside, NaN
    for NaN) [display units]; scalars or arrays."""
    v = np.asarray(values, float)
    lo = -np.inf if c["lower"] is None else c["lower"]
    hi = np.inf if c["upper"] is None else c["upper"]
    return np.maximum(np.maximum(lo - v, v - hi), 0.0)


class TuneProblem:
    """The objective of a tuning config as pure JAX functions of z (unbounded).

    Responses y are the objectives (in config order) followed by the
    constraints; rows i of the data arrays (:meth:`data`) belong to them.
    """

    def __init__(self, cfg):
        self.model = model_from_config(cfg.model)
        spec = OmegaConf.to_container(cfg.parameters, resolve=True) if cfg.get("parameters") else {}
        if not spec:
            raise ConfigError("parameters: give at least one parameter to tune")
        try:
            self.pset = build_parameters(spec, self.model)
        except ModelError as err:      # the same schema as sweep.parameters, named as in this config
            raise ConfigError(str(err).replace("sweep.parameters.", "parameters.")) from None
        self.geometry = None
        if self.pset.hardpoints:
            # hardpoints move the model build (host code): the model's values
            # as a differentiable function of theta (geometry derivative by
            # central differences of the build, the rest exact)
            from sweep.engine.values import Lifted, PerVariant, differentiable_values
            self.lifted = Lifted(self.model)
            self.geometry = differentiable_values(PerVariant(cfg.model, self.pset, lambda m: m, self.lifted),
                                                  len(self.pset))
        self.objectives = parse_objectives(OmegaConf.to_container(cfg.objectives, resolve=True)
                                           if cfg.get("objectives") else {})
        self.constraints = parse_constraints(OmegaConf.to_container(cfg.constraints, resolve=True)
                                             if cfg.get("constraints") else {},
                                             [o["name"] for o in self.objectives])
        kcfg = OmegaConf.to_container(cfg.get("kc") or {}, resolve=True)
        self.loaded_radius = float(kcfg.get("loaded_radius", kc.DEFAULT_LOADED_RADIUS))
        if not self.loaded_radius > 0:
            raise ConfigError(f"kc.loaded_radius = {self.loaded_radius} must be > 0 [m]")
        self.brake_lock = float(kcfg.get("brake_lock_stiffness", kc.DEFAULT_BRAKE_LOCK))
        if not self.brake_lock >= 0:
            raise ConfigError(f"kc.brake_lock_stiffness = {self.brake_lock} must be >= 0")
        self.tol = float(kcfg.get("tolerance", 1e-6))
        self.lock_index = kc.brake_lock_index(self.model)
        rows = self.rows
        self.needs_kc = any(o["kind"] == "kc" for o in rows)
        self.needs_time = any(o["kind"] == "time" for o in rows)
        self.tr = self._time_response(OmegaConf.to_container(cfg.get("time_response") or {}, resolve=True)) \
            if self.needs_time else None
        p = self.pset.params
        self.lo = np.array([math.log(q.lower) if q.scale == "log" else q.lower for q in p])
        self.hi = np.array([math.log(q.upper) if q.scale == "log" else q.upper for q in p])
        self.is_log = np.array([q.scale == "log" for q in p])

    @property
    def rows(self):
        """Objectives, then constraints: the responses y in order."""
        return self.objectives + self.constraints

    @property
    def response_labels(self):
        """(name, units) of every response (objectives, then constraints)."""
        return [(o["name"], o["units"]) for o in self.rows]

    # ----- parametrisation
    def theta(self, z):
        """Parameter values from the unbounded variable z (sigmoid onto the bounds)."""
        w = jax.nn.sigmoid(z)
        x = self.lo + w * (self.hi - self.lo)
        return jnp.where(self.is_log, jnp.exp(x), x)

    def z_of(self, theta):
        theta = np.asarray(theta, float)
        with np.errstate(divide="ignore", invalid="ignore"):     # log of linear parameters' values unused
            x = np.where(self.is_log, np.log(theta), theta)
        w = np.clip((x - self.lo) / (self.hi - self.lo), 1e-9, 1 - 1e-9)
        return np.log(w) - np.log1p(-w)

    # ----- time response
    def _time_response(self, tr):
        what = "time_response"
        known = {"t_end", "step_time", "dt", "wheel_loads", "step", "settle_window", "checkpoint_block",
                 "solver"}
        check_keys(what, tr, known)
        dt = float(tr.get("dt", 1e-3))
        t_end = float(tr.get("t_end", 0.3))
        t_step = float(tr.get("step_time", 0.05))
        if not dt > 0:                    # the schema checks it for the command line; a script may not
            raise ConfigError(f"{what}.dt = {dt}: must be > 0 [s]")
        n = int(round(t_end / dt))
        if n < 1 or not math.isclose(n * dt, t_end, abs_tol=1e-9):
            raise ConfigError(f"{what}.dt = {dt} does not divide t_end = {t_end}")
        if not 0 <= t_step < t_end:
            raise ConfigError(f"{what}.step_time = {t_step} must be in [0, t_end = {t_end})")
        block = int(tr.get("checkpoint_block", 50))
        if block < 1 or n % block:
            raise ConfigError(f"{what}.checkpoint_block = {block} must divide the {n} steps")
        window = float(tr.get("settle_window", 0.05))
        if not 0 < window <= t_end - t_step:
            raise ConfigError(f"{what}.settle_window = {window} must be in (0, t_end - step_time]")
        solver = str(tr.get("solver", "dense"))
        base = np.zeros((2, 6))
        amp = np.zeros((2, 6))
        for arr, key in ((base, "wheel_loads"), (amp, "step")):
            for ch, val in (tr.get(key) or {}).items():
                if ch not in kc.LOADS:
                    raise ConfigError(f"{what}.{key}.{ch}: unknown load channel (one of {', '.join(kc.LOADS)})")
                arr[:, kc.LOADS.index(ch)] = float(val)
        refs = self.model.topology.tables.get("reference_bushings") or {}
        names = self.model.topology.bushing_names
        for o in self.rows:
            if o["metric"] == "peak_bushing_force" and not refs:
                section = "objectives" if o in self.objectives else "constraints"
                raise ConfigError(f"{section}: peak_bushing_force needs a model with a reference_bushing")
        ref_idx = np.array([names.index(refs[s]) for s in kc.SIDES]) if refs else np.zeros(2, int)
        times = np.arange(n + 1) * dt
        options = response.Options(n_samples=n + 1, method="lsrt2", solver=solver, state_events=False,
                                   checkpoint_block=block)
        return dict(dt=dt, n=n, block=block, t_step=t_step, t_end=t_end, solver=solver, options=options,
                    exc=loads.excitation(base, [(t_step, 0.0, amp)]), ref_idx=ref_idx,
                    after=times >= t_step - 1e-9, settle=times >= t_end - window - 1e-9, times=times)

    def time_response(self, model):
        """Reference-bushing Fx [N] and wheel-centre x displacement [m], (n+1, 2) each:
        the time-response driver (:func:`kernels.response.driver`) with LSRT2
        linearised every step, its reverse mode in checkpointed blocks."""
        tr = self.tr
        if "friction" in model.topology.p2p_events:
            raise ModelError("tuning: a time-response objective cannot be differentiated through a damper's "
                             "switching friction (its stick/slip events are located by a while loop, which "
                             "reverse mode cannot pass); give the damper friction law: regularised")
        m = model.topology.n_bodies

        def out(mdl, r, v, r_eq):
            r = r.reshape(m, 6)
            f = metrics.bushing_forces(mdl, r, v.reshape(m, 6))[tr["ref_idx"], 0]
            x = metrics.wheel_centre_position(mdl, r)[:, 0] - metrics.wheel_centre_position(mdl, r_eq.reshape(m, 6))[:, 0]
            return {"fx": f, "x": x}
        # the stops by the sign of their penetration (the state events of a
        # switching stop law are not reverse-differentiable; this load case
        # keeps the stops clear, where both laws are the same force)
        run = response.driver(tr["options"], out)
        problem = response.Problem(model, tr["exc"], 0.0, tr["dt"])
        start = run.init(problem)
        return run.run(problem, start.r).outputs, start.converged

    # ----- responses and objective
    def responses(self, theta):
        """{objective / constraint name: value in its units}, and an ok flag
        (equilibria converged)."""
        base = self.model if self.geometry is None else self.lifted.rebuild(self.geometry(theta))
        model = self.pset.apply(base, theta)
        vals, ok = {}, jnp.asarray(True)
        if self.needs_kc:
            mk = kc.lock_brakes(model, self.brake_lock, self.lock_index)
            eq = kc.design_position(mk, tol=self.tol)
            M = kc.kc_metrics(mk, eq, self.loaded_radius, with_geometry=any(
                o["kind"] == "kc" and (o["metric"] in kc.GEOMETRY_METRICS or (
                    o["metric"] in kc.AXLE_METRICS and o["metric"] not in kc.AXLE_COMPLIANCE_METRICS))
                for o in self.rows))
            ok = ok & eq.converged
        if self.needs_time:
            out, conv = self.time_response(model)
            ok = ok & conv
            peak = jnp.max(jnp.where(self.tr["after"][:, None], jnp.abs(out["fx"]), 0.0), 0) / 1e3
            settle = jnp.sum(jnp.where(self.tr["settle"][:, None], out["x"], 0.0), 0) \
                / np.sum(self.tr["settle"]) * 1e3
            T = {"peak_bushing_force": peak, "settling_displacement": settle}
        for o in self.rows:
            if o["compliance"] is not None:
                per_side = M["compliance_matrix"][:, o["compliance"][0], o["compliance"][1]]
            elif o["kind"] == "kc":
                per_side = M[o["metric"]]
                if o["metric"] in kc.AXLE_METRICS:          # one value for the axle
                    per_side = jnp.stack([per_side, per_side])
            else:
                per_side = T[o["metric"]]
            vals[o["name"]] = {"left": per_side[0], "right": per_side[1],
                               "mean": 0.5 * (per_side[0] + per_side[1])}[o["side"]]
        return vals, ok

    # The data of the compiled program, one row per response (objectives,
    # then constraints): DATA_FIELDS. Objective rows: penalty 0, bounds
    # -inf / inf, shifts 0; constraint rows: weight 0 (target unused).
    DATA_FIELDS = ("target", "weight", "scale", "lower", "upper", "penalty", "shift_lower", "shift_upper")

    def data(self):
        """The data of the optimisation (:data:`DATA_FIELDS`, arrays
        (n_responses,)): inputs of the compiled program, not constants
        (retargeting, new bounds or multipliers do not recompile). The
        multiplier shifts start at 0 (the first round is the exterior
        quadratic penalty)."""
        obj, cs = self.objectives, self.constraints
        cols = ([o["target"] for o in obj] + [0.0] * len(cs),
                [o["weight"] for o in obj] + [0.0] * len(cs),
                [o["scale"] for o in self.rows],
                [-np.inf] * len(obj) + [-np.inf if c["lower"] is None else c["lower"] for c in cs],
                [np.inf] * len(obj) + [np.inf if c["upper"] is None else c["upper"] for c in cs],
                [0.0] * len(obj) + [c["weight"] for c in cs],
                [0.0] * len(self.rows), [0.0] * len(self.rows))
        return tuple(np.array(c, float) for c in cols)

    def weights(self):
        """(targets, weights, scales) of the responses."""
        return self.data()[:3]

    def probe_data(self, i):
        """Data for which J = y_i^2 (target 0, weight e_i, scale 1, no
        constraint term): the gradient check."""
        n = len(self.rows)
        return (np.zeros(n), np.eye(n)[i], np.ones(n), np.full(n, -np.inf), np.full(n, np.inf),
                np.zeros(n), np.zeros(n), np.zeros(n))

    def objective(self, z, targets, weights, scales, lower, upper, penalty, shift_lower, shift_upper):
        """J(z) and the responses y (objectives, then constraints):

            J = sum_i w_i ((y_i - target_i) / s_i)^2
                + sum_j rho_j [max(0, g_j + sigma_j)^2 - sigma_j^2]      (per bound of constraint j)

        with g = (lower_j - y_j) / s_j or (y_j - upper_j) / s_j (<= 0: the
        bound holds), rho_j the constraint's ``weight`` and s_j its
        ``scale``; NaN when an equilibrium fails.

        The constraint term is the augmented Lagrangian of Powell, Hestenes
        and Rockafellar with multiplier mu_j = 2 rho_j sigma_j: in the first
        round sigma = 0, an exterior quadratic penalty; after each round the
        multipliers are updated, sigma <- max(0, sigma + g) at the round's
        best point (:meth:`next_round`), so the bound is met exactly with a
        moderate rho, instead of only approximately (a pure penalty leaves an
        active constraint outside its bound by ~ s^2 |dJ/dy| / (2 rho)) or
        only with a very large rho. Measured on the recovery problem of
        tests/e2e/test_tune_jobs.py with one response turned into a bound: the plain
        penalty with rho = 1e4 needed ~400 L-BFGS iterations (the steep,
        kinked valley of a large rho slows L-BFGS) and still ended 1.4e-5
        outside the bound; with rho = 1e2 it converged in < 100 iterations
        but 1.4e-3 outside; the augmented Lagrangian with rho = 1e2 reached
        the same optimum, ~1e-4 (relative) from the bound after 2 rounds of
        60 iterations, 5e-8 after 4.
        Within a round J is one fixed smooth (C1) function of z, so both
        optimisers run unchanged; the multipliers are data of the compiled
        program (no recompilation), and the L-BFGS memory restarts each
        round."""
        vals, ok = self.responses(self.theta(z))
        y = jnp.stack([vals[o["name"]] for o in self.rows])
        g_lo = (lower - y) / scales
        g_hi = (y - upper) / scales
        J = jnp.sum(weights * ((y - targets) / scales) ** 2) \
            + jnp.sum(penalty * (jnp.maximum(g_lo + shift_lower, 0.0) ** 2 - shift_lower ** 2
                                 + jnp.maximum(g_hi + shift_upper, 0.0) ** 2 - shift_upper ** 2))
        return jnp.where(ok, J, jnp.nan), y

    def tracking(self, y_objectives):
        """The objective without the constraint term at objective responses
        (..., n_objectives) [1] (numpy)."""
        t, w, s = (np.array([o[k] for o in self.objectives], float) for k in ("target", "weight", "scale"))
        return np.sum(w * ((np.asarray(y_objectives, float) - t) / s) ** 2, axis=-1)

    def constraint_term(self, y, data):
        """The constraint term of J (numpy) at responses y (..., n_responses)
        with the data of a round (arrays (..., n_responses))."""
        _, _, s, lo, hi, rho, sl, su = (np.asarray(a, float) for a in data)
        y = np.asarray(y, float)
        with np.errstate(invalid="ignore"):
            term = rho * (np.maximum((lo - y) / s + sl, 0.0) ** 2 - sl ** 2
                          + np.maximum((y - hi) / s + su, 0.0) ** 2 - su ** 2)
        return np.sum(np.where(rho > 0, term, 0.0), axis=-1)

    def multipliers(self, data):
        """{constraint: {lower|upper: mu}} of data (n_responses,): the
        Lagrange multipliers of the bounds in the normalised objective,
        mu = 2 rho sigma (0: the bound is not active)."""
        n_o = len(self.objectives)
        out = {}
        for j, c in enumerate(self.constraints):
            i = n_o + j
            out[c["name"]] = {b: float(2 * data[5][i] * data[6 if b == "lower" else 7][i])
                              for b in ("lower", "upper") if c[b] is not None}
        return out

    def next_round(self, data, y):
        """The augmented-Lagrangian update after a round: data (arrays
        (n_starts, n_responses)) and the round's best responses y
        (n_starts, n_responses) -> (data of the next round, log line), or
        None when there is nothing to do: no constraints, or every
        constraint holds (within its tolerance) at every start that has a
        finite result. Per start: sigma <- max(0, sigma + g)."""
        if not self.constraints:
            return None
        n_o = len(self.objectives)
        yc = np.asarray(y, float)[:, n_o:]
        finite = np.all(np.isfinite(yc), axis=1)
        if not finite.any() or all(all(h for _, _, h in self.constraint_report(row)) for row in yc[finite]):
            return None
        _, _, s, lo, hi, rho, sl, su = (np.array(a, float) for a in data)
        y = np.asarray(y, float)
        upd = (rho > 0) & np.isfinite(y)
        with np.errstate(invalid="ignore"):
            sl = np.where(upd, np.maximum(sl + (lo - y) / s, 0.0), sl)
            su = np.where(upd, np.maximum(su + (y - hi) / s, 0.0), su)
        new = tuple(data[:6]) + (sl, su)
        mu = self.multipliers(tuple(a[0] for a in new))
        text = ", ".join(f"{name} {b} {m:.3g}" for name, d in mu.items() for b, m in d.items())
        return new, f"constraints: next round, multipliers (start 0): {text}"

    def constraint_report(self, y_constraints):
        """[(constraint, value, holds)] at constraint values (n_constraints,):
        holds = within the bounds up to the constraint's tolerance."""
        out = []
        for c, v in zip(self.constraints, np.asarray(y_constraints, float)):
            viol = float(violation(c, v))
            out.append((c, float(v), bool(np.isfinite(viol) and viol <= c["tolerance"])))
        return out

    def signature(self):
        """Text that identifies the compiled program (everything but the data
        of :meth:`data`)."""
        return yaml.safe_dump({"model": self.model.topology.name, "params": repr(self.pset.params),
                               "objectives": [[o["metric"], o["side"]] for o in self.rows],
                               "kc": [self.loaded_radius, self.brake_lock, self.tol],
                               "tr": repr({k: v for k, v in (self.tr or {}).items() if k != "exc"})
                               + repr(self.tr["exc"] if self.tr else None)})

    def trace_key(self):
        """Everything the compiled objective closes over (the model's tables,
        the parameters, the metric, side and kind of every response, the
        K&C settings, the time response's excitation and grid), for the
        trace cache of the optimisation step; not the data (:meth:`data`:
        targets, weights, bounds, multipliers are inputs)."""
        from sweep.core.tracecache import fingerprint
        if self.geometry is not None:     # a host callback (the model build) is not exportable
            return None
        rows = [[o["metric"], o["side"], o["kind"], o["compliance"]] for o in self.rows]
        return fingerprint(self.signature(), self.model, self.pset, rows, self.tr, self.loaded_radius,
                           self.brake_lock, self.tol, self.lock_index, self.lo, self.hi, self.is_log)


def targets_from(problem, oc, values, log=print):
    """Replace every objective's target by the response of the axle with the
    parameter values ``values`` ({parameter: value}; the others nominal) -
    synthetic targets for identification / recovery studies. Evaluated with
    the compiled optimisation step (no extra compilation). Constraints keep
    their bounds."""
    from sweep.tune.optimiser import evaluate, parameter_point
    names = problem.pset.names
    theta = parameter_point(problem, values, "targets_from")
    y = evaluate(problem, oc, theta)[:len(problem.objectives)]
    if not np.all(np.isfinite(y)):
        raise ConfigError(f"targets_from = {values}: the responses there are not finite (equilibrium failed)")
    log("targets from " + ", ".join(f"{n} = {v:g}" for n, v in zip(names, theta)) + ":")
    for o, v in zip(problem.objectives, y):
        o["target"] = float(v)
        if o["scale_from_target"] and v != 0:
            o["scale"] = abs(float(v))
        log(f"  {o['name']:32s} {v:11.5g} {o['units']}")
