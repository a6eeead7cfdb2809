"""The generated backend (sweep.codegen, sweep.codegen.runner) against XLA.

The oracle is the JAX function itself run by XLA: the generated C must give
every output channel of the time-response integration equal to 1e-10
relative over the whole manoeuvre (the two differ only in the order of a
few floating-point operations). Small programs check the translator's
control flow and indexing primitives one at a time; the numpy versions of
the structural primitives are checked against ``primitive.bind``.
"""
from __future__ import annotations

import os
import warnings

import numpy as np
import pytest

import jax
import jax.numpy as jnp
from jax import lax

from sweep.results import status
from sweep.codegen import build, emit, npops

pytestmark = pytest.mark.skipif(build.compiler() is None, reason="no C compiler")

TOL = 1e-10


def _generated(fn, *args, W=4, traced=None):
    gen, f, _ = build.load_or_build(fn, *jax.tree_util.tree_map(lambda a: np.asarray(a)[0], args), W=W,
                                    traced=traced)
    return build.Kernel(gen, f, threads=2)


def _assert_equal(got, ref, tol=TOL):
    for a, b in zip(jax.tree_util.tree_leaves(got), jax.tree_util.tree_leaves(ref)):
        a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
        assert a.shape == b.shape
        scale = max(float(np.max(np.abs(b))), 1e-300)
        assert np.max(np.abs(a - b)) <= tol * scale, (np.max(np.abs(a - b)), scale)


# ----------------------------------------------------------------------------- primitives
def test_numpy_structural_primitives_equal_bind():
    rng = np.random.default_rng(0)
    x = rng.normal(size=(3, 4, 5))
    cases = [
        (lax.slice_p, (x,), dict(start_indices=(1, 0, 2), limit_indices=(3, 4, 5), strides=(1, 2, 1))),
        (lax.squeeze_p, (x[:1],), dict(dimensions=(0,))),
        (lax.broadcast_in_dim_p, (x[0],), dict(shape=(2, 4, 5), broadcast_dimensions=(1, 2), sharding=None)),
        (lax.reshape_p, (x,), dict(new_sizes=(12, 5), dimensions=None, sharding=None)),
        (lax.transpose_p, (x,), dict(permutation=(2, 0, 1))),
        (lax.concatenate_p, (x, x), dict(dimension=1)),
        (lax.rev_p, (x,), dict(dimensions=(0, 2))),
    ]
    for prim, args, params in cases:
        ref = np.asarray(prim.bind(*[jnp.asarray(a) for a in args], **params))
        got = npops.STRUCTURAL[prim.name](*args, **params)
        np.testing.assert_array_equal(got, ref, err_msg=prim.name)
    padded = np.asarray(lax.pad(jnp.asarray(x[0]), 7.0, ((1, -1, 1), (0, 2, 0))))
    np.testing.assert_array_equal(npops.pad(x[0], 7.0, ((1, -1, 1), (0, 2, 0))), padded)


def test_numpy_gather_and_scatter_positions_equal_bind():
    rng = np.random.default_rng(1)
    x = rng.normal(size=(4, 3, 5))
    idx = np.array([[0, 2], [3, 1], [2, 0]])
    fns = [lambda a, i: a[i[:, 0], :, i[:, 1]],            # two indexed axes
           lambda a, i: a[:, 1][i[:, 0]],                 # one axis, a window
           lambda a, i: jnp.take_along_axis(a, jnp.zeros((4, 3, 1), int) + 2, axis=2)]
    for fn in fns:
        eqn, ops = _operands_of(jax.make_jaxpr(fn)(x, idx), "gather", x, idx)
        ref = np.asarray(jax.jit(fn)(x, idx))
        pos = npops.gather_positions(ops[0].shape, ops[1], **eqn.params)
        np.testing.assert_array_equal(ops[0].reshape(-1)[pos], ref)
    upd = rng.normal(size=(3,))
    fn = lambda a, i, u: a.at[i[:, 0], 1, i[:, 1]].add(u)  # noqa: E731
    eqn, ops = _operands_of(jax.make_jaxpr(fn)(x, idx, upd), "scatter-add", x, idx, upd)
    tgt = npops.scatter_targets(ops[0].shape, ops[1], ops[2].shape, **eqn.params).reshape(-1)
    out = ops[0].reshape(-1).copy()
    np.add.at(out, tgt, ops[2].reshape(-1))
    np.testing.assert_array_equal(out.reshape(x.shape), np.asarray(jax.jit(fn)(x, idx, upd)))


def _operands_of(closed, name, *args):
    """(equation, concrete operands) of the first ``name`` equation of
    ``closed`` (the jaxpr evaluated up to it, nested jit calls entered)."""
    from jax.extend.core import Literal

    def walk(jaxpr, consts, vals):
        env = dict(zip(jaxpr.invars, vals))
        env.update(zip(jaxpr.constvars, consts))
        for e in jaxpr.eqns:
            ins = [v.val if isinstance(v, Literal) else env[v] for v in e.invars]
            if e.primitive.name == name:
                return e, [np.asarray(v) for v in ins]
            if e.primitive.name == "jit":
                hit = walk(e.params["jaxpr"].jaxpr, e.params["jaxpr"].consts, ins)
                if hit:
                    return hit
            out = e.primitive.bind(*ins, **e.params)
            for v, o in zip(e.outvars, out if e.primitive.multiple_results else [out]):
                env[v] = np.asarray(o)
        return None
    return walk(closed.jaxpr, closed.consts, [np.asarray(a) for a in args])


# ----------------------------------------------------------------------------- small programs
def test_control_flow_and_variable_indexing_equal_xla():
    """scan (carries, outputs, a scanned-over table), while (a per-variant
    trip count: each lane keeps its own state once done), cond (a
    per-variant branch), a gather with a per-variant index (a table lookup),
    integer arithmetic, reductions and a scatter-add with repeated targets."""
    table = jnp.linspace(-1.0, 2.0, 7) ** 2

    def f(x, n):
        def body(c, t):
            y = jnp.sin(c * t) + table[jnp.clip(jnp.sum(c > table), 0, 6)]
            return c + 0.1 * y, jnp.stack([y, jnp.cos(y) ** 3])
        c, ys = lax.scan(body, x, jnp.linspace(0.0, 1.0, 9))

        def wcond(s):
            return s[1] < n

        def wbody(s):
            return (s[0] * 1.5 - 0.2, s[1] + 1)
        w, k = lax.while_loop(wcond, wbody, (c, jnp.zeros((), jnp.int32)))
        z = lax.cond(w > 1.0, lambda a: jnp.exp(-a), lambda a: a ** 2, w)
        # a scatter-add with repeated targets (the assembly of element
        # blocks into body rows): every update counts
        acc = jnp.zeros(4).at[jnp.array([0, 2, 0, 3, 2, 0])].add(ys[:6, 0] * x)
        return ys, z, k, jnp.max(ys), (k // 2) * 3 % 5, acc

    xs = np.linspace(-0.7, 1.3, 10)
    ns = np.array([0, 1, 2, 3, 4, 5, 6, 1, 2, 3], np.int32)
    k = _generated(f, xs, ns)
    _assert_equal(k(xs, ns), jax.jit(jax.vmap(f))(xs, ns), tol=1e-13)


@pytest.mark.parametrize("strided", [False, True])
def test_finite_check_and_nan_mask_cost_no_arrays_and_equal_xla(strided):
    """The time-response kind's status check and mask over a scan's outputs,
    ``all(is_finite(ys))`` and ``where(ok, ys, nan)``: fused into the
    reduction and into the copy to the outputs (no arena array of their
    own), equal to XLA for finite lanes and for lanes that overflow, start
    NaN or are masked by another flag. The outputs' concatenation is read
    as contiguous arena runs without an index table; one channel of every
    sample (81 runs of one element) through its table."""
    import re

    def f(x, keep):
        def body(c, _):
            c = c * x
            return c, jnp.stack([c, -c, 2.0 * c])
        _, ys = lax.scan(body, jnp.ones(()), None, length=80)
        ys = jnp.concatenate([jnp.full((1, 3), 0.5), ys])      # the initial sample, as the kind's
        ys = ys[:, 1] if strided else ys
        ok = jnp.all(jnp.isfinite(ys)) & (keep > 0)
        return jnp.where(ok, ys, jnp.nan), ok

    xs = np.array([0.5, 1.1, 1e10, np.nan, 2.0, 1.0, 3.0, -1.2])
    keep = np.array([1.0, 1.0, 1.0, 1.0, 0.0, 1.0, 1.0, 1.0])
    gen = emit.generate(f, xs[0], keep[0])
    if strided:                                                     # the fused reduction
        assert re.search(r"acc = v_isfin\(x\)", gen.source) and "itab" in gen.source
    else:
        assert re.search(r"acc = v_land\(acc, v_isfin\(ar\[", gen.source) and "itab" not in gen.source
    assert not re.search(r"ar\[[^]]*\] = v_isfin\(", gen.source)    # no is_finite array
    assert re.search(r"PUT\([^;]*v_sel\(", gen.source)              # the mask, as copied out
    got = _generated(f, xs, keep)(xs, keep)
    ref = jax.jit(jax.vmap(f))(xs, keep)
    np.testing.assert_array_equal(np.asarray(got[1]), np.asarray(ref[1]))
    assert list(np.asarray(ref[1])) == [True, True, False, False, False, True, True, True]
    np.testing.assert_array_equal(np.asarray(got[0]), np.asarray(ref[0]))     # NaN where masked


def test_broadcast_rows_are_one_nested_loop_and_equal_xla():
    """An outer product of arena arrays (rows of a broadcast, as the block
    solver's): 72 equal runs whose starts advance evenly are emitted as one
    two-level loop, not 72 loops, with XLA's values."""
    def f(x):
        def body(c, _):
            c = c * x
            return c, jnp.stack([c, -c, 2.0 * c, c + 1.0, c - 1.0, 3.0 * c])
        _, ys = lax.scan(body, jnp.ones(()), None, length=12)        # (12, 6) in the arena
        return ys[:, :, None] * ys[0][None, None, :] - ys[None, 3, :, None]

    xs = np.array([0.5, 1.1, -0.7, 2.0, 0.9])
    gen = emit.generate(f, xs[0])
    assert "for (long r = 0; r < 72; r++)" in gen.source
    _assert_equal(_generated(f, xs)(xs), jax.jit(jax.vmap(f))(xs), tol=1e-15)


def test_output_references_of_constants_map_to_minus_one_without_warnings():
    """The generator's view of output references (ids as ints, constants as
    floats, NaN and infinite ones included): ids kept, constants -1."""
    import warnings

    from sweep.codegen.ir import BUF, int_refs
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        got = int_refs([3, BUF + 7, float("nan"), 2.0, float("inf"), np.int64(5), -float("inf")])
    assert got.tolist() == [3, BUF + 7, -1, -1, -1, 5, -1]


def test_unknown_primitive_is_named():
    def f(x):
        return lax.population_count(x.astype(jnp.int32)).astype(x.dtype)
    with pytest.raises(emit.Unsupported, match="population_count"):
        emit.generate(f, np.zeros(3))


def test_a_compiler_error_is_reported_with_its_text(tmp_path, monkeypatch):
    """A compiler that fails (here on every part, with more output than a
    pipe holds) ends the build with a BuildError carrying its message, not
    a hang or a bare exit status."""
    cc = tmp_path / "failing-cc"
    cc.write_text("#!/bin/sh\nfor i in $(seq 3000); do echo 'padding line of a chatty compiler' >&2; done\n"
                  "echo 'failing-cc: error: out of memory' >&2\nexit 1\n")
    cc.chmod(0o755)
    monkeypatch.setenv("CC", str(cc))
    monkeypatch.setattr(build, "cache_dir", lambda cfg=None: str(tmp_path))
    gen = emit.generate(lambda x: jnp.sin(x) * 2.0, np.zeros(3))
    with pytest.raises(build.BuildError, match="out of memory"):
        build.build(gen)


def test_runner_falls_back_to_xla_with_one_line_when_no_compiler(monkeypatch, caplog):
    from sweep.engine import mapping
    from sweep.codegen.runner import GeneratedRunner

    def first(th):
        return th * 2.0

    def second(th, c):
        return jnp.sin(c) + th
    fallback = mapping.map_variants(lambda th: second(th, first(th)))
    monkeypatch.setenv("CC", "/nonexistent/cc")
    monkeypatch.setattr(build, "compiler", lambda: None)
    runner = GeneratedRunner(first, second, fallback)
    thetas = np.linspace(0, 1, 6).reshape(3, 2)
    with caplog.at_level("WARNING", logger="sweep"):
        run = runner.lower(thetas).compile()
    assert runner.info["backend"] == "xla" and "no C compiler" in runner.info["why"]
    assert sum("generated backend not available" in r.getMessage() for r in caplog.records) == 1
    np.testing.assert_allclose(run(thetas, 3), np.sin(2 * thetas) + thetas, rtol=1e-15)


# ----------------------------------------------------------------------------- the integration
def _toy_runner_pair(method="lsrt2", relin=1, n_samples=61, every=2, model_name="toy_trailing_arm"):
    from kernels import loads
    from kernels.model import build_model
    from sweep.kinds.time_response import Case, make_chunk_runner
    from sweep.axle.builder import build_tables
    from sweep.axle.params import build_parameters
    from tests.conftest import load_model_cfg
    model = build_model(build_tables(load_model_cfg(model_name)))
    u0 = np.zeros((2, 6))
    u0[:, 2] = 5000.0
    amp = np.zeros((2, 6))
    amp[:, 0] = -2500.0
    exc = loads.excitation(u0, [(5.0, 0.0, amp)])
    names = model.topology.bushing_names
    spec = {"first_radial": {"target": "bushing.stiffness", "elements": names[0], "directions": "radial",
                             "bounds": [0.5, 2.0]},
            "damping": {"target": "bushing.damping", "elements": "*", "bounds": [0.5, 2.0]}}
    pset = build_parameters(spec, model)
    case = lambda backend: Case(exc, 4.95, 1e-3, n_samples, every=every, relin=relin, method=method,  # noqa: E731
                                backend=backend)
    thetas = np.array([[1.0, 1.0], [0.5, 2.0], [2.0, 0.5], [1.3, 0.7], [0.8, 1.6]])
    return make_chunk_runner(model, pset, case("generated")), make_chunk_runner(model, pset, case("xla")), thetas


STORE = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))), "fixtures", "codegen")


def _generated_against_xla(name, first, second, thetas, W=4):
    """The generated code of ``second`` (the integration stage) against
    ``jit(vmap(second))`` under XLA on the same inputs: the equilibria
    ``first`` of ``thetas`` and XLA's outputs from them are read from
    ``tests/fixtures/codegen/<name>.npz`` (AXLE_STORE_REFERENCES=1 writes
    it). Where the generated outputs equal the stored ones, they equal
    XLA's: the stored outputs are XLA's for these inputs from some version
    of ``second``, and only a generator that is right reproduces them.
    Where they differ (the function changed, or the generator is wrong),
    XLA is run now (a warning says so) and decides. Only per-variant
    functions are traced (vmapped traces cost seconds each); the trace is
    handed on to the build. Returns the generated outputs."""
    path = os.path.join(STORE, f"{name}.npz")
    carry_shape = jax.eval_shape(first, thetas[0])
    carry_tree = jax.tree_util.tree_structure(carry_shape)
    example = jax.tree_util.tree_map(lambda a: np.zeros(a.shape, a.dtype), carry_shape)
    traced = emit.trace(second, thetas[0], example, W=W)
    out_tree = traced[1]
    carries = ref = None
    if os.path.exists(path) and not os.environ.get("AXLE_STORE_REFERENCES"):
        z = np.load(path)
        leaves = [z[f"carry{k}"] for k in range(carry_tree.num_leaves) if f"carry{k}" in z]
        shapes = [(len(thetas),) + tuple(a.shape) for a in jax.tree_util.tree_leaves(carry_shape)]
        if np.array_equal(z["thetas"], thetas) and [a.shape for a in leaves] == shapes \
                and all(f"out{k}" in z for k in range(out_tree.num_leaves)):
            carries = jax.tree_util.tree_unflatten(carry_tree, leaves)
            ref = jax.tree_util.tree_unflatten(out_tree, [z[f"out{k}"] for k in range(out_tree.num_leaves)])
    if carries is None:
        carries = jax.device_get(jax.jit(jax.vmap(first))(thetas))
    got = _generated(second, thetas, carries, W=W, traced=traced)(thetas, carries)
    if ref is not None:
        try:
            _assert_equal(got, ref)
            return got
        except AssertionError:
            warnings.warn(f"the generated outputs differ from {path}: XLA's computed now to decide")
    ref = jax.device_get(jax.jit(jax.vmap(second))(thetas, carries))
    if os.environ.get("AXLE_STORE_REFERENCES"):
        os.makedirs(STORE, exist_ok=True)
        np.savez_compressed(path, thetas=thetas,
                            **{f"carry{k}": np.asarray(a) for k, a in enumerate(jax.tree_util.tree_leaves(carries))},
                            **{f"out{k}": np.asarray(a) for k, a in enumerate(jax.tree_util.tree_leaves(ref))})
    _assert_equal(got, ref)
    return got


def _compare(name, method, relin, W=4, **kw):
    gen_runner, _, thetas = _toy_runner_pair(method, relin, **kw)
    got = _generated_against_xla(name, gen_runner.first_fn, gen_runner.second, thetas, W=W)
    assert (np.asarray(got[1]) == status.OK).all()
    assert np.ptp(np.asarray(got[0]["wheel_centre_displacement"])) > 1e-4


def test_a_chunk_of_one_variant_is_built_with_one_variant_per_vector():
    """The single-variant job's chunk gets scalar code (its other lanes
    would compute padding); a batch the runner's vector width."""
    from sweep.codegen.runner import LANES, _Lowered
    gen_runner, _, thetas = _toy_runner_pair("lsrt2", 1, n_samples=17, every=5)
    assert _Lowered(gen_runner, thetas[:1]).lanes() == 1
    assert _Lowered(gen_runner, thetas[:2]).lanes() == LANES == 4


@pytest.mark.parametrize("mvec", ["1", "0"])
def test_transcendental_functions_equal_numpy(monkeypatch, mvec):
    """The transcendental functions of the generated code - glibc's vector
    math library (libmvec) where it is available, one libm call per variant
    otherwise - against numpy, to a few ulp."""
    monkeypatch.setenv("AXLE_GENERATED_MVEC", mvec)

    def f(x):
        y = 1.3 - x
        return jnp.stack([jnp.sin(7 * x), jnp.cos(7 * x), jnp.tan(x), jnp.arctan2(x, y), jnp.exp(x),
                          jnp.log1p(x * x), jnp.tanh(3 * x), jnp.arcsin(x / 2), jnp.arctan(5 * x),
                          jnp.expm1(x), jnp.log(2 + x), jnp.power(2 + x, y), jnp.sinh(x), jnp.cosh(x)])

    xs = np.linspace(-1.9, 1.9, 37)
    k = _generated(f, xs)
    got = np.asarray(k(xs))
    y = 1.3 - xs
    ref = np.stack([np.sin(7 * xs), np.cos(7 * xs), np.tan(xs), np.arctan2(xs, y), np.exp(xs),
                    np.log1p(xs * xs), np.tanh(3 * xs), np.arcsin(xs / 2), np.arctan(5 * xs),
                    np.expm1(xs), np.log(2 + xs), np.power(2 + xs, y), np.sinh(xs), np.cosh(xs)], axis=1)
    np.testing.assert_allclose(got, ref, rtol=4e-15, atol=4e-16)
    assert (build.MVEC in build.compile_flags()) == (mvec == "1" and build.has_mvec())


def test_rerun_with_the_same_prekey_does_not_trace(monkeypatch):
    """A prekey (the job's key of everything the function closes over) that
    was built before loads the library without tracing; a new prekey traces."""
    import uuid
    prekey = uuid.uuid4().hex

    def f(x):
        return jnp.sin(x) * 3.0 + x ** 2
    x0 = np.zeros(3)
    gen, fn, info = build.load_or_build(f, x0, prekey=prekey)
    assert not info.get("trace_skipped")

    def no_trace(*a, **k):
        raise AssertionError("traced")
    monkeypatch.setattr(emit, "trace", no_trace)
    gen2, fn2, info2 = build.load_or_build(f, x0, prekey=prekey)
    assert info2["trace_skipped"] and gen2.key == gen.key
    xs = np.linspace(-1, 1, 15).reshape(5, 3)
    np.testing.assert_allclose(build.Kernel(gen2, fn2)(xs), np.sin(xs) * 3 + xs ** 2, rtol=1e-14)
    with pytest.raises(AssertionError, match="traced"):
        build.load_or_build(f, x0, prekey=prekey + "-other")


def test_argmax_and_argmin_follow_xla():
    """First index of the extreme, ties to the earlier index, the first NaN
    wins (XLA's comparator), over rows and columns."""
    def f(x):
        m = x.reshape(3, 4)
        return (jnp.argmax(m, axis=1), jnp.argmin(m, axis=0), jnp.argmax(jnp.abs(m[:, :3]), axis=1),
                jnp.argmax(x))
    xs = np.array([[1.0, 3.0, 3.0, 2.0, -1.0, -1.0, 0.0, 5.0, 2.0, np.nan, 7.0, np.nan],
                   [0.0, 0.0, 0.0, 0.0, 4.0, -4.0, 4.0, 4.0, np.nan, 1.0, 1.0, 1.0],
                   [-2.0, 1.0, -3.0, 0.5, 9.0, 8.0, -9.0, 0.0, 1.0, 2.0, 3.0, 4.0]])
    kernel = _generated(f, xs)
    _assert_equal(kernel(xs), jax.vmap(f)(xs), tol=0.0)


def test_shared_arguments_are_run_time_inputs():
    """An argument marked shared (the same for every variant) is read at run
    time from its own buffer: one build serves any values of it, including
    a curve table gathered at a per-variant index and values used inside a
    loop, equal to XLA's vmap with the argument unbatched."""
    def f(x, p):
        k = jnp.clip(jnp.floor(x[0] * 4.0), 0, 7).astype(jnp.int32)      # a per-variant table position
        y = p["table"][k] * x[1] + p["rate"] * jnp.sin(x)

        def body(c, row):
            return c * p["rate"] + row @ x, c
        c, ys = lax.scan(body, 0.5, p["rows"])
        return y + c, ys

    rng = np.random.default_rng(3)
    xs = rng.uniform(0.0, 2.0, size=(7, 3))

    def params():
        return {"table": rng.normal(size=8), "rate": np.float64(rng.uniform(0.5, 0.9)),
                "rows": rng.normal(size=(5, 3))}
    p0 = params()
    example = (xs[0], jax.tree_util.tree_map(np.zeros_like, p0))
    gen, fn, _ = build.load_or_build(f, *example, shared=(1,))
    assert gen.shared == (1,) and gen.n_shared == 8 + 1 + 15 and gen.n_in == 3
    kernel = build.Kernel(gen, fn, threads=2)
    for p in (p0, params()):                     # other values: the same library
        ref = jax.vmap(f, in_axes=(0, None))(xs, jax.tree_util.tree_map(jnp.asarray, p))
        _assert_equal(kernel(xs, p), ref, tol=1e-13)
    with pytest.raises(ValueError, match="shared input values"):
        kernel(xs, {"table": np.zeros(9), "rate": 0.5, "rows": np.zeros((5, 3))})
    # the key is the structure's: marking an argument shared is part of it
    assert emit.trace(f, *example, shared=(1,))[2] == gen.key
    assert emit.trace(f, *example)[2] != gen.key


def test_a_folded_pattern_build_serves_every_value_of_its_pattern():
    """``fold``: the shared values' pattern is compiled in - exact 0 and +-1
    as constants - and every other value is read at run time. One build
    gives XLA's numbers for other values of the same pattern (changed rates
    and a changed table, here inside a scan over a per-element table in a
    time loop, the shape of the element loops, and entries that were equal
    and no longer are); a value that becomes 0 or 1 is a new pattern and a
    new key; folding makes less code than reading every value."""
    def f(x, p):
        def step(c, _):
            def element(acc, row):             # an element loop inside the time loop
                k, s, r = row
                return acc + k * jnp.sin(c * s) + r * c, None
            acc, _ = lax.scan(element, 0.0, (p["k"], p["s"], p["r"]))
            j = jnp.clip(jnp.floor(c).astype(jnp.int32), 0, 3)    # a per-variant table position
            return 0.5 * c + 0.1 * acc + p["table"][j] * x[1], c
        c, ys = lax.scan(step, x[0], None, length=6)
        return c, ys

    def params(k1, k2, table):
        return {"k": np.array([k1, 0.0, k2, 1.0]), "s": np.array([1.0, -1.0, 0.3, 0.3]),
                "r": np.array([0.0, 0.2, k1, 0.0]), "table": np.asarray(table, np.float64)}
    p0 = params(0.7, 0.9, [0.1, 0.4, 0.4, -1.0])
    codes = emit.shared_pattern((None, p0), (1,))
    flat = np.concatenate([np.ravel(p0[k]) for k in sorted(p0)])      # the tree's (sorted) leaf order
    assert (codes[flat == 0.0] == -1).all() and (codes[flat == 1.0] == -2).all() and (codes[flat == -1.0] == -3).all()
    others = (flat != 0.0) & (flat != 1.0) & (flat != -1.0)
    assert (codes[others] == np.flatnonzero(others)).all()          # read at run time, each from its place
    rng = np.random.default_rng(5)
    xs = rng.uniform(0.0, 3.5, size=(6, 2))
    example = (xs[0], p0)
    gen, fn, _ = build.load_or_build(f, *example, shared=(1,), fold=True)
    kernel = build.Kernel(gen, fn, threads=2)
    for p in (p0, params(1.3, -0.4, [2.0, -0.5, -0.5, -1.0]), params(0.7, 0.9, [0.1, 0.4, 0.3, -1.0])):
        assert emit.trace(f, xs[0], p, shared=(1,), fold=True)[2] == gen.key
        ref = jax.vmap(f, in_axes=(0, None))(xs, jax.tree_util.tree_map(jnp.asarray, p))
        _assert_equal(kernel(xs, p), ref, tol=1e-13)
    for other in (params(0.0, 0.9, [0.1, 0.4, 0.4, -1.0]),        # a rate becomes 0
                  params(0.7, 1.0, [0.1, 0.4, 0.4, -1.0])):       # a rate becomes 1
        assert emit.trace(f, xs[0], other, shared=(1,), fold=True)[2] != gen.key
    unfolded = emit.generate(f, *example, shared=(1,))
    assert gen.n_statements < unfolded.n_statements


def test_a_rows_pattern_build_reads_each_variants_values(caplog):
    """``rows_fold`` (a hardpoint design: each variant its own values in its
    row): the 0 and +-1 that every probe row shares are compiled in, every
    other entry is read per variant - one build gives XLA's numbers for
    rows of other values (each row its own), with less code than reading
    every entry; the pattern is part of the key. A chunk with a row outside
    the pattern (a shared 0 that became 0.3) is run by the runner on XLA,
    with one line saying so, never on the code built for other values."""
    from sweep.codegen.runner import GeneratedRunner
    from sweep.engine import mapping

    def f(row):
        x, k, zero, one, frame = row[0], row[1:3], row[3], row[4], row[5:9].reshape(2, 2)
        v = frame @ jnp.stack([jnp.sin(x), jnp.cos(x)])
        return k @ v + zero * jnp.exp(x) + one * x, v * (1.0 + zero)

    # probe rows: x and the rates vary (the nominal's first rate is 1, the
    # others' not: read), the 'zero', 'one' and the identity frame do not
    probe = np.array([[0.1, 1.0, 3.0, 0.0, 1.0, 1.0, 0.0, 0.0, 1.0],
                      [0.5, 2.5, 3.0, 0.0, 1.0, 1.0, 0.0, 0.0, 1.0],
                      [0.9, 1.5, 3.5, 0.0, 1.0, 1.0, 0.0, 0.0, 1.0]])
    code = emit.rows_pattern(probe)
    assert list(code[:3]) == [0, 1, 2] and (code[3:] < 0).all()
    rng = np.random.default_rng(11)
    rows = np.tile(probe[0], (6, 1))
    rows[:, :3] = rng.uniform(0.2, 3.0, size=(6, 3))           # each row its own x and rates
    assert emit.rows_agree(rows, code).all()
    gen, fn, _ = build.load_or_build(f, probe[0] * 0.0, rows_fold=code)
    kernel = build.Kernel(gen, fn, threads=2)
    _assert_equal(kernel(rows), jax.vmap(f)(rows), tol=1e-13)
    assert emit.trace(f, probe[0], rows_fold=code)[2] == gen.key
    assert emit.trace(f, probe[0])[2] != gen.key
    assert gen.n_statements < emit.generate(f, probe[0]).n_statements
    outside = rows.copy()
    outside[2, 3] = 0.3
    assert list(emit.rows_agree(outside, code)) == [True, True, False, True, True, True]
    fallback = mapping.map_variants(f, 1, None)
    runner = GeneratedRunner(None, None, fallback, whole=f, rows_fold=code, threads=2)
    run = runner.lower(rows).compile()
    _assert_equal(run(rows), jax.vmap(f)(rows), tol=1e-13)
    assert "run on XLA" not in caplog.text
    _assert_equal(run(outside), jax.vmap(f)(outside), tol=1e-13)
    assert "such chunks run on XLA" in caplog.text


def test_a_reference_and_a_constant_of_the_same_number_stay_apart():
    """Statement and stored-table keys tell a value's reference (an int) from
    a constant of the same number (Python's 2 == 2.0): ``x[2] - 1.0`` and
    ``x[2] - x[1]`` are two statements, and two tables scanned at the top
    level - one holding a constant 1.0, the other the value with reference 1
    - are two stored tables; and 0.0 is not -0.0."""
    def f(x):
        a = jnp.stack([x[2] - 1.0, x[2] - x[1], x[2] * 0.0 + x[0] * -0.0])
        t1 = jnp.stack([x[2], 1.0])
        t2 = jnp.stack([x[2], x[1]])
        s1, _ = lax.scan(lambda c, v: (c * 0.5 + v, None), 0.0, t1)
        s2, _ = lax.scan(lambda c, v: (c * 0.5 + v, None), 0.0, t2)
        return a, s1, s2

    xs = np.array([[0.3, 2.5, -1.2], [1.0, 1.0, 1.0], [-4.0, 0.25, 3.0], [2.0, -3.0, 0.5]])
    kernel = _generated(f, xs)
    _assert_equal(kernel(xs), jax.vmap(f)(xs), tol=0.0)


def test_a_loop_invariant_table_is_stored_once_not_every_step():
    """A table read by a scan inside a loop whose values do not change in the
    loop (an element table of run-time values inside the time loop) is
    stored in the workspace once, before the loops: no store statement in
    the time loop's body, and the same table scanned twice is stored once."""
    def f(x, p):
        def step(c, _):
            a, _ = lax.scan(lambda acc, k: (acc + k * c, None), 0.0, p)
            b, _ = lax.scan(lambda acc, k: (acc * 0.5 + jnp.sin(k + c), None), 0.0, p)
            return 0.9 * c + 0.01 * (a + b), c
        return lax.scan(step, x[0], None, length=4)

    p = np.array([0.3, 0.7, 1.9])
    gen_prog = {}
    plain = emit.to_c

    def spy(prog, *a, **k):
        gen_prog["prog"] = prog
        return plain(prog, *a, **k)
    emit.to_c = spy
    try:
        gen = emit.generate(f, np.zeros(1), p, shared=(1,))
    finally:
        emit.to_c = plain
    top = gen_prog["prog"].scopes[0]

    def stores(scope):
        n = 0
        for _, op, args in scope:
            if op == "loop":
                n += stores(args.body)
            n += op == "store"
        return n
    loops = [a for _, op, a in top if op == "loop"]
    assert len(loops) == 1 and stores(loops[0].body) == 0
    assert sum(op == "store" for _, op, _ in top) == p.size
    kernel = build.Kernel(gen, build.build(gen)[0], threads=1)
    xs = np.array([[0.2], [1.5], [-0.7]])
    _assert_equal(kernel(xs, p), jax.vmap(f, in_axes=(0, None))(xs, jnp.asarray(p)), tol=1e-13)


def test_index_table_runs():
    """An arena loop over an index table is split into loops over the
    table's runs (first index + step * e) that reproduce every entry."""
    import types
    from sweep.codegen.csource import _Emitter
    rng = np.random.default_rng(1)
    for _ in range(200):
        n = int(rng.integers(1, 60))
        tabs = [np.cumsum(rng.choice([0, 1, 1, 1, 5, -3], size=n)) + 100 for _ in range(int(rng.integers(1, 3)))]
        em = types.SimpleNamespace(p=types.SimpleNamespace(index_tables=tabs))
        ops = [("t", k) for k in range(len(tabs))] + [("a", 1 << 40)]
        segments = _Emitter.segments(em, ops, n, max_runs=10 ** 6)
        assert sum(ln for _, ln, _ in segments) == n
        for s0, ln, subs in segments:
            for k, (first, step) in enumerate(subs[:len(tabs)]):
                np.testing.assert_array_equal(first + step * np.arange(ln), tabs[k][s0:s0 + ln])
            assert subs[-1] is None
    two = [np.r_[np.arange(10, 20), np.arange(50, 60)]]
    em = types.SimpleNamespace(p=types.SimpleNamespace(index_tables=two))
    assert [(s, ln) for s, ln, _ in _Emitter.segments(em, [("t", 0)], 20)] == [(0, 10), (10, 10)]
    assert _Emitter.segments(em, [("t", 0)], 20, max_runs=1) is None
