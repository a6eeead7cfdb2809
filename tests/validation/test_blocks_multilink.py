"""The block solver against the dense solve on the multi-link (full form, on demand): a solve and a trajectory. CI's form: the same on the double wishbone (tests/kernels/test_blocks_axles.py) and on random topologies (tests/kernels/test_blocks.py)."""
import pytest
from tests.kernels.test_blocks import _axle_case, _check_axle  # noqa: F401
from tests.kernels.test_blocks_axles import _trajectories_agree  # noqa: F401

pytestmark = pytest.mark.validation


def test_block_and_dense_solve_agree_multilink(ml_model, ml_equilibrium, step_excitation):
    from kernels import loads
    lin = _axle_case(ml_model, ml_equilibrium, loads.u_at(step_excitation, 5.0))
    _check_axle(ml_model, lin)


def test_block_and_dense_trajectories_agree_multilink(ml_model, step_excitation, ml_equilibrium):
    _trajectories_agree(ml_model, step_excitation, ml_equilibrium)
