"""Run plumbing: what every command that writes a run folder shares.

:mod:`nas.runs.folder` is the run-folder protocol (check against ``--resume``, lock, check again,
record the settings, checkpoint and result paths); :mod:`nas.runs.config` the settings each kind
of run records; :mod:`nas.runs.lock` one writer per folder; :mod:`nas.runs.provenance` wall time
and code version; :mod:`nas.runs.checkpoint` checkpoints read as data only; :mod:`nas.runs.writers`
atomic JSON, CSV, Markdown and PNG files; :mod:`nas.runs.tboard` TensorBoard curves.
"""
