"""The commands, registered as app.py registers them: ``report RUN`` and ``runs compare``."""

from __future__ import annotations

import json

import pytest
import typer
from report_helpers import SPEC, make_fake_run, parse
from typer.testing import CliRunner

from accelopt.cli.report import compare_command, report_command
from accelopt.errors import UserError
from accelopt.hardware.cache import save_cpu_spec
from accelopt.store.store import Store


@pytest.fixture()
def app() -> typer.Typer:
    app = typer.Typer()
    app.command("report")(report_command)
    runs = typer.Typer()
    runs.command("compare")(compare_command)
    app.add_typer(runs, name="runs")
    return app


@pytest.fixture()
def workspace(tmp_path, monkeypatch):
    monkeypatch.setenv("ACCELOPT_CACHE_DIR", str(tmp_path / "cache"))
    save_cpu_spec(SPEC)  # this machine's ceilings are the run's
    ws = tmp_path / "ws"
    with Store.open(ws) as store:
        make_fake_run(store, "beamrun00001")
        make_fake_run(store, "samplerun001", strategy="sampling")
    return ws


def test_report_writes_the_page_into_the_workspace(app, workspace):
    result = CliRunner().invoke(app, ["report", "beam", "--workspace", str(workspace)])
    assert result.exit_code == 0, result.output
    path = workspace / "reports" / "beamrun00001-silu.html"
    assert path.is_file() and "report written to" in result.output
    page = parse(path.read_text())
    assert "summary" in page.ids and "500.0 GFLOP/s" in "".join(page.text)  # ceilings shown


def test_report_to_a_chosen_file(app, workspace, tmp_path):
    out = tmp_path / "deep" / "r.html"
    result = CliRunner().invoke(app, ["report", "samplerun001", "--out", str(out),
                                      "--workspace", str(workspace)])  # fmt: skip
    assert result.exit_code == 0, result.output
    assert out.read_text().startswith("<!DOCTYPE html>")


def test_an_unknown_run_is_a_user_error(app, workspace):
    result = CliRunner().invoke(app, ["report", "nosuchrun", "--workspace", str(workspace)])
    assert isinstance(result.exception, UserError)
    result = CliRunner().invoke(app, ["runs", "compare", "beamrun00001", "nosuchrun",
                                      "--workspace", str(workspace)])  # fmt: skip
    assert isinstance(result.exception, UserError)


def test_compare_prints_the_table_and_writes_page_and_json(app, workspace, tmp_path):
    out, target = tmp_path / "cmp.html", tmp_path / "cmp.json"
    result = CliRunner().invoke(
        app,
        ["runs", "compare", "beamrun00001", "samplerun001", "--out", str(out), "--json",
         str(target), "--workspace", str(workspace)],
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    for text in ("runs compared", "beamrun00001", "sampling", "80.0%", "0.0300", "comparison"):
        assert text in result.output
    rows = json.loads(target.read_text())
    assert [r["run"] for r in rows] == ["beamrun00001", "samplerun001"]
    assert {"problem", "strategy", "models", "iterations", "best_pct", "cost_usd", "tokens",
            "curve"} <= set(rows[0])  # fmt: skip
    assert parse(out.read_text()).svg_parents == ["by-cost", "by-iteration"]


def test_compare_json_to_stdout_holds_only_json(app, workspace, tmp_path):
    result = CliRunner().invoke(app, ["runs", "compare", "beamrun00001", "--json", "-",
                                      "--workspace", str(workspace)])  # fmt: skip
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)[0]["run"] == "beamrun00001"
