"""K&C metrics against finite-difference loading of the full nonlinear model: the double wishbone, the toy axle's travel metrics in both modes, the implicit derivatives of the equilibrium."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest
import kernels  # noqa: F401  (float64)
from kernels import kc, statics
from kernels.model import build_model
from tests.kernels.test_kc import DEG, G, SPRING_LINKS, _kc_cfg, _wheel, toy_spring_axle  # noqa: F401

pytestmark = pytest.mark.slow


def test_implicit_derivatives_of_the_equilibrium_match_finite_differences():
    """Reverse-mode derivatives of static and height-constrained equilibria w.r.t. stiffness scales, loads and heights (implicit function
    theorem, not unrolled Newton) against central differences."""
    base = build_model(toy_spring_axle())

    def with_scale(s):
        return base.replace_elements(p2p={"k_scale": base.elements["p2p"]["k_scale"].at[:3].multiply(s[0])
                                   .at[6:9].multiply(s[1])})

    u = jnp.zeros((2, 6)).at[:, 2].set(260.0).at[0, 1].set(150.0)

    def free(p):      # p = (scale0, scale1, Fy_left)
        m = with_scale(p)
        r = statics.static_equilibrium(m, u.at[0, 1].add(p[2])).r
        return jnp.stack([r[0, 0], r[0, 1], r[1, 2], r[0, 5], r[1, 3]])

    def constrained(p):   # p = (scale0, scale1, z_left)
        m = with_scale(p)
        eq = statics.constrained_equilibrium(m, jnp.zeros((2, 6)), jnp.array([p[2], 0.0]))
        return jnp.concatenate([eq.fz, eq.r[0, :2], eq.r[1, 4:5]])

    for f, p0, h in ((free, np.array([1.2, 0.8, 0.0]), np.array([1e-4, 1e-4, 1e-2])),
                     (constrained, np.array([1.2, 0.8, 0.01]), np.array([1e-4, 1e-4, 1e-6]))):
        P = np.concatenate([p0 + np.diag(h), p0 - np.diag(h)])

        @jax.jit
        def derivatives(p0, P):       # one compilation: reverse mode and the FD points
            return jax.jacrev(f)(p0), jax.vmap(f)(P)
        J_rev, vals = (np.asarray(a) for a in derivatives(jnp.asarray(p0), jnp.asarray(P)))
        fd = ((vals[:3] - vals[3:]) / (2 * h[:, None])).T
        np.testing.assert_allclose(J_rev, fd, rtol=1e-5, atol=1e-7 * np.abs(fd).max())


def test_toy_travel_metrics_match_finite_differences_in_both_modes():
    """The wheel-travel metrics of the trailing-arm toy axle (parallel and
    opposite travel: bump steer, camber gain, wheel rate, each per the
    side's own travel) against central differences of its nonlinear travel
    curve at +-0.1 mm - the cheap twin of the double-wishbone check above."""
    from sweep.axle.builder import model_from_config
    model = kc.lock_brakes(model_from_config(_kc_cfg().model), kc.DEFAULT_BRAKE_LOCK)
    dzs = np.stack([kc.travel_direction(mode) for mode in kc.TRAVEL_MODES])

    @jax.jit
    def run(model):
        eq = kc.design_position(model)
        travel = jax.vmap(lambda dz: kc.travel_curve(model, eq, np.array([-1e-4, 1e-4]), dz))(dzs)
        return kc.kc_metrics(model, eq, kc.DEFAULT_LOADED_RADIUS, with_geometry=False), travel
    M, travel = jax.device_get(run(model))
    sign = kc.SIDE_SIGN
    for i, (mode, pre) in enumerate((("parallel", ""), ("opposite", "roll_"))):
        assert kc.TRAVEL_MODES[i] == mode
        o = jax.tree_util.tree_map(lambda a: a[i], travel)
        assert np.all(o["converged"])
        own = np.ones(2) if mode == "parallel" else sign
        fd = {k: (o[k][1] - o[k][0]) / 2e-4 for k in ("toe", "camber", "wheel_load")}
        checks = {pre + ("bump_steer" if mode == "parallel" else "steer"): fd["toe"] / own * DEG,
                  pre + "camber_gain": fd["camber"] / own * DEG,
                  pre + "wheel_rate": fd["wheel_load"][:, 2] / own / 1e3}
        for name, value in checks.items():
            assert np.all(np.abs(value) > 1e-3) or name.endswith("steer"), (name, value)
            np.testing.assert_allclose(M[name], value, rtol=1e-5, atol=1e-9, err_msg=name)
