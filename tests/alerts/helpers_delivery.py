"""Site-file delivery tables that point at the suite's real SMTP server and HTTP receiver
(tests/alerts/conftest.py)."""

from tests.alerts.conftest import USERNAME, SmtpServer, WebhookReceiver


def delivery_tables(smtp: SmtpServer, hook: WebhookReceiver) -> str:
    return f"""
[gpuledger.alerts.smtp]
host = "{smtp.host}"
port = {smtp.port}
starttls = true
username = "{USERNAME}"
password_file = "{smtp.password_file}"
sender = "gpuledger@cluster.example.org"
ca_file = "{smtp.ca_file}"
timeout_s = 10

[[gpuledger.alerts.webhook]]
name = "ops-chat"
url = "{hook.url('/slack')}"
format = "slack"
"""


def mails(smtp: SmtpServer) -> list[tuple[tuple[str, ...], str]]:
    return sorted((m.rcpt_tos, str(m.message["Subject"])) for m in smtp.messages)
