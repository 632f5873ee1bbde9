"""In Dagster: the alert sensor asks for one run per tick (a run_key each, the tick's time as a
tag), the alert asset in the ledger pool evaluates that time and sends through the real SMTP
server; a second run of the same tick sends nothing new; the asset check lists keys sent twice."""

from pathlib import Path

import dagster as dg
import duckdb
import pytest

from gpuledger.site import load_site
from pipelines.defs.alerts.assets import (
    ALERTS,
    AS_OF_TAG,
    alert_keys_sent_once,
    idle_gpu_alerts,
)
from pipelines.defs.alerts.sensors import alerts_sensor
from pipelines.defs.resources import LEDGER_POOL, LedgerResource, SiteResource
from tests.alerts.conftest import SmtpServer, WebhookReceiver
from tests.alerts.helpers_delivery import delivery_tables, mails
from tests.alerts.helpers_world import at, write_world
from tests.helpers import SAMPLE_SITE, load_definitions


@pytest.fixture
def world(tmp_path: Path, smtp_server: SmtpServer, webhook_receiver: WebhookReceiver,
          monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.delenv("GPULEDGER_DB", raising=False)
    site = write_world(tmp_path, alerts=delivery_tables(smtp_server, webhook_receiver))
    monkeypatch.setenv("GPULEDGER_CONFIG", str(site))
    return site


def _materialize(site_file: Path, as_of: str) -> dg.ExecuteInProcessResult:
    site = load_site(site_file)
    return dg.materialize(
        [idle_gpu_alerts], tags={AS_OF_TAG: as_of},
        resources={"ledger": LedgerResource(database=str(site.db)),
                   "site": SiteResource(path=str(site_file))})


def test_sensor_requests_one_run_per_tick(world: Path) -> None:
    sensor = alerts_sensor(load_site(world))
    assert sensor.minimum_interval_seconds == 15 * 60
    assert sensor.default_status == dg.DefaultSensorStatus.RUNNING
    [request] = sensor.evaluate_tick(dg.build_sensor_context()).run_requests
    assert request.run_key.startswith("alerts-")
    assert AS_OF_TAG in request.tags


def test_sensor_stopped_when_alerts_are_off(tmp_path: Path) -> None:
    path = write_world(tmp_path)
    path.write_text(path.read_text().replace("enabled = true", "enabled = false"))
    assert alerts_sensor(load_site(path)).default_status == dg.DefaultSensorStatus.STOPPED


def test_asset_sends_each_warning_once(world: Path, smtp_server: SmtpServer) -> None:
    result = _materialize(world, at(61).isoformat())
    assert result.success
    meta = result.asset_materializations_for_node("idle_gpu_alerts")[0].metadata
    assert meta["sent"].value == 2
    assert meta["findings"].value == 2
    assert [to[0] for to, _ in mails(smtp_server)] == ["alice@example.org",
                                                       "ml-team@example.org"]
    assert _materialize(world, at(61).isoformat()).success
    assert _materialize(world, at(64).isoformat()).success
    assert len(smtp_server.messages) == 2
    check = alert_keys_sent_once(LedgerResource(database=str(load_site(world).db)))
    assert check.passed


def test_check_lists_a_key_sent_twice(world: Path) -> None:
    db = load_site(world).db
    _materialize(world, at(61).isoformat())
    con = duckdb.connect(str(db))
    try:
        con.execute("INSERT INTO alert_log SELECT * REPLACE ('dup' AS attempt_id) FROM alert_log "
                    "WHERE status = 'sent' LIMIT 1")
    finally:
        con.close()
    check = alert_keys_sent_once(LedgerResource(database=str(db)))
    assert not check.passed
    assert check.metadata["offending_rows"].value == 1


def test_alert_assets_are_in_the_ledger_pool(world: Path) -> None:
    defs = load_definitions(world)
    dg.Definitions.validate_loadable(defs)
    steps = {a.node_def.name: a for a in [*defs.assets, *(defs.asset_checks or [])]
             if isinstance(a, dg.AssetsDefinition)}
    for name in ("idle_gpu_alerts", "idle_gpu_digest", "idle_gpu_alerts_alert_keys_sent_once"):
        assert steps[name].node_def.pool == LEDGER_POOL, name
    assert "duckdb" in defs.resolve_assets_def(ALERTS).specs_by_key[ALERTS].kinds
    assert defs.resolve_sensor_def("idle_gpu_alerts_sensor") is not None
    assert defs.resolve_schedule_def("idle_gpu_digest_weekly").cron_schedule == "0 8 * * 1"


def test_asset_evaluates_nothing_when_alerts_are_off(world: Path, smtp_server: SmtpServer
                                                     ) -> None:
    world.write_text(world.read_text().replace("[gpuledger.alerts]\nenabled = true",
                                               "[gpuledger.alerts]\nenabled = false"))
    assert load_site(world).alerts.enabled is False
    result = _materialize(world, at(61).isoformat())
    assert result.success
    meta = result.asset_materializations_for_node("idle_gpu_alerts")[0].metadata
    assert meta["enabled"].value is False
    assert smtp_server.messages == []
    with duckdb.connect(str(load_site(world).db), read_only=True) as con:
        assert con.execute("SELECT count(*) FROM alert_log").fetchone()[0] == 0


def test_make_demo_does_not_run_the_alerts_on_a_data_folder() -> None:
    from pipelines.materialize import _plan
    defs = load_definitions(SAMPLE_SITE)
    planned = {k.to_user_string() for _, _, keys in _plan(defs.resolve_asset_graph(),
                                                          ["2026-01-05"]) for k in keys}
    assert "chargeback" in planned
    assert {"idle_gpu_alerts", "idle_gpu_digest"}.isdisjoint(planned)
