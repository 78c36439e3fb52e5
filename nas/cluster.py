"""Ray for the commands that spread work: a local instance started for the command, or a cluster
joined with ``--ray-address``."""

from __future__ import annotations

from nas.core.errors import NasError


def start_ray(address: str | None, num_cpus: int) -> bool:
    """Join ``address``, or start a local Ray with ``num_cpus`` CPUs, unless Ray already runs in
    this process. Returns whether this call started it (the caller then shuts it down)."""
    import ray

    if ray.is_initialized():
        return False
    try:
        if address:
            ray.init(address=address, log_to_driver=False)
        else:
            ray.init(num_cpus=max(num_cpus, 1), include_dashboard=False, log_to_driver=False, configure_logging=False)
    except ConnectionError as exc:
        raise NasError(f"cannot reach a Ray cluster at {address}: {exc}") from None
    return True
