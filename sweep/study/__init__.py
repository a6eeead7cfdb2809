"""What a job runs: designs of experiments (:mod:`sweep.study.design`) and
load cases (:mod:`sweep.study.loadcase`)."""
