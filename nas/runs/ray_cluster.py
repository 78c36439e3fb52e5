"""Ray for the commands that spread work: a local instance started for the command, or a cluster
joined with ``--ray-address``."""

from __future__ import annotations

from nas.core.errors import NasError
from nas.runs.malloc import MALLOC_ENV, RAY_SETUP_HOOK, malloc_choice


def start_ray(address: str | None, num_cpus: int) -> bool:
    """Join ``address``, or start a local Ray with ``num_cpus`` CPUs, unless Ray already runs in
    this process. Returns whether this call started it (the caller then shuts it down).

    Its workers set glibc's malloc as this process was asked to (``NAS_MALLOC``, see
    :mod:`nas.runs.malloc`): a worker that trains or evaluates pays the same page faults otherwise."""
    import ray

    if ray.is_initialized():
        return False
    choice = malloc_choice()
    runtime_env = {"env_vars": {MALLOC_ENV: choice}}
    if choice == "retain":
        runtime_env["worker_process_setup_hook"] = RAY_SETUP_HOOK
    try:
        if address:
            ray.init(address=address, log_to_driver=False, runtime_env=runtime_env)
        else:
            ray.init(
                num_cpus=max(num_cpus, 1),
                include_dashboard=False,
                log_to_driver=False,
                configure_logging=False,
                runtime_env=runtime_env,
            )
    except ConnectionError as exc:
        raise NasError(f"cannot reach a Ray cluster at {address}: {exc}") from None
    return True
