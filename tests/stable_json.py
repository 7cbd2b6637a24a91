"""A run's JSON less what differs between two runs of the same seed by nature (timings) or
describes the workers themselves: what tests/test_workers.py and tests/test_ray.py compare."""

from __future__ import annotations

from typing import Any

#: Keys dropped wherever they occur.
VOLATILE = {"duration_s", "started", "finished_at", "timing", "sampler_seconds", "versions", "platform", "workers", "worker_starts"}


def stable(value: Any) -> Any:
    """``value`` with every :data:`VOLATILE` key removed, at any depth."""
    if isinstance(value, dict):
        return {k: stable(v) for k, v in value.items() if k not in VOLATILE}
    if isinstance(value, list):
        return [stable(v) for v in value]
    return value
