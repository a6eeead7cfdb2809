"""Every shipped job config passes the job's strict config checks (slow
tier: about 30 Hydra composes, 10 s of the fast tier's budget; every e2e
job composes shipped configs through the same checks)."""
import os

import pytest

from tests.conftest import ROOT

pytestmark = pytest.mark.slow


def test_every_shipped_job_config_has_only_known_keys():
    """The strict tables of sweep/core/config.py (integrator, sweep, output, cache,
    the time-response load case, the tuning sections) know every key the
    shipped config files use; K&C and modes load cases name theirs in
    their kinds (KNOWN_KEYS)."""
    import glob
    from hydra import compose, initialize_config_dir
    from sweep.kinds import kind_of
    from sweep.core.config import check_config, check_tune_config
    from tests.jobs import cfg_of
    names = lambda g: sorted(os.path.basename(f)[:-5] for f in glob.glob(os.path.join(ROOT, "configs", g, "*.yaml")))
    overs = [[f"loadcase={n}"] for n in names("loadcase")] + [[f"integrator={n}"] for n in names("integrator")] + \
            [[f"sweep={n}"] + (["sweep.table=x.csv"] if n == "table" else []) for n in names("sweep")]
    assert len(overs) >= 15
    for over in overs:
        cfg = cfg_of(*over)
        check_config(cfg, kind_of(cfg))
    with initialize_config_dir(config_dir=os.path.join(ROOT, "configs"), version_base="1.3"):
        check_tune_config(compose(config_name="tune"))
