"""The twist-beam axle: design state (ride height, stops, alignment) and a cross member that carries roll, not parallel travel."""
import copy
import jax
import jax.numpy as jnp
import numpy as np
import pytest
import kernels  # noqa: F401  (float64)
from tests.conftest import load_model_cfg
from kernels import kc, metrics
from kernels.model import build_model
from sweep.axle.builder import build_tables
from tests.kernels.test_axle_kinematics import _stop_clearances, carrier_freedoms
from tests.kernels.test_twist_beam import DEG, cfg, model  # noqa: F401

pytestmark = pytest.mark.slow


def test_design_state_ride_height_stops_and_alignment(cfg, model):
    al = cfg["alignment"]
    # the wheel centres held at design height need the design wheel load
    # (1e-3: 3 N, 0.1 mm at the 30 N/mm wheel rate), so the static state
    # under that load is the design position
    eq = jax.jit(kc.design_position)(model)
    assert bool(eq.converged)
    np.testing.assert_allclose(np.asarray(eq.fz), al["wheel_load"], rtol=1e-3)
    wc = np.asarray(metrics.wheel_centre_position(model, eq.r))
    np.testing.assert_allclose(wc[:, 2], np.asarray(kc.design_heights(model)), atol=1e-9)
    clear = _stop_clearances(model, eq.r)
    assert len(clear) == 4
    for k, v in clear.items():
        assert v >= 0.020, (k, v)
    toe, camber = (np.asarray(a) * DEG for a in metrics.toe_camber(model, eq.r))
    np.testing.assert_allclose(toe, 0.10, atol=0.005)
    np.testing.assert_allclose(camber, -1.20, atol=0.005)


def test_cross_member_carries_roll_not_parallel_travel(model):
    """Scaling the cross member's stiffness (E and G together, the modal
    stiffness) changes the roll wheel rate in proportion and leaves the
    parallel wheel rate all but unchanged: in parallel travel the beam turns
    as a whole about the pivot line, in opposite travel it twists."""
    from sweep.axle.params import build_parameters
    ps = build_parameters({"beam": {"target": "flexible.stiffness", "elements": "cross_member",
                                    "bounds": [0.1, 10.0]}}, model)

    @jax.jit
    def rates(theta):
        mdl = ps.apply(model, theta)
        k = kc.kc_metrics(mdl, kc.design_position(mdl), with_geometry=False)
        return jnp.stack([k["wheel_rate"][0], k["roll_wheel_rate"][0]])
    r = np.array([np.asarray(rates(jnp.array([s]))) for s in (0.5, 1.0, 2.0)])   # N/m
    parallel, roll = r[:, 0], r[:, 1]
    assert np.ptp(parallel) < 0.01 * parallel[1]
    d1, d2 = roll[1] - roll[0], roll[2] - roll[1]
    assert d1 > 1.0                                          # N/mm per halving: the beam is engaged
    np.testing.assert_allclose(d2, 2 * d1, rtol=0.05)        # linear in the stiffness factor
