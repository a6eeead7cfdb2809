"""A two-device cube's parameters reproduce its results: ``python -m sweep`` on two CPU devices (a subprocess: the test process has one JAX device), each chunk split over the devices, the last padded; each chosen variant re-run alone from the values the cube records (tests/sweep/test_reproduce.py: the oracle, the one-device, K&C and resumed cubes)."""
import os
import subprocess
import sys
import xarray as xr
from tests.conftest import ROOT
from tests.sweep.test_reproduce import C, HANG_GUARD, STEP, TOY, assert_reproduced, replay


def job_env(**extra):
    """This process's environment for a job subprocess, without the device
    count it may carry (AXLE_CPU_DEVICES, a count in XLA_FLAGS) or a fault hook."""
    e = {k: v for k, v in os.environ.items()
         if k not in ("AXLE_CPU_DEVICES", "AXLE_CPU_DEVICES_DEFAULT", "AXLE_TEST_KILL_AFTER_CHUNKS",
                      "AXLE_TEST_KILL_SIGNAL")}
    e["XLA_FLAGS"] = " ".join(f for f in e.get("XLA_FLAGS", "").split()
                              if "xla_force_host_platform_device_count" not in f)
    return {**e, **extra}


def test_two_device_time_response_cube_parameters_reproduce_its_results(tmp_path):
    """``python -m sweep`` on two CPU devices: 7 variants in chunks of 4,
    each chunk split over the devices (lanes 0-1 on one, 2-3 on the other),
    the last chunk padded (3 variants + the nominal axle). Replayed: the
    first and last variant of the full chunk and of the padded one."""
    path = tmp_path / "two_devices.zarr"
    proc = subprocess.run([sys.executable, "-m", "sweep", *TOY, *STEP, "sweep.n_variants=7",
                           f"output.path={path}", f"hydra.run.dir={tmp_path}/hydra"],
                          cwd=ROOT, capture_output=True, text=True, timeout=HANG_GUARD,
                          env=job_env(AXLE_CPU_DEVICES="2"))
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert f"chunks of {C} on 2 device(s)" in proc.stdout, proc.stdout[-3000:]
    ds = xr.load_dataset(path, engine="zarr")
    assert list(ds.chunk_done.values) == [1, 1]
    variants = [0, 3, 4, 6]
    assert_reproduced(ds, variants, replay(ds, variants, [*TOY, *STEP], tmp_path))
