"""``--executor ray``: the same JSON as local workers on a local Ray cluster the test starts (2
CPUs), and a Ray actor killed mid-run leaves the same, correct, result.

Ray is an optional extra (``pip install 'specverify[ray]'``, in ``.[dev]``); CI sets
``SPECVERIFY_REQUIRE_RAY=1`` so these tests fail there rather than skip.
"""

from __future__ import annotations

import os

import pytest

from specverify._runner import check
from specverify.errors import UsageError

if os.environ.get("SPECVERIFY_REQUIRE_RAY") != "1":
    pytest.importorskip("ray")
import ray  # noqa: E402

#: A subset whose experiments span many units (fit.conditional[zero-residual] draws ~1.8M rows at quick).
SELECT = ["fit.conditional[[]zero-residual[]]", "fit.step*"]
VOLATILE = {"duration_s", "started", "finished_at", "timing", "sampler_seconds", "versions", "platform", "workers", "worker_starts"}


def _stable(value):
    if isinstance(value, dict):
        return {k: _stable(v) for k, v in value.items() if k not in VOLATILE}
    if isinstance(value, list):
        return [_stable(v) for v in value]
    return value


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    mark = tmp_path_factory.mktemp("ray") / "killed"
    os.environ["SPECVERIFY_TEST_KILL_MARK"] = str(mark)  # the raylet (so every actor) inherits it
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, configure_logging=False)
    yield mark
    ray.shutdown()


def _run(spec: str, **options):
    return check(spec, budget="quick", seed=4, select=SELECT, isolation="process", **options).to_json()


def test_ray_actors_give_the_json_of_local_workers(cluster):
    local = _run("specverify.samplers:reference")
    on_ray = _run("specverify.samplers:reference", executor="ray", workers=2)
    assert on_ray["run"]["workers"]["executor"] == "ray" and on_ray["run"]["workers"]["count"] == 2
    assert on_ray["run"]["sampler_rows"] == local["run"]["sampler_rows"] > 1_000_000  # the units ran, on the actors
    assert _stable(on_ray) == _stable(local)


def test_an_actor_killed_mid_run_leaves_the_same_result(cluster):
    """The sampler kills its actor once; Ray restarts it and retries the unit with its seed."""
    local = _run("specverify.samplers:reference")
    on_ray = _run("ray_samplers:kills_its_actor_once", executor="ray", workers=2)
    assert cluster.exists(), "no actor was killed: the test tested nothing"
    assert all(c["status"] == "pass" for c in on_ray["checks"])
    strip = lambda d: {**_stable(d), "run": {k: v for k, v in _stable(d)["run"].items() if k not in ("sampler", "spec")}}  # noqa: E731
    assert strip(on_ray) == strip(local)


def test_an_unreachable_address_is_a_usage_error():
    if ray.is_initialized():
        pytest.skip("this process is joined to a cluster already; the address would not be tried")  # never: the module fixture ends first
    with pytest.raises(UsageError, match="no Ray cluster could be joined"):
        check("specverify.samplers:reference", budget="quick", select=SELECT, executor="ray", address="127.0.0.1:1")
