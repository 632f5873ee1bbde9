"""The kinds of the ledger's declarations: a ``Table`` (name, columns, key) and a ``View``."""

from dataclasses import dataclass


@dataclass(frozen=True)
class Table:
    """A table of the ledger: its name, columns (name -> DuckDB type) and key."""

    name: str
    columns: tuple[tuple[str, str], ...]
    key: tuple[str, ...] = ()
    doc: str = ""

    @property
    def column_names(self) -> list[str]:
        return [c for c, _ in self.columns]

    def ddl(self) -> str:
        cols = ",\n  ".join(f'"{c}" {t}' for c, t in self.columns)
        return f"CREATE TABLE IF NOT EXISTS {self.name} (\n  {cols}\n)"


@dataclass(frozen=True)
class View:
    """A view of the ledger, created after the tables (operators query it like a table)."""

    name: str
    select: str
    doc: str = ""

    def ddl(self) -> str:
        return f"CREATE OR REPLACE VIEW {self.name} AS {self.select}"
