"""E-mail delivery against a real SMTP server (aiosmtpd on 127.0.0.1, tests/alerts/conftest.py):
STARTTLS with a certificate checked against its CA, AUTH with the password from its file, the
headers and body a person reads, and every way it must refuse or fail without losing the
other channels."""

import time

from gpuledger.alerts.delivery import deliver
from gpuledger.alerts.delivery_config import DeliverySettings, SmtpSettings
from gpuledger.alerts.message import Recipients

OWNER = Recipients(to=("alice@example.org",), cc=("gpu-admins@example.org", "ops@example.org"))


def test_email_arrives_over_starttls_with_auth_to_and_cc(smtp_server, idle_alert):
    alert = idle_alert()
    results = deliver(alert, OWNER, DeliverySettings(smtp=smtp_server.settings()))

    assert [(r.channel, r.ok) for r in results] == [("email", True)], results
    assert "alice@example.org" in results[0].detail
    [mail] = smtp_server.messages
    assert mail.tls, "the message must travel over TLS after STARTTLS"
    assert mail.login == "gpuledger-bot"
    assert mail.mail_from == "gpuledger@cluster.example.org"
    assert set(mail.rcpt_tos) == {"alice@example.org", "gpu-admins@example.org",
                                  "ops@example.org"}
    msg = mail.message
    assert msg["To"] == "alice@example.org"
    assert msg["Cc"] == "gpu-admins@example.org, ops@example.org"
    assert msg["X-Gpuledger-Alert"] == alert.key
    assert msg["Message-ID"].startswith("<")
    assert msg["Message-ID"].endswith(">")
    assert msg["Date"]
    assert msg["Auto-Submitted"] == "auto-generated"
    assert "job 1234 (train-llm)" in msg["Subject"]
    assert msg.get_content_type() == "text/plain"


def test_email_over_implicit_tls_arrives_with_auth(make_smtp_server, idle_alert):
    smtps = make_smtp_server(implicit_tls=True)
    settings = smtps.settings()
    assert (settings.ssl, settings.starttls) == (True, False)

    [result] = deliver(idle_alert(), OWNER, DeliverySettings(smtp=settings))

    assert result.ok, result
    [mail] = smtps.messages
    assert mail.tls
    assert mail.login == "gpuledger-bot"


def test_email_body_names_job_gpus_idle_time_cost_and_link(smtp_server, idle_alert):
    deliver(idle_alert(), OWNER, DeliverySettings(smtp=smtp_server.settings()))

    body = smtp_server.messages[0].message.get_content()
    for fact in ("job 1234 (train-llm)", "cluster alpha", "gpu-node-07", "GPU-0a1b",
                 "GPU-2c3d", "1 h 7 min", "5.58 EUR", "Alice Example", "scancel",
                 "https://ledger.example.org/incidents?cluster=alpha&job=1234"):
        assert fact in body, f"{fact!r} missing from the body:\n{body}"


def test_unpriced_kubernetes_pod_says_not_priced_and_how_to_free_the_gpus(smtp_server,
                                                                          idle_alert):
    alert = idle_alert(domain="kubernetes", workload="pod research/train-0", cost_so_far=None,
                       currency=None)
    deliver(alert, OWNER, DeliverySettings(smtp=smtp_server.settings()))

    body = smtp_server.messages[0].message.get_content()
    assert "Cost so far:    not priced" in body
    assert "delete the pod" in body
    assert "pod research/train-0" in smtp_server.messages[0].message["Subject"]


def test_temporary_451_is_retried_and_delivered_once(smtp_server, idle_alert):
    smtp_server.temporary_failures = 1
    [result] = deliver(idle_alert(), OWNER, DeliverySettings(smtp=smtp_server.settings()))

    assert result.ok, result
    assert "after 2 attempts" in result.detail
    assert smtp_server.data_attempts == 2
    assert len(smtp_server.messages) == 1


def test_permanent_550_for_one_recipient_still_delivers_to_the_others(smtp_server, idle_alert):
    recipients = Recipients(to=("alice@example.org",), cc=("bad@example.org",))
    smtp_server.unknown_users.add("bad@example.org")
    [result] = deliver(idle_alert(), recipients, DeliverySettings(smtp=smtp_server.settings()))

    assert result.ok, result
    assert "refused: bad@example.org (550" in result.detail
    assert smtp_server.messages[0].rcpt_tos == ("alice@example.org",)
    assert smtp_server.messages[0].message["Cc"] == "bad@example.org"


def test_every_recipient_refused_is_a_failed_result(smtp_server, idle_alert):
    smtp_server.unknown_users.update({"alice@example.org", "gpu-admins@example.org",
                                      "ops@example.org"})
    [result] = deliver(idle_alert(), OWNER, DeliverySettings(smtp=smtp_server.settings()))

    assert not result.ok
    assert "refused every recipient" in result.detail
    assert "550" in result.detail
    assert smtp_server.messages == []


def test_non_ascii_names_arrive_intact(smtp_server, idle_alert):
    alert = idle_alert(workload="job 88 (Übung-β 训练)", person="Zoë Ñúñez")
    [result] = deliver(alert, OWNER, DeliverySettings(smtp=smtp_server.settings()))

    assert result.ok, result
    msg = smtp_server.messages[0].message
    assert "job 88 (Übung-β 训练)" in msg["Subject"]
    assert msg.get_content().startswith("Hello Zoë Ñúñez,")


def test_newline_in_a_job_name_cannot_add_a_header(smtp_server, idle_alert):
    alert = idle_alert(workload="job 9 (x\r\nBcc: victim@example.org)")
    [result] = deliver(alert, OWNER, DeliverySettings(smtp=smtp_server.settings()))

    assert result.ok, result
    msg = smtp_server.messages[0].message
    assert msg["Bcc"] is None
    assert "victim@example.org" not in smtp_server.messages[0].rcpt_tos
    assert "\n" not in msg["Subject"]


def test_wrong_password_fails_email_and_the_webhook_still_gets_its_message(
        smtp_server, webhook_receiver, idle_alert, tmp_path):
    wrong = tmp_path / "wrong-password"
    wrong.write_text("not the password\n")
    wrong.chmod(0o600)
    settings = DeliverySettings(smtp=smtp_server.settings(password_file=wrong),
                                webhooks=(webhook_receiver.settings("slack"),))

    email, hook = deliver(idle_alert(), OWNER, settings)

    assert (email.channel, email.ok) == ("email", False)
    assert "refused the login of 'gpuledger-bot'" in email.detail
    assert "535" in email.detail
    assert "not the password" not in email.detail
    # smtplib tries each mechanism the server offers in one connection; no second connection
    assert len(smtp_server.auth_connections) == 1, "a wrong password is not retried"
    assert smtp_server.messages == []
    assert (hook.channel, hook.ok) == ("webhook:slack", True)
    assert len(webhook_receiver.requests) == 1


def test_auth_over_plaintext_is_refused_before_the_password_is_sent(make_smtp_server,
                                                                    idle_alert):
    plain = make_smtp_server(tls=False)
    settings = plain.settings(starttls=False, ssl=False)

    [result] = deliver(idle_alert(), OWNER, DeliverySettings(smtp=settings))

    assert not result.ok
    assert "unencrypted" in result.detail
    assert plain.auth_attempts == []
    assert plain.messages == []


def test_plaintext_auth_goes_through_only_when_the_site_allows_it(make_smtp_server,
                                                                  idle_alert):
    plain = make_smtp_server(tls=False)
    settings = plain.settings(starttls=False, allow_plaintext_auth=True)

    [result] = deliver(idle_alert(), OWNER, DeliverySettings(smtp=settings))

    assert result.ok, result
    assert plain.auth_attempts == [("LOGIN", "gpuledger-bot")] or plain.auth_attempts == [
        ("PLAIN", "gpuledger-bot")]
    assert not plain.messages[0].tls


def test_starttls_wanted_but_not_offered_sends_nothing(make_smtp_server, idle_alert):
    plain = make_smtp_server(tls=False)
    [result] = deliver(idle_alert(), OWNER,
                       DeliverySettings(smtp=plain.settings(starttls=True)))

    assert not result.ok
    assert "does not offer STARTTLS" in result.detail
    assert plain.messages == []
    assert plain.auth_attempts == []


def test_certificate_from_an_unknown_ca_is_refused(smtp_server, idle_alert):
    [result] = deliver(idle_alert(), OWNER,
                       DeliverySettings(smtp=smtp_server.settings(ca_file=None)))

    assert not result.ok
    assert "certificate does not verify" in result.detail
    assert smtp_server.auth_attempts == []
    assert smtp_server.messages == []


def test_world_readable_password_file_is_refused_at_send_time(smtp_server, idle_alert):
    smtp_server.password_file.chmod(0o644)
    [result] = deliver(idle_alert(), OWNER, DeliverySettings(smtp=smtp_server.settings()))

    assert not result.ok
    assert "chmod o-r" in result.detail
    assert smtp_server.auth_attempts == []
    assert smtp_server.messages == []


def test_no_address_is_a_failed_result_not_an_exception(smtp_server, idle_alert):
    [result] = deliver(idle_alert(), Recipients(to=(), cc=()),
                       DeliverySettings(smtp=smtp_server.settings()))

    assert not result.ok
    assert "no e-mail address" in result.detail
    assert smtp_server.messages == []


def test_dead_smtp_port_fails_within_the_timeout(dead_port, idle_alert):
    settings = SmtpSettings(host="127.0.0.1", port=dead_port, starttls=True, timeout_s=2.0)
    started = time.monotonic()
    [result] = deliver(idle_alert(), OWNER, DeliverySettings(smtp=settings))
    elapsed = time.monotonic() - started

    assert not result.ok
    assert "connection refused" in result.detail
    assert "after 3 attempts" in result.detail  # refused is transient: retried with backoff
    assert elapsed < 2.0 + 0.5, elapsed


def test_silent_smtp_server_fails_within_the_timeout(silent_port, idle_alert):
    settings = SmtpSettings(host="127.0.0.1", port=silent_port, timeout_s=1.0)
    started = time.monotonic()
    [result] = deliver(idle_alert(), OWNER, DeliverySettings(smtp=settings))
    elapsed = time.monotonic() - started

    assert not result.ok
    assert "no answer within the timeout" in result.detail
    assert elapsed < 1.0 + 1.0, elapsed
