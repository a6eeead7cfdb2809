"""The frequency-response job kind: what each variant of the axle transmits,
over frequency, from the wheel centre to the wheel and to the body mounts.

``python -m sweep loadcase=frf sweep=lhs sweep.n_variants=64``

Per variant (:func:`make_variant`): apply the parameters, find the static
equilibrium under the load case's wheel loads (force control, the state the
time response starts from), linearise eq. (1) there at rest and solve the
harmonic steady state on the frequency grid (:func:`kernels.frf.frequency_response`,
one complex solve of the velocity coordinates per frequency) for unit
harmonic wheel-centre forces (``loadcase.inputs``, e.g. ``left_fz``). The
outputs per frequency and input: the wheel-centre receptance (x, y, z per
side) [m/N], toe and camber per side [rad/N] (dynamic compliance steer), and
the force and torque of every body mount - each bushing and P2P element
(spring, damper, stop) with the chassis as one of its bodies;
``loadcase.mounts`` names others - on the chassis side, elastic and damping
parts together [N/N, N m/N] (for an element between two moving bodies: on
its second body). A P2P element's force acts along its line at its marker
(no torque).

Cube: dims ``variant``, ``frequency`` [Hz], ``input``, ``side``, ``axis``,
``mount``, ``component``; complex transfer functions as real and imaginary
parts (``*_real``, ``*_imag``; magnitude and phase: ``sweep.results.cube.complex_of``),
``status``, ``equilibrium_iterations``, one variable per swept parameter;
a Bode figure of the left wheel's vertical receptance and the largest mount
force beside the cube. Everything around it (chunks, store, resume, stops)
is the one job pipeline, :func:`sweep.engine.run`.
"""
from __future__ import annotations

import logging
import os

import jax
import jax.numpy as jnp
import numpy as np
from omegaconf import OmegaConf

from kernels import frf, kc, statics
from kernels.names import AXES, COMPONENTS, SIDES, TYRE_BUSHINGS
from sweep.results import cube
from sweep.results import schema as cube_schema
from sweep.results import status
from sweep.results.cube import CF_CONVENTIONS, flexible_note, provenance
from sweep.study.design import make_design
from sweep.engine import layout, log_run, mapping
from sweep.engine.layout import Channel
from sweep.kinds.base import JobKind, Plan, Runner, static_limits, rig_from_load_case
from sweep.study.loadcase import _loads
from sweep.axle.builder import model_from_config
from sweep.axle.params import build_parameters
from sweep.core.config import ConfigError, Float, Int, Map, Str

log = logging.getLogger("sweep")

NAME = "frf"
KNOWN_KEYS = {"name", "kind", "description", "wheel_loads", "frequencies", "inputs", "mounts",
              "tolerance", "max_iterations", "tyre", "sprung_body"}
FORCE_INPUTS = tuple(n for n in frf.INPUTS if n[-2] == "f")     # wheel-centre forces only
ROAD_INPUTS = ("left_road", "right_road")                       # road height under a tyre (model.tyres)
MOUNT_UNITS = "mixed units: N/N (fx, fy, fz), N m/N (mx, my, mz) per unit input force, per component"


def _pair(name, dims, units, what, comment=""):
    return [Channel(f"{name}_{part}", dims, units, f"{what}, {part} part", comment=comment)
            for part in ("real", "imag")]


CHANNELS = [
    *_pair("wheel_centre_receptance", ("input", "side", "axis"), "m/N",
           "wheel-centre displacement per unit harmonic input force (receptance)"),
    *_pair("toe_receptance", ("input", "side"), "rad/N", "toe angle (DIN 70000) per unit harmonic input force"),
    *_pair("camber_receptance", ("input", "side"), "rad/N",
           "camber angle (DIN 70000) per unit harmonic input force"),
    *_pair("mount_transfer", ("input", "mount", "component"), layout.MIXED_UNITS,
           "force and torque of the mount (a bushing or P2P element) on the chassis (an element between two "
           "moving bodies: on its second body), vehicle frame, per unit harmonic input force", MOUNT_UNITS),
]
ROAD_MOUNT_UNITS = "mixed units: N/m (fx, fy, fz), N m/m (mx, my, mz) per unit road height, per component"
# the road inputs' transfer functions: per metre of road height under a tyre
# (their own variables, so that every variable has one unit)
ROAD_CHANNELS = [
    *_pair("wheel_centre_road_transmissibility", ("road_input", "side", "axis"), "m/m",
           "wheel-centre displacement per unit harmonic road height under a tyre"),
    *_pair("toe_road_transfer", ("road_input", "side"), "rad/m", "toe angle (DIN 70000) per unit road height"),
    *_pair("camber_road_transfer", ("road_input", "side"), "rad/m", "camber angle (DIN 70000) per unit road height"),
    *_pair("mount_road_transfer", ("road_input", "mount", "component"), layout.MIXED_UNITS,
           "force and torque of the mount on the chassis, vehicle frame, per unit harmonic road height",
           ROAD_MOUNT_UNITS),
]


# a model with a sprung body (model.sprung_body, loadcase.sprung_body): its heave and roll
BODY_CHANNELS = [
    *_pair("body_heave_receptance", ("input",), "m/N", "sprung body's heave (z at the middle of the wheel "
           "centres) per unit harmonic input force"),
    *_pair("body_roll_receptance", ("input",), "rad/N", "sprung body's roll angle (about x, right side down "
           "positive) per unit harmonic input force"),
]
BODY_ROAD_CHANNELS = [
    *_pair("body_heave_road_transmissibility", ("road_input",), "m/m",
           "sprung body's heave (z at the middle of the wheel centres) per unit road height under a tyre"),
    *_pair("body_roll_road_transfer", ("road_input",), "rad/m",
           "sprung body's roll angle (about x, right side down positive) per unit road height under a tyre"),
]


def channels_of(n_force, n_road, body=False):
    """The plan's channel table: the force inputs' channels where there are
    force inputs, the road inputs' where there are road inputs; a sprung
    body's heave and roll for each where ``body``."""
    return tuple((CHANNELS + (BODY_CHANNELS if body else []) if n_force else [])
                 + (ROAD_CHANNELS + (BODY_ROAD_CHANNELS if body else []) if n_road else []))


def load_case(lc: dict, model) -> dict:
    """Validate an FRF load case against the model; one-line :class:`ConfigError` naming the key."""
    for key in lc:
        if key not in KNOWN_KEYS:
            raise ConfigError(f"loadcase.{key}: unknown key for a frequency-response load case "
                              f"(known: {', '.join(sorted(KNOWN_KEYS))})")
    u = _loads(lc.get("wheel_loads"), "loadcase.wheel_loads")
    fr = lc.get("frequencies") or {}
    if not isinstance(fr, dict) or set(fr) - {"min", "max", "n", "spacing"}:
        raise ConfigError(f"loadcase.frequencies = {fr!r} must be a mapping of min, max [Hz], n, spacing")
    f_min = Float(gt=0, unit="Hz").check(fr.get("min", 0.5), "loadcase.frequencies.min")
    f_max = Float(gt=0, unit="Hz").check(fr.get("max", 100.0), "loadcase.frequencies.max")
    n = fr.get("n", 100)
    if not isinstance(n, int) or n < 2:
        raise ConfigError(f"loadcase.frequencies.n = {n!r} must be an integer >= 2")
    if not f_max > f_min:
        raise ConfigError(f"loadcase.frequencies.max = {f_max} must be greater than min = {f_min} [Hz]")
    spacing = fr.get("spacing", "log")
    if spacing not in ("log", "linear"):
        raise ConfigError(f"loadcase.frequencies.spacing = {spacing!r} must be log or linear")
    f = np.geomspace(f_min, f_max, n) if spacing == "log" else np.linspace(f_min, f_max, n)
    inputs = list(lc.get("inputs") or ["left_fx", "left_fy", "left_fz"])
    for name in inputs:
        if name not in FORCE_INPUTS + ROAD_INPUTS:
            raise ConfigError(f"loadcase.inputs: {name!r} is not an input (known: "
                              f"{', '.join(FORCE_INPUTS + ROAD_INPUTS)})")
    if len(set(inputs)) != len(inputs):
        raise ConfigError(f"loadcase.inputs = {inputs}: an input is listed twice")
    topo = model.topology
    road_inputs = [i for i in inputs if i in ROAD_INPUTS]
    inputs = [i for i in inputs if i not in ROAD_INPUTS]
    if road_inputs and not topo.tables.get("tyres"):
        raise ConfigError(f"loadcase.inputs: {road_inputs[0]!r} is a road input, which needs tyres: give "
                          "loadcase.tyre (rate [N/m], damping [N s/m]) or model.tyres")
    names, pnames = list(topo.bushing_names), list(topo.p2p_names)
    ground = statics.mount_slot(topo)     # the chassis, or the sprung body
    rig = statics.rig_bushings(topo)
    if lc.get("mounts") is None:       # every element to the chassis (the tyres and the guide are not mounts)
        mounts = ([n for i, n in enumerate(names) if ground in topo.bushing_bodies[i] and n not in rig]
                  + [n for i, n in enumerate(pnames) if ground in topo.p2p_bodies[i]])
    else:
        mounts = list(lc["mounts"])
        for name in mounts:
            if name not in names and name not in pnames:
                raise ConfigError(f"loadcase.mounts: {name!r} is not a bushing or P2P element of model "
                                  f"{topo.name} (known: {', '.join(names + pnames)})")
    if len(set(mounts)) != len(mounts):
        raise ConfigError(f"loadcase.mounts = {mounts}: an element is listed twice")
    bushing_mounts = [m for m in mounts if m in names]
    p2p_mounts = [m for m in mounts if m not in names]
    mounts = bushing_mounts + p2p_mounts             # the cube's order: bushings, then P2P elements
    tol = Float(gt=0, unit="N").check(lc.get("tolerance", 1e-6), "loadcase.tolerance")
    max_iter = lc.get("max_iterations", 60)
    if not isinstance(max_iter, int) or max_iter < 1:
        raise ConfigError(f"loadcase.max_iterations = {max_iter!r} must be an integer >= 1")
    # the sign that turns an element's force on its first body into its force on the chassis side:
    # -1 where the chassis is the second body (or neither), +1 where it is the first
    sign = [1.0 if topo.bushing_bodies[names.index(m), 0] == ground else -1.0 for m in bushing_mounts]
    sign += [1.0 if topo.p2p_bodies[pnames.index(m), 0] == ground else -1.0 for m in p2p_mounts]
    sides = [ROAD_INPUTS.index(i) for i in road_inputs]
    return dict(u=u, frequency=f, inputs=np.array([frf.INPUTS.index(i) for i in inputs], np.int32),
                input_names=inputs, road_input_names=road_inputs,
                road_inputs=np.array([frf.INPUTS.index(f"{SIDES[s_]}_fz") for s_ in sides], np.int32),
                tyres=np.array([names.index(TYRE_BUSHINGS[s_]) for s_ in sides], np.int32), mounts=np.array([names.index(m) for m in bushing_mounts], np.int32),
                p2p_mounts=np.array([pnames.index(m) for m in p2p_mounts], np.int32),
                body_slots=np.array([ground] if topo.tables.get("sprung_body") else [], np.int32),
                mount_sign=np.array(sign), mount_names=mounts, tol=tol, max_iter=max_iter)


def _plan(cfg) -> Plan:
    model = model_from_config(cfg.model)
    lc = load_case(OmegaConf.to_container(cfg.loadcase, resolve=True), model)
    lc["limits"] = static_limits(cfg)
    sw = OmegaConf.to_container(cfg.sweep, resolve=True)
    pset = build_parameters(sw.get("parameters") or {}, model)
    X = make_design(sw, pset)
    nf, ni, nm = len(lc["frequency"]), len(lc["inputs"]), len(lc["mount_names"])
    nr = len(lc["road_inputs"])
    channels = channels_of(ni, nr, len(lc["body_slots"]) > 0)
    shapes = {}
    for c in channels:
        sizes = {"input": ni, "road_input": nr, "side": 2, "axis": 3, "mount": nm, "component": 6}
        shapes[c.name] = tuple(sizes[d] for d in c.dims)
    shard, nsh, n_dev, C = mapping.chunking(sw, len(X), layout.output_bytes(channels, shapes, nf),
                                            model.topology.n_dof, max_devices=None)
    coords = {
        "variant": (np.arange(len(X), dtype=np.int64), {}),
        "frequency": (lc["frequency"], {"units": "Hz", "long_name": "frequency of the harmonic input"}),
        "input": (np.array(lc["input_names"], dtype=str), {"long_name": "harmonic input: unit force at a wheel "
                                                           "centre, vehicle frame (side_component)"}),

        "side": (np.array(SIDES), {}),
        "axis": (np.array(AXES), {}),
        "mount": (np.array(lc["mount_names"]), {"long_name": "bushing or P2P element whose force on the "
                                                "body is output"}),
        "component": (np.array(COMPONENTS), {}),
    }
    if not ni:
        coords.pop("input")
    if nr:
        coords["road_input"] = (np.array(lc["road_input_names"], dtype=str),
                                {"long_name": "harmonic input: unit road height under a tyre (side_road)"})
    return Plan(model=model, model_cfg=cfg.model, pset=pset, X=X, shard=shard, num_shards=nsh, chunk=C,
                n_dev=n_dev, micro_batch=None, channels=channels, shapes=shapes, coords=coords,
                lead=(("frequency", nf, nf),), iterations_long_name="Newton iterations of the static equilibrium",
                case=lc)


def run_inputs(model, lc):
    """The tree whose values a lifted runner reads at run time: the model and
    the load case (wheel loads, frequencies, tolerances; input and mount
    indices are integers: structure)."""
    return (model, {k: lc[k] for k in ("u", "frequency", "inputs", "mounts", "p2p_mounts", "tol", "max_iter",
                                       "limits", "road_inputs", "tyres", "body_slots")})


def make_variant(model, pset, lc):
    """theta (P,) -> (outputs, status, Newton iterations of the static equilibrium).

    A road input (``lc["road_inputs"]``: the fz input of that side's wheel
    centre) is the response to a unit wheel-centre fz times the tyre's
    dynamic rate k_t + i w c_t: the road enters the model's force input
    through the tyre (:mod:`kernels.road`), the tyre's own terms are in the
    linearisation."""
    n_force = len(lc["inputs"])
    n_road = len(lc["road_inputs"])

    def variant(theta):
        m = pset.apply(model, theta)
        st = statics.static_equilibrium(m, lc["u"], tol=lc["tol"], max_iter=lc["max_iter"])
        omega = 2 * jnp.pi * lc["frequency"]
        inputs = np.concatenate([np.asarray(lc["inputs"]), np.asarray(lc["road_inputs"])])    # static indices
        # linearised as a run from the static state sees the model: tyres and sprung body at rest there
        res = frf.frequency_response(statics.at_rest(m, st.r), st.r, lc["u"], omega, inputs, lc["mounts"],
                                     lc["p2p_mounts"], np.asarray(lc["body_slots"]))
        if n_road:                      # the tyre's dynamic rate on each road input's column
            tyres = lc["tyres"]
            k_t = m.elements["bushing"]["k_scale"][tyres, 2] * m.elements["bushing"]["k"][tyres, 2]
            c_t = m.elements["bushing"]["c_scale"][tyres, 2] * m.elements["bushing"]["c"][tyres, 2]
            dyn = k_t[None, :] + 1j * omega[:, None] * c_t[None, :]          # (nf, n_road)
            scale = jnp.concatenate([jnp.ones((len(omega), n_force), dyn.dtype), dyn], axis=1)
            res = frf.FrequencyResponse(*(a * scale.reshape(len(omega), *([1] * (a.ndim - 2)), -1) for a in res))
        wc = jnp.moveaxis(res.wheel_centre, -1, 1)                 # (nf, input, side, axis)
        tc = jnp.moveaxis(res.toe_camber, -1, 1)                   # (nf, input, angle, side)
        p2p = jnp.concatenate([res.p2p, jnp.zeros_like(res.p2p)], axis=2)     # no torque at the marker
        mt = jnp.concatenate([res.bushing, p2p], axis=1)           # (nf, mount, component, input): on the first body
        mt = jnp.moveaxis(mt * lc["mount_sign"][None, :, None, None], -1, 1)   # on the chassis side
        out = {}
        pairs = [("wheel_centre_receptance", "wheel_centre_road_transmissibility", wc),
                 ("toe_receptance", "toe_road_transfer", tc[:, :, 0]),
                 ("camber_receptance", "camber_road_transfer", tc[:, :, 1]),
                 ("mount_transfer", "mount_road_transfer", mt)]
        if len(lc["body_slots"]):       # the sprung body's heave (z) and roll (about x): (nf, input)
            pairs += [("body_heave_receptance", "body_heave_road_transmissibility", res.body[:, 0, 2]),
                      ("body_roll_receptance", "body_roll_road_transfer", res.body[:, 0, 5])]   # z-y'-x'': x''

        for name, road_name, z in pairs:
            for key, part in ((name, z[:, :n_force]), (road_name, z[:, n_force:])):
                if part.shape[1]:
                    out[f"{key}_real"], out[f"{key}_imag"] = jnp.real(part), jnp.imag(part)
        finite = jnp.all(jnp.stack([jnp.all(jnp.isfinite(a)) for a in out.values()]))
        plausible = kc.static_state_plausible(m, st.r, lc["limits"])     # as the time response's
        code = jnp.where(~st.converged, status.EQUILIBRIUM_FAILED, jnp.where(
            ~finite, status.NON_FINITE, jnp.where(plausible, status.OK, status.IMPLAUSIBLE))).astype(jnp.int8)
        good = (code == status.OK) | (code == status.IMPLAUSIBLE)
        out = jax.tree_util.tree_map(lambda a: jnp.where(good, a, jnp.nan), out)
        return out, code, st.iterations
    return variant


def chunk_runner(model, pset, lc, n_dev=1, lifted=False, shared=False):
    """jit(vmap(variant)) over a chunk of rows; ``lifted``: rows ``[theta |
    values]``, values = ``Lifted(run_inputs(model, lc)).vector``; ``shared``:
    the same values in every row (no hardpoint design), kept unbatched
    (:func:`sweep.engine.mapping.map_variants`, ``shared``: a chunk is the pair (thetas, values))."""
    P = len(pset)
    lift = None
    if lifted:
        from sweep.engine.values import Lifted
        lift = Lifted(run_inputs(model, lc))

    def variant(row):
        if lift is None:
            return make_variant(model, pset, lc)(row)
        theta, (mdl, case) = lift.split(row, P)
        return make_variant(mdl, pset, {**lc, **case})(theta)

    def variant_shared(theta, vec):
        mdl, case = lift.rebuild(vec)
        return make_variant(mdl, pset, {**lc, **case})(theta)
    if lift is not None and shared:
        return mapping.map_variants(variant_shared, n_dev, shared=True)
    return mapping.map_variants(variant, n_dev)


def report(ds, cfg, s):
    """Log the FRF job summary and draw the Bode figure beside the cube."""
    a = ds.attrs
    log.info(f"model {a['model']}: {a['n_bodies']} bodies{flexible_note(a)}, {a['n_force_elements']} force elements, "
             f"{a['n_dof']} DOF; frequency response {float(ds.frequency[0]):g}-{float(ds.frequency[-1]):g} Hz, "
             f"{ds.sizes['frequency']} frequencies, inputs "
             f"{', '.join(str(i) for d in ('input', 'road_input') if d in ds.coords for i in ds[d].values)}; design "
             f"{cfg.sweep.design}, {s['n_variants']} variant(s)")
    codes = ds.status.values
    log_run(log, s, codes, KIND.status)
    ok = np.nonzero(np.isin(codes, (status.OK, status.IMPLAUSIBLE)))[0]
    if len(ok) and ds.sizes.get("road_input", 0):
        v = int(ok[0])
        h = cube.complex_of(ds, "wheel_centre_road_transmissibility").isel(variant=v)
        for inp in ds.road_input.values:
            mag = np.abs(h.sel(road_input=inp, side=str(inp)[:-5], axis="z").values)
            k = int(np.nanargmax(mag))
            log.info(f"variant {v}: {inp} -> wheel centre z: peak {mag[k]:.4g} m/m at "
                     f"{float(ds.frequency[k]):.3g} Hz (at {float(ds.frequency[0]):g} Hz {mag[0]:.4g} m/m)")
            if "body_heave_road_transmissibility_real" in ds:
                hb = np.abs(cube.complex_of(ds, "body_heave_road_transmissibility").isel(variant=v)
                            .sel(road_input=inp).values)
                k = int(np.nanargmax(hb))
                log.info(f"variant {v}: {inp} -> body heave: peak {hb[k]:.4g} m/m at {float(ds.frequency[k]):.3g} Hz "
                         "(the body mode)")
    if len(ok) and ds.sizes.get("input", 0):
        v = int(ok[0])
        h = cube.complex_of(ds, "wheel_centre_receptance").isel(variant=v)
        for inp in ds.input.values:
            side, axis = str(inp)[:-3], str(inp)[-1]
            mag = np.abs(h.sel(input=inp, side=side, axis=axis).values)
            k = int(np.nanargmax(mag))
            log.info(f"variant {v}: {inp} -> wheel centre {axis}: peak {mag[k] * 1e6:.4g} mm/kN at "
                     f"{float(ds.frequency[k]):.3g} Hz (static {mag[0] * 1e6:.4g} mm/kN)")
    log.info(f"result cube: {os.path.abspath(s['path'])}")
    cube_schema.warn(ds, KIND.cube_channels(ds))
    from sweep.results.plots import bode_figure, draw_beside
    draw_beside(ds, s, bode_figure, "Bode figure", log)


class FrequencyResponse(JobKind):
    name = NAME
    channels = tuple(CHANNELS)
    status = (status.NOT_RUN, status.OK, status.EQUILIBRIUM_FAILED, status.NON_FINITE, status.IMPLAUSIBLE)
    loadcase = Map({"name": Str(), "kind": Str(), "description": Str(), "max_iterations": Int(),
                    "tolerance": Float(gt=0, unit="N")})
    unused = ("start", "every")     # no time axis
    drop = ("integrator",)          # no time integration

    def cube_channels(self, ds):
        """Force inputs' and road inputs' channels as the cube has them."""
        return channels_of(ds.sizes.get("input", 0), ds.sizes.get("road_input", 0),
                           "body_heave_receptance_real" in ds or "body_heave_road_transmissibility_real" in ds)

    def prepare(self, cfg):
        """``loadcase.tyre`` puts tyres on the model (``model.tyres``, unless
        the model file sets them): the road inputs need them;
        ``loadcase.sprung_body`` a sprung body (``model.sprung_body``)."""
        return rig_from_load_case(cfg, log)

    def plan(self, cfg):
        return _plan(cfg)

    def runner(self, plan):
        lc, topo, n_dev = plan.case, plan.model.topology, plan.n_dev
        what = (f"frequency-response chunk runner: {topo.name} ({topo.n_dof} DOF), static equilibrium + "
                f"{len(lc['frequency'])} complex solves of {topo.n_dof} coordinates, {plan.chunk} variant(s) "
                f"per chunk on " + (mapping.devices_note(n_dev) if n_dev > 1 else "one device"))
        from sweep.engine.values import example as values_example, run_values
        from sweep.core.tracecache import fingerprint
        vals, structure, size = run_values(plan, lambda m: run_inputs(m, lc))
        shared = not callable(vals)             # one vector for every variant (not a hardpoint design)
        fn = chunk_runner(plan.model, plan.pset, lc, n_dev, lifted=True, shared=shared)
        key = fingerprint(NAME, plan.chunk, structure, plan.n_dev, shared, "pair" if shared else "rows")
        return Runner(fn, values_example(plan.chunk, len(plan.pset), size, shared), what, key=key, values=vals)

    def static_state(self, model, cfg):
        """The free static equilibrium under the load case's wheel loads."""
        u = _loads(OmegaConf.to_container(cfg.loadcase, resolve=True).get("wheel_loads"), "loadcase.wheel_loads")
        return jax.jit(statics.static_equilibrium)(model, jnp.asarray(u)).r, False

    def summary(self, plan):
        return {"n_frequencies": len(plan.case["frequency"])}

    def attrs(self, plan, cfg_yaml):
        topo = plan.model.topology
        u = plan.case["u"]
        return {"n_bodies": int(topo.n_physical_bodies), "n_modal_coordinates": int(topo.n_modal_coordinates),
                "n_force_elements": int(topo.n_force_elements), "n_dof": int(topo.n_dof), "model": topo.name,
                "config": cfg_yaml, "cube_kind": NAME, "Conventions": CF_CONVENTIONS,
                "linearised_at": "static equilibrium under the load case's wheel loads (force control), at rest: "
                                 f"left {u[0].tolist()}, right {u[1].tolist()} N, N m",
                "transfer_functions": "complex amplitudes of the steady-state response to a unit harmonic "
                                      "input force F e^(i 2 pi f t): *_real and *_imag parts; "
                                      "sweep.results.cube.complex_of(ds, name) joins them",
                "parameters": list(plan.pset.names), "chunk_size": int(plan.chunk), **provenance()}

    def report(self, ds, cfg, s):
        report(ds, cfg, s)


KIND = FrequencyResponse()
