"""``python -m sweep`` (console script ``axle-sweep``): the Hydra app (config in
../configs); entry-point set-up in :mod:`sweep.entry`, devices and logging in
:mod:`sweep.core.runtime`, the job pipeline in :mod:`sweep.engine`.
"""
from sweep.entry import sweep_cli

if __name__ == "__main__":
    sweep_cli()
