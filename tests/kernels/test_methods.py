"""Integration methods as values (kernels/integrate.py): LSRT2, ROS34PW2 and the
linear-implicit Euler on one generic Rosenbrock step and one time loop,
behind the method interface (kernels.integrate.Method) with the Radau
reference (tests/kernels/test_radau.py).

Oracles: the classical order conditions of Rosenbrock methods (Hairer &
Wanner, Solving ODEs II, section IV.7, in the alpha/beta form), the
stability function at infinity and on the imaginary axis, observed orders
against a matrix exponential (linear problem with a ramp input) and against
scipy's Radau at rtol 1e-12 (nonlinear rigid body, large rotations),
LSRT2's two-stage step written out by hand (eqs. 6-9 with Table 1, below),
and the interface: every method's ``simulate`` is the module's time loop,
bitwise.
"""
import math
import os

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import kernels  # noqa: F401  (float64)
from kernels import integrate
from kernels.linear_implicit_euler import LINEAR_IMPLICIT_EULER
from kernels.lsrt2 import LSRT2
from kernels.ros34pw2 import ROS34PW2
from test_lsrt2 import BU, CDAMP, OMEGA, Y0, _exact_ramp, augmented, linear_system, rigid_body_problem

METHODS = {"lsrt2": LSRT2, "ros34pw2": ROS34PW2, "linear_implicit_euler": LINEAR_IMPLICIT_EULER}
ORDER = {"lsrt2": 2, "ros34pw2": 3, "linear_implicit_euler": 1}


def _conditions(b, a, g, gamma):
    """Residuals of the order conditions up to order 3 (HW IV.7, Table 7.1)."""
    a, g, b = np.asarray(a, float), np.asarray(g, float), np.asarray(b, float)
    beta = a + g + gamma * np.eye(len(b))
    alpha_i = a.sum(1)
    beta_p = (a + g).sum(1)                       # beta'_i = sum_{j<i} beta_ij
    return {1: [b.sum() - 1.0],
            2: [b @ beta_p - (0.5 - gamma)],
            3: [b @ alpha_i ** 2 - 1.0 / 3.0,
                b @ (np.tril(beta, -1) @ beta_p) - (1.0 / 6.0 - gamma + gamma ** 2)]}


@pytest.mark.parametrize("name", list(METHODS))
def test_order_conditions(name):
    m = METHODS[name]
    res = _conditions(m.b, m.a, m.g, m.gamma)
    for p in range(1, m.order + 1):
        np.testing.assert_allclose(res[p], 0.0, atol=1e-14, err_msg=f"{name} order {p}")
    if m.order < 3:   # and not more: the method is exactly of its order
        assert max(abs(x) for x in res[m.order + 1]) > 1e-3
    assert m.order == ORDER[name]
    if m.b_hat is not None:
        emb = _conditions(m.b_hat, m.a, m.g, m.gamma)
        for p in range(1, m.embedded_order + 1):
            np.testing.assert_allclose(emb[p], 0.0, atol=1e-14)
        assert max(abs(x) for x in emb[m.embedded_order + 1]) > 1e-3


@pytest.mark.parametrize("name", list(METHODS))
def test_l_stable(name):
    m = METHODS[name]
    assert abs(m.stability_function(-1e12)) < 1e-10                  # R(-inf) = 0
    y = np.logspace(-3, 6, 200)
    assert np.all(np.abs(m.stability_function(1j * y)) <= 1 + 1e-12)   # A-stable on the axis
    z = -np.logspace(-3, 6, 200)[:, None] * np.exp(1j * np.linspace(-1.5, 1.5, 31))[None]
    assert np.all(np.abs(m.stability_function(z)) <= 1 + 1e-12)
    # LSRT2's published stability function (method.md section 2)
    if name == "lsrt2":
        zz = np.array([-0.3, -7.0 + 2j, 0.4j])
        G = 1 - math.sqrt(2) / 2
        np.testing.assert_allclose(m.stability_function(zz),
                                   (1 + (math.sqrt(2) - 1) * zz) / (1 - G * zz) ** 2, rtol=1e-13)


def test_tableau_is_validated():
    with pytest.raises(ValueError, match="strictly lower"):
        integrate.RosenbrockTableau(name="bad", gamma=0.5, a=((1.0,),), g=((0.0,),), b=(1.0,))
    with pytest.raises(ValueError, match="gamma"):
        integrate.RosenbrockTableau(name="bad", gamma=-1.0, a=((0.0,),), g=((0.0,),), b=(1.0,))


def _run(method, system, y0, h, n, N=1):
    out = jax.jit(integrate.simulate, static_argnums=(0, 1, 6, 7, 8))(
        method, system, y0[:6], y0[6:], 0.0, h, n + 1, 1, N)
    return np.hstack([out.outputs["r"], out.outputs["v"]])


def _at_T(method, system, y0, hs, T, N=1):
    """The state at T for every step size of ``hs``, from one compilation:
    h is traced and the number of steps static, so every run takes
    T / min(hs) steps and the state at T is its sample T / h (the steps
    beyond T cost microseconds, a compilation seconds)."""
    n = int(round(T / min(hs)))
    return [_run(method, system, y0, h, n, N)[int(round(T / h))] for h in hs]


@pytest.mark.parametrize("name", list(METHODS))
@pytest.mark.parametrize("N", [1, 3])
def test_order_on_linear_problem_with_ramp_input(name, N):
    a, b = np.array([1.0, -2.0]), np.array([3.0, 0.5])
    sysm = linear_system(OMEGA, CDAMP, BU, lambda t: jnp.asarray(a) + jnp.asarray(b) * t)
    T = 1.2
    errs = [np.linalg.norm(y - _exact_ramp(T, a, b))
            for y in _at_T(METHODS[name], sysm, Y0, (0.04, 0.02, 0.01, 0.005), T, N)]
    orders = np.log2(np.array(errs[:-1]) / np.array(errs[1:]))
    assert np.all(np.abs(orders[1:] - ORDER[name]) < 0.2), (errs, orders)


@pytest.fixture(scope="module")
def rigid_body():
    """tests/kernels/test_lsrt2.py's rigid body on a nonlinear bushing (large
    rotations, K(r) far from identity); Radau reference at rtol 1e-12."""
    return rigid_body_problem()


@pytest.mark.parametrize("name, N", [("ros34pw2", 1), ("ros34pw2", 3), ("linear_implicit_euler", 1),
                                     ("linear_implicit_euler", 3)])
def test_order_on_nonlinear_rigid_body(rigid_body, name, N):
    """ROS34PW2 keeps order 3 with the linearisation reused for 3 steps (a
    W-method); the linear-implicit Euler is of order 1. (LSRT2: test_lsrt2.)"""
    sysm, y0, T, ref = rigid_body
    hs = (4e-3, 2e-3, 1e-3, 5e-4) if name == "ros34pw2" else (1e-4, 5e-5, 2.5e-5, 1.25e-5)
    errs = [np.linalg.norm(y - ref) for y in _at_T(METHODS[name], sysm, y0, hs, T, N)]
    orders = np.log2(np.array(errs[:-1]) / np.array(errs[1:]))
    assert np.all(np.abs(orders[1:] - ORDER[name]) < 0.25), (errs, orders)


def test_error_estimate_of_ros34pw2_is_of_embedded_order(rigid_body):
    """The embedded estimate is a local error of the order-2 solution:
    O(h^3), so halving h divides the largest estimate by ~8."""
    sysm, y0, T, _ = rigid_body
    norm = lambda er, ev, r, v: jnp.sqrt(jnp.mean(jnp.concatenate([er, ev]) ** 2))  # noqa: E731
    est = []
    for h in (2e-3, 1e-3, 5e-4):
        traj = jax.jit(integrate.simulate, static_argnums=(0, 1, 6, 7, 8, 10))(
            ROS34PW2, sysm, jnp.asarray(y0[:6]), jnp.asarray(y0[6:]), 0.0, h, int(round(T / h)) + 1, 1, 1,
            None, norm)
        est.append(float(traj.max_error))
    ratios = np.array(est[:-1]) / np.array(est[1:])
    assert np.all((ratios > 6.0) & (ratios < 10.0)), (est, ratios)


def test_stiff_problem_is_stable_for_every_method():
    from scipy.linalg import expm
    Omega = np.diag([1.0, 10.0, 1e4, 1e6, 1e9, 1e12])
    C = np.diag([0.2, 0.5, 100.0, 1e3, 1e5, 1e6])
    J = np.block([[np.zeros((6, 6)), np.eye(6)], [-Omega, -C]])
    sysm = linear_system(Omega, C, np.zeros((6, 2)), lambda t: jnp.zeros(2))
    y0 = np.ones(12)
    exact = expm(J * 2.0) @ y0
    for name, m in METHODS.items():
        ys = _run(m, sysm, y0, 1e-3, 2000)
        assert np.all(np.isfinite(ys)) and np.abs(ys).max() < 1e4, name
        stiff = [4, 5, 10, 11]
        assert np.abs(ys[40:, stiff]).max() < 1e-6, name
        tol = 2e-2 if ORDER[name] == 1 else 5e-3      # slow modes; first order: ~1 % at h = 1 ms
        np.testing.assert_allclose(ys[-1, [0, 1, 6, 7]], exact[[0, 1, 6, 7]], rtol=tol, atol=1e-4,
                                   err_msg=name)


# --------------------------------------------------------------------------- LSRT2 written out

def _old_lsrt2_step(system, lin, lu, q1, r, v, t, h):
    """LSRT2's step written out for s = 2 (eqs. 6-9, Table 1), independently
    of the generic stage loop."""
    GAMMA = 1.0 - 2.0 ** 0.5 / 2.0
    G21, A21, C2, B1, B2 = -GAMMA, 0.5, 0.5, 0.0, 1.0

    def _kmul(K, x):
        m = K.shape[0]
        return jnp.einsum("mij,mj->mi", K, x.reshape(m, 6)).reshape(-1)
    hg = h * GAMMA
    K = lin.K
    S = system.solver
    rate1 = system.rates(r, v)
    du1 = system.du(t)
    rhs1 = q1 + hg * S.ju(lin, du1) + hg * S.jr(lin, rate1)
    dv1 = S.solve(lu, rhs1)
    Kdv1 = _kmul(K, dv1)
    dr1 = rate1 + hg * Kdv1
    r2 = r + h * A21 * dr1
    v2 = v + h * A21 * dv1
    q2 = system.q(r2, v2, system.u(t + C2 * h))
    rate2 = system.rates(r2, v2)
    rhs2 = (q2 + h * G21 * (S.jr(lin, dr1) + S.jv(lin, dv1))
            + hg * S.jr(lin, rate2 + h * G21 * Kdv1))
    dv2 = S.solve(lu, rhs2)
    dr2 = rate2 + hg * _kmul(K, dv2) + h * G21 * Kdv1
    return r + h * (B1 * dr1 + B2 * dr2), v + h * (B1 * dv1 + B2 * dv2)


def test_generic_step_equals_lsrt2_written_out(rigid_body):
    """The generic step with LSRT2's tableau equals LSRT2's step written out
    to 1e-12 (relative) over 200 steps with large rotations and a
    time-varying input term."""
    from kernels.lsrt2 import GAMMA
    sysm, y0, T, _ = rigid_body
    h = 1e-3

    def run(stepper):
        def body(carry, k):
            r, v = carry
            t = k * h
            lin = sysm.linearise(r, v, sysm.u(t))
            lu = sysm.solver.factor(lin, h * GAMMA)
            return stepper(sysm, lin, lu, lin.q, r, v, t, h), None
        (r, v), _ = jax.lax.scan(body, (jnp.asarray(y0[:6]), jnp.asarray(y0[6:])), jnp.arange(200))
        return jnp.concatenate([r, v])
    new = jax.jit(lambda: run(lambda *a: integrate.step(LSRT2, *a)[:2]))()
    old = jax.jit(lambda: run(_old_lsrt2_step))()
    np.testing.assert_allclose(new, old, rtol=1e-12, atol=1e-14)


# --------------------------------------------------------------------------- as a sweep job

def test_error_estimate_flags_a_too_large_step_and_not_the_nominal_one(tmp_path):
    """``integrator=ros34pw2``: the job with h = 1 ms is "ok" (status 0), the
    same job with h = 20 ms (far too coarse for the axle's modes; L-stable,
    so it stays finite) is flagged "inaccurate" (status 3) with its values
    kept; the toy axle keeps the compilations short."""
    import xarray as xr
    from tests.e2e.test_app import cfg_of
    from sweep.app import main
    common = ["model=toy_trailing_arm", "integrator=ros34pw2", "loadcase.t_start=4.9", "loadcase.t_end=5.3",
              "sweep.progress=false"]
    out = {}
    for dt in ("0.001", "0.02"):
        path = tmp_path / f"h{dt}.zarr"
        assert main(cfg_of(*common, f"integrator.dt={dt}", f"output.path={path}")) == 0
        out[dt] = xr.open_zarr(path)
    assert int(out["0.001"].status[0]) == 0
    assert int(out["0.02"].status[0]) == 3
    assert np.all(np.isfinite(out["0.02"].wheel_centre_displacement.values))   # values kept
    assert out["0.02"].status.attrs["flag_meanings"].split()[4] == "inaccurate"


# --------------------------------------------------------------------------- the method interface

def test_every_registered_method_is_a_method_value():
    """kernels.methods.METHODS: every entry satisfies the Method protocol;
    the fixed-step methods are jittable, the Radau reference is not; only
    ROS34PW2 has an error estimate."""
    from kernels.methods import FIXED_STEP, METHODS as REGISTRY
    assert set(REGISTRY) == {*METHODS, "radau"}
    for name, m in REGISTRY.items():
        assert isinstance(m, integrate.Method), name
        assert m.name == name
        assert m.jittable == (name != "radau")
        assert m.has_error_estimate == (name == "ros34pw2")
        assert m.order == {**ORDER, "radau": 5}[name]
    assert FIXED_STEP == ("lsrt2", "ros34pw2", "linear_implicit_euler")
    hash(REGISTRY["radau"])                     # a value: hashable, usable as a static argument
    from kernels.methods import REFERENCE
    assert REGISTRY[REFERENCE].name == REFERENCE and not REGISTRY[REFERENCE].jittable
    with pytest.raises(KeyError):
        REGISTRY["rk4"]


def test_the_registry_imports_radau_only_when_asked():
    """scipy.integrate (the Radau reference's solver) is not part of every
    job's start-up: importing the registry and a fixed-step method leaves it
    out, asking for Radau brings it."""
    import subprocess
    import sys
    code = ("import sys, kernels.methods as m; m.METHODS['lsrt2']; assert 'radau' in m.METHODS; "
            "print('scipy.integrate' in sys.modules, 'kernels.radau' in sys.modules); m.METHODS['radau']; "
            "print('scipy.integrate' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300,
                         cwd=os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["False", "False", "True"], out.stdout


def test_user_tolerances_reach_the_methods_that_take_them():
    import dataclasses
    from kernels.methods import METHODS as REGISTRY, with_tolerances
    from kernels.radau import Radau
    r = with_tolerances(REGISTRY["radau"], rtol=1e-6, atol_speeds=None)
    assert r == Radau(rtol=1e-6) == dataclasses.replace(REGISTRY["radau"], rtol=1e-6)
    assert REGISTRY["radau"].rtol == 1e-8                     # the registry's value is unchanged
    assert with_tolerances(LSRT2, rtol=1e-3) is LSRT2         # a fixed step takes none
    with pytest.raises(ValueError, match="unknown tolerance"):
        with_tolerances(LSRT2, rtl=1e-3)
    with pytest.raises(ValueError, match="radau.rtol"):
        Radau(rtol=-1.0)


@pytest.mark.parametrize("name", list(METHODS))
def test_simulate_through_the_interface_is_the_time_loop_bitwise(name):
    """``method.simulate(system, ...)`` is ``integrate.simulate(method,
    system, ...)``: identical arrays (samples every 2 steps, linearisation
    reused for 3 steps, an output function, the error norm, and the
    checkpointed variant)."""
    m = METHODS[name]
    a, b = np.array([1.0, -2.0]), np.array([3.0, 0.5])
    sysm = linear_system(OMEGA, CDAMP, BU, lambda t: jnp.asarray(a) + jnp.asarray(b) * t)
    norm = lambda er, ev, r, v: jnp.max(jnp.abs(er)) + jnp.max(jnp.abs(ev))  # noqa: E731
    out = lambda r, v, t: {"x": r[:2] * t, "e": jnp.sum(v ** 2)}  # noqa: E731
    r0, v0 = jnp.asarray(Y0[:6]), jnp.asarray(Y0[6:])
    for ck in (None, 5):
        via_value = jax.jit(lambda r, v: m.simulate(sysm, r, v, 0.1, 0.01, 21, 2, 3, out, norm, ck))(r0, v0)
        via_loop = jax.jit(lambda r, v: integrate.simulate(m, sysm, r, v, 0.1, 0.01, 21, 2, 3, out, norm, ck))(
            r0, v0)
        for x, y in zip(jax.tree_util.tree_leaves(via_value), jax.tree_util.tree_leaves(via_loop)):
            np.testing.assert_array_equal(np.asarray(x), np.asarray(y))
        assert (float(via_value.max_error) > 0) == m.has_error_estimate


# --------------------------------------------------------------------------- time events
def _exact_piecewise(t_end, pieces):
    """Exact solution of the linear problem for an input that is a + b t on
    each piece [(t_start, a, b), ...] (ascending, the first at 0), by the
    augmented matrix exponential piece by piece."""
    y = np.asarray(Y0, float)
    bounds = [p[0] for p in pieces[1:]] + [t_end]
    t = 0.0
    for (t0, a, b), t1 in zip(pieces, bounds):
        t1 = min(t1, t_end)
        if t1 <= t:
            continue
        from scipy.linalg import expm
        z = np.concatenate([y, np.asarray(a) + np.asarray(b) * t, [1.0]])
        y = (expm(augmented(b) * (t1 - t)) @ z)[:12]
        t = t1
    return y


def _loads_system(changes):
    """The linear problem driven by a load case of kernels.loads (its first
    two input channels), with the time events bound as for the axles."""
    from kernels import loads
    amp = [(t, d, np.pad(np.asarray(a, float), (0, 10)).reshape(2, 6)) for t, d, a in changes]
    exc = loads.excitation(np.pad([1.0, -2.0], (0, 10)).reshape(2, 6), amp)
    base = linear_system(OMEGA, CDAMP, BU, lambda t: loads.u_at(exc, t).reshape(-1)[:2])
    return base._replace(u_one_sided=lambda t, ref: loads.u_one_sided(exc, t, ref).reshape(-1)[:2],
                         du_one_sided=lambda ref: loads.du_one_sided(exc, ref).reshape(-1)[:2],
                         events=lambda: loads.event_times(exc))


EVENT_CASES = {
    # a jump of the input on the step grid of every h below, and off it
    "step_on_grid": ([(0.6, 0.0, [2.0, 1.0])],
                     [(0.0, [1.0, -2.0], [0.0, 0.0]), (0.6, [3.0, -1.0], [0.0, 0.0])]),
    "step_off_grid": ([(0.6003, 0.0, [2.0, 1.0])],
                      [(0.0, [1.0, -2.0], [0.0, 0.0]), (0.6003, [3.0, -1.0], [0.0, 0.0])]),
    # a 0.1237 s ramp (both corners off the grid) and a step inside one step of each h
    "ramp_and_step_off_grid": ([(0.3011, 0.1237, [2.0, 1.0]), (0.7004, 0.0, [-1.0, 0.5])],
                               [(0.0, [1.0, -2.0], [0.0, 0.0]),
                                (0.3011, [1.0 - 2.0 * 0.3011 / 0.1237, -2.0 - 0.3011 / 0.1237],
                                 [2.0 / 0.1237, 1.0 / 0.1237]),
                                (0.3011 + 0.1237, [3.0, -1.0], [0.0, 0.0]),
                                (0.7004, [2.0, -0.5], [0.0, 0.0])]),
}


@pytest.mark.parametrize("case", list(EVENT_CASES))
@pytest.mark.parametrize("name", list(METHODS))
def test_every_method_keeps_its_order_through_load_steps_and_ramp_corners(name, case):
    """Within a step every stage sees the one-sided input (a stage at
    c_i = 1 - ROS34PW2's last - must not see the next piece), and a switch
    inside a step splits it: the observed order is the method's own on
    and off the step grid. Oracle: the exact solution piece by piece."""
    changes, pieces = EVENT_CASES[case]
    sysm = _loads_system(changes)
    T = 1.2
    exact = _exact_piecewise(T, pieces)
    errs = [np.linalg.norm(y - exact) for y in _at_T(METHODS[name], sysm, Y0, (0.04, 0.02, 0.01, 0.005), T)]
    orders = np.log2(np.array(errs[:-1]) / np.array(errs[1:]))
    assert np.all(orders[1:] > ORDER[name] - 0.2), (errs, orders)


def test_one_sided_input_is_the_piece_inside_the_step():
    """kernels.loads: u_one_sided(t, t_ref) is u_at on the piece that holds
    at t_ref, continued beyond it (the left limit at a switch ahead, the
    right limit at one behind), du_one_sided its slope (central differences
    of the piece), and the event times are the switches."""
    from kernels import loads
    changes, _ = EVENT_CASES["ramp_and_step_off_grid"]
    amp = [(t, d, np.pad(np.asarray(a, float), (0, 10)).reshape(2, 6)) for t, d, a in changes]
    exc = loads.excitation(np.pad([1.0, -2.0], (0, 10)).reshape(2, 6), amp)
    t_ramp, d_ramp, t_step = 0.3011, 0.1237, 0.7004
    np.testing.assert_allclose(sorted(set(np.asarray(loads.event_times(exc)).tolist())),
                               [t_ramp, t_ramp + d_ramp, t_step])
    for ref in (0.1, 0.35, 0.41, 0.6, 0.9):          # one reference time per piece
        for t in (ref - 0.004, ref, ref + 0.004):       # inside the piece: u_at itself
            np.testing.assert_allclose(loads.u_one_sided(exc, t, ref), loads.u_at(exc, t), atol=1e-13)
        eps = 1e-6
        fd = (loads.u_one_sided(exc, ref + eps, ref) - loads.u_one_sided(exc, ref - eps, ref)) / (2 * eps)
        np.testing.assert_allclose(loads.du_one_sided(exc, ref), fd, atol=1e-6)
    # a step ahead of the step's interval is off up to its end, one behind is on from its start
    before, after = loads.u_one_sided(exc, t_step, t_step - 1e-4), loads.u_one_sided(exc, t_step, t_step + 1e-4)
    np.testing.assert_allclose(after - before, amp[1][2])
    np.testing.assert_allclose(before, loads.u_at(exc, t_step - 1e-6), atol=1e-12)
    # the ramp ahead continues as its line beyond its end on the ramp's piece
    np.testing.assert_allclose(loads.u_one_sided(exc, t_ramp + d_ramp + 0.01, 0.35)[0, :2],
                               np.array([1.0, -2.0]) + np.array([2.0, 1.0]) * (d_ramp + 0.01) / d_ramp)
    np.testing.assert_allclose(np.asarray(loads.du_one_sided(exc, 0.35))[0, :2], np.array([2.0, 1.0]) / d_ramp)


def test_a_concrete_load_case_on_the_step_grid_traces_no_split():
    """A load case closed over by the traced function stays concrete inside
    the trace (kernels.loads.event_times): with every event on the step grid
    the step splitting (a lax.cond around a second copy of the step) is
    left out of the program - the usual sweep job compiles the step once;
    with an event inside a step it is there."""
    def jaxpr(case, t0=0.0):
        sysm = _loads_system(EVENT_CASES[case][0])
        return str(jax.make_jaxpr(lambda y: METHODS["lsrt2"].simulate(
            sysm, y[:6], y[6:], t0, 0.01, 121).outputs)(jnp.asarray(Y0)))
    assert "cond[" not in jaxpr("step_on_grid")
    assert "cond[" in jaxpr("step_off_grid")
    assert "cond[" in jaxpr("step_on_grid", t0=0.0003)          # the same load case off the grid of t0
