import json
import os
from datetime import UTC, datetime, timedelta
from pathlib import Path

import dagster as dg
import duckdb

from connectors.slurm.commands import CommandRunner
from connectors.slurm.parse import parse_sacct
from connectors.slurm.sanity import SanityLimits
from gpuledger import slurm_ingest
from gpuledger.config import load_settings


class SlurmSourceResource(dg.ConfigurableResource):
    """Where Slurm accounting comes from: live ``sacct``/``sreport`` (``mode="sacct"``, optionally
    through a prefix such as ``ssh login``) or exported dump files (``mode="dump"``)."""

    mode: str = "dump"
    sacct_prefix: str = ""
    timeout_s: float = 300.0
    lookback_hours: float = 48.0
    dump_path: str = ""
    dump_timezone: str = "UTC"
    dump_as_of: str = ""
    sreport_utilization_path: str = ""
    sreport_accounts_path: str = ""
    # sanity limits of sacct lines ([gpuledger.slurm_limits] in gpuledger.toml; docs/slurm.md)
    slurm_limits: dict[str, float] = SanityLimits().as_config()

    def limits(self) -> SanityLimits:
        return SanityLimits.from_config(self.slurm_limits)

    def _as_of(self) -> datetime | None:
        if not self.dump_as_of:
            return None
        return datetime.fromisoformat(self.dump_as_of.replace("Z", "+00:00")).astimezone(
            UTC).replace(tzinfo=None)

    def load_window(self, con: duckdb.DuckDBPyConnection, start: datetime,
                    end: datetime) -> slurm_ingest.SlurmLoad:
        lookback = timedelta(hours=self.lookback_hours)
        if self.mode == "sacct":
            runner = CommandRunner.from_prefix(self.sacct_prefix, timeout_s=self.timeout_s)
            return slurm_ingest.ingest_slurm_window(con, runner, start, end, lookback=lookback,
                                                    limits=self.limits())  # fmt: skip
        if self.mode != "dump":
            msg = f"expected slurm source mode 'sacct' or 'dump', found {self.mode!r}"
            raise ValueError(msg)
        as_of = self._as_of()
        limits = slurm_ingest.sanity_limits(
            con, observed_at=as_of or datetime.now(UTC).replace(tzinfo=None),
            observed_what="the dump's as-of time" if as_of else "the time of the import",
            charged_until=as_of, base=self.limits(),
        )  # fmt: skip
        parsed = parse_sacct(Path(self.dump_path), timezone=self.dump_timezone,
                             source_file=self.dump_path, limits=limits)  # fmt: skip
        # every day's load is the same dump, observed when it was taken
        observed = as_of or slurm_ingest.default_observed_until(parsed)
        window = slurm_ingest.within_window(parsed, start - lookback, end)
        seen = min(end, as_of) if as_of else end
        return slurm_ingest.store_sacct(
            con, window, source_file=self.dump_path, observed_until=seen, observed_at=observed,
            partition_key=f"{start:%Y-%m-%d}", window=(start, end),
        )

    def load_sreport(self, con: duckdb.DuckDBPyConnection, start: datetime,
                     end: datetime) -> tuple[int, int]:
        if self.mode == "sacct":
            runner = CommandRunner.from_prefix(self.sacct_prefix, timeout_s=self.timeout_s)
            return slurm_ingest.ingest_sreport(con, runner, start, end)
        util = Path(self.sreport_utilization_path)
        accounts = Path(self.sreport_accounts_path)
        return slurm_ingest.store_sreport(
            con, util.read_text(encoding="utf-8"), accounts.read_text(encoding="utf-8"),
            source=str(util.parent),
        )


def slurm_source_from_environment(world_root: str) -> SlurmSourceResource:
    """Dump mode on the sample world unless ``GPULEDGER_SLURM_MODE=sacct``."""
    root = Path(world_root)
    as_of = os.environ.get("GPULEDGER_SLURM_DUMP_AS_OF", "")
    world_file = root / "world.json"
    if not as_of and world_file.is_file():
        # a simulated world's dump was taken at the end of its window
        as_of = str(json.loads(world_file.read_text(encoding="utf-8"))["window"]["end"])
    limits = slurm_ingest.configured_limits(load_settings())  # [gpuledger.slurm_limits]
    return SlurmSourceResource(
        slurm_limits=limits.as_config(),
        mode=os.environ.get("GPULEDGER_SLURM_MODE", "dump"),
        sacct_prefix=os.environ.get("GPULEDGER_SACCT_PREFIX", ""),
        dump_path=str(root / "sacct" / "sacct-unitsep-epoch.txt"),
        dump_as_of=as_of,
        sreport_utilization_path=str(root / "sreport" / "cluster-utilization.txt"),
        sreport_accounts_path=str(root / "sreport" / "account-utilization-by-user.txt"),
    )
