"""POST an alert as JSON to a webhook with urllib (docs/alerts-delivery.md).

The body is Slack's, Teams' or the plain ``json`` shape (``gpuledger.alerts.message``).
Redirects are not followed: urllib would turn a redirected POST into a GET without its body,
and a webhook that moved should be an error a person sees.
"""

import json
import ssl
import urllib.error
import urllib.request
from email.message import Message

from gpuledger.alerts.delivery_config import (
    SecretFileError,
    WebhookSettings,
    check_url,
    read_secret,
)
from gpuledger.alerts.message import Alert, json_payload, slack_payload, teams_payload

USER_AGENT = "gpuledger-alerts/1"
BODY_SHOWN = 200  # characters of a receiver's error reply kept in the delivery log

PAYLOADS = {"slack": slack_payload, "teams": teams_payload, "json": json_payload}


class ThrottledError(OSError):
    """A Teams connector answered 200 with "Microsoft Teams endpoint returned HTTP error 429"
    in its body: connectors do not send a real 429 (MicrosoftDocs/msteams-docs,
    connectors-using.md, "Rate limiting for connectors"), so this is retried like one."""


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, req, fp, code, msg, headers, newurl):
        return None  # urllib then raises the 3xx as an HTTPError


def payload(alert: Alert, settings: WebhookSettings) -> dict:
    return PAYLOADS[settings.format](alert)


def body_bytes(alert: Alert, settings: WebhookSettings) -> bytes:
    return json.dumps(payload(alert, settings), ensure_ascii=False).encode("utf-8")


def post_once(body: bytes, settings: WebhookSettings, timeout_s: float) -> str:
    """One POST. Returns a short description of the 2xx answer; raises HTTPError (non-2xx),
    URLError / OSError (network) or SecretFileError."""
    url = settings.resolved_url()
    headers = {**settings.headers, "Content-Type": "application/json; charset=utf-8",
               "User-Agent": USER_AGENT}
    if settings.bearer_token_file is not None:
        headers["Authorization"] = f"Bearer {read_secret(settings.bearer_token_file).strip()}"
    check_url(url, f"webhook {settings.name}")
    # the scheme is http or https (check_url): no file: or custom schemes reach urllib
    request = urllib.request.Request(url, data=body, method="POST", headers=headers)  # noqa: S310
    context = ssl.create_default_context(
        cafile=str(settings.ca_file) if settings.ca_file else None)
    opener = urllib.request.build_opener(_NoRedirect(),
                                         urllib.request.HTTPSHandler(context=context))
    with opener.open(request, timeout=timeout_s) as response:
        reply = response.read(BODY_SHOWN + 1).decode("utf-8", "replace")
        if "HTTP error 429" in reply:
            raise ThrottledError(_short(reply))
        return f"HTTP {response.status}" + (f" {_short(reply)}" if reply.strip() else "")


def is_transient(exc: BaseException) -> bool:
    """Worth another try: timeouts, refused connections, 408, 425, 429 and 5xx. Not: other 4xx
    (a revoked Slack URL answers 403/404 and stays so), certificates, a secret file."""
    if isinstance(exc, SecretFileError):
        return False
    if isinstance(exc, ThrottledError):
        return True
    if isinstance(exc, urllib.error.HTTPError):
        return exc.code in (408, 425, 429) or exc.code >= 500
    if isinstance(exc, urllib.error.URLError):
        exc = exc.reason if isinstance(exc.reason, BaseException) else exc
        if isinstance(exc, urllib.error.URLError):
            return False  # e.g. "unknown url type"
    if isinstance(exc, ssl.SSLError | ssl.CertificateError):
        return False
    return isinstance(exc, OSError)


def retry_after(exc: BaseException) -> float | None:
    """Seconds a 429/503 asks to wait (``Retry-After: <seconds>``), if given."""
    if not isinstance(exc, urllib.error.HTTPError) or exc.headers is None:
        return None
    value = exc.headers.get("Retry-After") if isinstance(exc.headers, Message) else None
    try:
        return max(0.0, float(value)) if value is not None else None
    except ValueError:
        return None  # an HTTP date: the backoff applies


def describe(exc: BaseException, settings: WebhookSettings) -> str:
    """The error in words for the delivery log; never the URL (it is the secret)."""
    if isinstance(exc, urllib.error.HTTPError):
        try:
            reply = exc.read(BODY_SHOWN + 1).decode("utf-8", "replace")
        except (OSError, ValueError):
            reply = ""
        return f"HTTP {exc.code} {exc.reason}" + (f": {_short(reply)}" if reply.strip() else "")
    if isinstance(exc, urllib.error.URLError) and isinstance(exc.reason, BaseException):
        exc = exc.reason
    if isinstance(exc, ssl.SSLCertVerificationError):
        return (f"the receiver's certificate does not verify ({exc.verify_message}); set "
                "ca_file for a private CA")
    if isinstance(exc, ThrottledError):
        return f"the receiver is throttling: {exc}"
    if isinstance(exc, TimeoutError):
        return "no answer within the timeout"
    if isinstance(exc, ConnectionRefusedError):
        return "connection refused"
    return f"{type(exc).__name__}: {exc}"


def _short(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= BODY_SHOWN else text[:BODY_SHOWN] + "…"
