"""The one rate precedence (``rate_for_allocation.sql``) that the invoice lines, the FOCUS rows
and the incidents' cost all use."""

import duckdb

from models import load_sql


def create_rate_choice(con: duckdb.DuckDBPyConnection, keys_select: str,
                       params: dict[str, object] | None = None) -> None:
    """Temp table ``rate_choice``: the rate of each (day, domain, gpu_model, qos) that
    ``keys_select`` gives, by the one rate precedence (``rate_for_allocation.sql``) that the
    invoice lines and the incidents' cost both use."""
    con.execute(f"CREATE OR REPLACE TEMP TABLE rate_keys AS {keys_select}", params or {})
    con.execute(f"CREATE OR REPLACE TEMP TABLE rate_choice AS {load_sql('rate_for_allocation')}")
