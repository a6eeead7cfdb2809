"""Every mutant of the mutation run (tests/mutants.py) still applies to the
source: each edit's text is found as often as the mutant expects. A refactor
that moves or rewrites a mutated line makes the mutant stale - the mutation
run would report it instead of testing it - so it fails here, in the fast
tier, where the refactor lands."""
import os

from tests import mutants

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def test_every_mutant_applies_to_the_source():
    stale = {m.name: why for m in mutants.MUTANTS if (why := mutants.check_applies(m, ROOT))}
    assert len(mutants.MUTANTS) > 50
    assert not stale, stale
