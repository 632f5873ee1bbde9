"""Read raw samples from Prometheus into long Polars frames.

Accounting never reads ``query_range`` of gauges: a backfilled (or remote-read) series has no
staleness marker, so PromQL keeps returning its last value for the 5-minute lookback and a
``query_range`` count over a week came out 3 % too high on the lab fixture. Instead every read is
a *raw-sample* instant query ``selector[<window>]`` evaluated at the window's end, over
non-overlapping windows (default 6 h):

* the range of each request is ``window + 1 ms`` so that both range conventions return every
  sample of ``[window start, window end]`` -- Prometheus 2.x selects ``[t - r, t]`` (closed), 3.x
  ``(t - r, t]`` (left-open);
* each window's samples are then kept only if ``window start <= ts < window end`` and the whole
  result is de-duplicated on (series, ts), so a sample exactly on a window edge is counted once
  whatever the server version;
* the frame is long: one row per sample with ``ts`` (naive ``Datetime("us")``, UTC), ``value``
  (Float64; ``NaN``/``+Inf`` kept), ``__name__`` and one String column per label (null where a
  series lacks the label), sorted by the label columns then ``ts``.

JSON goes straight into Polars (the sample arrays as CSV through ``pl.read_csv``, the rest through
``json.loads``; ``pl.read_json`` for bodies of another shape): no per-sample Python objects except
for bodies under 16 KiB, and the cyclic GC paused while big bodies are parsed. No pandas. Where
``query_range`` is used at all (dashboards), requests are split so that none asks for more than
11,000 points per series.

Errors: connection failures, timeouts, truncated bodies, HTTP 429 and 5xx are retried with
exponential backoff; then (and at once for other 4xx) a ``SourceError`` naming the URL and the
query is raised. A metric that does not exist in the window is not an error: the frame is empty
(``RAW_SAMPLE_BASE`` columns) and the caller decides whether to warn.
"""

from __future__ import annotations

import contextlib
import json
import logging
import time
from collections.abc import Callable, Iterable, Iterator
from datetime import datetime, timedelta
from pathlib import Path

import polars as pl
import requests
import urllib3
from prometheus_api_client import PrometheusConnect
from urllib3.util.retry import Retry

from connectors.errors import SourceError
from connectors.kubernetes.metrics_source import PrometheusConfig
from connectors.kubernetes.promql_selectors import add_matchers
from connectors.kubernetes.sample_frames import (
    empty_raw,
    finish_raw,
    ordered_raw,
    parse_matrix,
    parse_series,
)
from connectors.secrets import (
    SecretFileError,
    check_secret_file,
    excerpt,
    redact,
    without_credentials,
)
from connectors.times import epoch_ms, utc_naive

log = logging.getLogger(__name__)
# Retries are for the person running the ingest: outside connectors.kubernetes, whose notes the
# ingest quiets while it collects them.
retry_log = logging.getLogger("gpuledger.sources.prometheus")

MAX_POINTS_PER_SERIES = 11_000  # Prometheus' hard limit for query_range
RETRY_STATUS = frozenset({408, 429, 500, 502, 503, 504})
# The first window of a metric whose density is not known yet (a probe).
FIRST_WINDOW = timedelta(hours=1)
MIN_WINDOW = timedelta(minutes=1)
_TOO_MANY_SAMPLES = "too many samples"


# --------------------------------------------------------------------------- HTTP source


class PrometheusHttpSource:
    """`MetricsSource` over the Prometheus HTTP API, configured through prometheus-api-client.

    ``client`` is the underlying ``PrometheusConnect`` (its session carries TLS, basic auth, the
    headers and the transport adapter); the raw-sample reads go through that same session but
    parse the body with Polars instead of ``response.json()``.
    """

    def __init__(self, config: PrometheusConfig, *,
                 sleep: Callable[[float], None] = time.sleep) -> None:
        self.config = config
        self._sleep = sleep
        session = requests.Session()
        if config.ca_bundle is not None:
            session.verify = str(config.ca_bundle)
        elif not config.verify_tls:
            session.verify = False
        auth = None
        if config.basic_auth_user is not None:
            password = config.basic_auth_password or ""
            if config.basic_auth_password_file is not None:
                password = _read_secret(config.basic_auth_password_file)
            auth = (config.basic_auth_user, password)
        self.client = PrometheusConnect(
            url=config.base_url,
            headers=self._headers(),
            session=session,
            # retries are ours (below): they also cover bodies cut off mid-read
            retry=Retry(total=0, raise_on_status=False),
            auth=auth,
            timeout=config.timeout_s,
            method=config.method.upper(),
        )
        self._session = session
        self._auth = auth
        self.warnings: list[str] = []  # "warnings" returned by the server, with the query
        self._budget_deadline: float | None = None  # monotonic end of the current window
        # samples per second last seen per metric name: sizes the first window of the next read
        self._density: dict[str, float] = {}

    # ------------------------------------------------------------------ plumbing

    def _secrets(self) -> list[str | None]:
        """Values never shown: the password, the token, the configured headers' values."""
        values = [*(self._auth or ()), *self.config.headers.values()]
        if self.config.bearer_token_file is not None:
            with contextlib.suppress(SourceError):
                values.append(_read_secret(self.config.bearer_token_file))
        return values

    def _headers(self) -> dict[str, str]:
        headers = {
            "Accept": "application/json",
            "Accept-Encoding": "gzip" if self.config.compress else "identity",
            **dict(self.config.headers),
        }
        if self.config.bearer_token_file is not None:
            token = _read_secret(self.config.bearer_token_file)
            headers["Authorization"] = f"Bearer {token}"
        return headers

    def close(self) -> None:
        self.client.close()

    def __enter__(self) -> PrometheusHttpSource:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @contextlib.contextmanager
    def window_budget(self) -> Iterator[None]:
        """Bound every request and retry inside the block by ``config.window_budget_s``."""
        outer = self._budget_deadline
        if self.config.window_budget_s is not None:
            self._budget_deadline = time.monotonic() + self.config.window_budget_s
        try:
            yield
        finally:
            self._budget_deadline = outer

    def _check_budget(self, shown: str, what: str) -> float | None:
        """Seconds left in the window's budget (None: unbounded); SourceError when spent."""
        if self._budget_deadline is None:
            return None
        left = self._budget_deadline - time.monotonic()
        if left <= 0:
            msg = (f"Prometheus at {shown}: query {what!r} not answered within the window's "
                   f"budget of {self.config.window_budget_s:g} s (window_budget_s); nothing of "
                   "the window was written")
            raise SourceError(msg)
        return left

    def _fetch(self, url: str, params: dict[str, str], headers: dict[str, str],
               deadline_s: float) -> tuple[int, bytes, str | None]:
        """One request whose connect and whole body fit in `deadline_s` seconds: status, body
        and where a redirect points. Redirects are not followed: requests drops Authorization
        on a cross-host redirect but sends every other configured header (an API key, a
        tenant id) on to the new host."""
        start = time.monotonic()
        timeout = (min(self.config.connect_timeout_s, deadline_s), deadline_s)
        if self.config.method.upper() == "POST" and "/api/v1/series" not in url:
            response = self._session.post(url, data=params, headers=headers, auth=self._auth,
                                          timeout=timeout, stream=True, allow_redirects=False)
        else:
            response = self._session.get(url, params=params, headers=headers, auth=self._auth,
                                         timeout=timeout, stream=True, allow_redirects=False)
        chunks = []
        try:
            # read1: what one socket read brings (a trickling server cannot hold a read past
            # the deadline by sending a byte just before each socket timeout)
            while chunk := response.raw.read1(1 << 16, decode_content=True):
                chunks.append(chunk)
                if time.monotonic() - start > deadline_s:
                    msg = f"the whole response took longer than {deadline_s:g} s"
                    raise requests.Timeout(msg)
        except (urllib3.exceptions.ProtocolError, urllib3.exceptions.ReadTimeoutError) as exc:
            raise requests.ConnectionError(exc) from exc
        except urllib3.exceptions.DecodeError as exc:
            raise requests.exceptions.ContentDecodingError(exc) from exc
        finally:
            response.close()
        return response.status_code, b"".join(chunks), response.headers.get("Location")

    def _request(self, path: str, params: dict[str, str], what: str) -> bytes:
        """Body of a successful response; retries transient failures, else SourceError."""
        url = f"{self.config.base_url}{path}"
        shown = f"{self.config.display_url}{path}"
        attempts = self.config.retries + 1
        last = ""
        for attempt in range(attempts):
            if attempt:
                pause = self.config.backoff_s * 2 ** (attempt - 1)
                if attempt == 1:  # a person watching sees what the ingest waits for
                    retry_log.warning(
                        "Prometheus at %s: %s; retrying in %g s (attempt %d of %d, each within "
                        "%g s)", shown, last, pause, attempt + 1, attempts, self.config.timeout_s)
                left = self._check_budget(shown, what)
                self._sleep(pause if left is None else min(pause, left))
            left = self._check_budget(shown, what)
            deadline = self.config.timeout_s if left is None else min(self.config.timeout_s,
                                                                      left)
            headers = self._headers()
            self.client.headers = headers
            try:
                status, body, redirect_target = self._fetch(url, params, headers, deadline)
            except (
                requests.ConnectionError,
                requests.Timeout,
                requests.exceptions.ChunkedEncodingError,
                requests.exceptions.ContentDecodingError,
            ) as exc:
                last = redact(f"{type(exc).__name__}: {exc}", self._secrets())
                log.info("prometheus %s attempt %d/%d failed: %s", shown, attempt + 1, attempts,
                         last)
                continue
            except requests.RequestException as exc:
                msg = redact(f"Prometheus at {shown}: query {what!r} failed: "
                             f"{type(exc).__name__}: {exc}", self._secrets())
                raise SourceError(msg) from exc
            if status == 200:
                return body
            if 300 <= status < 400:  # never followed: the headers would go to another host
                where = without_credentials(redirect_target or "?")
                msg = (f"Prometheus at {shown}: expected an answer, found a redirect (HTTP "
                       f"{status}) to {where}: set the url to where it points, so the "
                       "credentials and headers go to the server they are meant for")
                raise SourceError(msg)
            detail = _error_detail(body, self._secrets())
            last = f"HTTP {status}: {detail}"
            if status in RETRY_STATUS:
                log.info("prometheus %s attempt %d/%d: %s", shown, attempt + 1, attempts, last)
                continue
            raise _HttpError(shown, what, status, detail)
        msg = (
            f"Prometheus at {shown} did not answer query {what!r} after {attempts} attempt(s): "
            f"{last}"
        )
        raise SourceError(msg)

    def _note_warnings(self, body: bytes, what: str) -> None:
        if b'"warnings"' not in body[-4096:] and b'"warnings"' not in body[:4096]:
            return
        with contextlib.suppress(ValueError):
            found = json.loads(body).get("warnings") or []
            self.warnings.extend(f"{what}: {w}" for w in found)

    # ------------------------------------------------------------------ MetricsSource

    def raw_samples(self, selector: str, start: datetime, end: datetime) -> pl.DataFrame:
        parts = list(self.iter_raw_samples(selector, start, end))
        return finish_raw(parts, start, end)

    def iter_raw_samples(
        self, selector: str, start: datetime, end: datetime
    ) -> Iterator[pl.DataFrame]:
        """The raw samples window by window (each already limited to its own ``[a, b)``)."""
        selector = add_matchers(selector, self.config.selector)  # the one place (and series)
        start, end = utc_naive(start), utc_naive(end)
        family = selector.split("{", 1)[0].strip() or selector
        a = start
        window = self._next_window(self._density.get(family))
        while a < end:
            b = min(a + window, end)
            samples = 0
            for frame in self._window(selector, a, b):
                samples += frame.height
                yield frame
            seconds = (b - a).total_seconds()
            if samples or b - a >= window:  # a short last window with nothing says little
                self._density[family] = samples / seconds
            window = self._next_window(self._density.get(family))
            a = b

    def _next_window(self, density: float | None) -> timedelta:
        """The window whose response should hold ``samples_per_request`` samples at `density`
        (samples/s), between one minute and ``chunk``; a probe hour when nothing is known."""
        cfg = self.config
        if density is None:
            return min(cfg.chunk, FIRST_WINDOW)
        if density <= 0:
            return cfg.chunk
        fit = timedelta(seconds=int(cfg.samples_per_request / density))
        return max(min(fit, cfg.chunk), min(MIN_WINDOW, cfg.chunk))

    def _window(self, selector: str, a: datetime, b: datetime) -> Iterator[pl.DataFrame]:
        range_ms = epoch_ms(b) - epoch_ms(a) + 1
        query = f"{selector}[{range_ms}ms]"
        params = {"query": query, "time": f"{epoch_ms(b) / 1000:.3f}"}
        try:
            body = self._request("/api/v1/query", params, query)
        except _HttpError as exc:
            # Too many samples for one request (--query.max-samples): halve the window.
            if exc.status == 422 and _TOO_MANY_SAMPLES in exc.detail and b - a > timedelta(
                minutes=1
            ):
                mid = a + (b - a) / 2
                mid = mid.replace(microsecond=(mid.microsecond // 1000) * 1000)
                yield from self._window(selector, a, mid)
                yield from self._window(selector, mid, b)
                return
            raise SourceError(str(exc)) from exc
        self._note_warnings(body, query)
        try:
            frame = parse_matrix(body)
        except (ValueError, pl.exceptions.PolarsError) as exc:
            msg = (
                f"Prometheus at {self.config.display_url}: query {query!r}: expected a matrix JSON "
                f"response, found {body[:200]!r} ({exc})"
            )
            raise SourceError(msg) from exc
        ts = frame["ts"]
        if frame.height and (ts.min() < a or ts.max() >= b):  # type: ignore[operator]
            frame = frame.filter((pl.col("ts") >= a) & (pl.col("ts") < b))
        yield frame

    def series(self, match: str, start: datetime, end: datetime) -> pl.DataFrame:
        match = add_matchers(match, self.config.selector)
        params = {
            "match[]": match,
            "start": f"{epoch_ms(start) / 1000:.3f}",
            "end": f"{(epoch_ms(end) - 1) / 1000:.3f}",
        }
        try:
            body = self._request("/api/v1/series", params, f"series {match}")
        except _HttpError as exc:
            raise SourceError(str(exc)) from exc
        try:
            return parse_series(body)
        except (ValueError, pl.exceptions.PolarsError) as exc:
            msg = f"Prometheus at {self.config.display_url}: series {match!r}: bad response ({exc})"
            raise SourceError(msg) from exc

    # ------------------------------------------------------------------ dashboards only

    def query_range(
        self, query: str, start: datetime, end: datetime, step: timedelta
    ) -> pl.DataFrame:
        """``/api/v1/query_range`` split so no request exceeds 11,000 points per series.

        For dashboards and aggregates only: evaluated values, lookback-filled, not raw samples.
        Steps are ``start, start + step, ...`` up to and including ``end``.
        """
        step_ms = round(step / timedelta(milliseconds=1))
        if step_ms <= 0:
            msg = f"expected a positive step, found {step}"
            raise ValueError(msg)
        parts = []
        for a_ms, b_ms in range_chunks(epoch_ms(start), epoch_ms(end), step_ms):
            params = {
                "query": query,
                "start": f"{a_ms / 1000:.3f}",
                "end": f"{b_ms / 1000:.3f}",
                "step": f"{step_ms / 1000:.3f}",
            }
            try:
                body = self._request("/api/v1/query_range", params, query)
            except _HttpError as exc:
                raise SourceError(str(exc)) from exc
            parts.append(parse_matrix(body))
        parts = [p for p in parts if p.height]
        if not parts:
            return empty_raw()
        frame = ordered_raw(pl.concat(parts, how="diagonal_relaxed"))
        labels = [c for c in frame.columns if c not in ("ts", "value")]
        return frame.sort([*labels, "ts"], nulls_last=True)


def range_chunks(start_ms: int, end_ms: int, step_ms: int,
                 max_points: int = MAX_POINTS_PER_SERIES) -> list[tuple[int, int]]:
    """``[a, b]`` step-aligned chunks of ``[start, end]``, each with at most `max_points` steps."""
    out = []
    span = step_ms * (max_points - 1)
    a = start_ms
    while a <= end_ms:
        b = min(a + span, end_ms)
        b = a + ((b - a) // step_ms) * step_ms
        out.append((a, b))
        a = b + step_ms
    return out


class _HttpError(Exception):
    def __init__(self, url: str, what: str, status: int, detail: str) -> None:
        self.url, self.what, self.status, self.detail = url, what, status, detail
        super().__init__(f"Prometheus at {url}: query {what!r} failed: HTTP {status}: {detail}")


def _error_detail(body: bytes, secrets: Iterable[str | None] = ()) -> str:
    """What an error body says, redacted (a proxy that echoes the request would show its
    Authorization header) and cut to 300 characters."""
    try:
        doc = json.loads(body)
    except ValueError:
        return excerpt(body, secrets)
    if isinstance(doc, dict) and "error" in doc:
        return excerpt(f"{doc.get('errorType', '')}: {doc['error']}".strip(": "), secrets)
    return excerpt(body, secrets)


def _read_secret(path: Path) -> str:
    """A secret file's text, after the one rule for secret files (connectors/secrets.py): a
    regular file not readable by every user."""
    try:
        check_secret_file(Path(path))
        return Path(path).read_text(encoding="utf-8").strip()
    except SecretFileError as exc:
        raise SourceError(str(exc)) from exc
    except OSError as exc:
        msg = f"cannot read the secret file {path}: {exc}"
        raise SourceError(msg) from exc
