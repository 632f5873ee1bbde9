"""Webhook delivery to a real HTTP receiver on 127.0.0.1 (tests/alerts/conftest.py): the Slack,
Teams and plain JSON bodies as receivers parse them, retries of transient failures, and
timeouts. Body shapes: Slack https://api.slack.com/messaging/webhooks and
https://api.slack.com/reference/surfaces/formatting#escaping; Teams MicrosoftDocs/msteams-docs
webhooks-and-connectors/how-to/connectors-using.md ("Send adaptive cards using an incoming
webhook")."""

import json
import time
from datetime import datetime
from decimal import Decimal

from gpuledger.alerts.delivery import deliver
from gpuledger.alerts.delivery_config import DeliverySettings, WebhookSettings
from gpuledger.alerts.message import Recipients

NOBODY = Recipients(to=(), cc=())


def _slack_text(body: dict) -> str:
    """All text a Slack user sees, from the blocks."""
    parts = []
    for block in body["blocks"]:
        if block["type"] == "section":
            parts.append(block["text"]["text"])
        elif block["type"] == "context":
            parts += [e["text"] for e in block["elements"]]
    return "\n".join(parts)


def test_slack_body_is_json_with_text_and_section_blocks_holding_the_facts(webhook_receiver,
                                                                          idle_alert):
    [result] = deliver(idle_alert(), NOBODY,
                       DeliverySettings(webhooks=(webhook_receiver.settings("slack"),)))

    assert (result.channel, result.ok) == ("webhook:slack", True), result
    [request] = webhook_receiver.requests
    assert request.method == "POST"
    assert request.path == "/slack"
    assert request.headers["content-type"].startswith("application/json")
    body = request.json()
    assert set(body) == {"text", "blocks"}
    assert "job 1234 (train-llm)" in body["text"]
    assert all(b["type"] in ("section", "context") for b in body["blocks"])
    assert all(b["text"]["type"] == "mrkdwn" for b in body["blocks"] if b["type"] == "section")
    text = _slack_text(body)
    for fact in ("job 1234 (train-llm)", "alpha", "gpu-node-07", "GPU-0a1b", "1 h 7 min",
                 "5.58 EUR", "Alice Example"):
        assert fact in text, fact
    # a link is <url|label>, & escaped as Slack asks
    assert "<https://ledger.example.org/incidents?cluster=alpha&amp;job=1234|" in text


def test_slack_escapes_a_job_name_that_tries_to_ping_the_channel(webhook_receiver, idle_alert):
    alert = idle_alert(workload="job 77 (<!channel> & <@U024BE7LH>)")
    deliver(alert, NOBODY, DeliverySettings(webhooks=(webhook_receiver.settings("slack"),)))

    body = webhook_receiver.requests[0].json()
    everything = body["text"] + _slack_text(body)
    assert "<!channel>" not in everything
    assert "<@U024BE7LH>" not in everything
    assert "&lt;!channel&gt; &amp; &lt;@U024BE7LH&gt;" in everything


def test_teams_body_is_a_message_with_one_adaptive_card(webhook_receiver, idle_alert):
    [result] = deliver(idle_alert(), NOBODY,
                       DeliverySettings(webhooks=(webhook_receiver.settings("teams"),)))

    assert result.ok, result
    body = webhook_receiver.requests[0].json()
    assert body["type"] == "message"
    [attachment] = body["attachments"]
    assert attachment["contentType"] == "application/vnd.microsoft.card.adaptive"
    card = attachment["content"]
    assert card["type"] == "AdaptiveCard"
    assert card["version"] == "1.4"
    assert card["$schema"] == "http://adaptivecards.io/schemas/adaptive-card.json"
    [action] = card["actions"]
    assert action == {"type": "Action.OpenUrl", "title": "Open on the dashboard",
                      "url": "https://ledger.example.org/incidents?cluster=alpha&job=1234"}
    [fact_set] = [b for b in card["body"] if b["type"] == "FactSet"]
    facts = {f["title"]: f["value"] for f in fact_set["facts"]}
    assert facts["GPUs"] == "2 (GPU-0a1b, GPU-2c3d)"
    assert facts["Idle for"] == "1 h 7 min"
    assert facts["Cost so far"] == "5.58 EUR"
    assert facts["Node"] == "gpu-node-07"
    assert facts["Owner"] == "Alice Example, team vision, cost centre CC-4711"
    assert any("job 1234 (train-llm)" in b.get("text", "") for b in card["body"])


def test_teams_card_does_not_turn_a_job_name_into_a_link(webhook_receiver, idle_alert):
    alert = idle_alert(workload="job 5 ([click](https://evil.example))")
    deliver(alert, NOBODY, DeliverySettings(webhooks=(webhook_receiver.settings("teams"),)))

    card = webhook_receiver.requests[0].json()["attachments"][0]["content"]
    texts = json.dumps(card["body"])
    assert "](https://evil.example)" not in texts
    assert "[click] (https://evil.example)" in texts


def test_teams_card_without_a_link_has_no_action(webhook_receiver, idle_alert):
    deliver(idle_alert(link=None), NOBODY,
            DeliverySettings(webhooks=(webhook_receiver.settings("teams"),)))

    card = webhook_receiver.requests[0].json()["attachments"][0]["content"]
    assert card["actions"] == []


def test_json_body_is_the_alert_with_exact_amounts_and_utc_times(webhook_receiver, idle_alert):
    alert = idle_alert(kind="digest", digest_rows=(("job 1 (a)", 3.5, Decimal("7.00")),
                                                   ("pod ns/b", 1.25, None)))
    deliver(alert, NOBODY, DeliverySettings(webhooks=(webhook_receiver.settings("json"),)))

    body = webhook_receiver.requests[0].json()
    assert body["key"] == alert.key
    assert body["kind"] == "digest"
    assert body["cost_so_far"] == "5.5750"
    assert body["idle_since"] == "2026-01-05T09:55:00Z"
    assert datetime.fromisoformat(body["as_of"]) == datetime.fromisoformat("2026-01-05T11:02Z")
    assert body["gpus"] == ["GPU-0a1b", "GPU-2c3d"]
    assert body["digest_rows"] == [["job 1 (a)", 3.5, "7.00"], ["pod ns/b", 1.25, None]]
    assert "job 1 (a): 3.5 idle GPU-hours, 7.00 EUR" in body["text"]
    assert "pod ns/b: 1.2 idle GPU-hours, not priced" in body["text"]


def test_500_then_200_is_retried_once_and_delivered(webhook_receiver, idle_alert):
    webhook_receiver.fail_next(1, status=500)
    [result] = deliver(idle_alert(), NOBODY,
                       DeliverySettings(webhooks=(webhook_receiver.settings("slack"),)))

    assert result.ok, result
    assert "after 2 attempts" in result.detail
    first, second = webhook_receiver.requests
    assert first.body == second.body


def test_404_is_not_retried_and_names_the_answer_not_the_url(webhook_receiver, idle_alert):
    webhook_receiver.fail_next(1, status=404)
    settings = webhook_receiver.settings("slack", url=webhook_receiver.url("/services/T0/B0/s3"))
    [result] = deliver(idle_alert(), NOBODY, DeliverySettings(webhooks=(settings,)))

    assert not result.ok
    assert result.detail.startswith("HTTP 404")
    assert "receiver failure planted by the test" in result.detail
    assert "/services/T0/B0/s3" not in result.detail
    assert len(webhook_receiver.requests) == 1


def test_429_waits_as_retry_after_asks(webhook_receiver, idle_alert):
    webhook_receiver.fail_next(1, status=429, headers={"Retry-After": "1"})
    started = time.monotonic()
    [result] = deliver(idle_alert(), NOBODY,
                       DeliverySettings(webhooks=(webhook_receiver.settings("json"),)))

    assert result.ok, result
    assert time.monotonic() - started >= 1.0
    assert len(webhook_receiver.requests) == 2


def test_persistent_503_gives_up_after_three_attempts(webhook_receiver, idle_alert):
    webhook_receiver.fail_next(5, status=503)
    [result] = deliver(idle_alert(), NOBODY,
                       DeliverySettings(webhooks=(webhook_receiver.settings("teams"),)))

    assert not result.ok
    assert "HTTP 503" in result.detail
    assert "after 3 attempts" in result.detail
    assert len(webhook_receiver.requests) == 3


def test_url_and_bearer_token_come_from_files_read_at_send_time(webhook_receiver, idle_alert,
                                                                tmp_path):
    url_file, token_file = tmp_path / "hook-url", tmp_path / "hook-token"
    url_file.write_text(webhook_receiver.url("/from-file") + "\n")
    token_file.write_text("tok-123\n")
    for secret in (url_file, token_file):
        secret.chmod(0o640)
    settings = WebhookSettings(name="ops", url_file=url_file, bearer_token_file=token_file,
                               headers={"X-Site": "alpha"})
    [result] = deliver(idle_alert(), NOBODY, DeliverySettings(webhooks=(settings,)))

    assert result.ok, result
    [request] = webhook_receiver.requests
    assert request.path == "/from-file"
    assert request.headers["authorization"] == "Bearer tok-123"
    assert request.headers["x-site"] == "alpha"
    assert json.loads(request.body)["key"] == "slurm/alpha/job-1234/idle_first"


def test_dead_port_fails_within_the_timeout_and_the_next_webhook_still_gets_it(
        dead_port, webhook_receiver, idle_alert):
    dead = WebhookSettings(name="dead", url=f"http://127.0.0.1:{dead_port}/x", timeout_s=2.0)
    started = time.monotonic()
    first, second = deliver(idle_alert(), NOBODY, DeliverySettings(
        webhooks=(dead, webhook_receiver.settings("json"))))
    elapsed = time.monotonic() - started

    assert (first.channel, first.ok) == ("webhook:dead", False)
    assert "connection refused" in first.detail
    assert elapsed < 2.0 + 1.0, elapsed
    assert second.ok
    assert len(webhook_receiver.requests) == 1


def test_silent_receiver_fails_within_the_timeout(silent_port, idle_alert):
    hook = WebhookSettings(name="silent", url=f"http://127.0.0.1:{silent_port}/x", timeout_s=1.0)
    started = time.monotonic()
    [result] = deliver(idle_alert(), NOBODY, DeliverySettings(webhooks=(hook,)))
    elapsed = time.monotonic() - started

    assert not result.ok
    assert "no answer within the timeout" in result.detail
    assert elapsed < 1.0 + 1.0, elapsed


def test_teams_throttling_reported_in_a_200_body_is_retried(webhook_receiver, idle_alert):
    # legacy Teams connectors answer 200 with this text instead of a 429
    # (MicrosoftDocs/msteams-docs connectors-using.md, "Rate limiting for connectors")
    webhook_receiver.fail_next(1, status=200,
                               body=b"Microsoft Teams endpoint returned HTTP error 429")
    [result] = deliver(idle_alert(), NOBODY,
                       DeliverySettings(webhooks=(webhook_receiver.settings("teams"),)))

    assert result.ok, result
    assert "after 2 attempts" in result.detail
    assert len(webhook_receiver.requests) == 2


def test_https_receiver_is_verified_with_the_sites_ca_file(tls_webhook_receiver, idle_alert,
                                                           test_certificate):
    trusted = tls_webhook_receiver.settings("slack", ca_file=test_certificate.cert_file)
    untrusted = WebhookSettings(name="untrusted", url=tls_webhook_receiver.url("/x"),
                                format="slack")

    ok, refused = deliver(idle_alert(), NOBODY,
                          DeliverySettings(webhooks=(trusted, untrusted)))

    assert ok.ok, ok
    assert not refused.ok
    assert "certificate does not verify" in refused.detail
    assert "attempts" not in refused.detail  # a certificate problem is not retried
    assert len(tls_webhook_receiver.requests) == 1
