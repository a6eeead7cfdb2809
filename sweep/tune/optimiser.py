"""A batched, multi-start optax optimiser of a bounded problem - generic: it
knows nothing of axles.

A *problem* here is any object with

* ``pset``: the parameters (:class:`sweep.axle.params.ParameterSet`: names,
  nominal values, bounds, ``from_unit``);
* ``theta(z)`` / ``z_of(theta)``: parameter values from the unbounded
  variable z and back (``theta`` pure JAX);
* ``objective(z, *data) -> (J, y)``: the scalar J (NaN where the problem
  cannot be evaluated) and a response vector y (n_responses,), pure JAX;
  ``data`` are arrays that enter the compiled program as inputs, not
  constants (changing them does not recompile), one set per start;
* ``data()``: the data of the optimisation; ``probe_data(i)``: data for
  which J = y_i^2 (the gradient check);
* ``next_round(data, y)``: an outer loop (e.g. the multiplier update of an
  augmented Lagrangian): given the data of a round (per start) and the
  round's best responses, the data of the next round and a log line, or
  None to stop; at most ``optimizer.constraint_rounds`` rounds of
  ``optimizer.iterations`` iterations each, the optimiser state restarts
  from the best point of every start each round;
* ``response_labels``: (name, units) per response (logs);
* ``signature()``: text that identifies the compiled program (everything
  but the data);
* ``trace_key()`` (optional): a key of everything the program closes over
  (:func:`sweep.core.tracecache.fingerprint`), or None: with a key, the traced
  step is kept in the trace cache beside the persistent compilation cache,
  so that a second run of the same problem (another round of targets or
  bounds, the tuning notebook after the command line) skips tracing it -
  minutes for an axle's K&C and time-response gradients.

One iteration of one start is one value-and-gradient evaluation
(:func:`_step_fn`); the starts run vmapped in one compiled program, cached
per problem signature and optimiser settings (:func:`compiled_step`).
"""
from __future__ import annotations

import logging
import time

import jax
import jax.numpy as jnp
import numpy as np
import optax


from sweep.core import tracecache
from sweep.core.config import ConfigError

log = logging.getLogger("sweep")
OPTIMIZERS = ("adam", "lbfgs")
ARMIJO = 1e-4


def make_optimizer(oc):
    """(name, optax transformation): ``adam`` (optax.adam, exponentially
    decaying learning rate) or ``lbfgs`` (the optax L-BFGS direction,
    optax.scale_by_lbfgs, with a step length found by backtracking across
    iterations, see :func:`_step_fn`)."""
    name = oc.get("name", "lbfgs")
    if name not in OPTIMIZERS:
        raise ConfigError(f"optimizer.name = {name!r} is not one of {', '.join(OPTIMIZERS)}")
    lr = float(oc.get("learning_rate", 0.1))
    if not lr > 0:
        raise ConfigError(f"optimizer.learning_rate = {lr} must be > 0")
    if name == "adam":
        n = int(oc.get("iterations", 100))
        sched = optax.exponential_decay(lr, transition_steps=max(1, n), decay_rate=float(oc.get("decay", 0.05)))
        return name, optax.adam(sched)
    memory = int(oc.get("memory", 10))
    if memory < 1:
        raise ConfigError(f"optimizer.memory = {memory} must be >= 1")
    return name, optax.scale_by_lbfgs(memory_size=memory)


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

    ``step(z, state, *data)`` returns (next z, state, J(z), g(z), y(z),
    accepted z, accepted J)."""
    vg = jax.value_and_grad(problem.objective, has_aux=True)

    if name == "adam":
        def step(z, st, *data):
            (J, y), g = vg(z, *data)
            upd, new = opt.update(g, st, z)
            good = jnp.isfinite(J) & jnp.all(jnp.isfinite(g))
            z_new = jnp.where(good, optax.apply_updates(z, upd), z)
            new = jax.tree_util.tree_map(lambda a, b: jnp.where(good, a, b), new, st)
            return z_new, new, J, g, y, z, J
        return step

    def step(z, st, *data):
        opt_state, z_a, J_a, g_a, d_a, eta = st
        (J, y), g = vg(z, *data)
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


class _TraceCachedStep:
    """``vstep(z, state, *data)`` through the trace cache: the step as a
    function of flat arrays (the optimiser state's leaves in its place),
    exported and kept under ``key`` + the argument shapes
    (:func:`sweep.core.tracecache.traced`); without a key, plain ``jax.jit``."""

    def __init__(self, vstep, key):
        self.vstep, self.key, self.fns = vstep, key, {}
        self.loaded = None            # whether the last program built came from the trace cache

    def __call__(self, z, state, *data):
        leaves, tree = jax.tree_util.tree_flatten(state)
        n = len(leaves)
        # every call with arguments committed to the one device: the first
        # call's (fresh arrays) and the later ones' (the step's own outputs)
        # then lower to the same program (else two compilations of it)
        args = jax.device_put((z, *leaves, *data), jax.devices()[0])
        shapes = tuple((tuple(np.shape(a)), str(jnp.result_type(a))) for a in args)
        fn = self.fns.get((shapes, tree))
        if fn is None:
            vstep = self.vstep

            def flat(z, *rest):
                out = vstep(z, jax.tree_util.tree_unflatten(tree, rest[:n]), *rest[n:])
                return (out[0], *jax.tree_util.tree_leaves(out[1]), *out[2:])
            key = tracecache.fingerprint("tune-step", self.key, shapes, str(tree)) if self.key else None
            fn, self.loaded = tracecache.traced(jax.jit(flat), args, key)
            if self.loaded:
                log.info("optimisation step: traced program from the trace cache")
            self.fns[(shapes, tree)] = fn
        out = fn(*args)
        return (out[0], jax.tree_util.tree_unflatten(tree, out[1:1 + n]), *out[1 + n:])


def compiled_step(problem, oc):
    """(optimizer name, (vmapped step, jit(vmap(init)))), cached per problem
    signature; the step through the trace cache where the problem has a
    ``trace_key``."""
    name, opt = make_optimizer(oc)
    settings = repr(sorted((k, v) for k, v in oc.items() if k in ("learning_rate", "decay", "iterations", "memory")))
    key = (problem.signature(), name, settings)
    if key not in _STEPS:
        step = _step_fn(problem, name, opt)
        trace_key = getattr(problem, "trace_key", lambda: None)()
        _STEPS[key] = (_TraceCachedStep(jax.vmap(step), trace_key and (trace_key, name, settings)),
                       jax.jit(jax.vmap(lambda z: _init_state(name, opt, z))))
    return name, _STEPS[key]


def parameter_point(problem, values, what):
    """Parameter vector from a mapping name -> value (nominal where not given);
    one-line error naming ``what.name`` for an unknown name or a value out of
    bounds."""
    names = problem.pset.names
    for k in values:
        if k not in names:
            raise ConfigError(f"{what}.{k}: not a tuned parameter (one of {', '.join(names)})")
    theta = np.array([float(values.get(p.name, p.nominal)) for p in problem.pset.params])
    for p, v in zip(problem.pset.params, theta):
        if not p.lower <= v <= p.upper:
            raise ConfigError(f"{what}.{p.name} = {v} is outside bounds [{p.lower}, {p.upper}]")
    return theta


def start_points(problem, oc, names):
    """(n_starts, P) parameter values: start 0 = optimizer.start (default nominal),
    the others a Latin hypercube over the bounds (seeded)."""
    from scipy.stats import qmc
    n = int(oc.get("n_starts", 1))
    if n < 1:
        raise ConfigError(f"optimizer.n_starts = {n} must be >= 1")
    starts = [parameter_point(problem, dict(oc.get("start") or {}), "optimizer.start")]
    if n > 1:
        U = qmc.LatinHypercube(d=len(names), seed=int(oc.get("seed", 0))).random(n - 1)
        starts += list(problem.pset.from_unit(U))
    return np.array(starts)


def per_start(data, n):
    """The data tuple with a leading start axis (n, ...)."""
    return tuple(jnp.asarray(np.broadcast_to(a, (n,) + np.shape(a))) for a in data)


def evaluate(problem, oc, theta):
    """Responses y (n_responses,) at one parameter vector theta, with the
    compiled optimisation step (no extra compilation; the batch of the
    starts holds theta in every row)."""
    n_starts = len(start_points(problem, oc, problem.pset.names))
    _, (vstep, vinit) = compiled_step(problem, oc)
    Z = jnp.asarray(np.tile(problem.z_of(theta), (n_starts, 1)))
    return np.asarray(vstep(Z, vinit(Z), *per_start(problem.data(), n_starts))[4])[0]


def optimise(problem, oc, progress=True, log=print, on_first=None):
    """Run the batched multi-start optimisation; returns the history dict.

    Per iteration and start the history holds the objective, parameters,
    gradient norm and responses at the best point so far of the round
    (lbfgs: the last accepted point, so convergence is monotone within a
    round; adam: the current point); ``evaluated`` holds J at the point
    evaluated in that iteration, ``round`` the round of every iteration and
    ``data`` the data of every round (per start). ``on_first(y)``, if given,
    is called with the responses (n_starts, n_responses) at the starting
    points, after the first evaluation."""
    iters = int(oc.get("iterations", 100))
    if iters < 0:
        raise ConfigError(f"optimizer.iterations = {iters} must be >= 0")
    rounds = int(oc.get("constraint_rounds", 1))
    if rounds < 1:
        raise ConfigError(f"optimizer.constraint_rounds = {rounds} must be >= 1")
    gtol = float(oc.get("gtol", 0.0))
    theta0 = start_points(problem, oc, problem.pset.names)
    name, (vstep, vinit) = compiled_step(problem, oc)
    n = len(theta0)
    data = tuple(np.array(np.broadcast_to(a, (n,) + np.shape(a))) for a in problem.data())
    z = jnp.asarray(np.stack([problem.z_of(t) for t in theta0]))
    hist = {"objective": [], "theta": [], "grad_norm": [], "responses": [], "evaluated": [], "round": [],
            "data": []}
    best_z = np.asarray(z).copy()
    best_y = np.full((n, len(problem.response_labels)), np.nan)
    tic = time.perf_counter()
    it = 0
    for r in range(rounds):
        state = vinit(z)
        jdata = tuple(jnp.asarray(a) for a in data)
        best_J = np.full(n, np.nan)                 # J changes with the data: best of this round
        best_g = np.full(n, np.nan)
        for k in range(iters + 1):
            z_next, state_next, J, g, y, z_acc, J_acc = vstep(z, state, *jdata)
            zc, J, g, y, z_acc = (np.asarray(a) for a in (z, J, g, y, z_acc))
            if it == 0 and on_first is not None:
                on_first(y)
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
            hist["round"].append(r)
            ok = np.isfinite(best_J)
            if progress:
                b = int(np.argmin(np.where(ok, best_J, np.inf)))
                log(f"iter {it:4d}  objective best {best_J[b]:.4e} (start {b})  median "
                    f"{np.nanmedian(best_J) if ok.any() else np.nan:.4e}  |grad| {best_g[b]:.2e}  "
                    f"{time.perf_counter() - tic:.1f} s")
            it += 1
            if k == iters or (gtol > 0 and ok.any() and np.all(best_g[ok] < gtol)):
                break
            z, state = z_next, state_next
        hist["data"].append(data)
        nxt = problem.next_round(data, best_y) if r < rounds - 1 else None
        if nxt is None:
            break
        data, message = nxt
        z = jnp.asarray(best_z)                     # the next round starts at each start's best point
        if progress:
            log(message)
    hist = {k: (v if k == "data" else np.stack(v)) for k, v in hist.items()}
    hist["wall_s"] = time.perf_counter() - tic
    hist["optimizer"] = name
    return hist


def gradient_check(problem, oc, step=1e-4, log=print):
    """Check the exact gradient of every response against central differences.

    At start 0 (``optimizer.start`` or nominal), with the same compiled step
    as the optimisation (the data are inputs: ``problem.probe_data(i)``
    makes J = y_i^2, so grad y_i = grad J / (2 y_i)); the
    finite-difference points z0 +- step e_j run as batches of the same size.
    Returns {response name: max relative error over the parameters},
    relative to the largest |d y_i / d z_j| of that response."""
    theta0 = start_points(problem, oc, problem.pset.names)
    n_starts = len(theta0)
    _, (vstep, vinit) = compiled_step(problem, oc)
    z0 = problem.z_of(theta0[0])
    P = len(z0)
    pts = np.concatenate([z0 + step * np.eye(P), z0 - step * np.eye(P)])
    data = per_start(problem.data(), n_starts)

    def batch(rows):
        Z = np.tile(z0, (n_starts, 1))
        Z[:len(rows)] = rows
        return jnp.asarray(Z)

    Y = []
    for a in range(0, len(pts), n_starts):
        Zb = batch(pts[a:a + n_starts])
        Y.append(np.asarray(vstep(Zb, vinit(Zb), *data)[4])[:len(pts[a:a + n_starts])])
    Y = np.concatenate(Y)
    fd = (Y[:P] - Y[P:]).T / (2 * step)                   # (n_responses, P)
    Zb = batch(z0[None])
    state = vinit(Zb)
    errors = {}
    for i, (label, units) in enumerate(problem.response_labels):
        out = vstep(Zb, state, *per_start(problem.probe_data(i), n_starts))
        y, g = float(np.asarray(out[4])[0, i]), np.asarray(out[3])[0]
        grad = g / (2 * y)
        scale = max(np.abs(fd[i]).max(), np.abs(grad).max(), 1e-300)
        errors[label] = float(np.abs(grad - fd[i]).max() / scale)
        log(f"  gradient check {label:28s} max |exact - central difference| / max |grad| = "
            f"{errors[label]:.1e}  (|grad| max {np.abs(grad).max():.3e} {units} per unit z)")
    return errors
