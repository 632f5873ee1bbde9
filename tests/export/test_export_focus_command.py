"""`gpuledger export focus`: writes <reports_dir>/<period>/focus-1.2.csv (or --output, parquet)
from the published ledger, names a bad --period clearly before opening anything, reads the
optional [gpuledger.focus] site table (errors name the file and key), and prints a warning for
allocations the rate card does not price (BilledCost 0, x_Unpriced)."""

import csv
import shutil
from datetime import date, datetime, time
from decimal import Decimal
from pathlib import Path

import duckdb
import pytest

from gpuledger.cli import main
from gpuledger.export.focus import FocusSite, export_focus, parse_focus_table
from gpuledger.site import SiteError, load_site
from models.build import build_chargeback
from models.focus import FocusIdentity
from models.runner import ensure_schema, publish_snapshot
from tests.helpers import SAMPLE_SITE


@pytest.mark.parametrize(("period", "expected"), [
    ("2026-W2", "expected a billing period: an ISO week such as 2026-W02 or a month such as "
                "2026-01, found '2026-W2'"),
    ("2026-13", "found '2026-13'"),
    ("W02", "found 'W02'"),
    ("2026-W54", "expected an ISO week that exists (01 .. 52 or 53), found '2026-W54'"),
])
def test_a_bad_period_is_a_clear_error(period, expected, tmp_path: Path, capsys):
    code = main(["--db", str(tmp_path / "none.duckdb"), "export", "focus", "--period", period])
    assert code == 1
    err = capsys.readouterr().err
    assert expected in err
    assert not (tmp_path / "none.duckdb").exists()  # failed before the ledger was looked at


def test_the_command_writes_the_reports_folder_file_and_parquet_on_request(
        sample_db: Path, tmp_path: Path, monkeypatch, capsys):
    monkeypatch.setenv("GPULEDGER_REPORTS", str(tmp_path / "reports"))
    assert main(["--db", str(sample_db), "export", "focus", "--period", "2026-W02",
                 "--config", str(SAMPLE_SITE)]) == 0
    written = tmp_path / "reports" / "2026-W02" / "focus-1.2.csv"
    with written.open(newline="") as fh:
        rows = list(csv.DictReader(fh))
    assert len(rows) > 1000
    # the site's defaults: "gpuledger" names the provider, the cluster the billing account
    assert {(r["ProviderName"], r["BillingAccountId"]) for r in rows} == {("gpuledger", "gpulab")}
    assert "FOCUS 2026-W02:" in capsys.readouterr().err
    out = tmp_path / "m.parquet"
    assert main(["--db", str(sample_db), "export", "focus", "--period", "2026-01", "--format",
                 "parquet", "--output", str(out)]) == 0
    # the sample world's January is its week 2026-W02 (the site starts on 2026-01-05)
    assert duckdb.sql(f"SELECT count(*) FROM read_parquet('{out}')").fetchone()[0] == len(rows)


def test_the_site_table_names_provider_account_and_formats(tmp_path: Path):
    shutil.copytree(SAMPLE_SITE.parent, tmp_path / "world")
    text = (tmp_path / "world" / "gpuledger.toml").read_text()
    site = tmp_path / "world" / "gpuledger.toml"
    site.write_text(text + '\n[gpuledger.focus]\nprovider = "Research Computing"\n'
                    'billing_account_id = "RC-42"\nformats = ["csv", "parquet"]\n')
    focus = load_site(site).focus
    assert focus.identity.provider == "Research Computing"
    assert (focus.identity.billing_account_id, focus.identity.billing_account_name) \
        == ("RC-42", "RC-42")
    assert focus.formats == ("csv", "parquet")
    for bad, message in (('formats = ["xlsx"]', r'\[gpuledger.focus.formats\]: expected a list '
                                                 r'of formats among \["csv", "parquet"\]'),
                         ('currency = "euro"', r"\[gpuledger.focus.currency\]: expected an ISO "
                                               r"4217 code"),
                         ('provider = ""', r"\[gpuledger.focus.provider\]: expected a "
                                           r"non-empty ASCII string"),
                         ('colour = "red"', r"\[gpuledger.focus\]: expected only the keys")):
        site.write_text(text + f"\n[gpuledger.focus]\n{bad}\n")
        with pytest.raises(SiteError, match=rf"{site}: " + message):
            load_site(site)


def _unpriced_ledger() -> duckdb.DuckDBPyConnection:
    con = duckdb.connect()
    ensure_schema(con)
    con.execute("INSERT INTO rate_card VALUES ('a100', '', '', NULL, NULL, 2.50, 'EUR')")
    day = date(2026, 1, 6)
    for key, model in (("c:1:0", "a100"), ("c:2:0", "l40s")):  # no rate for the L40S
        start = datetime.combine(day, time(8))
        con.execute(
            "INSERT INTO allocations (day, domain, cluster, source_key, job_id, name, node, "
            "gpu_model, gpus, start_ts, end_ts, gpu_seconds, physical_gpu_seconds, qos, person, "
            "team, cost_centre, outcome) VALUES (?, 'slurm', 'c', ?, ?, 'x', 'n1', ?, 1, ?, "
            "? + INTERVAL 1 HOUR, 3600, 3600, 'normal', 'ann', 't', 'CC-1', 'completed')",
            [day, key, key, model, start, start])
    build_chargeback(con, day, day)
    return con


def test_unpriced_allocations_cost_zero_with_a_warning(tmp_path: Path):
    con = _unpriced_ledger()
    result = export_focus(con, "2026-W02", focus=parse_focus_table(None, ()),
                          out={"csv": tmp_path / "w.csv"})
    assert result.rows.unpriced_rows == 1
    assert [w for w in result.rows.warnings if "1 rows of 2026-W02 have no rate" in w]
    with (tmp_path / "w.csv").open(newline="") as fh:
        rows = {r["x_GpuModel"]: r for r in csv.DictReader(fh)}
    assert (Decimal(rows["l40s"]["BilledCost"]), rows["l40s"]["x_Unpriced"]) == (0, "true")
    assert rows["l40s"]["BillingCurrency"] == "EUR"  # the period's one priced currency
    assert (Decimal(rows["a100"]["BilledCost"]), rows["a100"]["x_Unpriced"]) == (2.5, "false")


def test_unpriced_rows_without_any_currency_carry_xxx_or_the_site_currency(tmp_path: Path):
    con = _unpriced_ledger()
    con.execute("DELETE FROM allocations WHERE gpu_model = 'a100'")
    build_chargeback(con, date(2026, 1, 6), date(2026, 1, 6))
    # nothing priced, no currency set: ISO 4217's "no currency", with a warning
    result = export_focus(con, "2026-W02", focus=parse_focus_table(None, ()),
                          out={"csv": tmp_path / "w.csv"})
    assert any("BillingCurrency XXX" in w for w in result.rows.warnings)
    with (tmp_path / "w.csv").open(newline="") as fh:
        assert [r["BillingCurrency"] for r in csv.DictReader(fh)] == ["XXX"]
    site = FocusSite(FocusIdentity(currency="CHF"))
    export_focus(con, "2026-W02", focus=site, out={"csv": tmp_path / "w.csv"})
    with (tmp_path / "w.csv").open(newline="") as fh:
        assert [r["BillingCurrency"] for r in csv.DictReader(fh)] == ["CHF"]


def test_the_command_prints_the_unpriced_warning(tmp_path: Path, capsys):
    db = tmp_path / "ledger.duckdb"
    memory = _unpriced_ledger()
    memory.execute(f"ATTACH '{db}' AS disk")
    memory.execute("COPY FROM DATABASE memory TO disk")
    memory.execute("DETACH disk")
    with duckdb.connect(str(db)) as con:
        publish_snapshot(con, db)
    assert main(["--db", str(db), "export", "focus", "--period", "2026-W02", "--output",
                 str(tmp_path / "w.csv")]) == 0
    err = capsys.readouterr().err
    assert "gpuledger export focus: warning: 1 rows of 2026-W02 have no rate on the rate card" \
        in err
