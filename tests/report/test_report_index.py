"""``specverify report``: a page per run and an index comparing samplers, and ``check --report``."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from specverify import RunResult
from specverify._cli import main
from specverify.report import build_index, write_report

from ._audit import audit


def _save(run: RunResult, path: Path) -> str:
    path.write_text(json.dumps(run.to_json()), encoding="utf-8")
    return str(path)


def test_index_compares_samplers_and_links_a_page_for_each(tmp_path: Path, lossy_run, support_run, capsys) -> None:
    inputs = [_save(lossy_run, tmp_path / "a.json"), _save(support_run, tmp_path / "b.json")]
    out = tmp_path / "site" / "index.html"
    assert build_index(inputs, str(out)) == 0
    pages = sorted(p.name for p in out.parent.iterdir())
    assert pages == ["abs-residual.html", "index.html", "replacement-from-target.html"]
    index = out.read_text(encoding="utf-8")
    found = audit(index)
    links = {v for tag, name, v in found.attributes if tag == "a" and name == "href"}
    assert {"replacement-from-target.html", "abs-residual.html"} <= links
    text = " ".join(found.text)
    assert "lossy" in text and "non-conformant" in text
    # sampler by family: each run's passed out of those that ran, per family (a skip is no failure)
    for run in (lossy_run, support_run):
        for family in {c.family for c in run.checks}:
            members = [c for c in run.checks if c.family == family]
            ran = [c for c in members if c.status not in ("skip", "float-edge")]
            assert f"{sum(c.status == 'pass' for c in members)}/{len(ran)}" in text
    page = (out.parent / "abs-residual.html").read_text(encoding="utf-8")
    assert 'data-verdict="non-conformant"' in page
    assert "index:" in capsys.readouterr().out


def test_pages_of_samplers_with_the_same_name_do_not_overwrite_each_other(tmp_path: Path, support_run) -> None:
    path = _save(support_run, tmp_path / "a.json")
    assert build_index([path, path], str(tmp_path / "out" / "index.html")) == 0
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == [
        "abs-residual-2.html",
        "abs-residual.html",
        "index.html",
    ]


def test_a_page_is_never_named_like_the_index(tmp_path: Path, support_run) -> None:
    data = support_run.to_json()
    data["run"]["sampler"]["name"] = "index"
    (tmp_path / "a.json").write_text(json.dumps(data), encoding="utf-8")
    assert build_index([str(tmp_path / "a.json")], str(tmp_path / "index.html")) == 0
    assert "data-verdict" not in (tmp_path / "index.html").read_text(encoding="utf-8")
    assert (tmp_path / "index-2.html").exists()


@pytest.mark.parametrize(
    ("content", "reason"),
    [
        ("{not json", "is not JSON"),
        ("[1, 2]", "is not a run result"),
        ('{"schema_version": 99, "checks": []}', "unsupported schema_version 99"),
        ('{"schema_version": 1, "run": {}}', "missing 'checks'"),
        (
            '{"schema_version": 1, "run": {}, "checks": [{"id": "x", "family": "f", "status": "great"}]}',
            "unknown status",
        ),
        (None, "cannot read"),
    ],
)
def test_unreadable_or_invalid_json_is_a_one_line_error_and_writes_nothing(
    tmp_path: Path, support_run, capsys, content: str | None, reason: str
) -> None:
    good = _save(support_run, tmp_path / "good.json")
    bad = tmp_path / "bad.json"
    if content is not None:
        bad.write_text(content, encoding="utf-8")
    out = tmp_path / "out" / "index.html"
    assert build_index([good, str(bad)], str(out)) == 2
    err = capsys.readouterr().err
    assert err.startswith("specverify: error: ") and err.count("\n") == 1 and reason in err and "bad.json" in err
    assert not out.parent.exists()


def test_the_cli_report_command(tmp_path: Path, lossy_run, capsys) -> None:
    path = _save(lossy_run, tmp_path / "run.json")
    assert main(["report", path, "-o", str(tmp_path / "index.html")]) == 0
    assert (tmp_path / "replacement-from-target.html").exists()
    assert main(["report", str(tmp_path / "missing.json"), "-o", str(tmp_path / "index.html")]) == 2


def test_check_writes_a_report(tmp_path: Path, capsys) -> None:
    report = tmp_path / "deep" / "ref.html"
    status = main(
        [
            "check",
            "specverify.samplers:reference",
            "--budget",
            "quick",
            "--only",
            "contract.output",
            "--report",
            str(report),
            "-q",
        ]
    )
    assert status == 3  # a subset cannot pass a sampler
    page = report.read_text(encoding="utf-8")
    assert 'data-verdict="inconclusive"' in page and "specverify.reference" in page
    assert oct(report.stat().st_mode & 0o777) == "0o644"


def test_write_report_replaces_a_file_whole(tmp_path: Path, support_run, raising_run) -> None:
    path = tmp_path / "r.html"
    write_report(raising_run, path)
    write_report(support_run, path)
    assert 'data-verdict="non-conformant"' in path.read_text(encoding="utf-8")
    assert [p.name for p in tmp_path.iterdir()] == ["r.html"]  # no temporary file left behind


def test_a_run_file_that_is_not_utf8_is_a_one_line_error(tmp_path: Path, support_run, capsys) -> None:
    good = _save(support_run, tmp_path / "good.json")
    bad = tmp_path / "bad.json"
    bad.write_bytes(b'\xff\xfe{"schema_version": 1}')
    assert build_index([good, str(bad)], str(tmp_path / "index.html")) == 2
    err = capsys.readouterr().err
    assert err.startswith("specverify: error: cannot read ") and err.count("\n") == 1 and "bad.json" in err
