"""The fleet's page: one sortable table, figures only for the runs to look at, the rest in a folder."""

from __future__ import annotations

import re
from html.parser import HTMLParser
from pathlib import Path

import matplotlib

matplotlib.use("Agg")

import numpy as np
import pandas as pd
import pytest

from bayesgrpo.errors import BayesGRPOError
from bayesgrpo.interfaces.cli import main
from bayesgrpo.interfaces.fleet import FleetSettings
from bayesgrpo.interfaces.html_report import page as report_page
from bayesgrpo.interfaces.html_report.fleet import flagged_order, write_fleet_report
from bayesgrpo.logs.writers.verl import write_verl_console

pytestmark = pytest.mark.usefixtures("ray_lock")  # this module starts Ray: one at a time (conftest)

EVIL = "<img src=x onerror=alert(1)>"


class Page(HTMLParser):
    """The images, links, scripts and the sortable table's rows of a page."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.images: list[str] = []
        self.links: list[str] = []
        self.scripts = 0
        self.rows: list[list[str]] = []
        self._in_table = False
        self._cell: list[str] | None = None

    def handle_starttag(self, tag, attrs):
        attributes = dict(attrs)
        if tag == "img":
            self.images.append(attributes["src"])
        if tag == "a":
            self.links.append(attributes["href"])
        if tag == "script":
            self.scripts += 1
            assert "src" not in attributes  # nothing fetched
        if tag == "table" and "sortable" in (attributes.get("class") or ""):
            self._in_table = True
        if tag == "tr" and self._in_table:
            self.rows.append([])
        if tag in ("td", "th") and self._in_table:
            self._cell = []

    def handle_endtag(self, tag):
        if tag in ("td", "th") and self._cell is not None:
            self.rows[-1].append("".join(self._cell))
            self._cell = None
        if tag == "table":
            self._in_table = False

    def handle_data(self, data):
        if self._cell is not None:
            self._cell.append(data)


def parse(path: Path) -> Page:
    page = Page()
    page.feed(path.read_text(encoding="utf-8"))
    return page


@pytest.fixture
def fleet(tmp_path: Path) -> Path:
    """Twelve verl runs: six flat near their end (advised to stop), six still rising early, one of
    them named to break a page; and one log that cannot be read.
    """
    root = tmp_path / "fleet"
    root.mkdir()
    rng = np.random.default_rng(0)
    for i in range(12):
        flat = i < 6
        steps = np.arange(1, (190 if flat else 30) + 1)
        rate = 8.0 if flat else 150.0
        reward = 0.2 + 0.5 * (1 - np.exp(-steps / rate)) + rng.normal(0, 0.01, len(steps))
        name = f"{'flat' if flat else 'rising'}_{i:02d}" + (EVIL if i == 11 else "")
        points = pd.DataFrame({"step": steps, "critic/score/mean": reward.round(4)})
        write_verl_console(root / f"{name}.log", points, total_training_steps=200)
    (root / "broken.csv").write_bytes(b"\x00\x01garbage")
    return root


def test_one_row_a_run_flagged_runs_inline_and_the_rest_in_a_folder(fleet, tmp_path):
    path = write_fleet_report([fleet], tmp_path / "fleet.html", max_inline=2)
    page = parse(path)
    header, *rows = page.rows
    assert header[:6] == ["run", "step", "horizon", "forecast", "90% band", "advice"]
    assert len(rows) == 13 and sum(r[5] == "error" for r in rows) == 1
    advice = {r[0]: r[5] for r in rows}
    assert all(advice[f"flat_{i:02d}"] == "stop" for i in range(6))  # flat at their end: stop
    flagged = [r for r in rows if r[5] == "stop" or r[10] == "high"]
    assert len(page.images) == 2  # the first two flagged, inline
    assert all(src.startswith("data:image/png;base64,") for src in page.images)
    in_folder = [link for link in page.links if not link.startswith("#")]
    assert len(in_folder) == len(flagged) - 2
    assert all((tmp_path / link).is_file() for link in in_folder)
    assert sorted(p.name for p in (tmp_path / "fleet_figures").iterdir()) == sorted(
        Path(link).name for link in in_folder
    )
    assert {r[11] for r in rows if r not in flagged} == {"-"}  # no figure for a run not flagged
    assert page.scripts == 1


def test_log_text_is_escaped(fleet, tmp_path):
    text = write_fleet_report([fleet], tmp_path / "fleet.html", figures="none").read_text(encoding="utf-8")
    assert EVIL not in text and "&lt;img src=x onerror=alert(1)&gt;" in text
    assert re.search(r"<(img|a)\b[^>]*\bhref=\"http", text) is None


def test_figures_all_draws_every_readable_run_and_none_draws_nothing(fleet, tmp_path):
    page = parse(write_fleet_report([fleet], tmp_path / "all.html", figures="all", max_inline=0))
    assert len(page.images) == 0 and len(list((tmp_path / "all_figures").iterdir())) == 12
    page = parse(write_fleet_report([fleet], tmp_path / "none.html", figures="none"))
    assert not page.images and not (tmp_path / "none_figures").exists()
    with pytest.raises(BayesGRPOError, match="figures must be one of"):
        write_fleet_report([fleet], tmp_path / "x.html", figures="some")


def test_flagged_runs_come_high_findings_first_then_by_stop_probability():
    frame = pd.DataFrame(
        {
            "status": ["ok", "ok", "ok", "ok", "error"],
            "decision": ["stop", "continue", "stop", "stop", None],
            "probability": [0.91, 0.2, 0.99, 0.95, None],
            "worst_severity": ["", "high", "warning", "high", None],
        }
    )
    assert flagged_order(frame) == [3, 1, 2, 0]


def test_the_cli_writes_the_fleet_page_when_asked_or_for_many_logs(fleet, tmp_path, monkeypatch, capsys):
    out = tmp_path / "asked.html"
    assert main(["report", str(fleet), "--fleet", "-o", str(out), "--figures", "none"]) == 0
    assert len(parse(out).rows) == 14 and f"wrote {out}" in capsys.readouterr().out
    monkeypatch.setattr(report_page, "FLEET_THRESHOLD", 5)  # 13 logs: a fleet
    out = tmp_path / "many.html"
    assert main(["report", str(fleet), "-o", str(out), "-q", "--figures", "none"]) == 0
    assert 'class="sortable"' in out.read_text(encoding="utf-8")
    capsys.readouterr()
    assert main(["report", str(fleet), "--fleet", "-o", str(out), "--transfer-size", "7"]) != 0
    assert "no transfer section" in capsys.readouterr().err


@pytest.mark.slow
def test_the_page_on_ray_holds_the_serial_rows(fleet, tmp_path):
    settings = FleetSettings()
    serial = parse(write_fleet_report([fleet], tmp_path / "serial.html", settings=settings, max_inline=3))
    on_ray = parse(
        write_fleet_report([fleet], tmp_path / "ray.html", settings=settings, max_inline=3, workers=2)
    )
    assert serial.rows == on_ray.rows and serial.images == on_ray.images
