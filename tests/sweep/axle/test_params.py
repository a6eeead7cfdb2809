"""ParameterSet.apply (sweep/axle/params.py), the one way parameters reach a model
(sweeps and tuning): its scatters (``.at[].multiply`` / ``.at[].set`` with
unique indices) are differentiated by JAX. Checked against two oracles that
do not use scatters: the 0/1-mask formulation that sweep.tune used before
(written out here) and central differences, in scale and value mode, with
two parameters acting on the same entries, and under vmap (as the engine
applies it)."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import kernels  # noqa: F401  (float64)
from tests.conftest import load_model_cfg

FIELDS = (("bushing", "k"), ("bushing", "c"), ("bushing", "k_scale"), ("bushing", "c_scale"),
          ("p2p", "k_scale"), ("p2p", "c_scale"))


def _get(model, f):
    """The parameter table entry f = (group, key), or a parameter's field ("elements", group, key)."""
    group, key = f[-2:]
    return model.elements[group][key]

# name: spec (the schema of sweep.parameters), nominal value used as theta
SPEC = {
    "pf_radial": ({"target": "bushing.stiffness", "elements": "pivot_front_*", "directions": "radial",
                   "bounds": [0.2, 5.0], "scale": "log"}, 1.7),
    # the same entries (x) again: factors compose
    "pf_all": ({"target": "bushing.stiffness", "elements": "pivot_front_*", "directions": "all",
                "bounds": [0.2, 5.0]}, 0.6),
    "rm_damping_z": ({"target": "bushing.damping", "elements": "rear_mount_*", "directions": "z",
                      "bounds": [0.2, 5.0]}, 1.3),
    "spring": ({"target": "spring.rate", "elements": "spring_*", "bounds": [0.5, 2.0]}, 1.2),
    "compression": ({"target": "damper.compression", "elements": "damper_*", "bounds": [0.5, 2.0]}, 0.8),
    "rebound": ({"target": "damper.rebound", "elements": "damper_left", "bounds": [0.5, 2.0]}, 1.4),
    # value mode [N/m, N s/m], then a scale on one of the same entries (x)
    "rm_k_value": ({"target": "bushing.stiffness", "elements": "rear_mount_*", "directions": "translational",
                    "mode": "value", "nominal": 1.0e6, "bounds": [1.0e5, 1.0e7], "scale": "log"}, 1.6e6),
    "rm_k_x": ({"target": "bushing.stiffness", "elements": "rear_mount_left", "directions": "x",
                "bounds": [0.2, 5.0]}, 2.5),
    "pf_c_value": ({"target": "bushing.damping", "elements": "pivot_front_right", "directions": "rx",
                    "mode": "value", "nominal": 10.0, "bounds": [1.0, 100.0]}, 6.0),
}


@pytest.fixture(scope="module")
def toy():
    from sweep.axle.builder import model_from_config
    from sweep.axle.params import build_parameters
    model = model_from_config(load_model_cfg("toy_trailing_arm"))
    pset = build_parameters({k: v for k, (v, _) in SPEC.items()}, model)
    theta = jnp.array([t for _, t in SPEC.values()])
    return model, pset, theta


@pytest.fixture(scope="module")
def observable(toy):
    """A smooth, nonlinear scalar of every field a parameter can touch, with
    a different weight per entry (a wrong entry or a wrong chain rule changes
    the gradient); entries normalised by the nominal model's."""
    model = toy[0]
    norm = {f: jnp.where(_get(model, f) == 0, 1.0, jnp.abs(_get(model, f))) for f in FIELDS}

    def obs(m):
        out = 0.0
        for k, f in enumerate(FIELDS):
            x = _get(m, f)
            w = 1.0 + 0.1 * jnp.arange(x.size, dtype=x.dtype).reshape(x.shape) + k
            out = out + jnp.sum(w * jnp.sin(x / norm[f]))
        return out
    return obs


def apply_with_masks(pset, model, theta):
    """The former sweep.tune.apply_parameters: every parameter acts through a
    constant 0/1 mask of its entries, x (1 + mask (theta - 1)) for scale,
    x (1 - mask) + mask theta for value - no scatter."""
    updates = {}
    for i, p in enumerate(pset.params):
        arr = updates.get(p.field, _get(model, p.field))
        mask = np.zeros(arr.shape)
        mask[p.index] = 1.0
        if p.mode == "scale":
            arr = arr * (1.0 + mask * (theta[i] - 1.0))
        else:
            arr = arr * (1.0 - mask) + mask * theta[i]
        updates[p.field] = arr
    groups = {}
    for (_, group, key), arr in updates.items():
        groups.setdefault(group, {})[key] = arr
    return model.replace_elements(**groups)


def test_apply_equals_the_mask_formulation(toy):
    model, pset, theta = toy
    a, b = pset.apply(model, theta), apply_with_masks(pset, model, theta)
    for f in FIELDS:
        np.testing.assert_allclose(_get(a, f), _get(b, f), rtol=1e-15, atol=0, err_msg=str(f))
    # the parameters really act: composed factors and values where expected
    names = model.topology.bushing_names
    pf, rm = names.index("pivot_front_left"), names.index("rear_mount_left")
    assert float(a.elements["bushing"]["k_scale"][pf, 0]) == pytest.approx(1.7 * 0.6, rel=1e-15)
    assert float(a.elements["bushing"]["k_scale"][pf, 2]) == pytest.approx(0.6, rel=1e-15)
    assert float(a.elements["bushing"]["k"][rm, 0]) == 1.6e6 and float(a.elements["bushing"]["k_scale"][rm, 0]) == 2.5
    assert float(a.elements["bushing"]["k"][names.index("rear_mount_right"), 0]) == 1.6e6
    assert float(a.elements["p2p"]["c_scale"][1, 1]) == pytest.approx(1.4, rel=1e-15)    # damper_left rebound
    assert float(a.elements["p2p"]["c_scale"][3, 1]) == 1.0 and float(a.elements["p2p"]["c_scale"][3, 0]) == pytest.approx(0.8, rel=1e-15)


@pytest.mark.parametrize("mode", ["scale", "value"])
def test_gradient_of_apply_equals_mask_oracle_and_central_differences(toy, observable, mode):
    """d observable(apply(model, theta)) / d theta, reverse and forward mode,
    against the mask formulation (same derivative, to round-off) and against
    central differences of apply itself (relative step 1e-6)."""
    model, pset, theta = toy
    sel = np.array([p.mode == mode for p in pset.params])
    assert sel.sum() >= 2

    def J(t, apply):
        return observable(apply(model, t))
    g = np.asarray(jax.grad(J)(theta, pset.apply))
    g_fwd = np.asarray(jax.jacfwd(J)(theta, pset.apply))
    g_mask = np.asarray(jax.grad(J)(theta, lambda m, t: apply_with_masks(pset, m, t)))
    np.testing.assert_allclose(g, g_mask, rtol=1e-12, atol=1e-12 * np.abs(g_mask).max())
    np.testing.assert_allclose(g_fwd, g_mask, rtol=1e-12, atol=1e-12 * np.abs(g_mask).max())
    fd = np.zeros(len(theta))
    for i in np.nonzero(sel)[0]:
        h = 1e-6 * abs(float(theta[i]))
        e = jnp.zeros(len(theta)).at[i].set(h)
        fd[i] = (float(J(theta + e, pset.apply)) - float(J(theta - e, pset.apply))) / (2 * h)
    assert np.all(np.abs(g[sel] * theta[sel]) > 1e-3)   # every parameter of the mode moves the observable
    np.testing.assert_allclose(g[sel], fd[sel], rtol=1e-6)


def test_apply_gradient_under_vmap(toy, observable):
    """The engine vmaps apply over variants: per-variant gradients unchanged."""
    model, pset, theta = toy
    thetas = jnp.stack([theta, theta * 1.1, theta * 0.9])
    grad = jax.grad(lambda t: observable(pset.apply(model, t)))
    batched = np.asarray(jax.jit(jax.vmap(grad))(thetas))
    for k in range(len(thetas)):
        np.testing.assert_allclose(batched[k], np.asarray(grad(thetas[k])), rtol=1e-13)


def test_repeated_index_entries_are_refused(toy):
    """apply declares unique indices; build_parameters never makes repeated
    ones (a directions list naming x twice still gives x once)."""
    from sweep.axle.params import build_parameters
    model = toy[0]
    p = build_parameters({"twice": {"target": "bushing.stiffness", "elements": ["pivot_*", "pivot_front_*"],
                                    "directions": ["x", "x", "radial"], "bounds": [0.5, 2.0]}}, model)
    idx = p.params[0].index
    pairs = list(zip(*(a.tolist() for a in idx)))
    assert len(pairs) == len(set(pairs)) == 2 * 2       # 2 bushings x (x, y)


def test_damper_friction_target_and_stop_law_from_the_model_file(toy):
    """``damper.friction`` needs a damper with a friction law (a plain damper
    is refused by name); in value mode it sets the Coulomb force [N] of the
    matched dampers only. ``stop_law`` sets the law of every stop that has
    none of its own; a bad one names the key."""
    from sweep.axle.builder import model_from_config
    from sweep.axle.params import build_parameters
    from sweep.core.config import ConfigError
    spec = {"fric": {"target": "damper.friction", "elements": "damper_*", "mode": "value",
                     "nominal": 100.0, "bounds": [0.0, 400.0]}}
    with pytest.raises(ConfigError, match=r"damper 'damper_left' has no friction law"):
        build_parameters(spec, toy[0])
    cfg = load_model_cfg("toy_trailing_arm")
    cfg["per_side"]["p2p"]["damper"]["friction"] = {"force": 50.0}
    model = model_from_config(cfg)
    events = dict(zip(model.topology.p2p_names, model.topology.p2p_events))
    assert events["damper_left"] == events["damper_right"] == "friction"
    dw = load_model_cfg("double_wishbone")
    dw["stop_law"] = "switching"
    dw["per_side"]["p2p"]["rebound_stop"]["law"] = "smooth"       # an element's own law wins
    dwm = model_from_config(dw)
    dw_events = dict(zip(dwm.topology.p2p_names, dwm.topology.p2p_events))
    assert dw_events["bump_stop_left"] == dw_events["bump_stop_right"] == "contact"
    assert dw_events["rebound_stop_left"] == dw_events["main_spring_left"] == ""
    pset = build_parameters(spec, model)
    m2 = pset.apply(model, jnp.array([250.0]))
    fr = dict(zip(model.topology.p2p_names, np.asarray(m2.elements["p2p"]["friction"])))
    assert fr["damper_left"] == fr["damper_right"] == 250.0
    assert all(v == 0.0 for n, v in fr.items() if not n.startswith("damper"))
    from sweep.engine.layout import parameter_units
    assert parameter_units(pset.params[0]) == "N"          # the cube's units of a swept friction force
    dw["stop_law"] = "sticky"
    with pytest.raises(kernels.ModelError, match=r"model.stop_law = 'sticky' is not one of smooth, switching"):
        model_from_config(dw)


def test_flexible_body_targets_scale_the_modal_stiffness_and_damping():
    """``flexible.stiffness`` / ``flexible.damping``: factors on the modal
    stiffness / damping rows of the named flexible body (all 6 columns of
    each of its modal slots), nothing else; and the refusals."""
    from kernels.model import build_model
    from sweep.axle.builder import build_tables
    from sweep.axle.params import build_parameters
    from sweep.core.config import ConfigError
    model = build_model(build_tables(load_model_cfg("twist_beam")))
    ps = build_parameters({"k": {"target": "flexible.stiffness", "elements": "cross_*", "bounds": [0.5, 2.0]},
                           "c": {"target": "flexible.damping", "elements": "cross_member", "bounds": [0.5, 2.0]}},
                          model)
    out = ps.apply(model, jnp.array([1.5, 0.7]))
    np.testing.assert_allclose(np.asarray(out.flex["k"]), 1.5 * np.asarray(model.flex["k"]), rtol=1e-15)
    np.testing.assert_allclose(np.asarray(out.flex["c"]), 0.7 * np.asarray(model.flex["c"]), rtol=1e-15)
    np.testing.assert_array_equal(np.asarray(out.flex["phi"]), np.asarray(model.flex["phi"]))
    np.testing.assert_array_equal(np.asarray(out.elements["bushing"]["k_scale"]), np.asarray(model.elements["bushing"]["k_scale"]))
    # differentiable: d(sum k)/d theta = sum k
    g = jax.grad(lambda t: jnp.sum(ps.apply(model, t).flex["k"]))(jnp.array([1.0, 1.0]))
    np.testing.assert_allclose(np.asarray(g), [float(jnp.sum(model.flex["k"])), 0.0], rtol=1e-12)
    for spec, message in (({"elements": "arm_*"}, "matches no flexible"),
                          ({"directions": "radial"}, "takes neither directions nor mode=value"),
                          ({"mode": "value", "nominal": 1.0}, "takes neither directions nor mode=value")):
        with pytest.raises(ConfigError, match=message):
            build_parameters({"k": {"target": "flexible.stiffness", "elements": "cross_member",
                                    "bounds": [0.5, 2.0], **spec}}, model)
