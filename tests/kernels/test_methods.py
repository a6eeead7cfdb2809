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
from tests.kernels.test_lsrt2 import BU, CDAMP, OMEGA, Y0, _exact_ramp, augmented, linear_system, rigid_body_problem

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


# --------------------------------------------------------------------------- LSRT2 written out


# --------------------------------------------------------------------------- as a sweep job


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
                         du_one_sided=lambda ref, t=None: loads.du_one_sided(exc, ref, t).reshape(-1)[:2],
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


# ROS34PW2 on the grid (its c = 1 stage) and through a ramp and an off-grid
# step: the fast tier; the other methods and cases: test_methods_orders.py
FAST_EVENT_CASES = [("ros34pw2", "step_on_grid"), ("ros34pw2", "ramp_and_step_off_grid")]


@pytest.mark.parametrize("name, case", FAST_EVENT_CASES)
def test_every_method_keeps_its_order_through_load_steps_and_ramp_corners(name, case):
    keeps_its_order(name, case)


def keeps_its_order(name, case):
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


@pytest.mark.parametrize("name", ["lsrt2", "ros34pw2"])
def test_a_harmonic_input_keeps_the_order(name):
    """kernels.loads harmonics (a road's force, smooth, no events): every
    stage sees the harmonic at its own time and the input-rate term takes
    its derivative at the step's start, so each method keeps its order.
    Oracle:
    the exact solution of the linear problem, its harmonic steady state plus
    the free response (matrix exponential)."""
    from scipy.linalg import expm
    from kernels import loads
    w = np.array([7.0, 19.0])
    cos = np.zeros((2, 2, 6))
    sin = np.zeros((2, 2, 6))
    cos[:, 0, :2] = [[1.5, -0.7], [0.4, 0.9]]
    sin[:, 0, :2] = [[0.3, 1.1], [-0.8, 0.2]]
    exc = loads.with_harmonics(loads.excitation(np.zeros((2, 6))), w, cos, sin)
    base = linear_system(OMEGA, CDAMP, BU, lambda t: loads.u_at(exc, t).reshape(-1)[:2])
    sysm = base._replace(u_one_sided=lambda t, ref: loads.u_one_sided(exc, t, ref).reshape(-1)[:2],
                         du_one_sided=lambda ref, t=None: loads.du_one_sided(exc, ref, t).reshape(-1)[:2],
                         events=lambda: loads.event_times(exc))
    A = np.block([[np.zeros((6, 6)), np.eye(6)], [-OMEGA, -CDAMP]])
    Bf = np.vstack([np.zeros((6, 2)), BU])
    T = 1.2

    def particular(t):                # sum over harmonics of Re(Y e^{i w t}), (i w - A) Y = B (C - i S)
        y = np.zeros(12)
        for k in range(len(w)):
            Y = np.linalg.solve(1j * w[k] * np.eye(12) - A, Bf @ (cos[k, 0, :2] - 1j * sin[k, 0, :2]))
            y += np.real(Y * np.exp(1j * w[k] * t))
        return y
    exact = particular(T) + expm(A * T) @ (Y0 - particular(0.0))
    errs = [np.linalg.norm(y - exact) for y in _at_T(METHODS[name], sysm, Y0, (0.04, 0.02, 0.01, 0.005), T)]
    orders = np.log2(np.array(errs[:-1]) / np.array(errs[1:]))
    assert np.all(orders[1:] > ORDER[name] - 0.2), (errs, orders)
