"""The undamped axle over half a second (8 periods of its 16 Hz longitudinal mode): energy conserved by the explicit reference solution - the full form of tests/kernels/test_energy.py::test_undamped_axle_conserves_energy_short (0.1 s, in CI)."""
import numpy as np
import pytest
import kernels  # noqa: F401  (float64)
from tests.kernels.test_energy import TOL_DRIFT, _run, undamped  # noqa: F401  (undamped: a fixture)

pytestmark = pytest.mark.validation


def test_undamped_axle_conserves_energy_half_a_second(undamped):
    """Five times the short run: 8 periods of the 16 Hz longitudinal mode (the explicit
    reference solver's cost grows with the time span)."""
    model, _, r0 = undamped
    t, E, D, Tmax = _run(model, r0, 0.5, 26)
    drift = np.abs(E - E[0]).max() / Tmax
    print(f"undamped 0.5 s: largest kinetic energy {Tmax:.2f} J, max |E - E0| / T_max = {drift:.2e}")
    assert drift < TOL_DRIFT
