"""``python -m sweep.tune``: gradient-based tuning of bushing and damper parameters.

Finds parameter values (``parameters``: the same schema as
``sweep.parameters``, bounded, usually ``scale: log``) such that the axle
reaches target K&C metrics and/or target time-response figures, by
minimising the weighted sum of squared normalised errors

    J(theta) = sum_i w_i ((y_i(theta) - target_i) / s_i)^2,
    s_i = |target_i| unless ``scale`` is given,

with an optax optimiser (``adam`` or ``lbfgs``) over an unbounded variable
z: theta_i = from_unit_i(sigmoid(z_i)), where from_unit maps [0, 1] onto the
bounds linearly or in the logarithm (``scale: log``). Every evaluation is
differentiated exactly:

* K&C metrics (:mod:`kernels.kc`): through the static equilibrium by the
  implicit function theorem (:func:`kernels.statics.implicit_solution`) and
  through the linearisation at the design position;
* time responses: reverse mode through LSRT2 over ``lax.scan`` in
  checkpointed blocks (:func:`kernels.kc.simulate_checkpointed`), started
  from the (implicitly differentiated) static equilibrium.

Several starting points are optimised at once (``jax.vmap`` over starts:
start 0 at ``optimizer.start`` or the nominal values, the others a Latin
hypercube over the bounds); the best is kept. A start whose equilibrium
fails or whose objective is not finite keeps its last parameters. Progress
is printed per iteration; the history (objective, parameters, gradient norm,
responses per iteration and start) is written as a zarr dataset at
``output.path``, the final design as ``<path stem>_design.yaml`` beside it.

Responses (``objectives.<name>.metric``):

* any K&C metric of :data:`kernels.kc.METRICS` (engineering units), per
  ``side``: left, right or mean;
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

import logging
import math
import os
import shutil
import time

import jax
import jax.numpy as jnp
import numpy as np
import optax
import yaml
from omegaconf import DictConfig, OmegaConf

from kernels import kc, loads, metrics, statics
from kernels.model import ModelError
from sweep.job import model_from_config
from sweep.params import build_parameters, check_keys
from sweep.schema import ConfigError, Float

logger = logging.getLogger(__name__)

TIME_METRICS = {"peak_bushing_force": "kN", "settling_displacement": "mm"}
OBJECTIVE_KEYS = {"metric", "side", "target", "weight", "scale"}
OPTIMIZERS = ("adam", "lbfgs")
SIDE_CHOICES = ("left", "right", "mean")


def metric_units(metric):
    if metric in kc.METRICS:
        return kc.METRICS[metric][0]
    if metric in TIME_METRICS:
        return TIME_METRICS[metric]
    return "SI"


# --------------------------------------------------------------------------- config

def parse_objectives(spec) -> list:
    """``objectives`` mapping -> list of dicts; one-line error naming the field."""
    if not spec:
        raise ModelError("objectives: give at least one objective (metric, target)")
    out = []
    for name, o in spec.items():
        what = f"objectives.{name}"
        if not isinstance(o, dict):
            raise ModelError(f"{what} must be a mapping with metric and target")
        check_keys(what, o, OBJECTIVE_KEYS)
        metric = o.get("metric")
        comp = None
        if isinstance(metric, str) and metric.startswith("compliance."):
            parts = metric.split(".")
            if len(parts) != 3 or parts[1] not in kc.DOFS or parts[2] not in kc.LOADS:
                raise ModelError(f"{what}.metric = {metric!r}: use compliance.<{'|'.join(kc.DOFS)}>."
                                 f"<{'|'.join(kc.LOADS)}>")
            comp = (kc.DOFS.index(parts[1]), kc.LOADS.index(parts[2]))
        elif metric not in kc.METRICS and metric not in TIME_METRICS:
            raise ModelError(f"{what}.metric = {metric!r} is not a K&C metric ({', '.join(kc.METRICS)}), "
                             f"compliance.<dof>.<load>, or a time response ({', '.join(TIME_METRICS)})")
        side = o.get("side", "mean")
        if side not in SIDE_CHOICES:
            raise ModelError(f"{what}.side = {side!r} is not one of {', '.join(SIDE_CHOICES)}")
        if o.get("target") is None:
            raise ConfigError(f"{what}.target is missing")
        target = Float().check(o["target"], f"{what}.target")
        weight = Float(ge=0).check(o.get("weight", 1.0), f"{what}.weight")
        scale = o.get("scale")
        from_target = scale is None
        scale = abs(target) if scale is None else Float().check(scale, f"{what}.scale")
        if not (np.isfinite(scale) and scale > 0):
            raise ModelError(f"{what}.scale = {o.get('scale')}: needs a positive normalisation "
                             "(give scale when the target is 0)")
        out.append(dict(name=name, metric=metric, side=side, target=target, weight=weight,
                        scale=scale, scale_from_target=from_target, compliance=comp, kind="time" if metric in TIME_METRICS else "kc",
                        units=metric_units(metric)))
    return out


def apply_parameters(pset, model, theta):
    """:meth:`sweep.params.ParameterSet.apply` in a form that JAX can
    differentiate with respect to theta: each parameter acts through a
    constant 0/1 mask of its entries (``x * (1 + mask (theta - 1))`` for
    ``scale``, ``x (1 - mask) + mask theta`` for ``value``) instead of a
    scatter-multiply (whose derivative JAX does not implement for
    non-unique indices)."""
    import dataclasses
    updates = {}
    for i, p in enumerate(pset.params):
        arr = updates.get(p.field, getattr(model, p.field))
        mask = np.zeros(arr.shape)
        mask[p.index] = 1.0
        if p.mode == "scale":
            arr = arr * (1.0 + mask * (theta[i] - 1.0))
        else:
            arr = arr * (1.0 - mask) + mask * theta[i]
        updates[p.field] = arr
    return dataclasses.replace(model, **updates) if updates else model


class TuneProblem:
    """The objective of a tuning config as pure JAX functions of z (unbounded)."""

    def __init__(self, cfg):
        self.model = model_from_config(cfg.model)
        spec = OmegaConf.to_container(cfg.parameters, resolve=True) if cfg.get("parameters") else {}
        if not spec:
            raise ModelError("parameters: give at least one parameter to tune")
        try:
            self.pset = build_parameters(spec, self.model)
        except ModelError as err:      # the same schema as sweep.parameters, named as in this config
            raise ModelError(str(err).replace("sweep.parameters.", "parameters.")) from None
        self.objectives = parse_objectives(OmegaConf.to_container(cfg.objectives, resolve=True)
                                           if cfg.get("objectives") else {})
        kcfg = OmegaConf.to_container(cfg.get("kc") or {}, resolve=True)
        self.loaded_radius = float(kcfg.get("loaded_radius", kc.DEFAULT_LOADED_RADIUS))
        if not self.loaded_radius > 0:
            raise ModelError(f"kc.loaded_radius = {self.loaded_radius} must be > 0 [m]")
        self.brake_lock = float(kcfg.get("brake_lock_stiffness", kc.DEFAULT_BRAKE_LOCK))
        if not self.brake_lock >= 0:
            raise ModelError(f"kc.brake_lock_stiffness = {self.brake_lock} must be >= 0")
        self.tol = float(kcfg.get("tolerance", 1e-6))
        self.lock_index = kc.brake_lock_index(self.model)
        self.needs_kc = any(o["kind"] == "kc" for o in self.objectives)
        self.needs_time = any(o["kind"] == "time" for o in self.objectives)
        self.tr = self._time_response(OmegaConf.to_container(cfg.get("time_response") or {}, resolve=True)) \
            if self.needs_time else None
        p = self.pset.params
        self.lo = np.array([math.log(q.lower) if q.scale == "log" else q.lower for q in p])
        self.hi = np.array([math.log(q.upper) if q.scale == "log" else q.upper for q in p])
        self.is_log = np.array([q.scale == "log" for q in p])

    # ----- parametrisation
    def theta(self, z):
        """Parameter values from the unbounded variable z (sigmoid onto the bounds)."""
        w = jax.nn.sigmoid(z)
        x = self.lo + w * (self.hi - self.lo)
        return jnp.where(self.is_log, jnp.exp(x), x)

    def z_of(self, theta):
        theta = np.asarray(theta, float)
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
        if not dt > 0:
            raise ModelError(f"{what}.dt = {dt} must be > 0")
        n = int(round(t_end / dt))
        if n < 1 or not math.isclose(n * dt, t_end, abs_tol=1e-9):
            raise ModelError(f"{what}.dt = {dt} does not divide t_end = {t_end}")
        if not 0 <= t_step < t_end:
            raise ModelError(f"{what}.step_time = {t_step} must be in [0, t_end = {t_end})")
        block = int(tr.get("checkpoint_block", 50))
        if block < 1 or n % block:
            raise ModelError(f"{what}.checkpoint_block = {block} must divide the {n} steps")
        window = float(tr.get("settle_window", 0.05))
        if not 0 < window <= t_end - t_step:
            raise ModelError(f"{what}.settle_window = {window} must be in (0, t_end - step_time]")
        solver = str(tr.get("solver", "dense"))
        base = np.zeros((2, 6))
        amp = np.zeros((2, 6))
        for arr, key in ((base, "wheel_loads"), (amp, "step")):
            for ch, val in (tr.get(key) or {}).items():
                if ch not in kc.LOADS:
                    raise ModelError(f"{what}.{key}.{ch}: unknown load channel (one of {', '.join(kc.LOADS)})")
                arr[:, kc.LOADS.index(ch)] = float(val)
        refs = self.model.topology.tables.get("reference_bushings") or {}
        names = self.model.topology.bushing_names
        if any(o["metric"] == "peak_bushing_force" for o in self.objectives) and not refs:
            raise ModelError("objectives: peak_bushing_force needs a model with a reference_bushing")
        ref_idx = np.array([names.index(refs[s]) for s in kc.SIDES]) if refs else np.zeros(2, int)
        times = np.arange(n + 1) * dt
        return dict(dt=dt, n=n, block=block, t_step=t_step, t_end=t_end, solver=solver,
                    exc=loads.excitation(base, [(t_step, 0.0, amp)]), ref_idx=ref_idx,
                    after=times >= t_step - 1e-9, settle=times >= t_end - window - 1e-9, times=times)

    def time_response(self, model):
        """Reference-bushing Fx [N] and wheel-centre x displacement [m], (n+1, 2) each."""
        from kernels.system import model_system
        tr = self.tr
        m = model.topology.n_bodies
        eq = statics.static_equilibrium(model, loads.u_at(tr["exc"], 0.0))
        system = model_system(model, tr["exc"], tr["solver"])
        wc0 = metrics.wheel_centre_position(model, eq.r)

        def out(r, v, t):
            r = r.reshape(m, 6)
            f = metrics.bushing_forces(model, r, v.reshape(m, 6))[tr["ref_idx"], 0]
            return {"fx": f, "x": metrics.wheel_centre_position(model, r)[:, 0] - wc0[:, 0]}
        resp = kc.simulate_checkpointed(system, eq.r.reshape(-1), jnp.zeros(6 * m), 0.0, tr["dt"],
                                        tr["n"], out, tr["block"])
        return resp.outputs, eq.converged

    # ----- responses and objective
    def responses(self, theta):
        """{objective name: value in its units}, and an ok flag (equilibria converged)."""
        model = apply_parameters(self.pset, self.model, theta)
        vals, ok = {}, jnp.asarray(True)
        if self.needs_kc:
            mk = kc.lock_brakes(model, self.brake_lock, self.lock_index)
            eq = kc.design_position(mk, tol=self.tol)
            M = kc.kc_metrics(mk, eq, self.loaded_radius)
            ok = ok & eq.converged
        if self.needs_time:
            out, conv = self.time_response(model)
            ok = ok & conv
            peak = jnp.max(jnp.where(self.tr["after"][:, None], jnp.abs(out["fx"]), 0.0), 0) / 1e3
            settle = jnp.sum(jnp.where(self.tr["settle"][:, None], out["x"], 0.0), 0) \
                / np.sum(self.tr["settle"]) * 1e3
            T = {"peak_bushing_force": peak, "settling_displacement": settle}
        for o in self.objectives:
            if o["compliance"] is not None:
                per_side = M["compliance_matrix"][:, o["compliance"][0], o["compliance"][1]]
            elif o["kind"] == "kc":
                per_side = M[o["metric"]]
            else:
                per_side = T[o["metric"]]
            vals[o["name"]] = {"left": per_side[0], "right": per_side[1],
                               "mean": 0.5 * (per_side[0] + per_side[1])}[o["side"]]
        return vals, ok

    def weights(self):
        """(targets, weights, scales) arrays of the objectives: data, not
        constants of the compiled program (retargeting does not recompile)."""
        return tuple(np.array([o[k] for o in self.objectives], float) for k in ("target", "weight", "scale"))

    def objective(self, z, targets, weights, scales):
        """J(z) = sum_i w_i ((y_i - target_i) / s_i)^2 and the responses y (n_obj,).
        NaN when an equilibrium fails."""
        vals, ok = self.responses(self.theta(z))
        y = jnp.stack([vals[o["name"]] for o in self.objectives])
        J = jnp.sum(weights * ((y - targets) / scales) ** 2)
        return jnp.where(ok, J, jnp.nan), y

    def signature(self):
        """Text that identifies the compiled program (everything but targets,
        weights and scales)."""
        return yaml.safe_dump({"model": self.model.topology.name, "params": repr(self.pset.params),
                               "objectives": [[o["metric"], o["side"]] for o in self.objectives],
                               "kc": [self.loaded_radius, self.brake_lock, self.tol],
                               "tr": repr({k: v for k, v in (self.tr or {}).items() if k != "exc"})
                               + repr(self.tr["exc"] if self.tr else None)})


# --------------------------------------------------------------------------- optimisation

def make_optimizer(oc):
    """(name, optax transformation): ``adam`` (optax.adam, exponentially
    decaying learning rate) or ``lbfgs`` (the optax L-BFGS direction,
    optax.scale_by_lbfgs, with a step length found by backtracking across
    iterations, see :func:`_step_fn`)."""
    name = oc.get("name", "lbfgs")
    if name not in OPTIMIZERS:
        raise ModelError(f"optimizer.name = {name!r} is not one of {', '.join(OPTIMIZERS)}")
    lr = float(oc.get("learning_rate", 0.1))
    if not lr > 0:
        raise ModelError(f"optimizer.learning_rate = {lr} must be > 0")
    if name == "adam":
        n = int(oc.get("iterations", 100))
        sched = optax.exponential_decay(lr, transition_steps=max(1, n), decay_rate=float(oc.get("decay", 0.05)))
        return name, optax.adam(sched)
    memory = int(oc.get("memory", 10))
    if memory < 1:
        raise ModelError(f"optimizer.memory = {memory} must be >= 1")
    return name, optax.scale_by_lbfgs(memory_size=memory)


ARMIJO = 1e-4


def _step_fn(problem, name, opt):
    """One iteration for one start: a single value-and-gradient evaluation.

    adam: z <- z + adam(g). lbfgs: z is a trial point on the current search
    direction d from the last accepted point z_a. If J(z) satisfies Armijo's
    condition J <= J_a + c eta g_a.d it is accepted: the L-BFGS memory is
    updated with (z - z_a, g - g_a) and the next trial is z + d' with the new
    direction d' (first step: |d'| <= 1). Otherwise the step is halved along
    d: z <- z_a + eta/2 d. So every iteration costs one evaluation, and the
    compiled program holds the objective once (a line search inside the
    step would compile it again, measured: ~10x the compile time).

    Returns (next z, state, J(z), g(z), y(z), accepted z, accepted J)."""
    vg = jax.value_and_grad(problem.objective, has_aux=True)

    if name == "adam":
        def step(z, st, targets, weights, scales):
            (J, y), g = vg(z, targets, weights, scales)
            upd, new = opt.update(g, st, z)
            good = jnp.isfinite(J) & jnp.all(jnp.isfinite(g))
            z_new = jnp.where(good, optax.apply_updates(z, upd), z)
            new = jax.tree_util.tree_map(lambda a, b: jnp.where(good, a, b), new, st)
            return z_new, new, J, g, y, z, J
        return step

    def step(z, st, targets, weights, scales):
        opt_state, z_a, J_a, g_a, d_a, eta = st
        (J, y), g = vg(z, targets, weights, scales)
        good = jnp.isfinite(J) & jnp.all(jnp.isfinite(g))
        first = ~jnp.isfinite(J_a)
        accept = good & (first | (J <= J_a + ARMIJO * eta * jnp.dot(g_a, d_a)))
        u, opt_new = opt.update(g, opt_state, z)
        d = -u
        d = jnp.where(jnp.dot(g, d) < 0, d, -g / jnp.maximum(1.0, jnp.linalg.norm(g)))   # keep descent
        acc_state = (opt_new, z, J, g, d, jnp.asarray(1.0, z.dtype))
        rej_state = (opt_state, z_a, J_a, g_a, d_a, eta * 0.5)
        st_new = jax.tree_util.tree_map(lambda a, b: jnp.where(accept, a, b), acc_state, rej_state)
        z_next = st_new[1] + st_new[5] * st_new[4]
        return z_next, st_new, J, g, y, st_new[1], st_new[2]
    return step


def _init_state(name, opt, z):
    if name == "adam":
        return opt.init(z)
    inf = jnp.asarray(jnp.inf, z.dtype)
    return (opt.init(z), z, inf, jnp.zeros_like(z), jnp.zeros_like(z), jnp.asarray(1.0, z.dtype))


_STEPS = {}   # compiled vmapped steps per (problem signature, optimizer): reused in a process


def compiled_step(problem, oc):
    """(optimizer name, (jit(vmap(step)), jit(vmap(init)))), cached per problem signature."""
    name, opt = make_optimizer(oc)
    key = (problem.signature(), name, repr(sorted((k, v) for k, v in oc.items()
                                                   if k in ("learning_rate", "decay", "iterations", "memory"))))
    if key not in _STEPS:
        step = _step_fn(problem, name, opt)
        _STEPS[key] = (jax.jit(jax.vmap(step, in_axes=(0, 0, None, None, None))),
                       jax.jit(jax.vmap(lambda z: _init_state(name, opt, z))))
    return name, _STEPS[key]


def parameter_point(problem, values, what):
    """Parameter vector from a mapping name -> value (nominal where not given);
    one-line error naming ``what.name`` for an unknown name or a value out of
    bounds."""
    names = problem.pset.names
    for k in values:
        if k not in names:
            raise ModelError(f"{what}.{k}: not a tuned parameter (one of {', '.join(names)})")
    theta = np.array([float(values.get(p.name, p.nominal)) for p in problem.pset.params])
    for p, v in zip(problem.pset.params, theta):
        if not p.lower <= v <= p.upper:
            raise ModelError(f"{what}.{p.name} = {v} is outside bounds [{p.lower}, {p.upper}]")
    return theta


def start_points(problem, oc, names):
    """(n_starts, P) parameter values: start 0 = optimizer.start (default nominal),
    the others a Latin hypercube over the bounds (seeded)."""
    from scipy.stats import qmc
    n = int(oc.get("n_starts", 1))
    if n < 1:
        raise ModelError(f"optimizer.n_starts = {n} must be >= 1")
    starts = [parameter_point(problem, dict(oc.get("start") or {}), "optimizer.start")]
    if n > 1:
        U = qmc.LatinHypercube(d=len(names), seed=int(oc.get("seed", 0))).random(n - 1)
        starts += list(problem.pset.from_unit(U))
    return np.array(starts)


def optimise(problem, oc, progress=True, log=print):
    """Run the batched multi-start optimisation; returns the history dict.

    Per iteration and start the history holds the objective, parameters,
    gradient norm and responses at the best point so far (lbfgs: the last
    accepted point, so convergence is monotone; adam: the current point);
    ``evaluated`` holds J at the point evaluated in that iteration."""
    iters = int(oc.get("iterations", 100))
    if iters < 0:
        raise ModelError(f"optimizer.iterations = {iters} must be >= 0")
    gtol = float(oc.get("gtol", 0.0))
    theta0 = start_points(problem, oc, problem.pset.names)
    name, (vstep, vinit) = compiled_step(problem, oc)
    data = tuple(jnp.asarray(a) for a in problem.weights())
    z = jnp.asarray(np.stack([problem.z_of(t) for t in theta0]))
    state = vinit(z)
    n = len(theta0)
    hist = {"objective": [], "theta": [], "grad_norm": [], "responses": [], "evaluated": []}
    best_J = np.full(n, np.nan)
    best_z = np.asarray(z).copy()
    best_g = np.full(n, np.nan)
    best_y = np.full((n, len(problem.objectives)), np.nan)
    tic = time.perf_counter()
    for k in range(iters + 1):
        z_next, state_next, J, g, y, z_acc, J_acc = vstep(z, state, *data)
        zc, J, g, y, z_acc = (np.asarray(a) for a in (z, J, g, y, z_acc))
        gn = np.linalg.norm(g, axis=1)
        took = np.all(z_acc == zc, axis=1) & np.isfinite(J)     # the evaluated point is the accepted one
        if name == "adam":
            took = np.isfinite(J)
        best_J = np.where(took, J, best_J)
        best_z = np.where(took[:, None], zc, best_z)
        best_g = np.where(took, gn, best_g)
        best_y = np.where(took[:, None], y, best_y)
        hist["objective"].append(best_J.copy())
        hist["theta"].append(np.asarray(jax.vmap(problem.theta)(jnp.asarray(best_z))))
        hist["grad_norm"].append(best_g.copy())
        hist["responses"].append(best_y.copy())
        hist["evaluated"].append(J)
        ok = np.isfinite(best_J)
        if progress:
            b = int(np.argmin(np.where(ok, best_J, np.inf)))
            log(f"iter {k:4d}  objective best {best_J[b]:.4e} (start {b})  median "
                f"{np.nanmedian(best_J) if ok.any() else np.nan:.4e}  |grad| {best_g[b]:.2e}  "
                f"{time.perf_counter() - tic:.1f} s")
        if k == iters or (gtol > 0 and ok.any() and np.all(best_g[ok] < gtol)):
            break
        z, state = z_next, state_next
    hist = {k: np.stack(v) for k, v in hist.items()}
    hist["wall_s"] = time.perf_counter() - tic
    hist["optimizer"] = name
    return hist


def targets_from(problem, oc, values, log=print):
    """Replace every objective's target by the response of the axle with the
    parameter values ``values`` ({parameter: value}; the others nominal) -
    synthetic targets for identification / recovery studies. Evaluated with
    the compiled optimisation step (no extra compilation)."""
    names = problem.pset.names
    theta = parameter_point(problem, values, "targets_from")
    n_starts = len(start_points(problem, oc, names))
    _, (vstep, vinit) = compiled_step(problem, oc)
    Z = jnp.asarray(np.tile(problem.z_of(theta), (n_starts, 1)))
    y = np.asarray(vstep(Z, vinit(Z), *(jnp.asarray(a) for a in problem.weights()))[4])[0]
    if not np.all(np.isfinite(y)):
        raise ModelError(f"targets_from = {values}: the responses there are not finite (equilibrium failed)")
    log("targets from " + ", ".join(f"{n} = {v:g}" for n, v in zip(names, theta)) + ":")
    for o, v in zip(problem.objectives, y):
        o["target"] = float(v)
        if o["scale_from_target"] and v != 0:
            o["scale"] = abs(float(v))
        log(f"  {o['name']:32s} {v:11.5g} {o['units']}")


def gradient_check(problem, oc, step=1e-4, log=print):
    """Check the exact gradient of every response against central differences.

    At start 0 (``optimizer.start`` or nominal), with the same compiled step
    as the optimisation (targets/weights are data: weight e_i, target 0 and
    scale 1 make J = y_i^2, so grad y_i = grad J / (2 y_i)); the
    finite-difference points z0 +- step e_j run as batches of the same size.
    Returns {objective: max relative error over the parameters}, relative
    to the largest |d y_i / d z_j| of that objective."""
    theta0 = start_points(problem, oc, problem.pset.names)
    n_starts = len(theta0)
    _, (vstep, vinit) = compiled_step(problem, oc)
    z0 = problem.z_of(theta0[0])
    P, n_obj = len(z0), len(problem.objectives)
    pts = np.concatenate([z0 + step * np.eye(P), z0 - step * np.eye(P)])
    zeros, ones = jnp.zeros(n_obj), jnp.ones(n_obj)

    def batch(rows):
        Z = np.tile(z0, (n_starts, 1))
        Z[:len(rows)] = rows
        return jnp.asarray(Z)

    Y = []
    for a in range(0, len(pts), n_starts):
        Zb = batch(pts[a:a + n_starts])
        Y.append(np.asarray(vstep(Zb, vinit(Zb), zeros, ones, ones)[4])[:len(pts[a:a + n_starts])])
    Y = np.concatenate(Y)
    fd = (Y[:P] - Y[P:]).T / (2 * step)                   # (n_obj, P)
    Zb = batch(z0[None])
    state = vinit(Zb)
    errors = {}
    for i, o in enumerate(problem.objectives):
        w = jnp.zeros(n_obj).at[i].set(1.0)
        out = vstep(Zb, state, zeros, w, ones)
        y, g = float(np.asarray(out[4])[0, i]), np.asarray(out[3])[0]
        grad = g / (2 * y)
        scale = max(np.abs(fd[i]).max(), np.abs(grad).max(), 1e-300)
        errors[o["name"]] = float(np.abs(grad - fd[i]).max() / scale)
        log(f"  gradient check {o['name']:28s} max |exact - central difference| / max |grad| = "
            f"{errors[o['name']]:.1e}  (|grad| max {np.abs(grad).max():.3e} {o['units']} per unit z)")
    return errors


# --------------------------------------------------------------------------- output

def history_dataset(problem, hist, cfg_yaml):
    import xarray as xr
    from sweep.cube import provenance
    obj = problem.objectives
    J = hist["objective"][-1]
    best = int(np.nanargmin(np.where(np.isfinite(J), J, np.inf)))
    n_it, n_st = hist["objective"].shape
    ds = xr.Dataset(
        {"objective": (("iteration", "start"), hist["objective"],
                       {"units": "1", "long_name": "sum_i w_i ((y_i - target_i) / scale_i)^2"}),
         "parameter_value": (("iteration", "start", "parameter"), hist["theta"],
                             {"units": "1 (scale) or SI (value)", "long_name": "tuned parameter values"}),
         "objective_evaluated": (("iteration", "start"), hist["evaluated"],
                                 {"units": "1", "long_name": "objective at the point evaluated in the iteration "
                                                             "(lbfgs: trial point, maybe rejected)"}),
         "grad_norm": (("iteration", "start"), hist["grad_norm"],
                       {"units": "1", "long_name": "|dJ/dz|, z = logit of the position within the bounds"}),
         "response": (("iteration", "start", "objective_name"), hist["responses"],
                      {"long_name": "response of each objective (units per objective: attrs units)"}),
         "target": (("objective_name",), np.array([o["target"] for o in obj])),
         "weight": (("objective_name",), np.array([o["weight"] for o in obj])),
         "scale": (("objective_name",), np.array([o["scale"] for o in obj])),
         "units": (("objective_name",), np.array([o["units"] for o in obj])),
         "metric": (("objective_name",), np.array([f"{o['metric']} ({o['side']})" for o in obj]))},
        coords={"iteration": np.arange(n_it), "start": np.arange(n_st),
                "parameter": np.array(problem.pset.names), "objective_name": np.array([o["name"] for o in obj])},
        attrs={"best_start": best, "optimizer": hist["optimizer"], "wall_s": float(hist["wall_s"]),
               "config": cfg_yaml, "model": problem.model.topology.name, **provenance()})
    return ds, best


def final_design(problem, ds, best):
    last = ds.isel(iteration=-1, start=best)
    return {
        "objective": float(last.objective),
        "start": best,
        "iterations": int(ds.sizes["iteration"] - 1),
        "parameters": {p: float(v) for p, v in zip(problem.pset.names, last.parameter_value.values)},
        "objectives": {o["name"]: {"metric": o["metric"], "side": o["side"], "units": o["units"],
                                   "target": o["target"], "reached": float(last.response.values[i]),
                                   "initial": float(ds.response.values[0, best, i]), "weight": o["weight"]}
                       for i, o in enumerate(problem.objectives)},
    }


def design_path(path):
    return path.rstrip("/")[:-5] + "_design.yaml"


def run(cfg, cfg_yaml=None, progress=True, log=print):
    """Validate, optimise, write history (zarr) and final design (yaml). Returns the design dict."""
    cfg_yaml = cfg_yaml or OmegaConf.to_yaml(cfg, resolve=True)
    path = str(cfg.output.path)
    if not path.rstrip("/").endswith(".zarr"):
        raise ModelError(f"output.path = {path!r} must end in .zarr")
    if os.path.exists(path) and not cfg.output.get("overwrite", False):
        raise ModelError(f"output.path = {path!r} exists; choose another output.path or set output.overwrite=true")
    problem = TuneProblem(cfg)
    oc = OmegaConf.to_container(cfg.optimizer, resolve=True)
    # every optimizer setting is checked before any compilation
    make_optimizer(oc)
    start_points(problem, oc, problem.pset.names)
    if int(oc.get("iterations", 100)) < 0:
        raise ModelError(f"optimizer.iterations = {oc.get('iterations')} must be >= 0")
    log(f"tuning {len(problem.pset)} parameter(s) of {problem.model.topology.name} "
        f"({', '.join(problem.pset.names)}) for {len(problem.objectives)} objective(s), "
        f"{oc.get('n_starts', 1)} start(s), optimizer {oc.get('name', 'lbfgs')}")
    synthetic = cfg.get("targets_from")
    synthetic = OmegaConf.to_container(synthetic, resolve=True) if synthetic else {}
    if synthetic:
        targets_from(problem, oc, synthetic, log=log)
    gc = cfg.get("gradient_check")
    gc = OmegaConf.to_container(gc, resolve=True) if gc else {}
    checked = None
    if gc.get("enabled", False):
        h = float(gc.get("step", 1e-4))
        if not h > 0:
            raise ModelError(f"gradient_check.step = {h} must be > 0")
        log(f"gradient check at start 0, central differences with step {h} in z:")
        checked = gradient_check(problem, oc, h, log=log)
    hist = optimise(problem, oc, progress=progress, log=log)
    ds, best = history_dataset(problem, hist, cfg_yaml)
    if checked is not None:
        ds.attrs["gradient_check"] = yaml.safe_dump(checked)
    design = final_design(problem, ds, best)
    ds.attrs["final_design"] = yaml.safe_dump(design, sort_keys=False)
    tmp = path.rstrip("/") + ".partial"
    shutil.rmtree(tmp, ignore_errors=True)
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    ds.to_zarr(tmp, mode="w", zarr_format=2, consolidated=True)
    if os.path.exists(path):
        shutil.rmtree(path)
    os.rename(tmp, path)
    with open(design_path(path), "w") as fh:
        yaml.safe_dump(design, fh, sort_keys=False)
    log(f"best start {best}: objective {design['objective']:.4e} after {design['iterations']} iterations "
        f"({hist['wall_s']:.1f} s)")
    for p, v in design["parameters"].items():
        log(f"  {p:32s} {v:.6g}")
    log(f"  {'objective':32s} {'target':>11s} {'reached':>11s} {'initial':>11s}  units")
    for name, o in design["objectives"].items():
        log(f"  {name:32s} {o['target']:11.4g} {o['reached']:11.4g} {o['initial']:11.4g}  {o['units']}")
    log(f"history: {os.path.abspath(path)}\ndesign: {os.path.abspath(design_path(path))}")
    return design


def main(cfg: DictConfig, progress=True) -> int:
    """Run a tuning config; 0, or 2 after a one-line error (nothing built or written)."""
    from sweep.entry import ensure_console_logging
    from sweep.schema import ConfigError, check_tune_config
    ensure_console_logging()
    try:
        check_tune_config(cfg)
        run(cfg, progress=progress, log=logger.info)
    except (ConfigError, ModelError) as err:
        logger.error("error: " + " ".join(str(err).split()))
        return 2
    return 0


if __name__ == "__main__":
    from sweep.entry import tune_cli
    tune_cli()
