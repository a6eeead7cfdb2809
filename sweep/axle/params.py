"""Variant parameters: named scale factors / overrides on model characteristics.

A parameter (config ``sweep.parameters.<name>``)::

    target: bushing.stiffness | bushing.damping | spring.rate |
            damper.compression | damper.rebound | damper.friction |
            bump_stop.force | rebound_stop.force |
            flexible.stiffness | flexible.damping
    elements: "lower_arm_*"        # fnmatch pattern(s) on element names (bushings or P2P;
                                   # flexible bodies for the flexible.* targets)
    directions: radial             # bushings only: x y z rx ry rz, or a group:
                                   # radial (x, y), axial (z), torsional (rz),
                                   # cardanic (rx, ry), translational, rotational, all
    mode: scale                    # scale: factor on the nominal characteristic;
                                   # value: absolute linear coefficient (bushings)
                                   # or Coulomb force [N] (damper.friction)
    nominal: 1.0
    bounds: [0.5, 2.0]
    scale: log                     # sampling space: linear | log

A hardpoint offset (``target: hardpoint``)::

    target: hardpoint
    points: [Q]                    # hardpoint name(s) or fnmatch pattern(s) of model.hardpoints
    axis: z                        # x | y | z
    side: both                     # both (default: left as given, right mirrored) | left | right
    nominal: 0.0                   # offset [m] in the left side's frame
    bounds: [-0.01, 0.01]
    alignment: hold                # hold (default) | realign

moves the points before the model is built, per variant: everything that
follows from the geometry (body frames, rod inertias, marker and element
frames, reference lengths, the design position) follows, exactly as a
model file with the points moved by hand (:func:`sweep.axle.builder.build_tables`).
The variant's values reach the compiled program at run time
(:mod:`sweep.engine.values`). ``alignment: hold`` keeps the alignment shims
and seat offset of the model file (a moved tie-rod point changes the static
toe, as on the car); ``realign`` solves each variant's static alignment
again - toe, camber and ride height at the design wheel load, as
``python -m sweep.align`` does (what a designer comparing layouts wants) -
on the host before the variant runs (:func:`sweep.axle.alignment.variant_config`).

Every element group declares its targets (``ElementGroup.targets``,
:class:`kernels.forces.Target`) - the bushing's and the P2P elements' above
as an added group's (``kernels.forces.ElementRegistry``): ``<group>.<target>``,
or ``<kind>.<target>`` for a target of one kind of the group's elements; a
factor on ``model.elements[group][key]`` of the matching elements, or in
value mode the entry's value in the target's units.

Applying a parameter vector to a model is a pure function
(:meth:`ParameterSet.apply`), so it vmaps over variants and differentiates.
"""
from __future__ import annotations

import fnmatch
from dataclasses import dataclass

import numpy as np

from kernels import forces, statics
from kernels.names import DIRECTIONS
from sweep.core.config import Bounds, ConfigError, Float, fmt

DIRECTION_GROUPS = {
    "radial": ("x", "y"), "axial": ("z",), "torsional": ("rz",), "cardanic": ("rx", "ry"),
    "translational": ("x", "y", "z"), "rotational": ("rx", "ry", "rz"), "all": DIRECTIONS,
}
# flexible bodies (kernels.flexible): a factor on the modal stiffness omega^2
# of every elastic mode (= E and G of the whole FE model scaled together: the
# Craig-Bampton modes are unchanged, exactly) / on the modal damping 2 zeta omega
FLEXIBLE_TARGETS = {"flexible.stiffness": ("flex", "k"), "flexible.damping": ("flex", "c")}
KNOWN_KEYS = {"target", "elements", "directions", "mode", "nominal", "bounds", "scale"}
HARDPOINT_KEYS = {"target", "points", "axis", "side", "nominal", "bounds", "scale", "alignment"}
HARDPOINT = "hardpoint"
AXES = ("x", "y", "z")


@dataclass(frozen=True)
class Parameter:
    name: str
    target: str
    field: object         # ("elements", group, key) or ("flex", key); None for a hardpoint
    index: tuple          # index arrays into the field
    mode: str
    nominal: float
    lower: float
    upper: float
    scale: str
    alignment: str = "hold"     # hardpoint parameters: hold the file's alignment or realign per variant
    units: object = None        # mode value: the values' unit, or (translational, rotational) per direction

    def to_unit(self, x):
        x = np.asarray(x, float)
        if self.scale == "log":
            return (np.log(x) - np.log(self.lower)) / (np.log(self.upper) - np.log(self.lower))
        return (x - self.lower) / (self.upper - self.lower)

    def from_unit(self, z):
        z = np.asarray(z, float)
        if self.scale == "log":
            return np.exp(np.log(self.lower) + z * (np.log(self.upper) - np.log(self.lower)))
        return self.lower + z * (self.upper - self.lower)


def _get_field(model, field):
    """The model table entry of a parameter: ("elements", group, key) or ("flex", key)."""
    if field[0] == "flex":
        return model.flex[field[1]]
    return model.elements[field[1]][field[2]]


def group_targets(model):
    """{config target: (group, :class:`kernels.forces.Target`)} of the model's
    element groups, in their order (the bushing's, the P2P elements', then a
    added group's): ``<group>.<target>``, or the target's own name for a
    target of one kind (``spring.rate``)."""
    out = {}
    for g in model.topology.element_groups:
        for t, v in g.targets.items():
            name = t if v.kind is not None else f"{g.name}.{t}"
            if name in out:
                raise ConfigError(f"element group {g.name!r}: sweep target {name!r} is also "
                                  f"{out[name][0].name!r}'s")
            out[name] = (g, v)
    return out


def _patterns(spec):
    if isinstance(spec, str):
        return [spec]
    return list(spec)


class ParameterSet:
    """The ordered parameters of a sweep, resolved against a model."""

    def __init__(self, params):
        self.params = list(params)

    @property
    def names(self):
        return [p.name for p in self.params]

    @property
    def nominal(self):
        return np.array([p.nominal for p in self.params], float)

    def __len__(self):
        return len(self.params)

    @property
    def hardpoints(self):
        """[(column, parameter)] of the hardpoint offsets (applied when the
        model is built, not by :meth:`apply`)."""
        return [(i, p) for i, p in enumerate(self.params) if p.target == HARDPOINT]

    @property
    def realign(self):
        """True when a hardpoint parameter asks for each variant's static
        alignment to be solved again (``alignment: realign``)."""
        return any(p.alignment == "realign" for _, p in self.hardpoints)

    def hardpoint_offsets(self, theta):
        """(name, side, (3,) offset [m]) of each moved point for the parameter
        vector ``theta`` (host side; :func:`sweep.axle.builder.build_tables`)."""
        out = []
        for i, p in self.hardpoints:
            names, axis, side = p.index
            d = np.zeros(3)
            d[axis] = float(theta[i])
            out += [(n, side, d) for n in names]
        return out

    def from_unit(self, Z):
        """(n, n_params) points of the unit cube -> parameter values."""
        Z = np.asarray(Z, float).reshape(-1, len(self.params))
        return np.stack([p.from_unit(Z[:, i]) for i, p in enumerate(self.params)], 1) \
            if self.params else np.zeros((Z.shape[0], 0))

    def check_values(self, X, what):
        """Every value finite and within its parameter's bounds (NaN is neither)."""
        for i, p in enumerate(self.params):
            ok = (X[:, i] >= p.lower - 1e-12 * abs(p.lower)) & (X[:, i] <= p.upper + 1e-12 * abs(p.upper))
            if not np.all(ok):
                j = int(np.nonzero(~ok)[0][0])
                raise ConfigError(f"{what}: row {j} {p.name} = {fmt(float(X[j, i]))} is outside bounds "
                                  f"[{fmt(p.lower)}, {fmt(p.upper)}]")

    def apply(self, model, theta):
        """Model with the parameter vector theta (n_params,) applied: the one
        way parameters reach a model (sweeps and tuning alike).

        ``scale``: the entries of the parameter's field are multiplied by
        theta_i [1]; ``value``: they are set to theta_i (the coefficient's SI
        unit: N/m, N m/rad, N s/m, N m s/rad). Parameters act in order, so
        two parameters on the same entry compose (scale: product; value then
        scale: the scaled value).

        Pure, jit/vmap-safe and differentiable with respect to theta (and the
        model): each parameter's index has unique entries (checked in
        :func:`build_parameters`), so the scatters are declared
        ``unique_indices=True`` - JAX differentiates ``.at[].multiply`` only
        then (its reverse rule needs each entry written once)."""
        updates = {}
        for i, p in enumerate(self.params):
            if p.target == HARDPOINT:        # moved when the model is built (hardpoint_offsets)
                continue
            arr = updates.get(p.field, None)
            arr = _get_field(model, p.field) if arr is None else arr
            if p.mode == "scale":
                arr = arr.at[p.index].multiply(theta[i], unique_indices=True)
            else:
                arr = arr.at[p.index].set(theta[i], unique_indices=True)
            updates[p.field] = arr
        if not updates:
            return model
        import dataclasses
        groups = {}
        for f, a in updates.items():
            if f[0] == "elements":
                groups.setdefault(f[1], {})[f[2]] = a
        model = model.replace_elements(**groups) if groups else model
        flex = {f[1]: a for f, a in updates.items() if f[0] == "flex"}
        return dataclasses.replace(model, flex={**model.flex, **flex}) if flex else model


def check_keys(what, mapping, known):
    """One-line error naming the first key of ``mapping`` not in ``known``."""
    for key in mapping:
        if key not in known:
            raise ConfigError(f"{what}.{key}: unknown key (known: {', '.join(sorted(known))})")


def build_parameters(spec, model) -> ParameterSet:
    """Resolve ``sweep.parameters`` (mapping name -> spec) against a model."""
    topo = model.topology
    out = []
    for name, p in (spec or {}).items():
        what = f"sweep.parameters.{name}"
        if not isinstance(p, dict):
            raise ConfigError(f"{what} must be a mapping")
        if p.get("target") == HARDPOINT:
            out.append(_hardpoint_parameter(name, p, model))
            continue
        check_keys(what, p, KNOWN_KEYS)
        target = p.get("target")
        targets = group_targets(model)
        if target not in targets and target not in FLEXIBLE_TARGETS:
            raise ConfigError(f"{what}.target = {target!r} is not one of "
                              f"{', '.join(list(targets) + list(FLEXIBLE_TARGETS) + [HARDPOINT])}")
        pats = _patterns(p.get("elements", "*"))
        matches = lambda n: any(fnmatch.fnmatchcase(n, pt) for pt in pats)  # noqa: E731
        mode = p.get("mode", "scale")
        if mode not in ("scale", "value"):
            raise ConfigError(f"{what}.mode = {mode!r} must be scale or value")
        if target in FLEXIBLE_TARGETS:  # rows: the modal slots of the matching flexible bodies
            kind, field = "flexible", FLEXIBLE_TARGETS[target]
            names = [topo.body_names[frame] for frame, _ in topo.flex_bodies]
            slots = list(topo.modal_slots)
            rows = [slots.index(s_) for (frame, ms), n in zip(topo.flex_bodies, names) if matches(n)
                    for s_ in ms]
            if not rows:
                raise ConfigError(f"{what}.elements = {p.get('elements', '*')!r} matches no "
                                  f"{kind} of model {topo.name!r}")
            if "directions" in p or mode == "value":
                raise ConfigError(f"{what}: a flexible-body target takes neither directions nor mode=value "
                                  "(it scales every elastic mode)")
            rr, cc = np.meshgrid(rows, np.arange(6), indexing="ij")
            index = (rr.ravel(), cc.ravel())
        else:
            group, tg = targets[target]
            kind = tg.kind or group.name
            names = group.names(topo)
            kinds = group.kinds(topo) if tg.kind is not None else None
            rows = [i for i, n in enumerate(names) if (kinds is None or kinds[i] == tg.kind) and matches(n)]
            if group is forces.BUSHING:
                # a model's tyres (model.tyres, the road load cases) are values of
                # the load case: their rate is also in the road's force input
                # and the sprung body's guide is the rig, not the axle
                rig = statics.rig_bushings(topo)
                tyres = [i for i in rows if names[i] in rig]
                if tyres and len(tyres) == len(rows):
                    raise ConfigError(f"{what}.elements = {p.get('elements', '*')!r} matches only "
                                      f"{', '.join(rig)}: the tyres' rate and damping are loadcase.tyre "
                                      "(or model.tyres), the sprung body's guide is the rig; neither is "
                                      "a sweep target")
                rows = [i for i in rows if i not in tyres]
            if not rows:
                raise ConfigError(f"{what}.elements = {p.get('elements', '*')!r} matches no "
                                  f"{kind} of model {topo.name!r}")
            if tg.requires is not None:
                for i in rows:
                    why = tg.requires(model, i)
                    if why:
                        raise ConfigError(f"{what}: {kind} {names[i]!r} {why}")
            if tg.directions:
                dlist = []
                for d in _patterns(p.get("directions", "all")):
                    if d in DIRECTION_GROUPS:
                        dlist += list(DIRECTION_GROUPS[d])
                    elif d in DIRECTIONS:
                        dlist.append(d)
                    else:
                        raise ConfigError(f"{what}.directions: unknown direction {d!r} (use "
                                          f"{', '.join(DIRECTIONS)} or {', '.join(DIRECTION_GROUPS)})")
                cols = sorted({DIRECTIONS.index(d) for d in dlist})
                rr, cc = np.meshgrid(rows, cols, indexing="ij")
                index = (rr.ravel(), cc.ravel())
            else:
                if "directions" in p:   # would be ignored: the element acts along one line
                    raise ConfigError(f"{what}.directions = {p['directions']!r}: {kind} elements have no "
                                      "directions (only bushing targets do); leave the key out")
                index = ((np.array(rows),) if tg.column is None
                         else (np.array(rows), np.full(len(rows), tg.column)))
            if mode == "value" and tg.value_key is None:
                valued = [t for t, (_, v) in targets.items() if v.value_key is not None]
                raise ConfigError(f"{what}.mode = value is only for the targets {', '.join(valued)}")
            field = ("elements", group.name, tg.value_key if mode == "value" else tg.key)
            if mode == "value" and tg.value_curve is not None:
                curve = model.elements[group.name][tg.value_curve]
                has_curve = np.any(np.asarray(curve["coef"])[index] != 0, axis=(-1, -2))
                if np.any(has_curve):
                    j = int(np.nonzero(has_curve)[0][0])
                    raise ConfigError(f"{what}: mode=value sets a linear coefficient, but "
                                      f"{names[index[0][j]]} direction {DIRECTIONS[index[1][j]]} "
                                      "has a curve (use mode=scale)")
        if mode == "value" and "nominal" not in p:
            # bounds and nominal are then absolute values (N/m, N s/m): the
            # default nominal 1.0 would be a factor's, not the model's value
            raise ConfigError(f"{what}.nominal is missing: mode=value needs the nominal value and bounds in "
                              f"the target's units (e.g. nominal: 1.0e+6, bounds: [5.0e+5, 2.0e+6] N/m)")
        nominal = Float().check(p.get("nominal", 1.0), f"{what}.nominal")
        bounds = p.get("bounds")
        if bounds is None:
            raise ConfigError(f"{what}.bounds is missing: give [lower, upper]")
        lo, hi = Bounds().check(bounds, f"{what}.bounds")
        if not lo < hi:
            raise ConfigError(f"{what}.bounds = [{lo}, {hi}] are reversed or empty (lower must be < upper)")
        scale = p.get("scale", "linear")
        if scale not in ("linear", "log"):
            raise ConfigError(f"{what}.scale = {scale!r} must be linear or log")
        if scale == "log" and lo <= 0:
            raise ConfigError(f"{what}.bounds = [{lo}, {hi}]: a log scale needs positive bounds")
        if not lo <= nominal <= hi:
            raise ConfigError(f"{what}.nominal = {nominal} is outside bounds [{lo}, {hi}]")
        index = tuple(np.asarray(i) for i in index)
        # ParameterSet.apply declares its scatters unique_indices=True
        if len({tuple(int(a[j]) for a in index) for j in range(len(index[0]))}) != len(index[0]):
            raise AssertionError(f"{what}: repeated entries in the parameter's index (internal error)")
        units = tg.value_units if mode == "value" and target not in FLEXIBLE_TARGETS else None
        out.append(Parameter(name, target, field, index, mode, nominal, lo, hi, scale, units=units))
    return ParameterSet(out)


def _hardpoint_parameter(name, p, model):
    """A ``target: hardpoint`` parameter (module doc), checked against the
    model's hardpoint table (its config, kept in the topology's tables)."""
    what = f"sweep.parameters.{name}"
    check_keys(what, p, HARDPOINT_KEYS)
    known = model.topology.tables.get("hardpoints")
    if known is None:
        raise ConfigError(f"{what}: model {model.topology.name!r} was not built from a model file with "
                          "hardpoints (model.hardpoints)")
    if "points" not in p:
        raise ConfigError(f"{what}.points is missing: give the hardpoint name(s), e.g. points: [Q]")
    pats = _patterns(p["points"])
    points = sorted({n for n in known for pt in pats if fnmatch.fnmatchcase(n, str(pt))})
    missing = [pt for pt in pats if not any(fnmatch.fnmatchcase(n, str(pt)) for n in known)]
    if missing:
        raise ConfigError(f"{what}.points: {missing[0]!r} matches no hardpoint of model {model.topology.name!r} "
                          f"(known: {', '.join(sorted(known))})")
    derived = [n for n in points if isinstance(known[n], dict)]
    if derived:
        raise ConfigError(f"{what}.points: hardpoint {derived[0]!r} is defined through other points "
                          f"({known[derived[0]]!r}); move those instead")
    axis = p.get("axis")
    if axis not in AXES:
        raise ConfigError(f"{what}.axis = {axis!r} must be x, y or z (the left side's frame)")
    side = p.get("side", "both")
    if side not in ("both", "left", "right"):
        raise ConfigError(f"{what}.side = {side!r} must be both, left or right")
    nominal = Float(unit="m").check(p.get("nominal", 0.0), f"{what}.nominal")
    if p.get("bounds") is None:
        raise ConfigError(f"{what}.bounds is missing: give [lower, upper] offsets in m, e.g. [-0.01, 0.01]")
    lo, hi = Bounds().check(p["bounds"], f"{what}.bounds")
    if not lo < hi:
        raise ConfigError(f"{what}.bounds = [{lo}, {hi}] are reversed or empty (lower must be < upper)")
    if max(abs(lo), abs(hi)) > 0.2:
        raise ConfigError(f"{what}.bounds = [{lo}, {hi}]: offsets are in metres; more than 0.2 m is not a "
                          "hardpoint variation (millimetres meant?)")
    if p.get("scale", "linear") != "linear":
        raise ConfigError(f"{what}.scale = {p['scale']!r}: a hardpoint offset is sampled on a linear scale")
    if not lo <= nominal <= hi:
        raise ConfigError(f"{what}.nominal = {nominal} is outside bounds [{lo}, {hi}]")
    alignment = p.get("alignment", "hold")
    if alignment not in ("hold", "realign"):
        raise ConfigError(f"{what}.alignment = {alignment!r} must be hold (the model file's shims and seat "
                          "offset) or realign (toe, camber and ride height solved again per variant)")
    if alignment == "realign":
        if side != "both":
            raise ConfigError(f"{what}.alignment = realign needs side: both (the alignment is solved for the "
                              "left side and mirrored)")
    return Parameter(name, HARDPOINT, None, (tuple(points), AXES.index(axis), side), "value", nominal, lo, hi,
                     "linear", alignment)
