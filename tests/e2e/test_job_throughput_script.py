"""benchmarks/job_throughput.py, the whole-job throughput script prepared
for a lent GPU, in its CPU form (--quick: the toy axle, 16 variants) so
that it cannot rot: it runs the job as a user does, reads the job's own log
(compile, run, the run's split, peak memory) and the cube's size, and
writes the figures with the machine and the commit."""
import json
import os
import subprocess
import sys

from tests.conftest import ROOT


def test_job_throughput_script_in_its_cpu_form(tmp_path):
    proc = subprocess.run([sys.executable, os.path.join(ROOT, "benchmarks", "job_throughput.py"), "--quick",
                           "--out-dir", str(tmp_path), "--store-dir", str(tmp_path / "stores"), "--every", "2",
                           "--budget", "560"], cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    res = json.load(open(tmp_path / "job_throughput.json"))
    assert res["machine"]["cores"] and res["commit"] is not None
    (job,) = res["jobs"]
    assert job["model"] == "toy_trailing_arm" and job["variants"] == 16 and job["status"] == "ok 16"
    for key in ("compile_s", "run_s", "compute_s", "write_s", "write_wait_s", "host_peak_gib", "cube_mb"):
        assert job[key] > 0 or key == "write_wait_s", (key, job)
    # the split adds up: computing and waiting for writes happen within the run
    assert job["compute_s"] + job["write_wait_s"] <= job["run_s"] * 1.05 + 0.05
    assert job["variant_steps_per_s"] > 0 and job["write_mb_per_s"] > 0
    assert job["command"].startswith("-m sweep ") and "model=toy_trailing_arm" in job["command"]
    # the GPU form's switches: output.every per size, the stores apart from the figures and removed after each job
    assert job["output_every"] == 2 and "output.every=2" in job["command"]
    assert "chunk runner" in job["runner_line"] and os.listdir(tmp_path / "stores") == []
