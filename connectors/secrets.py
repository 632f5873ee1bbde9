"""Secrets kept out of messages, logs and metadata (issue #28, the probe's findings).

* ``check_secret_file``: a file holding a password or token must be a regular file that not
  every user can read (``chmod o-r``); group-readable is allowed, for a group of service accounts
  that run gpuledger. The alert secrets (gpuledger/alerts) and the source secrets (Prometheus
  bearer token and basic-auth password) follow this one rule.
* ``without_credentials``: a URL with its ``user:password@`` part taken out, for every place a
  URL is shown or stored (doctor, load, Dagster metadata, errors).
* ``redact``: text from elsewhere (an error body a proxy may echo, an exception) with the known
  secret values, ``Authorization``-like headers, bearer and basic credentials and URL
  credentials replaced by ``***``; ``excerpt`` cuts it to a length after redacting, so a cut
  never leaves half a secret.
"""

from __future__ import annotations

import re
import stat
from collections.abc import Iterable
from pathlib import Path

MASK = "***"
_URL_USERINFO = re.compile(r"(?<=://)[^/@\s]*@")
_HEADERS = re.compile(
    r"(?i)\b((?:proxy-)?authorization|cookie|set-cookie|x-[a-z0-9-]*(?:token|key|secret|auth)"
    r"[a-z0-9-]*|api[-_]?key|password|passwd|token|secret)(\"?\s*[:=]\s*\"?)([^\s\",;&]+)")
_SCHEMES = re.compile(r"(?i)\b(bearer|basic|token)\s+[A-Za-z0-9._~+/=-]{4,}")


class SecretFileError(OSError):
    """A secret file that is missing, not a regular file, or readable by every user."""


#: where the kubelet projects a pod's secrets and service-account token (mode 0644 by default,
#: readable by the container's own users only): accepted as they are
KUBELET_SECRET_DIRS = (Path("/var/run/secrets"), Path("/run/secrets"))


def check_secret_file(path: Path) -> None:
    """Refuse a secret file that is missing, not a regular file, or readable by everyone.

    World-readable is refused rather than warned about: a warning in a sensor log is easy to
    miss, and the fix (``chmod o-r``) is one command. A file the kubelet projects into a pod
    (``KUBELET_SECRET_DIRS``: the in-cluster service-account token) is exempt from the mode
    rule: its mode is the kubelet's, and only the pod's containers see it."""
    try:
        info = Path(path).stat()
    except OSError as exc:
        msg = f"{path}: cannot read the secret file: {exc.strerror or exc}"
        raise SecretFileError(msg) from None
    if not stat.S_ISREG(info.st_mode):
        msg = f"{path}: expected a regular file holding a secret, found something else"
        raise SecretFileError(msg)
    projected = any(Path(path).absolute().is_relative_to(d) for d in KUBELET_SECRET_DIRS)
    if info.st_mode & stat.S_IROTH and not projected:
        msg = (f"{path}: expected a secret file not readable by every user (chmod o-r), "
               f"found mode {stat.filemode(info.st_mode)}")
        raise SecretFileError(msg)


def without_credentials(url: str) -> str:
    """``url`` without any ``user:password@`` part."""
    return _URL_USERINFO.sub("", url)


def redact(text: str, secrets: Iterable[str | None] = ()) -> str:
    """``text`` with secrets replaced by ``***``: the given values (4 characters or more),
    credential-like headers and parameters, bearer/basic credentials, URL userinfo."""
    for secret in sorted({s for s in secrets if s and len(s) >= 4}, key=len, reverse=True):
        text = text.replace(secret, MASK)
    text = _URL_USERINFO.sub(f"{MASK}@", text)
    text = _SCHEMES.sub(lambda m: f"{m.group(1)} {MASK}", text)
    return _HEADERS.sub(lambda m: f"{m.group(1)}{m.group(2)}{MASK}", text)


def excerpt(body: bytes | str, secrets: Iterable[str | None] = (), limit: int = 300) -> str:
    """At most `limit` characters of `body`, redacted before it is cut."""
    text = body.decode("utf-8", "replace") if isinstance(body, bytes) else body
    return redact(text[:limit * 4], secrets)[:limit]
