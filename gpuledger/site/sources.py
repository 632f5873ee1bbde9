"""Source clients built from a site file's tables, one way for the CLI and Dagster alike.

``prometheus_config`` turns a ``[gpuledger.clusters.<name>.prometheus]`` table with a URL into
the HTTP client's config (auth, TLS, timeouts and the cluster's label selector);
``slurm_runner`` turns a ``[...slurm]`` table into the runner of sacct/sreport/scontrol (with
the ``prefix`` such as ``ssh login-node``). Neither opens anything: they only configure.
"""

from connectors.kubernetes.metrics_source import MetricsSource, PrometheusConfig
from connectors.kubernetes.openmetrics_file import OpenMetricsFileSource
from connectors.kubernetes.prometheus import PrometheusHttpSource
from connectors.slurm.commands import CommandRunner
from connectors.slurm.sanity import SanityLimits
from gpuledger.site import PrometheusSite, SiteError, SlurmSite


def prometheus_config(p: PrometheusSite) -> PrometheusConfig:
    """The HTTP client config of a live Prometheus table (``SiteError`` for a file-mode one)."""
    if not p.url:
        msg = (f"expected a Prometheus url to build an HTTP client, found the OpenMetrics file "
               f"{p.openmetrics}")
        raise SiteError(msg)
    return PrometheusConfig(
        url=p.url,
        selector=p.selector,
        bearer_token_file=p.bearer_token_file,
        basic_auth_user=p.basic_auth_user or None,
        basic_auth_password_file=p.basic_auth_password_file,
        ca_bundle=p.ca_bundle,
        verify_tls=not p.insecure,
        headers=dict(p.headers),
        timeout_s=p.timeout_s,
        connect_timeout_s=p.connect_timeout_s,
        window_budget_s=p.window_budget_s,
        retries=p.retries,
    )


def metrics_source(p: PrometheusSite) -> MetricsSource:
    """The live server, or the OpenMetrics file of a file-mode table."""
    if p.openmetrics is not None:
        return OpenMetricsFileSource(p.openmetrics)
    return PrometheusHttpSource(prometheus_config(p))


def slurm_runner(s: SlurmSite) -> CommandRunner:
    """The runner of the Slurm commands of a live (``mode = "sacct"``) table."""
    return CommandRunner.from_prefix(s.prefix, timeout_s=s.timeout_s)


def slurm_limits(s: SlurmSite) -> SanityLimits:
    """The cluster's sacct sanity limits (``[...slurm.limits]``; defaults for the others)."""
    return SanityLimits.from_config(dict(s.limits) or None)
