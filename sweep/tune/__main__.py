"""``python -m sweep.tune`` (the Hydra app of :func:`sweep.entry.tune_cli`)."""
from sweep.entry import tune_cli

if __name__ == "__main__":
    tune_cli()
