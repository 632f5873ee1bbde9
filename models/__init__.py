"""The accounting model: named SQL files, the schema and a small runner."""

from importlib import resources


def sql_names() -> list[str]:
    """Names of the SQL models shipped in ``models/sql`` (without ``.sql``)."""
    folder = resources.files("models") / "sql"
    return sorted(p.name.removesuffix(".sql") for p in folder.iterdir() if p.name.endswith(".sql"))


def load_sql(name: str) -> str:
    """Return the text of ``models/sql/<name>.sql``."""
    path = resources.files("models") / "sql" / f"{name}.sql"
    if not path.is_file():
        msg = f"expected one of the SQL models {sql_names()}, found {name!r}"
        raise KeyError(msg)
    return path.read_text(encoding="utf-8")
