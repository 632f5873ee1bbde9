"""End to end: the planted world's idle owners get their warnings through a real SMTP server
(STARTTLS, AUTH) on 127.0.0.1 and a local webhook receiver, once; the log keeps each channel's
reply."""

from dataclasses import replace
from pathlib import Path

import duckdb

from gpuledger.alerts.delivery_config import DeliverySettings
from gpuledger.alerts.run import run_alerts
from gpuledger.site import load_site
from tests.alerts.conftest import SmtpServer, WebhookReceiver
from tests.alerts.helpers_delivery import delivery_tables, mails
from tests.alerts.helpers_world import at, write_world


def test_warnings_arrive_once_by_mail_and_webhook(
        tmp_path: Path, smtp_server: SmtpServer, webhook_receiver: WebhookReceiver) -> None:
    site = load_site(write_world(tmp_path, alerts=delivery_tables(smtp_server,
                                                                   webhook_receiver)))
    report = run_alerts(site, at(61))
    assert [s.status for s in report.sent] == ["sent", "sent"]
    got = mails(smtp_server)
    assert [to for to, _ in got] == [("alice@example.org", "ops@example.org"),
                                     ("ml-team@example.org", "ops@example.org")]
    bodies = [m.message.get_body(("plain",)).get_content() for m in smtp_server.messages]
    assert any("5001" in b and "hpc-01" in b for b in bodies)
    assert any("research/train-0" in b for b in bodies)
    assert all("https://gpuledger.example.org/incidents?" in b for b in bodies)
    assert len(webhook_receiver.requests) == 2
    run_alerts(site, at(65))
    assert len(smtp_server.messages) == 2
    assert len(webhook_receiver.requests) == 2
    con = duckdb.connect(str(site.db), read_only=True)
    try:
        channels = con.execute("SELECT channel, ok FROM alert_deliveries ORDER BY channel"
                               ).fetchall()
    finally:
        con.close()
    assert sorted(set(channels)) == [("email", True), ("webhook:ops-chat", True)]
    assert len(channels) == 4


def test_a_failed_delivery_is_retried_next_tick(
        tmp_path: Path, smtp_server: SmtpServer, webhook_receiver: WebhookReceiver,
        dead_port: int) -> None:
    tables = delivery_tables(smtp_server, webhook_receiver).replace(
        f"port = {smtp_server.port}", f"port = {dead_port}")
    site = load_site(write_world(tmp_path, alerts=tables))
    webhook_receiver.fail_next(50, status=503)
    report = run_alerts(site, at(61))
    assert [s.status for s in report.sent] == ["failed", "failed"]
    assert smtp_server.messages == []
    # the server is reachable again: the next tick sends both, once
    fixed = replace(site, alerts=replace(site.alerts, delivery=DeliverySettings(
        smtp=smtp_server.settings())))
    assert [s.status for s in run_alerts(fixed, at(62)).sent] == ["sent", "sent"]
    assert run_alerts(fixed, at(63)).sent == ()
    assert len(smtp_server.messages) == 2


def test_weekly_digest_arrives_once(tmp_path: Path, smtp_server: SmtpServer,
                                    webhook_receiver: WebhookReceiver) -> None:
    from datetime import date

    from gpuledger.alerts.digest import run_digest
    site = load_site(write_world(tmp_path, alerts=delivery_tables(smtp_server,
                                                                   webhook_receiver)))
    con = duckdb.connect(str(site.db))
    try:
        con.execute(
            "INSERT INTO incidents (incident_id, day, kind, domain, cluster, node, gpu_seconds, "
            "cost, currency, slurm_job, person, team) VALUES "
            "('a', DATE '2026-01-06', 'idle_allocation', 'slurm', 'hybrid', 'hpc-01', 43200, "
            "30.00, 'EUR', '4711', 'alice', 'physics')")
    finally:
        con.close()
    report = run_digest(site, "2026-W02", now=at(600))
    assert [s.status for s in report.sent] == ["sent"]
    assert run_digest(site, "2026-W02", now=at(601)).sent == ()
    [mail] = smtp_server.messages
    assert mail.rcpt_tos[0] == "alice@example.org"
    assert "4711" in mail.message.get_body(("plain",)).get_content()
    assert date(2026, 1, 5).isoformat()  # the week's Monday is the digest's start
