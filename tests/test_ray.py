"""``--executor ray``: the same JSON as local workers on a local Ray cluster the test starts (2
CPUs), and a Ray actor killed mid-run leaves the same, correct, result.

Ray is an optional extra (``pip install 'specverify[ray]'``, in ``.[dev]``); CI sets
``SPECVERIFY_REQUIRE_RAY=1`` so these tests fail there rather than skip.
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from specverify._calling.pool import UNIT_ROWS
from specverify.report import reproducible
from specverify._runner import check
from specverify.errors import UsageError

if os.environ.get("SPECVERIFY_REQUIRE_RAY") != "1":
    pytest.importorskip("ray")
import ray  # noqa: E402

#: A subset whose experiments span several units.
SELECT = ["fit.conditional[[]zero-residual[]]", "fit.step*"]


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
    assert on_ray["run"]["sampler_rows"] == local["run"]["sampler_rows"] > 2 * UNIT_ROWS  # several units ran, on the actors
    assert reproducible(on_ray) == reproducible(local)


def test_an_actor_killed_mid_run_leaves_the_same_result(cluster):
    """The sampler kills its actor once; Ray restarts it and retries the unit with its seed."""
    local = _run("specverify.samplers:reference")
    on_ray = _run("ray_samplers:kills_its_actor_once", executor="ray", workers=2)
    assert cluster.exists(), "no actor was killed: the test tested nothing"
    assert on_ray["verdict"] == local["verdict"] and all(c["status"] == "pass" for c in on_ray["checks"])
    assert _decisions(on_ray) == _decisions(local)  # the sampler's name differs (in the repro snippets), nothing it decided
    assert on_ray["run"]["sampler_rows"] == local["run"]["sampler_rows"]  # the lost unit was counted once


def _decisions(result):
    """What each check decided, from what counts (the sampler's spec, in repro snippets, left out)."""
    keys = ("id", "status", "finding", "p_value", "alpha", "samples", "min_detectable_tv", "reach")
    return [({k: c.get(k) for k in keys}, {k: v for k, v in c["evidence"].items() if k != "repro"}) for c in result["checks"]]


def test_an_unreachable_address_is_one_line_and_exit_2(tmp_path):
    """Nothing listens at the address: one line, exit 2, before the sampler loads (no JSON written)."""
    path = tmp_path / "out.json"
    command = [sys.executable, "-m", "specverify", "check", "specverify.samplers:reference", "--executor", "ray", "--address", "127.0.0.1:1", "--json", str(path)]
    done = subprocess.run(command, capture_output=True, text=True, timeout=300)
    assert done.returncode == 2, done.stdout + done.stderr
    assert "no Ray cluster could be joined at '127.0.0.1:1'" in done.stderr and len(done.stderr.strip().splitlines()) == 1
    assert not path.exists()


def test_the_api_refuses_an_unreachable_address():
    with pytest.raises(UsageError, match="nothing answers there"):
        check("specverify.samplers:reference", budget="quick", select=SELECT, executor="ray", address="127.0.0.1:1")
