"""Block-sparse linear algebra of eq. (11) (kernels/blocks.py, kernels/linsolve.py).

Oracles: numpy's dense LAPACK solve on random block-sparse systems of random
topologies, dense partially pivoted LU on the axles' own coefficient
matrices, and the dense-LU integrator for whole trajectories.
"""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from kernels import blocks, linsolve


def _random_graph(rng, m, extra):
    """A random spanning tree over m bodies plus `extra` random chords (cycles)."""
    perm = rng.permutation(m)
    edges = [(int(perm[i]), int(perm[rng.integers(0, i)])) for i in range(1, m)]
    for _ in range(extra):
        i, j = rng.choice(m, 2, replace=False)
        edges.append((int(i), int(j)))
    return edges


def _random_system(rng, pattern):
    """Slot blocks of a diagonally dominant, non-symmetric matrix like M A of eq. (11)."""
    B = rng.normal(size=(pattern.n, 6, 6))
    B[pattern.diag] += 12.0 * np.eye(6) * (1 + rng.random((pattern.m, 1, 1)))
    return B


@pytest.mark.parametrize("seed, m, extra", [(0, 1, 0), (1, 2, 0), (2, 7, 0), (3, 12, 4), (4, 30, 10),
                                            (5, 24, 25), (6, 9, 30)])
def test_block_lu_solves_random_topologies(seed, m, extra):
    rng = np.random.default_rng(seed)
    pattern = blocks.pattern_from_edges(m, _random_graph(rng, m, extra) if m > 1 else [])
    elim = blocks.eliminate(pattern)
    assert sorted(elim.order) == list(range(m))
    A = _random_system(rng, pattern)
    b = rng.normal(size=(m, 6))
    fac = jax.jit(lambda A: blocks.factor(elim, jnp.asarray(A)))(A)
    x = np.asarray(jax.jit(lambda f, b: blocks.solve(elim, f, b))(fac, jnp.asarray(b)))
    D = np.asarray(blocks.to_dense(pattern, jnp.asarray(A)))
    x_ref = np.linalg.solve(D, b.reshape(-1))
    res = np.linalg.norm(D @ x.reshape(-1) - b.reshape(-1)) / np.linalg.norm(b)
    assert res < 1e-12, res
    np.testing.assert_allclose(x.reshape(-1), x_ref, rtol=1e-10, atol=1e-12 * np.abs(x_ref).max())


def test_elimination_schedule_is_consistent():
    """Pivots of one superstep are never adjacent in the filled graph, and every
    fill block the symbolic phase predicts is all that numeric LU creates."""
    rng = np.random.default_rng(11)
    pattern = blocks.pattern_from_edges(20, _random_graph(rng, 20, 8))
    elim = blocks.eliminate(pattern)
    for st in elim.steps:
        piv = set(st.pivots.tolist())
        for i, j in zip(elim.filled.rows, elim.filled.cols):
            assert not (i != j and i in piv and j in piv)
    # dense LU (no pivoting) in the same order creates no blocks outside the filled pattern
    A = np.asarray(blocks.to_dense(pattern, jnp.asarray(_random_system(rng, pattern))))
    P = np.concatenate([np.arange(6 * k, 6 * k + 6) for k in elim.order])
    LU = A[np.ix_(P, P)].copy()
    for c in range(LU.shape[0]):
        LU[c + 1:, c] /= LU[c, c]
        LU[c + 1:, c + 1:] -= np.outer(LU[c + 1:, c], LU[c, c + 1:])
    nz = np.abs(LU).reshape(20, 6, 20, 6).max(axis=(1, 3)) > 1e-13
    inv = np.argsort(P[::6] // 6)
    allowed = np.zeros((20, 20), bool)
    allowed[elim.filled.rows, elim.filled.cols] = True
    assert not np.any(nz[np.ix_(inv, inv)] & ~allowed)


def test_given_order_and_bad_order():
    pattern = blocks.pattern_from_edges(4, [(0, 1), (1, 2), (2, 3)])
    elim = blocks.eliminate(pattern, order=[1, 0, 2, 3])     # eliminating 1 first fills (0, 2)
    assert elim.n_fill == 1 and (0, 2) in elim.filled.index
    with pytest.raises(ValueError, match="not a permutation"):
        blocks.eliminate(pattern, order=[0, 1, 1, 3])


def test_static_sum_equals_scatter_add():
    rng = np.random.default_rng(3)
    ids = rng.integers(0, 7, 40)
    x = rng.normal(size=(40, 6, 12))
    ref = np.zeros((9, 6, 12))
    np.add.at(ref, ids, x)
    np.testing.assert_array_equal(np.asarray(blocks.StaticSum(ids, 9)(jnp.asarray(x))), ref)


def _axle_case(model, eq, u):
    """Block linearisation of an axle at its equilibrium with random speeds."""
    from kernels.dynamics import linearise_blocks
    v = 0.05 * jax.random.normal(jax.random.PRNGKey(2), eq.r.shape)
    return jax.jit(linearise_blocks)(model, eq.r, v, u)


def _check_axle(model, lin):
    pattern = blocks.model_pattern(model.topology)
    b = jax.random.normal(jax.random.PRNGKey(5), (model.topology.n_dof,))
    xs = {}
    for name in ("block", "dense"):
        S = linsolve.model_solver(model.topology, name)
        xs[name] = jax.jit(lambda lin, b, S=S: S.solve(S.factor(lin, 1e-3), b))(lin, b)
    # the oracle's matrices jitted (op by op, the block assembly took most of the test's time)
    MA = np.asarray(jax.jit(lambda lin: blocks.to_dense(pattern, linsolve.block_coefficient_matrix(pattern, lin, 1e-3)))(
        lin))
    Mb = np.einsum("mij,mj->mi", np.asarray(lin.M), np.asarray(b).reshape(-1, 6)).reshape(-1)
    for name, x in xs.items():
        res = np.linalg.norm(MA @ np.asarray(x) - Mb) / np.linalg.norm(Mb)
        assert res < 1e-10, (name, res)
    np.testing.assert_allclose(xs["block"], xs["dense"], rtol=1e-8, atol=1e-10 * float(jnp.abs(xs["dense"]).max()))
    # A itself (eq. 11) from the dense Jacobians J = Minv G
    from kernels.dynamics import Linearisation
    @jax.jit
    def dense_A(lin):
        J_r = blocks.to_dense(pattern, jnp.einsum("sij,sjk->sik", lin.Minv[pattern.rows], lin.G_r[:pattern.n]))
        J_v = blocks.to_dense(pattern, jnp.einsum("sij,sjk->sik", lin.Minv[pattern.rows], lin.G_v[:pattern.n]))
        return linsolve.dense_coefficient_matrix(Linearisation(lin.q, J_r, J_v, None, lin.K), 1e-3)
    A = dense_A(lin)
    np.testing.assert_allclose(np.asarray(A) @ np.asarray(xs["block"]), np.asarray(b), rtol=0,
                               atol=1e-9 * float(jnp.abs(b).max()))


def test_block_and_dense_solve_agree_toy_axle(step_excitation):
    """Eq. (11) on the trailing-arm toy axle (the cheap case of the axle
    checks below): block and dense solves agree, and both solve the
    coefficient matrix written out from the dense Jacobians."""
    from kernels import loads
    from kernels.model import build_model
    from kernels.statics import equilibrium
    from sweep.axle.builder import build_tables
    from tests.conftest import load_model_cfg
    model = build_model(build_tables(load_model_cfg("toy_trailing_arm")))
    eq = equilibrium(model, loads.u_at(step_excitation, 4.9))
    assert bool(eq.converged)
    _check_axle(model, _axle_case(model, eq, loads.u_at(step_excitation, 5.0)))




def test_pivoted_inverse_of_blocks_with_zero_diagonal():
    """inv6_pivoted inverts regular 6x6 blocks whose diagonal has zeros (the
    stiffness of a rod in Euler angles at its design position), where the
    unpivoted inv6 gives NaN; numpy's inverse is the oracle."""
    rng = np.random.default_rng(3)
    D = rng.normal(size=(5, 6, 6))
    D[:, 3, 3] = 0.0
    D[:, 0, 0] = 0.0
    D[1] = np.eye(6)[[1, 0, 2, 3, 5, 4]] * 7.0            # a permutation: every pivot off the diagonal
    got = np.asarray(blocks.inv6_pivoted(jnp.asarray(D)))
    np.testing.assert_allclose(got, np.linalg.inv(D), rtol=1e-10, atol=1e-12)
    assert not np.all(np.isfinite(np.asarray(blocks.inv6(jnp.asarray(D)))))


def test_static_newton_by_blocks_equals_dense_lu():
    """The static equilibrium's Newton steps by the block LU of the body graph
    (kernels.statics.newton_increment, the generated backend's choice) equal
    dense partially pivoted LU (the oracle, the default): the same root and
    iteration count on the toy axle (every shipped axle: the slow tier's job
    tests, which start from these equilibria). The dense equilibrium is
    ``kernels.statics.equilibrium`` itself, the program the toy-axle case
    above compiled (the loads are an argument)."""
    import functools
    from kernels import statics
    from sweep.axle.builder import load_model_file, model_from_config
    u = jnp.zeros((2, 6)).at[:, 2].set(5000.0)
    model = model_from_config(load_model_file("configs/model/toy_trailing_arm.yaml"))
    dense = statics.equilibrium(model, u)
    block = jax.jit(functools.partial(statics.static_equilibrium, solver="block"))(model, u)
    assert bool(dense.converged) and bool(block.converged)
    assert int(dense.iterations) == int(block.iterations)
    np.testing.assert_allclose(block.r, dense.r, rtol=0, atol=1e-12)


def test_block_newton_increment_solves_the_dense_system_as_well_as_dense_lu():
    """From the design position the block increment solves the dense system
    J_r dr = -q as well as dense LU does (backward error; the increments
    themselves differ in the stiff system's near-null directions, e.g. a
    wheel's spin, by its condition number times round-off)."""
    from kernels import statics
    from kernels.dynamics import linearise
    from sweep.axle.builder import load_model_file, model_from_config
    u = jnp.zeros((2, 6)).at[:, 2].set(5000.0)
    model = model_from_config(load_model_file("configs/model/toy_trailing_arm.yaml"))

    @jax.jit
    def backward(m):
        lin = linearise(m, m.r_design, jnp.zeros_like(m.r_design), u)
        out = {}
        for s in ("dense", "block"):
            dr = statics.newton_increment(m, m.r_design, u, s)[0].reshape(-1)
            out[s] = jnp.linalg.norm(lin.J_r @ dr + lin.q) / jnp.linalg.norm(lin.q)
        return out
    err = {k: float(v) for k, v in backward(model).items()}
    assert err["block"] < max(1e-10, 100 * err["dense"]), err
