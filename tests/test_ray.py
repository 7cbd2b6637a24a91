"""``--executor ray``: the same JSON as local workers on a local Ray cluster the test starts (2
CPUs), and a Ray actor killed mid-run leaves the same, correct, result.

Ray is an optional extra (``pip install 'speculative-verify[ray]'``, in ``.[dev]``); CI sets
``SPECVERIFY_REQUIRE_RAY=1`` so these tests fail there rather than skip.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys

import pytest

from specverify._calling.pool import UNIT_ROWS
from specverify._run._driver import check
from specverify.errors import UsageError
from specverify.report import reproducible

if os.environ.get("SPECVERIFY_REQUIRE_RAY") != "1":
    pytest.importorskip("ray")
import ray  # noqa: E402

#: A check whose experiment spans many units at standard (44), so both actors run units.
SELECT = ["fit.step[[]random[]]"]


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    mark = tmp_path_factory.mktemp("ray") / "killed"
    hosts = tmp_path_factory.mktemp("hosts")
    os.environ["SPECVERIFY_TEST_KILL_MARK"] = str(mark)  # the raylet (so every actor) inherits them
    os.environ["SPECVERIFY_TEST_HOSTS"] = str(hosts)
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, configure_logging=False)
    yield mark, hosts
    ray.shutdown()


def _run(spec: str, **options):
    return check(spec, budget="standard", seed=4, select=SELECT, isolation="process", **options).to_json()


def test_ray_actors_give_the_json_of_local_workers(cluster):
    _, hosts = cluster
    local = _run("ray_samplers:counts_where_it_runs")
    for file in hosts.iterdir():  # what ran here; the Ray run's processes write afresh
        file.unlink()
    on_ray = _run("ray_samplers:counts_where_it_runs", executor="ray", workers=2)
    assert on_ray["run"]["workers"]["executor"] == "ray" and on_ray["run"]["workers"]["count"] == 2
    assert on_ray["run"]["sampler_rows"] == local["run"]["sampler_rows"]
    on_actors = {file.name: int(file.read_text()) for file in hosts.iterdir() if file.name.startswith("actor-")}
    assert len(on_actors) == 2 and sum(on_actors.values()) > 2 * UNIT_ROWS  # several units ran, on both actors
    assert reproducible(on_ray) == reproducible(local)


def test_an_actor_killed_mid_run_leaves_the_same_result(cluster):
    """The sampler kills its actor once; Ray restarts it and retries the unit with its seed."""
    local = _run("specverify.samplers:reference")
    mark, _ = cluster
    on_ray = _run("ray_samplers:kills_its_actor_once", executor="ray", workers=2)
    assert mark.exists(), "no actor was killed: the test tested nothing"
    assert on_ray["verdict"] == local["verdict"] and all(c["status"] == "pass" for c in on_ray["checks"])
    assert _decisions(on_ray) == _decisions(
        local
    )  # the sampler's name differs (in the repro snippets), nothing it decided
    assert on_ray["run"]["sampler_rows"] == local["run"]["sampler_rows"]  # the lost unit was counted once


def _decisions(result):
    """What each check decided, from what counts (the sampler's spec, in repro snippets, left out)."""
    keys = ("id", "status", "finding", "p_value", "alpha", "samples", "min_detectable_tv", "reach")
    return [
        ({k: c.get(k) for k in keys}, {k: v for k, v in c["evidence"].items() if k != "repro"})
        for c in result["checks"]
    ]


@pytest.mark.parametrize(
    ("command", "spec"), [("check", "specverify.samplers:reference"), ("loop", "specverify.samplers:loop_reference")]
)
def test_an_unreachable_address_is_one_line_and_exit_2(command, spec, tmp_path):
    """Nothing listens at the address: one line, exit 2, before the sampler loads (no JSON written)."""
    path = tmp_path / "out.json"
    argv = [
        sys.executable,
        "-m",
        "specverify",
        command,
        spec,
        "--executor",
        "ray",
        "--address",
        "127.0.0.1:1",
        "--json",
        str(path),
    ]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=300)
    assert done.returncode == 2, done.stdout + done.stderr
    assert (
        "no Ray cluster could be joined at '127.0.0.1:1'" in done.stderr and len(done.stderr.strip().splitlines()) == 1
    )
    assert not path.exists()


def test_the_api_refuses_an_unreachable_address():
    with pytest.raises(UsageError, match="nothing answers there"):
        check("specverify.samplers:reference", budget="quick", select=SELECT, executor="ray", address="127.0.0.1:1")


def test_an_address_other_than_the_joined_cluster_is_refused(cluster):
    """Ray is initialised here (the fixture's cluster): another address is an error, not ignored."""
    from specverify._calling.ray_pool import _joined_as_asked

    with socket.socket() as listening:  # something answers there, so only the cluster's identity is in question
        listening.bind(("127.0.0.1", 0))
        listening.listen()
        address = f"127.0.0.1:{listening.getsockname()[1]}"
        with pytest.raises(UsageError, match="already initialised in this process"):
            check("specverify.samplers:reference", budget="quick", select=SELECT, executor="ray", address=address)
    _joined_as_asked(ray, ray.get_runtime_context().gcs_address)  # the cluster joined: accepted
    _joined_as_asked(ray, None)
