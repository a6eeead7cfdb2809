"""Result channels in the domain's words, and the NMSE of method.md section 3."""
import jax
import jax.numpy as jnp
import numpy as np

from kernels import forces
from kernels.dynamics import states_with_ground
from kernels.rotations import euler_to_matrix


def wheel_centre_position(model, r):
    """Wheel-centre positions (2, 3) [m], left and right, vehicle frame."""
    return r[model.topology.wheel_slots, :3]


def toe_camber(model, r):
    """Toe and camber (2,) each [rad], DIN 70000 signs.

    Toe > 0 is toe-in (wheel front turned towards the vehicle centre);
    camber > 0 is the wheel top leaning outwards. From the spin axis
    a = R e_y of each wheel body (pointing left on both sides):
    left: toe = atan2(a_x, a_y), camber = -asin(a_z);
    right: toe = atan2(-a_x, a_y), camber = asin(a_z).
    """
    R = euler_to_matrix(r[model.topology.wheel_slots, 3:])
    a = R[:, :, 1]
    sign = jnp.array([1.0, -1.0])
    toe = jnp.arctan2(sign * a[:, 0], a[:, 1])
    camber = jnp.arcsin(jnp.clip(-sign * a[:, 2], -1.0, 1.0))
    return toe, camber


def element_forces(model, group, r, v, rows=None):
    """Force and torque each element of ``group`` (a group name of the model)
    exerts on its first body, (n, 6), vehicle frame [N, N m], by the group's
    ``output`` (:class:`kernels.forces.ElementGroup`); ``rows`` (static
    indices): only those elements, (len(rows), 6)."""
    topo = model.topology
    g = next((g for g in topo.element_groups if g.name == group), None)
    if g is None or g.output is None:
        raise ValueError(f"element_forces: the model has no element group {group!r} with an output "
                         f"(groups: {', '.join(h.name for h in topo.element_groups)})")
    x = states_with_ground(r, v)
    b = g.bodies(topo)
    prm = g.params(model)
    if rows is not None:
        rows = np.asarray(rows, int)
        b = np.asarray(b)[rows]
        prm = jax.tree_util.tree_map(lambda a: a[rows], prm)
    return forces.map_elements(g.output, prm, x[b[:, 0]], x[b[:, 1]])


def bushing_forces(model, r, v, rows=None):
    """Force and torque each bushing exerts on its first body, (nb, 6), vehicle frame [N, N m];
    ``rows`` (static indices): only those bushings, (len(rows), 6)."""
    return element_forces(model, "bushing", r, v, rows)


def chassis_reaction(model, r, v):
    """Total force (3,) [N] that all force elements exert on the chassis (ground)."""
    topo = model.topology
    m = topo.n_bodies
    x = states_with_ground(r, v)
    total = jnp.zeros(3)
    for group in topo.element_groups:       # kernels.forces.ElementGroup
        b = group.bodies(topo)
        if len(b) == 0:
            continue
        g1, g2 = forces.map_elements(group.element, group.params(model), x[b[:, 0]], x[b[:, 1]])
        total = total + jnp.sum(jnp.where((b[:, 0] == m)[:, None], g1[:, :3], 0.0), 0)
        total = total + jnp.sum(jnp.where((b[:, 1] == m)[:, None], g2[:, :3], 0.0), 0)
    return total


def nmse(y, y_ref):
    """Normalised mean squared error, method.md section 3:
    ``NMSE = mean((y - y_ref)^2) / mean(y_ref)^2`` over the samples given
    (the caller selects the window 4.9 s <= t <= 6.0 s and pools both sides)."""
    y = jnp.asarray(y)
    y_ref = jnp.asarray(y_ref)
    return jnp.mean((y - y_ref) ** 2) / jnp.mean(y_ref) ** 2
