"""State events on the model rigs: the damper's Coulomb friction against the analytic stick-slip, bushing play and a stop with clearance keeping the order (Radau agrees), zero friction force is no friction."""
import math
import jax
import jax.numpy as jnp
import numpy as np
import pytest
import kernels  # noqa: F401
from kernels import build_model, forces, integrate, loads
from kernels.dynamics import Linearisation
from kernels.lsrt2 import LSRT2
from kernels.radau import RADAU
from kernels.ros34pw2 import ROS34PW2
from kernels.system import model_system
from tests.kernels.test_state_events import D, F_C, G, K, K_C, M, NO_LOAD, N_STEPS, R0, T_CONTACT, V0, W_C, X0, bounce, bounce_errors, coulomb, rig, run  # noqa: F401

pytestmark = pytest.mark.slow


def test_model_stop_with_clearance_keeps_the_order_and_radau_agrees():
    """The rig's bump stop with ``law: switching``: the contact found by the
    model's root function (the stop's penetration) and the orders of
    LSRT2 / ROS34PW2 kept through 4 events; the smooth law (default) is
    the same force without events. Radau with the same root functions
    (scipy events, restart) matches the closed form to 1e-8 m."""
    model = build_model(rig("switching"))
    assert model.topology.p2p_events == ("contact",)
    assert build_model(rig()).topology.p2p_events == ("",)
    system = model_system(model, NO_LOAD)
    r0 = model.r_design.reshape(-1)
    for method, ratio in ((LSRT2, 3.5), (ROS34PW2, 6.5)):
        errs = bounce_errors(jax.jit(lambda h: method.simulate(system, r0, jnp.zeros(6), 0.0, h, N_STEPS + 1)))
        assert errs[0] / errs[1] >= ratio and errs[1] / errs[2] >= ratio, (method.name, errs)
    tr = RADAU.simulate(system, r0, jnp.zeros(6), 0.0, 1e-3, 501)
    z = np.asarray(tr.outputs["r"][:, 2])
    assert int(tr.n_events) == 4
    assert np.max(np.abs(z - np.array([bounce(tt) for tt in np.asarray(tr.t)]))) < 1e-8


def test_damper_coulomb_friction_against_the_analytic_stick_slip():
    """Spring-mass with a damper of pure Coulomb friction (switching law,
    elastic stick 1e8 N/m, 2e4 N s/m): from rest at 0.55 m it slides three
    half-swings (0.55 -> -0.35 -> 0.15 -> 0.05 m) and sticks at 0.05 m for
    good. Events: the start (stuck -> sliding), two reversals (sticks, slides
    back) and the final stick = 6. Deviation from the ideal Coulomb law:
    the elastic stick lags each reversal (measured 2.2e-5 m at 1e8 N/m,
    2.3e-4 m at 1e6 N/m); LSRT2, ROS34PW2 and Radau (the same root
    functions) within 5e-5 m of the closed form, Radau and LSRT2 within
    1e-5 m of each other."""
    model = build_model(rig(k_stop=0, gravity=0.0, k_spring=K_C,
                            friction={"force": F_C, "stiffness": 1e8, "damping": 2e4}))
    assert model.topology.p2p_events == ("", "friction")
    system = model_system(model, NO_LOAD)
    r0 = model.r_design.reshape(-1).at[2].set(X0)
    ref = None
    for method in (LSRT2, ROS34PW2, RADAU):
        run = jax.jit(method.simulate, static_argnums=(0, 5)) if method.jittable else method.simulate
        tr = run(system, r0, jnp.zeros(6), 0.0, 1e-3, 1501)
        t, z = np.asarray(tr.t), np.asarray(tr.outputs["r"][:, 2])
        assert int(tr.n_events) == 6, method.name
        assert np.max(np.abs(z - np.array([coulomb(tt) for tt in t]))) < 5e-5, method.name
        assert abs(z[-1] - 0.05) < 1e-6, method.name
        if method is LSRT2:
            ref = z
    np.testing.assert_allclose(z, ref, atol=1e-5)
    # the regularised law: no events, the same slides (a viscous band of 1 mm/s)
    reg = build_model(rig(k_stop=0, gravity=0.0, k_spring=K_C, friction={"force": F_C, "law": "regularised"}))
    assert reg.topology.p2p_events == ("", "")
    tr = jax.jit(LSRT2.simulate, static_argnums=(0, 5))(model_system(reg, NO_LOAD), r0, jnp.zeros(6), 0.0, 1e-3, 1001)
    z = np.asarray(tr.outputs["r"][:, 2])
    assert np.max(np.abs(z[:900] - np.array([coulomb(tt) for tt in np.asarray(tr.t)[:900]]))) < 5e-3


def test_zero_friction_force_is_no_friction():
    """A switching friction law with F_c = 0 (the end of a swept range) is a
    damper without friction: the undamped spring-mass swings on as the
    closed form x0 cos(w t), and no event fires (before: the stuck state's
    root |stick| - 0 fired at once, again after every reversal, and the run
    went non-finite)."""
    model = build_model(rig(k_stop=0, gravity=0.0, k_spring=K_C, friction={"force": 0.0}))
    system = model_system(model, NO_LOAD)
    r0 = model.r_design.reshape(-1).at[2].set(X0)
    tr = jax.jit(LSRT2.simulate, static_argnums=(0, 5))(system, r0, jnp.zeros(6), 0.0, 1e-3, 501)
    t, z = np.asarray(tr.t), np.asarray(tr.outputs["r"][:, 2])
    assert int(tr.n_events) == 0
    w = math.sqrt(K_C / M)
    assert np.max(np.abs(z - X0 * np.cos(w * t))) < 5e-3 * X0     # LSRT2's own damping at h = 1 ms


def test_model_bushing_play_drop_keeps_the_order():
    """The rig's guide bushing with play D along z (stiffness K beyond it,
    ``play_law: switching``; no stop): the mass falls through the band onto
    the bushing's rate - the closed form of the stop drop - and LSRT2 keeps
    order 2 through the 4 events of 0.5 s."""
    tables = rig(k_stop=0)
    guide = tables["bushings"][0]
    guide["stiffness"] = [1e6, 1e6, K, 1e4, 1e4, 1e4]
    guide["play"] = [0.0, 0.0, D, 0.0, 0.0, 0.0]
    guide["play_law"] = "switching"
    model = build_model(tables)
    assert model.topology.bushing_events == (True,)
    system = model_system(model, NO_LOAD)
    r0 = model.r_design.reshape(-1)
    prog = jax.jit(lambda h: LSRT2.simulate(system, r0, jnp.zeros(6), 0.0, h, N_STEPS + 1))
    errs = bounce_errors(prog)
    assert errs[0] / errs[1] >= 3.5 and errs[1] / errs[2] >= 3.5, errs
    assert int(prog(2.5e-4).n_events) == 4           # N_STEPS x 0.25 ms = 0.5 s: two bounces
