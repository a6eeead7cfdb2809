"""``sweep.engine.mapping.map_variants`` with shared values (``shared``: a
chunk is the pair (thetas, values)): the values passed once equal the values read per row, on one
device and split over two (a subprocess with two forced CPU devices: the
tests' own process has one)."""
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

CODE = r"""
import numpy as np, jax, jax.numpy as jnp
import kernels  # float64
from sweep.engine import mapping
assert jax.device_count() == 2, jax.devices()
P = 3
rng = np.random.default_rng(0)
values = rng.normal(size=5)
rows = np.concatenate([rng.normal(size=(8, P)), np.tile(values, (8, 1))], axis=1)

def per_row(row):
    theta, v = row[:P], row[P:]
    return jnp.sin(theta).sum() * v @ v + theta @ v[:P]

def shared(theta, v):
    return jnp.sin(theta).sum() * v @ v + theta @ v[:P]

want = np.asarray(jax.vmap(per_row)(rows))
for n_dev in (1, 2):
    for micro in (None, 2):
        pair = (rows[:, :P], values)
        placed = mapping.place(pair, n_dev) if n_dev > 1 else pair
        got = np.asarray(mapping.map_variants(shared, n_dev, micro, shared=True)(placed))
        np.testing.assert_allclose(got, want, rtol=1e-14, atol=0)
print("ok")
"""


def test_shared_values_equal_per_row_values_on_one_and_two_devices():
    flags = " ".join(f for f in os.environ.get("XLA_FLAGS", "").split()
                     if "xla_force_host_platform_device_count" not in f)
    env = dict(os.environ, XLA_FLAGS=f"{flags} --xla_force_host_platform_device_count=2",
               PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    proc = subprocess.run([sys.executable, "-c", CODE], cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 0 and proc.stdout.strip().endswith("ok"), proc.stderr[-3000:]
