"""Static equilibrium: solve q(r, 0, u0) = 0 by Newton with the assembled J_r,
and differentiate the solution by the implicit function theorem.

Every run starts from the static equilibrium (method.md section 2, last
implementation note). The iteration is a ``lax.while_loop`` so that it jits
and vmaps over variants; it reports convergence instead of raising, so that
a variant that fails is flagged rather than stopping a batch.

Derivatives. The Newton loop itself is never differentiated (its inputs are
``stop_gradient``-ed). The converged root x* of F(x, p) = 0 is passed through
:func:`implicit_solution`, a ``jax.custom_jvp`` whose tangent is the implicit
function theorem

    dx* = -(dF/dx)^-1 (dF/dp) dp          (at x = x*)

with dF/dx the assembled Jacobian (J_r of eq. 5, bordered for constraints)
and (dF/dp) dp the JVP of the residual with respect to the model parameters
and loads. The rule is linear in dp, so reverse mode (``jax.grad``) works by
JAX's transposition; it re-enters :func:`implicit_solution` for x*, so higher
derivatives are correct too. This is the same construction as
``jax.lax.custom_root``, written with the assembled Jacobian instead of a
Jacobian rebuilt from JVPs.

Two problems are provided:

* :func:`static_equilibrium` - all wheel-centre loads u prescribed;
* :func:`constrained_equilibrium` - the vertical wheel-centre positions are
  prescribed (a K&C rig's wheel pads in position control): the unknowns are
  r and the two vertical wheel-centre forces Fz (Lagrange multipliers of the
  constraints z_wc(r) = z_target), solved as one bordered Newton system.

Tyres (a model with ``tyres``: vertical bushings ``tyre_left``,
``tyre_right`` between the ground and the wheel centres, the road load
cases, :mod:`kernels.road`) are at rest in the static state: the static
problems solve with the tyres' stiffness and damping taken out
(:func:`unloaded_tyres`), so the static state is the one without tyres
under the same wheel loads, and a run from it uses the model whose tyre
offsets are their deflections there (:func:`tyres_at_rest`).

A sprung body (a model with ``sprung_body``: the chassis side of the axle
on a rigid body of the sprung mass, guided by the bushing
``sprung_body_guide`` that leaves heave and roll free; only with tyres,
which it stands on) is built held: the guide holds all six directions, so
the static problems, K&C and the modes at the design position see the body
held as on a rig, and the static state is the one with the body at its
design position. A run from it uses the model
whose guide carries, in its free directions, the constant force it carried
there and no stiffness (:func:`at_rest`): the body is in equilibrium at
rest, its weight is what the axle carries in the static state (whatever
its mass, which is its inertia), and it moves freely in heave and roll.
"""
import functools
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from kernels import linalg
from kernels.dynamics import linearise, q_fn

FZ_UNIT = 1.0e3    # N: unknown vertical forces are iterated in kN (conditioning only)
Z_UNIT = 1.0e-3    # m: constraint rows are written in mm (conditioning only)


class Equilibrium(NamedTuple):
    r: jax.Array           # (m, 6)
    converged: jax.Array   # bool
    iterations: jax.Array  # int
    residual: jax.Array    # max |generalised force| [N or N m]


class ConstrainedEquilibrium(NamedTuple):
    r: jax.Array           # (m, 6)
    fz: jax.Array          # (2,) vertical wheel-centre forces found [N], left, right
    converged: jax.Array   # bool
    iterations: jax.Array  # int
    residual: jax.Array    # max |generalised force| [N or N m]


def residual_forces(model, q):
    """M q (m, 6) [N, N m]: the generalised force behind accelerations q (m, 6)."""
    F = q[:, :3] * model.mass[:, None]
    M = jnp.einsum("mij,mj->mi", model.inertia, q[:, 3:])
    return jnp.concatenate([F, M], 1)


def generalised_residual(model, q):
    """Max |M q| over all bodies and directions [N, N m] for q of shape (m, 6)."""
    return jnp.max(jnp.abs(residual_forces(model, q)))


# --------------------------------------------------------------------------- implicit differentiation

@functools.partial(jax.custom_jvp, nondiff_argnums=(0, 1))
def implicit_solution(residual, jacobian, params, x):
    """Return x, a root of ``residual(x, params) = 0``, differentiable in ``params``.

    ``residual(x, params) -> (n,)`` and ``jacobian(x, params) -> (n, n)`` (its
    derivative in x) must be module-level functions (no closure over traced
    values). The tangent of x* is the implicit function theorem (module doc);
    the tangent of the ``x`` argument is ignored (the root does not depend on
    how it was found).
    """
    del residual, jacobian, params
    return x


@implicit_solution.defjvp
def _implicit_solution_jvp(residual, jacobian, primals, tangents):
    params, x = primals
    dparams, _ = tangents
    x = implicit_solution(residual, jacobian, params, x)     # keeps 2nd derivatives right
    _, rhs = jax.jvp(lambda p: residual(x, p), (params,), (dparams,))
    dx = -linalg.solve(jacobian(x, params), rhs)
    return x, dx


def _no_grad(tree):
    return jax.tree_util.tree_map(jax.lax.stop_gradient, tree)


def _newton(step, x0, tol, max_iter, polish):
    """Damped Newton: ``step(x) -> (residual measure, dx)``, then ``polish``
    more full steps once the measure is <= tol. One ``while_loop`` (one trace
    of ``step``, so one copy of the linearisation in the compiled program).

    Returns (x, converged, iterations to convergence, residual at x)."""
    def cond(state):
        x, it, res, dx, extra, it_conv = state
        # iterate while not converged and below max_iter; once converged,
        # exactly ``polish`` more steps
        return ((extra <= polish) & ((extra > 0) | (it < max_iter))
                & jnp.isfinite(res))

    def body(state):
        x, it, _, dx, extra, it_conv = state
        x = x + dx
        res, dx = step(x)
        # polishing: full Newton steps from a converged state take the root to
        # round-off (quadratic convergence), so that finite differences of
        # equilibrium results are not polluted by the stopping tolerance
        hit = (extra == 0) & (res <= tol)
        it_conv = jnp.where(hit, it, it_conv)
        extra = jnp.where((extra > 0) | hit, extra + 1, extra)
        return x, it + 1, res, dx, extra, it_conv

    zero = jnp.asarray(0)
    big = jnp.asarray(jnp.finfo(x0.dtype).max, x0.dtype)      # "not evaluated yet"
    state = (x0, zero, big, jnp.zeros_like(x0), zero, jnp.asarray(-1))
    x, it, res, dx, extra, it_conv = jax.lax.while_loop(cond, body, state)
    return x, extra > 0, jnp.where(extra > 0, it_conv, it), res


def _limit(dr, max_translation, max_rotation):
    """Factor <= 1 that limits the largest translation / rotation of a Newton step."""
    return jnp.minimum(1.0, jnp.minimum(
        max_translation / (jnp.max(jnp.abs(dr[:, :3])) + 1e-300),
        max_rotation / (jnp.max(jnp.abs(dr[:, 3:])) + 1e-300)))


# --------------------------------------------------------------------------- prescribed loads

def _free_residual(x, params):
    model, u = params
    m = model.topology.n_bodies
    return q_fn(model, x.reshape(m, 6), jnp.zeros((m, 6), x.dtype), u).reshape(-1)


def _free_jacobian(x, params):
    model, u = params
    m = model.topology.n_bodies
    return linearise(model, x.reshape(m, 6), jnp.zeros((m, 6), x.dtype), u).J_r


def tyre_rows(topology) -> tuple:
    """Indices of a model's tyre bushings (static), () without tyres."""
    from kernels.names import TYRE_BUSHINGS
    if not topology.tables.get("tyres"):
        return ()
    return tuple(topology.bushing_names.index(n) for n in TYRE_BUSHINGS)


def unloaded_tyres(model):
    """``model`` with its tyres' stiffness and damping zero (module doc);
    the model itself without tyres."""
    rows = np.asarray(tyre_rows(model.topology), int)
    if not len(rows):
        return model
    bu = model.elements["bushing"]
    return model.replace_elements(bushing={"k": bu["k"].at[rows].set(0.0), "c": bu["c"].at[rows].set(0.0)})


def tyres_at_rest(model, r):
    """``model`` with each tyre's offset set to its deflection in the state r
    (m, 6), so that its elastic force is zero there (module doc); the model
    itself without tyres."""
    rows = np.asarray(tyre_rows(model.topology), int)
    if not len(rows):
        return model
    from kernels import forces
    from kernels.dynamics import states_with_ground
    x = states_with_ground(r, jnp.zeros_like(r))
    b = model.topology.bushing_bodies[rows]
    prm = jax.tree_util.tree_map(lambda a: a[rows], model.elements["bushing"])
    defl = jax.vmap(lambda p, x1, x2: forces.bushing_deflection(p, x1, x2)[0])(prm, x[b[:, 0]], x[b[:, 1]])
    return model.replace_elements(bushing={"offset": model.elements["bushing"]["offset"].at[rows].set(defl)})


def mount_slot(topology) -> int:
    """The state slot the axle's body mounts end on: the sprung body's where
    the model has one, else the ground's (n_bodies)."""
    sb = topology.tables.get("sprung_body")
    return topology.body_names.index(sb["body"]) if sb else topology.n_bodies


def rig_bushings(topology) -> tuple:
    """Names of the bushings that are the rig, not the axle: the tyres and
    the sprung body's guide (not body mounts, not sweep targets)."""
    names = tuple(topology.bushing_names[i] for i in tyre_rows(topology))
    g = guide_row(topology)
    return names + ((topology.bushing_names[g],) if g is not None else ())


def guide_row(topology):
    """Index of a model's sprung-body guide bushing (static), None without one."""
    sb = topology.tables.get("sprung_body")
    return None if not sb else topology.bushing_names.index(sb["guide"])


def at_rest(model, r):
    """The model a run starts from in the static state r (m, 6) (module doc):
    the tyres at rest (:func:`tyres_at_rest`) and the sprung body's guide
    carrying, in its free directions, the force it carried there (held)
    as a constant (preload), with no stiffness or damping
    there. The model itself without tyres or a sprung body."""
    model = tyres_at_rest(model, r)
    g = guide_row(model.topology)
    if g is None:
        return model
    from kernels import forces
    from kernels.dynamics import states_with_ground
    from kernels.names import SPRUNG_BODY_FREE
    x = states_with_ground(r, jnp.zeros_like(r))
    a, b = model.topology.bushing_bodies[g]
    prm = jax.tree_util.tree_map(lambda p: p[g], model.elements["bushing"])
    defl, rate, _ = forces.bushing_deflection(prm, x[a], x[b])
    f_e, _ = forces.bushing_local_forces(prm, defl, rate)
    free = np.asarray(SPRUNG_BODY_FREE)
    bu = model.elements["bushing"]
    return model.replace_elements(bushing={"preload": bu["preload"].at[g, free].set(f_e[free]),
                                           "k": bu["k"].at[g, free].set(0.0), "c": bu["c"].at[g, free].set(0.0)})


def newton_increment(model, r, u, solver="dense"):
    """The Newton increment dr (m, 6) of q(r, 0, u) = 0 at r and the residual
    [N, N m]: G_r dr = -Q, G_r = dQ/dr and Q = M q the generalised forces.
    ``solver``: ``dense`` (the default) by dense LU of the assembled
    J_r = M^-1 G_r; ``block`` by the block LU of the body graph
    (:mod:`kernels.blocks`, the integrators' factorisation, here of -G_r,
    the stiffness: no pivoting between blocks, partial pivoting inside each
    pivot block, whose diagonal can be zero in Euler angles; one step of
    iterative refinement), from
    the block-sparse linearisation: faster per iteration on a batch of
    variants and about twice as long to compile on XLA (BENCHMARKS.md,
    "Static equilibria by blocks"); the generated backend's choice, whose C
    translates it (dense LU is a LAPACK call there is no C for). The two
    differ by round-off."""
    from kernels import blocks
    from kernels.dynamics import linearise_blocks
    from kernels.rotations import mv
    m = model.topology.n_bodies
    v0 = jnp.zeros_like(r)
    if solver == "dense":
        lin = linearise(model, r, v0, u)
        return -linalg.solve(lin.J_r, lin.q).reshape(m, 6), generalised_residual(model, lin.q.reshape(m, 6))
    lin = linearise_blocks(model, r, v0, u)
    elim = blocks.model_elimination(model.topology)
    q = lin.q.reshape(m, 6)
    Q = mv(lin.M, q)
    A = -lin.G_r[: elim.pattern.n]
    fac = blocks.factor(elim, A, blocks.inv6_pivoted)
    dr = blocks.solve(elim, fac, Q)
    # one step of iterative refinement: no pivoting between blocks lets the
    # error grow through stiff pivots (a wheel's spin: 20 N m/rad beside
    # 2e8 N/m), the residual's solve takes it back to dense LU's accuracy
    dr = dr + blocks.solve(elim, fac, Q - blocks.matvec(elim.pattern, A, dr))
    return dr, generalised_residual(model, q)


def static_equilibrium(model, u, r_start=None, tol=1e-6, max_iter=60,
                       max_translation=0.02, max_rotation=0.1, polish=2, solver="dense"):
    """Newton iteration for q(r, 0, u) = 0 (eq. 1b at rest).

    Args:
      u: (2, 6) wheel-centre loads [N, N m].
      tol: convergence limit on the largest generalised force residual [N, N m].
      max_translation, max_rotation: per-iteration step limits [m, rad]
        (a damped Newton step far from equilibrium; inactive near it).
      polish: full Newton steps after convergence (to round-off).
      solver: ``block`` or ``dense`` (:func:`newton_increment`).

    The returned ``r`` is differentiable with respect to the model parameters
    and ``u`` by the implicit function theorem (module doc).
    """
    m = model.topology.n_bodies
    model = unloaded_tyres(model)
    r0 = model.r_design if r_start is None else r_start
    model_c, u_c, r0 = _no_grad((model, u, r0))

    def step(x):
        dr, res = newton_increment(model_c, x.reshape(m, 6), u_c, solver)
        return res, (dr * _limit(dr, max_translation, max_rotation)).reshape(-1)

    x, ok, it, res = _newton(step, r0.reshape(-1), tol, max_iter, polish)
    finite = jnp.all(jnp.isfinite(x)) & jnp.isfinite(res)
    x = implicit_solution(_free_residual, _free_jacobian, (model, u), x)
    return Equilibrium(x.reshape(m, 6), ok & finite & (res <= tol), it, res)


# --------------------------------------------------------------------------- prescribed wheel-centre height

def _with_fz(u, fz):
    return u.at[:, 2].add(fz)


def _constrained_residual(x, params):
    model, u, z_target = params
    m = model.topology.n_bodies
    r = x[:-2].reshape(m, 6)
    fz = x[-2:] * FZ_UNIT
    q = q_fn(model, r, jnp.zeros((m, 6), x.dtype), _with_fz(u, fz)).reshape(-1)
    g = (r[model.topology.wheel_slots, 2] - z_target) / Z_UNIT
    return jnp.concatenate([q, g])


def _constrained_jacobian(x, params):
    model, u, _ = params
    m = model.topology.n_bodies
    r = x[:-2].reshape(m, 6)
    fz = x[-2:] * FZ_UNIT
    lin = linearise(model, r, jnp.zeros((m, 6), x.dtype), _with_fz(u, fz))
    return bordered_jacobian(model, lin)


def bordered_jacobian(model, lin):
    """d(q, g)/d(r, fz) of the constrained problem, (n + 2, n + 2), in the
    scaled unknowns (fz in kN) and rows (g in mm)."""
    n = lin.J_r.shape[0]
    slots = model.topology.wheel_slots
    B = lin.J_u[:, [2, 8]] * FZ_UNIT                     # dq/dFz (left, right)
    G = jnp.zeros((2, n), lin.J_r.dtype).at[jnp.arange(2), 6 * slots + 2].set(1.0 / Z_UNIT)
    top = jnp.concatenate([lin.J_r, B], 1)
    bottom = jnp.concatenate([G, jnp.zeros((2, 2), lin.J_r.dtype)], 1)
    return jnp.concatenate([top, bottom], 0)


def constrained_equilibrium(model, u, z_target, r_start=None, fz_start=None, tol=1e-6,
                            max_iter=60, max_translation=0.02, max_rotation=0.1, polish=2):
    """Static equilibrium with the wheel-centre heights prescribed.

    Solves q(r, 0, u + Fz e_z) = 0 and z_wc,s(r) = z_target,s (s = left, right)
    for r and the vertical wheel-centre forces Fz (2,) [N] - exactly what a
    K&C rig's vertical actuators in position control do; the other components
    of ``u`` (2, 6) [N, N m] are applied as given (their Fz column adds to the
    unknown force).

    Args:
      z_target: (2,) wheel-centre heights [m], vehicle frame.
      tol: limit on the largest generalised force residual [N, N m]; the
        height constraint is linear in r, so it holds to round-off after the
        first full Newton step.
    Returns a :class:`ConstrainedEquilibrium`; r and fz are differentiable
    with respect to the model parameters, u and z_target (implicit function
    theorem on the bordered system).
    """
    m = model.topology.n_bodies
    model = unloaded_tyres(model)
    r0 = model.r_design if r_start is None else r_start
    fz0 = jnp.zeros(2, r0.dtype) if fz_start is None else fz_start
    model_c, u_c, z_c, r0, fz0 = _no_grad((model, u, jnp.asarray(z_target, r0.dtype), r0, fz0))
    v0 = jnp.zeros_like(r0)
    slots = model.topology.wheel_slots

    def step(x):
        r = x[:-2].reshape(m, 6)
        lin = linearise(model_c, r, v0, _with_fz(u_c, x[-2:] * FZ_UNIT))
        g = (r[slots, 2] - z_c) / Z_UNIT
        res = jnp.maximum(generalised_residual(model_c, lin.q.reshape(m, 6)),
                          # a height error counts as unconverged until < 1e-9 m
                          jnp.max(jnp.abs(g)) * Z_UNIT * 1e9 * tol)
        dx = -linalg.solve(bordered_jacobian(model_c, lin), jnp.concatenate([lin.q, g]))
        dr = dx[:-2].reshape(m, 6)
        return res, dx * _limit(dr, max_translation, max_rotation)

    x0 = jnp.concatenate([r0.reshape(-1), fz0 / FZ_UNIT])
    x, ok, it, res = _newton(step, x0, tol, max_iter, polish)
    finite = jnp.all(jnp.isfinite(x)) & jnp.isfinite(res)
    x = implicit_solution(_constrained_residual, _constrained_jacobian,
                          (model, u, jnp.asarray(z_target, x.dtype)), x)
    return ConstrainedEquilibrium(x[:-2].reshape(m, 6), x[-2:] * FZ_UNIT,
                                  ok & finite & (res <= tol), it, res)


# the static equilibrium compiled once per model structure, for callers that
# solve one variant at a time (tests, benchmarks, notebooks)
equilibrium = jax.jit(static_equilibrium)
