"""The leaf-spring axle, full forms (on demand): its longitudinal step against the stored Radau reference (NMSE) and the pretension of the YAML. CI's forms: the double wishbone's NMSE against Radau (tests/kernels/test_validation.py) and the leaf axle's design state, rates and K&C against the beam model (tests/kernels/test_leaf_spring_axle.py)."""
import numpy as np
import pytest
import kernels  # noqa: F401  (float64)
from kernels.model import ModelError
from tests.kernels.test_leaf_spring import KC_TOLERANCES, MEASURED_NMSE, NAME, TOLERANCES  # noqa: F401
from tests.kernels.test_leaf_spring_axle import leaf  # noqa: F401

pytestmark = pytest.mark.validation


def test_pretension_of_the_yaml_is_current(leaf):
    """`python -m sweep.align leaf_spring_axle` reproduces the YAML's
    preloads; a pretension that cannot hold the axle is refused by name."""
    from sweep.align import pretension
    cfg, _ = leaf
    values, res = pretension(cfg)
    assert res < 1e-6
    for name, row in values.items():
        assert np.allclose(row, cfg["per_side"]["bushings"][name]["preload"], atol=1e-3), name
    import copy
    bad = copy.deepcopy(cfg)
    for spec in bad["per_side"]["bushings"].values():
        spec.pop("preload", None)
    bad["alignment"]["pretension"] = {"front_eye": ["x", "y"]}
    with pytest.raises(ModelError, match="cannot hold the design geometry"):
        pretension(bad)


@pytest.fixture(scope="module")
def step_runs(leaf):
    from kernels import loads
    from kernels.statics import equilibrium
    from tests.conftest import step_runs_against_radau
    cfg, model = leaf
    u0 = np.zeros((2, 6))
    u0[:, 2] = cfg["alignment"]["wheel_load"]
    amp = np.zeros((2, 6))
    amp[:, 0] = -2500.0
    exc = loads.excitation(u0, [(5.0, 0.0, amp)])
    eq = equilibrium(model, loads.u_at(exc, 4.9))
    return step_runs_against_radau("leaf_spring_step_nmse", model, exc, eq.r, rtol=1e-6,
                                   atol_coordinates=1e-9, atol_speeds=1e-6)


@pytest.mark.parametrize("what", ["wheel_displacement", "bushing_force"])
def test_step_nmse_against_radau(step_runs, leaf, what):
    from kernels import metrics
    from sweep.results.cube import pooled_signals
    _, model = leaf
    t, lsrt2, ref = step_runs
    window = np.tile((t >= 4.9) & (t <= 6.0), 2)
    y = pooled_signals(lsrt2, model, what)[window]
    y_ref = pooled_signals(ref, model, what)[window]
    value = float(metrics.nmse(y, y_ref))
    print(f"NMSE {what}: {value:.3e}")
    measured = MEASURED_NMSE[what]
    assert value <= 3.0 * measured and value > measured / 10.0, (what, value, measured)
