"""The weekly report against the ledger: CSVs are the chargeback lines exactly, every total on a
page equals SQL over ``chargeback``, text is escaped, and a folder is replaced atomically."""

import csv
from decimal import ROUND_HALF_UP, Decimal
from pathlib import Path

import duckdb
import pytest

from gpuledger.report.files import slugs
from gpuledger.report.lines import EmptyWeekError
from gpuledger.report.weekly import write_weekly_report
from models.runner import ensure_schema, publish_snapshot, read_snapshot
from models.weeks import parse_iso_week
from tests.reports.conftest import NASTY_CENTRE, SIM_WEEKS
from tests.reports.html_tables import Page, read_page

WEEK_SQL = "FROM chargeback WHERE period_kind = 'week' AND period = ?"


def _write(db: Path, week: str, out: Path):
    with read_snapshot(db) as con:
        return write_weekly_report(con, week, out)


def _sql_lines(db: Path, week: str, where: str = "TRUE", params: tuple = ()) -> list[list[str]]:
    """The week's lines as text, straight from DuckDB's own casts."""
    with read_snapshot(db) as con:
        columns = [r[0] for r in con.execute("DESCRIBE chargeback").fetchall()]
        text = ", ".join(f"coalesce(CAST({c} AS VARCHAR), '')" for c in columns)
        rows = con.execute(f"SELECT {text} {WEEK_SQL} AND {where}", [week, *params]).fetchall()
    return [columns, *sorted(list(r) for r in rows)]


def _csv(path: Path) -> list[list[str]]:
    with path.open(encoding="utf-8", newline="") as fh:
        header, *rows = list(csv.reader(fh))
    return [header, *sorted(rows)]


def _expected_totals(db: Path, week: str, key: str, where: str = "TRUE",
                     params: tuple = ()) -> dict[str, dict[str, str]]:
    """Per group: lines, GPU-seconds, amounts per currency (as the page encodes them), usage."""
    with read_snapshot(db) as con:
        columns = {r[0] for r in con.execute("DESCRIBE chargeback").fetchall()}
        usage = [c for c in ("measured_gpu_hours", "busy_gpu_hours", "idle_gpu_hours")
                 if c in columns]
        base = con.execute(
            f"SELECT {key} AS k, count(*), sum(gpu_seconds)::BIGINT, "
            f"sum(gpu_seconds) FILTER (WHERE amount IS NULL)::BIGINT"
            + "".join(f", sum({c})" for c in usage)
            + f" {WEEK_SQL} AND {where} GROUP BY k", [week, *params]).fetchall()
        money = con.execute(
            f"SELECT {key} AS k, currency, sum(amount) {WEEK_SQL} AND {where} "
            "AND amount IS NOT NULL GROUP BY k, currency ORDER BY currency",
            [week, *params]).fetchall()
    result: dict[str, dict[str, str]] = {}
    for k, lines, seconds, unpriced, *sums in base:
        result[k] = {"lines": str(lines), "gpu_hours": str(seconds), "unpriced": str(unpriced or 0),
                     "amount": ""}
        result[k] |= {c: "" if s is None else str(s) for c, s in zip(usage, sums, strict=True)}
    for k, currency, amount in money:
        sep = ";" if result[k]["amount"] else ""
        result[k]["amount"] += f"{sep}{currency}={amount}"
    return result


def _shown(page: Page, table: str) -> tuple[dict[str, dict[str, str]], dict[str, str]]:
    """data-value per column per row key, and the total row's."""
    rows = page.tables[table]
    groups = {r.attrs["data-key"]: {c: cell.attrs["data-value"] for c, cell in r.by_col().items()}
              for r in rows if "data-key" in r.attrs}
    (total,) = [r for r in rows if r.attrs.get("class") == "total"]
    return groups, {c: cell.attrs["data-value"] for c, cell in total.by_col().items()}


def _hours_text(seconds: str) -> str:
    value = (Decimal(seconds) / 3600).quantize(Decimal("0.01"), rounding=ROUND_HALF_UP)
    return f"{value:,}"


def _check_table(page: Page, table: str, expected: dict[str, dict[str, str]]) -> None:
    groups, total = _shown(page, table)
    assert set(groups) == set(expected)
    for key, want in expected.items():
        got = groups[key]
        assert {c: got.get(c, "0" if c == "unpriced" else None) for c in want} == want, key
    # the total row adds up the same lines
    assert int(total["gpu_hours"]) == sum(int(v["gpu_hours"]) for v in expected.values())
    assert int(total["lines"]) == sum(int(v["lines"]) for v in expected.values())
    # and the text shows the hours the data attribute holds, to the cent
    for row in page.tables[table]:
        cell = row.by_col()["gpu_hours"]
        assert cell.text == _hours_text(cell.attrs["data-value"])


@pytest.mark.parametrize("week", SIM_WEEKS)
def test_csv_invoice_lines_are_the_weeks_chargeback_lines_exactly(sim_db: Path, tmp_path: Path,
                                                                   week: str):
    report = _write(sim_db, week, tmp_path)
    folder = tmp_path / week
    expected = _sql_lines(sim_db, week)
    assert len(expected) > 2
    assert _csv(folder / "invoice-lines.csv") == expected
    with read_snapshot(sim_db) as con:
        centres = [r[0] for r in con.execute(f"SELECT DISTINCT cost_centre {WEEK_SQL}",
                                             [week]).fetchall()]
    assert len(centres) >= 2
    slug = slugs(centres)
    for centre in centres:
        mine = _csv(folder / f"invoice-lines-{slug[centre]}.csv")
        assert mine == _sql_lines(sim_db, week, "cost_centre = ?", (centre,))
        assert (folder / f"cost-centre-{slug[centre]}.html").is_file()
    assert sorted(p.name for p in folder.iterdir()) == sorted(report.files)
    assert report.lines == len(expected) - 1


@pytest.mark.parametrize("week", SIM_WEEKS)
def test_summary_totals_equal_the_chargeback_table(sim_db: Path, tmp_path: Path, week: str):
    _write(sim_db, week, tmp_path)
    page = read_page((tmp_path / week / "summary.html").read_text(encoding="utf-8"))
    for table, key in (("by-cost-centre", "cost_centre"), ("by-team", "team"),
                       ("by-domain", "domain"), ("by-gpu-model", "gpu_model")):
        _check_table(page, table, _expected_totals(sim_db, week, key))
    everything = _expected_totals(sim_db, week, "'all'")["all"]
    assert page.cards["gpu_hours"].attrs["data-value"] == everything["gpu_hours"]
    assert page.cards["gpu_hours"].text == _hours_text(everything["gpu_hours"])
    assert page.cards["amount"].attrs["data-value"] == everything["amount"]
    unattributed = _expected_totals(sim_db, week, "'u'", "cost_centre = 'unattributed'")
    want = unattributed.get("u", {"gpu_hours": "0", "amount": ""})
    assert page.cards["unattributed"].attrs["data-value"] == \
        f"{want['gpu_hours']}|{want['amount']}"


def test_each_cost_centre_page_totals_its_own_lines(sim_db: Path, tmp_path: Path):
    week = SIM_WEEKS[0]
    report = _write(sim_db, week, tmp_path)
    pages = [f for f in report.files if f.startswith("cost-centre-")]
    with read_snapshot(sim_db) as con:
        centres = [r[0] for r in con.execute(f"SELECT DISTINCT cost_centre {WEEK_SQL}",
                                             [week]).fetchall()]
    slug = slugs(centres)
    assert sorted(pages) == sorted(f"cost-centre-{slug[c]}.html" for c in centres)
    for centre in centres:
        page = read_page((tmp_path / week / f"cost-centre-{slug[centre]}.html").read_text())
        where, params = "cost_centre = ?", (centre,)
        _check_table(page, "by-team", _expected_totals(sim_db, week, "team", where, params))
        _check_table(page, "by-person", _expected_totals(
            sim_db, week, "team || ' · ' || person", where, params))
        lines = _sql_lines(sim_db, week, where, params)
        assert len(page.tables["lines"]) == len(lines) - 1


def test_markup_in_names_is_escaped_and_pages_are_self_contained(synthetic_db: Path,
                                                                 tmp_path: Path):
    report = _write(synthetic_db, "2026-W02", tmp_path)
    htmls = [p for p in (tmp_path / "2026-W02").iterdir() if p.suffix == ".html"]
    assert len(htmls) == 1 + report.cost_centres
    for path in htmls:
        text = path.read_text(encoding="utf-8")
        assert "<script" not in text.lower()
        assert "http://" not in text
        assert "https://" not in text
        assert " src=" not in text
    summary = (tmp_path / "2026-W02" / "summary.html").read_text(encoding="utf-8")
    assert "&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt; &amp; co" in summary
    page = read_page(summary)
    assert NASTY_CENTRE in _shown(page, "by-cost-centre")[0]  # round-trips through the escape
    assert "R&D" in _shown(page, "by-team")[0]


def test_synthetic_week_totals_currencies_unpriced_and_slug_collisions(synthetic_db: Path,
                                                                      tmp_path: Path):
    report = _write(synthetic_db, "2026-W02", tmp_path)
    folder = tmp_path / "2026-W02"
    # "CC A" and "cc-a" would both be cc-a: each gets its own files, with only its own lines
    slug = slugs(["CC A", "cc-a", NASTY_CENTRE, "unattributed"])
    assert len(set(slug.values())) == 4
    for centre in ("CC A", "cc-a"):
        assert _csv(folder / f"invoice-lines-{slug[centre]}.csv") == _sql_lines(
            synthetic_db, "2026-W02", "cost_centre = ?", (centre,))
    assert _csv(folder / "invoice-lines.csv") == _sql_lines(synthetic_db, "2026-W02")
    assert report.lines == 5  # the W03, day and month lines stay out
    page = read_page((folder / "summary.html").read_text(encoding="utf-8"))
    for table, key in (("by-cost-centre", "cost_centre"), ("by-team", "team"),
                       ("by-domain", "domain"), ("by-gpu-model", "gpu_model")):
        _check_table(page, table, _expected_totals(synthetic_db, "2026-W02", key))
    # two currencies are never added together; the line without a rate is flagged, not priced
    assert page.cards["amount"].attrs["data-value"] == "EUR=9.91;USD=2.50"
    assert page.cards["amount"].text == "9.91 EUR + 2.50 USD"
    assert page.cards["unpriced"].attrs["data-value"] == "900"
    # 18 s is 0.005 GPU-hours: shown as 0.01 (half up), the unattributed bucket in plain sight
    assert page.cards["unattributed"].attrs["data-value"] == "18|EUR=0.01"
    assert page.cards["unattributed"].text.startswith("0.01 GPU-h")
    assert page.cards["incomplete"].attrs["data-value"] == "900|"
    assert page.cards["busy_gpu_hours"].attrs["data-value"] == "1.750000"
    assert page.notes["incidents"].startswith("no incident data")


def test_largest_incidents_of_the_week_are_listed_when_the_table_exists(synthetic_db: Path,
                                                                       tmp_path: Path):
    with duckdb.connect(str(synthetic_db)) as con:
        ensure_schema(con)  # the model's incidents table (the fixture dropped it)
        rows = [  # id, day, kind, cost centre, the other scheduler's cost centre, cost, evidence
            ("i1", "2026-01-06", "idle_allocation", "CC A", None, "12.50", "<b>evidence</b>"),
            ("i2", "2026-01-11", "double_scheduled", "cc-a", "CC A", "80.00", "line 3"),
            ("i3", "2026-01-12", "double_scheduled", "CC A", None, "999.00", "next week"),
            ("i4", "2026-01-04", "double_scheduled", "CC A", None, "999.00", "last week"),
        ]
        for incident_id, day, kind, centre, other, cost, evidence in rows:
            con.execute(
                "INSERT INTO incidents (incident_id, day, kind, domain, node, gpu_seconds, cost, "
                "currency, person, team, cost_centre, other_cost_centre, evidence) VALUES "
                "(?, ?, ?, 'slurm', 'n1', 3600, ?, 'EUR', 'ann', 't1', ?, ?, ?)",
                [incident_id, day, kind, Decimal(cost), centre, other, evidence])
        publish_snapshot(con, synthetic_db)
    report = _write(synthetic_db, "2026-W02", tmp_path)
    assert report.incidents == 2
    folder = tmp_path / "2026-W02"
    summary = read_page((folder / "summary.html").read_text(encoding="utf-8"))
    listed = [[c.text for c in row.cells] for row in summary.tables["incidents"]]
    assert [row[1] for row in listed] == ["double_scheduled", "idle_allocation"]  # by cost
    assert "80.00 EUR" in listed[0]
    assert "<b>evidence</b>" in listed[1]  # escaped, read back as text
    slug = slugs(["CC A", "cc-a", NASTY_CENTRE, "unattributed"])
    mine = read_page((folder / f"cost-centre-{slug['CC A']}.html").read_text(encoding="utf-8"))
    # a double-scheduled GPU concerns both owners: it is on both cost centres' pages
    assert [row.cells[1].text for row in mine.tables["incidents"]] == \
        ["double_scheduled", "idle_allocation"]
    theirs = read_page((folder / f"cost-centre-{slug['cc-a']}.html").read_text(encoding="utf-8"))
    assert [row.cells[1].text for row in theirs.tables["incidents"]] == ["double_scheduled"]
    nasty = read_page((folder / f"cost-centre-{slug[NASTY_CENTRE]}.html").read_text())
    assert nasty.notes["incidents"].startswith("no incident")
    assert "incident data" not in nasty.notes["incidents"]


def test_rerun_replaces_the_folder_and_a_failed_run_leaves_it_untouched(
        synthetic_db: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    out = tmp_path / "reports"
    _write(synthetic_db, "2026-W02", out)
    folder = out / "2026-W02"
    (folder / "stale.txt").write_text("from an older run")
    _write(synthetic_db, "2026-W02", out)
    assert not (folder / "stale.txt").exists()
    assert [p.name for p in out.iterdir()] == ["2026-W02"]  # no temp folder left beside
    before = {p.name: p.read_bytes() for p in folder.iterdir()}

    from gpuledger.report import weekly

    def broken(*args, **kwargs):
        msg = "disk full (simulated)"
        raise RuntimeError(msg)

    monkeypatch.setattr(weekly, "cost_centre_page", broken)  # fails after summary.html
    with pytest.raises(RuntimeError, match="simulated"):
        _write(synthetic_db, "2026-W02", out)
    assert {p.name: p.read_bytes() for p in folder.iterdir()} == before
    assert [p.name for p in out.iterdir()] == ["2026-W02"]


def test_without_an_atomic_exchange_the_folder_is_still_replaced_whole(
        synthetic_db: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    out = tmp_path / "reports"
    from gpuledger.report import files

    _write(synthetic_db, "2026-W02", out)
    (out / "2026-W02" / "stale.txt").write_text("old")
    monkeypatch.setattr(files, "_exchange", lambda a, b: False)
    report = _write(synthetic_db, "2026-W02", out)
    assert sorted(p.name for p in (out / "2026-W02").iterdir()) == sorted(report.files)
    assert [p.name for p in out.iterdir()] == ["2026-W02"]


def test_readers_never_meet_a_missing_or_partial_file_while_the_folder_is_rewritten(
        synthetic_db: Path, tmp_path: Path):
    import threading

    out = tmp_path / "reports"

    first = _write(synthetic_db, "2026-W02", out)
    folder = out / "2026-W02"
    expected = sorted(first.files)
    done = threading.Event()
    errors: list[BaseException] = []

    def rewrite() -> None:
        try:
            for _ in range(15):
                _write(synthetic_db, "2026-W02", out)
        except BaseException as exc:  # reported by the main thread
            errors.append(exc)
        finally:
            done.set()

    writer = threading.Thread(target=rewrite)
    writer.start()
    seen = 0
    # A reader opens files by path: each must be there and complete, whichever run wrote it.
    # (A listing opened just before a swap reads the old folder, which is then deleted.)
    while not done.is_set() or seen == 0:
        for name in expected:
            text = (folder / name).read_text(encoding="utf-8")  # raises if missing
            if name.endswith(".html"):
                assert text.endswith("</html>\n"), name
            else:
                header = "period," if name == "adjustments.csv" else "period_kind,"
                assert text.startswith(header), name
                assert text.endswith("\n"), name
        seen += 1
    writer.join()
    assert errors == []
    assert seen > 1


def test_a_week_without_lines_is_an_error_that_says_what_to_build(synthetic_db: Path,
                                                                  tmp_path: Path):
    with pytest.raises(EmptyWeekError, match=r"expected chargeback lines for week 2026-W05 "
                       r"\(2026-01-26 \.\. 2026-02-02"):
        _write(synthetic_db, "2026-W05", tmp_path)
    assert not (tmp_path / "2026-W05").exists()


@pytest.mark.parametrize(("text", "message"), [
    ("2026-W2", "expected an ISO week YYYY-Www"),
    ("2026W02", "expected an ISO week YYYY-Www"),
    ("2026-01-05", "expected an ISO week YYYY-Www"),
    ("2026-W00", "with week 01..53 in 2026"),
    ("2025-W53", "with week 01..52 in 2025"),
])
def test_bad_week_strings_say_what_was_expected(text: str, message: str):
    with pytest.raises(ValueError, match=message) as info:
        parse_iso_week(text)
    assert repr(text) in str(info.value)


def test_week_bounds_follow_the_iso_calendar():
    week = parse_iso_week("2026-W01")
    assert (str(week.monday), str(week.end)) == ("2025-12-29", "2026-01-05")
    assert parse_iso_week("2026-W53").monday.isoformat() == "2026-12-28"


def test_incidents_of_a_built_world_are_the_weeks_rows_of_the_incidents_table(
        sim_db: Path, tmp_path: Path):
    week = parse_iso_week(SIM_WEEKS[0])
    report = _write(sim_db, week.name, tmp_path)
    with read_snapshot(sim_db) as con:
        count = con.execute("SELECT count(*) FROM incidents WHERE day >= ? AND day < ?",
                            [week.monday, week.end]).fetchone()[0]
        top = con.execute(
            "SELECT kind, coalesce(CAST(cost AS VARCHAR), '') FROM incidents "
            "WHERE day >= ? AND day < ? ORDER BY cost DESC NULLS LAST, gpu_seconds DESC "
            "LIMIT 10", [week.monday, week.end]).fetchall()
    assert report.incidents == count
    page = read_page((tmp_path / week.name / "summary.html").read_text(encoding="utf-8"))
    if count == 0:
        assert page.notes["incidents"].startswith("no incident")
        return
    # columns end with: cost, Slurm job, Kubernetes workload, evidence
    shown = [(row.cells[1].text, row.cells[-4].text.split(" ")[0].replace(",", ""))
             for row in page.tables["incidents"]]
    assert [kind for kind, _ in shown] == [kind for kind, _ in top]
    assert [cost for _, cost in shown] == [cost or "—" for _, cost in top]


def test_the_simulated_weeks_have_what_the_report_must_show(sim_db: Path):
    # guards the tests above against a world too small to mean anything
    with read_snapshot(sim_db) as con:
        domains, centres, busy = con.execute(
            f"SELECT count(DISTINCT domain), count(DISTINCT cost_centre), sum(busy_gpu_hours) "
            f"{WEEK_SQL}", [SIM_WEEKS[0]]).fetchone()
        incidents = con.execute("SELECT count(*) FROM incidents WHERE day >= '2026-01-05' "
                                "AND day < '2026-01-12'").fetchone()[0]
    assert domains == 2
    assert centres >= 4
    assert busy > 0
    assert incidents > 0
