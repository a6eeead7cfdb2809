"""The job pipeline records each variant's parameter values beside that
variant's own results (sweep.engine.stream.stream_chunks), chunk after
chunk, with padded last chunks - without computing anything: the chunk
runner here returns outputs that encode the row it was given, so every
result carries the parameter values it was computed from (the oracle).
(The full jobs that re-run a cube's recorded parameters are
tests/sweep/test_reproduce.py and its K&C / two-device forms.)"""
import numpy as np
import xarray as xr

from tests.jobs import cfg_of

PARAMS = ["~sweep.parameters",
          "+sweep.parameters.pf={target: bushing.stiffness, elements: 'pivot_front_*', directions: radial, "
          "bounds: [0.5, 2.0], scale: log}",
          "+sweep.parameters.sp={target: spring.rate, elements: 'spring_*', bounds: [0.5, 2.0]}",
          "sweep=lhs", "sweep.n_variants=7", "sweep.chunk_size=3", "sweep.progress=false",
          "loadcase=kc_wheel_travel", "loadcase.steps=3"]


def test_every_variant_keeps_its_own_parameter_values(tmp_path):
    from sweep.results import store as cube_store
    from sweep.engine import layout, stream
    from sweep.engine.stops import RunContext
    from sweep.kinds import kind_of
    path = tmp_path / "order.zarr"
    cfg = cfg_of("model=toy_trailing_arm", *PARAMS, f"output.path={path}")
    kind = kind_of(cfg)
    plan = kind.plan(cfg)
    attrs = {**kind.attrs(plan, "config: placeholder"), "cube_kind": kind.name}
    store, _ = cube_store.create_store(str(path), layout.store_spec(plan), attrs, "identity", chunk=plan.chunk)
    names = [c.name for c in plan.channels]
    shapes = {name: store.group[name].shape[1:] for name in names}

    def run_chunk(thetas, m, next_thetas=None):
        # each row's first result = its first parameter, the second its second
        outs = {}
        for name in names:
            a = np.zeros((len(thetas),) + shapes[name])
            flat = a.reshape(len(thetas), -1)
            flat[:, 0] = thetas[:, 0]
            if flat.shape[1] > 1:
                flat[:, 1] = thetas[:, 1]
            outs[name] = a
        return outs, np.zeros(len(thetas), np.int8), np.zeros(len(thetas), np.int64)

    todo = list(range(-(-len(plan.X) // plan.chunk)))[::-1]       # chunks in any order
    with RunContext() as ctx:
        stream.stream_chunks(ctx, plan, store, todo, run_chunk, names, False,
                             {"variants_run": 0, "run_s": 0.0})
    ds = xr.open_zarr(path)
    assert ds.sizes["variant"] == 7 and plan.chunk == 3
    first = names[0]
    got = ds[first].values.reshape(7, -1)
    np.testing.assert_array_equal(got[:, 0], ds.pf.values)
    np.testing.assert_array_equal(got[:, 1], ds.sp.values)
    np.testing.assert_array_equal(ds.pf.values, plan.X[:, 0])
    assert len(np.unique(ds.pf.values)) == 7
