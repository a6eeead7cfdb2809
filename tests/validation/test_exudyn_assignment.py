"""The Exudyn cross-check's eigenvalue assignment (no Exudyn run)."""
import numpy as np
from validation import crosscheck_exudyn as cx  # noqa: E402  (repository root: tests/conftest.py)


def test_eigenvalue_assignment_is_one_to_one():
    """The assignment never gives one eigenvalue to two of ours (nearest-neighbour would)."""
    ours = np.array([10 + 100j, 10.5 + 101j])
    theirs = np.array([10.2 + 100.5j, 30 + 300j])
    assigned, rel, _ = cx.assign_eigenvalues(ours, theirs)
    assert assigned[0] != assigned[1]
    np.testing.assert_allclose(cx.damping_ratio([-3 + 4j]), [0.6])
