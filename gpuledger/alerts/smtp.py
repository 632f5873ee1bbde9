"""E-mail an alert with smtplib: STARTTLS or implicit TLS, CA verification on, AUTH only over
an encrypted connection (unless the site allows it for a local relay), the password read from
its file at send time (docs/alerts-delivery.md)."""

import smtplib
import ssl
from datetime import UTC, datetime
from email.message import EmailMessage
from email.policy import SMTP as SMTP_POLICY
from email.utils import format_datetime, make_msgid, parseaddr

from gpuledger.alerts.delivery_config import SecretFileError, SmtpSettings, read_secret
from gpuledger.alerts.message import Alert, Recipients, one_line, plain_text, subject

ALERT_HEADER = "X-Gpuledger-Alert"


class PlaintextAuthRefusedError(smtplib.SMTPException):
    """AUTH would cross the network unencrypted: refused before the password is read."""


class StartTlsMissingError(smtplib.SMTPException):
    """The site asked for STARTTLS and the server does not offer it: never fall back."""


def valid_address(address: str) -> bool:
    """A bare ``local@domain`` without spaces or control characters."""
    _name, parsed = parseaddr(address)
    return (bool(parsed) and parsed == address.strip() and "@" in parsed
            and not any(c.isspace() or ord(c) < 32 for c in parsed)
            and not parsed.startswith("@") and not parsed.endswith("@"))


def build_email(alert: Alert, recipients: Recipients, settings: SmtpSettings) -> EmailMessage:
    """The MIME message (one text/plain part); built once so retries keep its Message-ID."""
    msg = EmailMessage(policy=SMTP_POLICY)
    msg["Subject"] = subject(alert)
    msg["From"] = settings.sender
    if recipients.to:
        msg["To"] = ", ".join(recipients.to)
    if recipients.cc:
        msg["Cc"] = ", ".join(recipients.cc)
    if settings.reply_to:
        msg["Reply-To"] = settings.reply_to
    msg["Date"] = format_datetime(datetime.now(UTC))
    msg["Message-ID"] = make_msgid(domain=settings.sender.rpartition("@")[2] or None)
    msg[ALERT_HEADER] = one_line(alert.key)
    msg["X-Gpuledger-Kind"] = alert.kind
    # RFC 3834: vacation responders and ticket systems do not answer an automatic message
    msg["Auto-Submitted"] = "auto-generated"
    msg.set_content(plain_text(alert))
    return msg


def _tls_context(settings: SmtpSettings) -> ssl.SSLContext:
    # verification of the certificate and of the host name is on; ca_file adds a private CA
    return ssl.create_default_context(cafile=str(settings.ca_file) if settings.ca_file else None)


def send_once(msg: EmailMessage, envelope_to: list[str], settings: SmtpSettings,
              timeout_s: float) -> dict[str, tuple[int, bytes]]:
    """One connection: TLS, AUTH, MAIL/RCPT/DATA. Returns the recipients the server refused
    (the others got the message); raises smtplib/OS errors otherwise."""
    if settings.username and not settings.encrypted and not settings.allow_plaintext_auth:
        msg_text = (f"refusing to send the password for {settings.username!r} to "
                    f"{settings.host}:{settings.port} over an unencrypted connection (set "
                    "starttls = true or ssl = true; allow_plaintext_auth = true only for a "
                    "local relay)")
        raise PlaintextAuthRefusedError(msg_text)
    context = _tls_context(settings)
    if settings.ssl:
        client: smtplib.SMTP = smtplib.SMTP_SSL(settings.host, settings.port,
                                                timeout=timeout_s, context=context)
    else:
        client = smtplib.SMTP(settings.host, settings.port, timeout=timeout_s)
    try:
        client.ehlo()
        if settings.starttls and not settings.ssl:
            if not client.has_extn("starttls"):
                text = (f"{settings.host}:{settings.port} does not offer STARTTLS; not sending "
                        "without encryption")
                raise StartTlsMissingError(text)
            client.starttls(context=context)
            client.ehlo()
        if settings.username:
            if settings.password_file is None:
                text = f"username {settings.username!r} is set but password_file is not"
                raise smtplib.SMTPAuthenticationError(530, text.encode())
            client.login(settings.username, read_secret(settings.password_file))
        refused = client.send_message(msg, from_addr=settings.sender, to_addrs=envelope_to)
    except BaseException:
        client.close()
        raise
    try:  # the message is accepted: a failing QUIT must not cause a second copy
        client.quit()
    except (smtplib.SMTPException, OSError):
        client.close()
    return refused


def is_transient(exc: BaseException) -> bool:
    """Worth another try: the network, a timeout, or a 4xx reply (greylisting, a busy
    server). Not: a certificate that does not verify, a wrong password, a 5xx refusal."""
    if isinstance(exc, PlaintextAuthRefusedError | StartTlsMissingError | SecretFileError):
        return False
    if isinstance(exc, smtplib.SMTPRecipientsRefused):
        return all(400 <= code < 500 for code, _ in exc.recipients.values())
    if isinstance(exc, smtplib.SMTPResponseException):
        return 400 <= exc.smtp_code < 500
    if isinstance(exc, smtplib.SMTPServerDisconnected | smtplib.SMTPConnectError):
        return True
    if isinstance(exc, ssl.SSLError | ssl.CertificateError):
        return False
    return isinstance(exc, OSError)  # refused, reset, timed out


def describe(exc: BaseException, settings: SmtpSettings) -> str:
    """The error in words for the delivery log (never the password)."""
    server = f"{settings.host}:{settings.port}"
    if isinstance(exc, smtplib.SMTPAuthenticationError):
        return (f"{server} refused the login of {settings.username!r}: {exc.smtp_code} "
                f"{reply_text(exc.smtp_error)}")
    if isinstance(exc, smtplib.SMTPRecipientsRefused):
        refused = ", ".join(f"{a} ({code} {reply_text(m)})" for a, (code, m) in
                            exc.recipients.items())
        return f"{server} refused every recipient: {refused}"
    if isinstance(exc, smtplib.SMTPResponseException):
        return f"{server} answered {exc.smtp_code} {reply_text(exc.smtp_error)}"
    if isinstance(exc, ssl.SSLCertVerificationError):
        return (f"{server}: the server's certificate does not verify ({exc.verify_message}); "
                "set ca_file for a private CA")
    # smtplib turns a read timeout into SMTPServerDisconnected; the timeout is its context
    if isinstance(exc, TimeoutError) or isinstance(exc.__context__, TimeoutError):
        return f"{server}: no answer within the timeout ({settings.timeout_s:g} s)"
    if isinstance(exc, ConnectionRefusedError):
        return f"{server}: connection refused"
    return f"{server}: {type(exc).__name__}: {exc}"


def reply_text(text: bytes | str) -> str:
    if isinstance(text, bytes):
        text = text.decode("utf-8", "replace")
    return one_line(text)
