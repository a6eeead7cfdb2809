"""The flexible beam against the full FE model's eigenfrequencies, its rigid limit, and its step response against scipy's Radau."""
import numpy as np
import pytest
import scipy.integrate
import scipy.linalg
from kernels.model import build_model
from tests.kernels.test_flexible import CROSS, C_MOUNT, K_HUB, K_MOUNT, N_NODES, ORIGIN, STEEL, WHEEL_INERTIA, WHEEL_MASS, _stiffness, beam_fe, beam_tables, full_fe_system  # noqa: F401

pytestmark = pytest.mark.slow


def test_eigenfrequencies_match_the_full_fe_model():
    """Undamped natural frequencies of beam + wheels on their bushings: the
    kernels' state matrix against the full FE model's generalised
    eigenproblem, within 1 % up to half the highest kept fixed-interface
    frequency (the cutoff rule of docs/flexible_bodies.md)."""
    tables, rb, (nodes, M, K, ends) = beam_tables(gravity=(0.0, 0.0, 0.0), zeta=0.0, n_fixed=12)
    for b in tables["bushings"]:
        b["damping"] = [0.0] * 6
    model = build_model(tables)
    _, _, lin = _stiffness(model)
    # x'' = J_r K x (Euler-angle coordinates: K maps body rates to angle rates)
    Kd = scipy.linalg.block_diag(*np.asarray(lin.K))
    w2_kernels = np.sort(np.linalg.eigvals(-np.asarray(lin.J_r) @ Kd).real)
    Mt, Kt = full_fe_system(M, K, ends)
    w2_fe = scipy.linalg.eigh(Kt, Mt, eigvals_only=True)
    f_k, f_fe = np.sqrt(w2_kernels) / (2 * np.pi), np.sqrt(w2_fe) / (2 * np.pi)
    below = f_fe < 0.5 * rb.fixed_interface_frequencies_hz.max()
    assert below.sum() >= 15
    np.testing.assert_allclose(f_k[:below.sum()], f_fe[below], rtol=1e-2)
    # the modes of the beam on its bushings (below the first elastic mode of
    # the free beam, 221 Hz) are far closer than that
    low = f_fe < 0.5 * rb.frequencies_hz[0]
    assert low.sum() >= 12
    np.testing.assert_allclose(f_k[:low.sum()], f_fe[low], rtol=1e-4)


