"""Validation of the double-wishbone longitudinal step against the Radau reference
(method.md section 3): NMSE at h = 1 ms must not exceed the published figures."""
import numpy as np
import pytest

from kernels import metrics

pytestmark = pytest.mark.slow
PUBLISHED = {"wheel_displacement": 0.00243, "bushing_force": 0.00751}


@pytest.fixture(scope="module")
def runs(dw_model, step_excitation, dw_equilibrium):
    import jax.numpy as jnp
    from sweep.job import channels, lsrt2_run
    from sweep.reference import radau
    t = 4.9 + np.arange(1101) * 1e-3
    lsrt2 = lsrt2_run(dw_model, step_excitation, dw_equilibrium.r, 4.9, 1e-3,
                      n_samples=1101, every=1, relinearise_every=1)
    _, r, v = radau(dw_model, step_excitation, dw_equilibrium.r, jnp.zeros_like(dw_equilibrium.r), t,
                    rtol=1e-8)
    import jax
    ref = jax.vmap(lambda rr, vv: channels(dw_model, rr, vv, dw_equilibrium.r))(jnp.asarray(r), jnp.asarray(v))
    return t, lsrt2, ref


def _pooled(ch, model, what):
    if what == "wheel_displacement":
        return np.concatenate([np.asarray(ch["wheel_centre_displacement"])[:, s, 0] for s in (0, 1)])
    names = model.topology.bushing_names
    idx = [names.index(model.topology.tables["reference_bushings"][s]) for s in ("left", "right")]
    return np.concatenate([np.asarray(ch["bushing_force"])[:, i, 0] for i in idx])


@pytest.mark.parametrize("what", ["wheel_displacement", "bushing_force"])
def test_nmse_against_radau_within_published(runs, dw_model, what):
    t, lsrt2, ref = runs
    window = (t >= 4.9) & (t <= 6.0)
    y = _pooled(lsrt2, dw_model, what)[np.tile(window, 2)]
    y_ref = _pooled(ref, dw_model, what)[np.tile(window, 2)]
    value = float(metrics.nmse(y, y_ref))
    print(f"NMSE {what}: {value:.3e} (published {PUBLISHED[what]})")
    assert value <= PUBLISHED[what]


def test_response_is_a_weakly_damped_oscillation_settling_at_a_few_mm(runs):
    t, _, ref = runs
    x = np.asarray(ref["wheel_centre_displacement"])[:, 0, 0]
    final = x[-1]
    assert -5e-3 < final < -1e-3, f"settles at {final * 1e3:.2f} mm"
    assert np.abs(x[t < 5.0]).max() < 1e-9          # at rest before the step
    after = x[(t >= 5.0) & (t < 5.5)] - final
    crossings = np.nonzero(np.diff(np.sign(after)) != 0)[0]
    assert len(crossings) >= 6, "oscillates"
    peaks = [np.abs(after[a:b]).max() for a, b in zip(crossings[:-1], crossings[1:])]
    ratios = np.array(peaks[1:5]) / np.array(peaks[:4])
    assert np.all(ratios < 1.0) and np.all(ratios > 0.3), f"weakly damped: peak ratios {ratios}"
    assert np.abs(x[t > 5.9] - final).max() < 0.02 * abs(final), "settled by 6 s"
