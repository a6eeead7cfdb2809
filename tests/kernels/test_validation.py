"""Validation of the double-wishbone longitudinal step against the Radau reference
(method.md section 3): NMSE at h = 1 ms must not exceed the published figures,
must stay near the value this code measures (regression bounds), and LSRT2
must show its order on the axle itself."""
import numpy as np
import pytest

from kernels import metrics
from sweep.results.cube import pooled_signals
from tests.conftest import step_runs_against_radau

pytestmark = pytest.mark.slow
PUBLISHED = {"wheel_displacement": 0.00243, "bushing_force": 0.00751}
# NMSE = mean((y - y_ref)^2) / mean(y_ref)^2 over 4.9 s <= t <= 6.0 s, both
# sides pooled (method.md section 3), measured by this test (LSRT2 h = 1 ms,
# block solver, against Radau rtol 1e-8) on the double wishbone of
# configs/model/double_wishbone.yaml (determinate links, design ride height,
# conservative bushing): 6.57e-7 / 4.03e-7. The published bars are
# 1,000-20,000x above these values and could
# not catch a degraded integrator (an LSRT2 with a21 = 0.55 passed them at
# 1.6e-4); the regression bounds below can.
# Re-measure (the test prints the value) after any change of the model or of
# the method, and update together with the reason in the commit.
MEASURED_NMSE = {"wheel_displacement": 6.6e-7, "bushing_force": 4.0e-7}
REGRESSION_FACTOR = 3.0     # value <= 3 x measured: a worse method or model fails
FLOOR_FACTOR = 10.0         # value >  measured / 10: a test that compares nothing fails


@pytest.fixture(scope="module")
def runs(dw_model, step_excitation, dw_equilibrium):
    return step_runs_against_radau("double_wishbone_step_nmse", dw_model, step_excitation, dw_equilibrium.r,
                                   rtol=1e-8)


@pytest.mark.parametrize("what", ["wheel_displacement", "bushing_force"])
def test_nmse_against_radau_within_published(runs, dw_model, what):
    assert_nmse_within(runs, dw_model, what, PUBLISHED[what], MEASURED_NMSE[what])


def assert_nmse_within(runs, model, what, published, measured, regression=REGRESSION_FACTOR, floor=FLOOR_FACTOR):
    """NMSE = mean((y - y_ref)^2) / mean(y_ref)^2 of ``what`` over 4.9 s <= t
    <= 6.0 s, both sides pooled (method.md section 3), of the (t, LSRT2,
    reference) ``runs``: below the published figure and within
    [measured / floor, regression x measured]."""
    t, lsrt2, ref = runs
    window = np.tile((t >= 4.9) & (t <= 6.0), 2)
    value = float(metrics.nmse(pooled_signals(lsrt2, model, what)[window], pooled_signals(ref, model, what)[window]))
    print(f"NMSE {what}: {value:.3e} (published {published}, measured {measured:.1e})")
    assert value <= published
    assert value <= regression * measured, (
        f"NMSE {what} = {value:.3e} > {regression:g} x the measured {measured:.1e}")
    assert value > measured / floor, (
        f"NMSE {what} = {value:.3e} < measured {measured:.1e} / {floor:g}: "
        "the comparison no longer exercises the integrator (or MEASURED_NMSE is stale)")


def test_response_is_a_weakly_damped_oscillation_settling_at_a_few_mm(runs):
    t, _, ref = runs
    x = np.asarray(ref["wheel_centre_displacement"])[:, 0, 0]
    final = x[-1]
    # "settles at a displacement of a few millimetres" (method.md section 3):
    # 5.07 mm on this axle (longitudinal compliance ~2 mm/kN at 2.5 kN)
    assert -8e-3 < final < -1e-3, f"settles at {final * 1e3:.2f} mm"
    assert np.abs(x[t < 5.0]).max() < 1e-9          # at rest before the step
    after = x[(t >= 5.0) & (t < 5.5)] - final
    crossings = np.nonzero(np.diff(np.sign(after)) != 0)[0]
    assert len(crossings) >= 6, "oscillates"
    # weakly damped: the envelope decays, but slowly (two close longitudinal
    # modes, left/right symmetric and antisymmetric, make it beat, so single
    # successive peaks need not fall)
    tt = t[(t >= 5.0) & (t < 5.5)]
    env = [np.abs(after[(tt >= a) & (tt < a + 0.1)]).max() for a in (5.0, 5.1, 5.2, 5.3, 5.4)]
    ratios = np.array(env[1:]) / np.array(env[:-1])
    assert np.all(ratios < 1.0) and np.all(ratios > 0.3), f"weakly damped: envelope ratios {ratios}"
    assert np.abs(x[t > 5.9] - final).max() < 0.02 * abs(final), "settled by 6 s"
