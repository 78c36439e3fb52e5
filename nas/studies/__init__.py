"""Studies: workflows that train many networks from scratch to answer one question.

:mod:`nas.studies.compare` (does the searched network beat random ones of its budget?),
:mod:`nas.studies.rankcheck` (does the supernet rank sub-networks as training from scratch does?)
and :mod:`nas.studies.demo` (the whole pipeline on built-in data) share :mod:`nas.studies.trainings`
for training many networks; their statistics are :mod:`nas.studies.stats`'.
"""
