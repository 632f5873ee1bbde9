import multiprocessing
from pathlib import Path

import duckdb
import polars as pl
import pytest

from models.runner import (
    ROW_GROUP_ROWS,
    _row_group_batches,
    append_rows,
    connect,
    publish_snapshot,
    read_snapshot,
    replace_rows,
    snapshot_path,
    transaction,
)
from models.schema import SLURM_ACCOUNTS, Table, table


def _accounts(*pairs: tuple[str, str]) -> pl.DataFrame:
    return pl.DataFrame(list(pairs), schema={"account": pl.String, "parent": pl.String},
                        orient="row")


def test_replace_is_idempotent_and_scoped(tmp_path: Path):
    db = tmp_path / "ledger.duckdb"
    with connect(db) as con:
        replace_rows(con, SLURM_ACCOUNTS, _accounts(("physics", "research"), ("ops", "")))
        replace_rows(con, SLURM_ACCOUNTS, _accounts(("physics", "research")),
                     where="account = ?", params=("physics",))
        replace_rows(con, SLURM_ACCOUNTS, _accounts(("physics", "research")),
                     where="account = ?", params=("physics",))
        rows = con.execute("SELECT * FROM slurm_accounts ORDER BY account").fetchall()
    assert rows == [("ops", ""), ("physics", "research")]


def test_failed_insert_rolls_back_the_delete(tmp_path: Path):
    db = tmp_path / "ledger.duckdb"
    nodes = table("nodes")
    good = pl.DataFrame(
        [("c", "n1", "slurm", "a100", 1, 0, "GPU-1", "gpu")],
        schema=dict.fromkeys(nodes.column_names, pl.String), orient="row",
    )
    with connect(db) as con:
        replace_rows(con, nodes, good)
        with pytest.raises(ValueError, match="expected columns"):
            replace_rows(con, nodes, pl.DataFrame({"node": ["x"]}))
        broken = good.with_columns(pl.lit("eight").alias("gpu_count"))
        with pytest.raises(duckdb.Error):
            replace_rows(con, nodes, broken)  # the delete ran first and must be undone
        assert con.execute("SELECT node, gpu_count FROM nodes").fetchall() == [("n1", 1)]


def _reader(path: str, rounds: int, queue: multiprocessing.Queue) -> None:
    errors = 0
    for _ in range(rounds):
        try:
            with read_snapshot(Path(path)) as con:
                con.execute("SELECT count(*) FROM slurm_accounts").fetchone()
        except Exception:
            errors += 1
    queue.put(errors)


def test_readers_use_the_snapshot_while_the_writer_holds_the_ledger(tmp_path: Path):
    db = tmp_path / "ledger.duckdb"
    with connect(db) as con:
        replace_rows(con, SLURM_ACCOUNTS, _accounts(("ops", "")))
        publish_snapshot(con, db)
        ctx = multiprocessing.get_context("spawn")
        queue = ctx.Queue()
        readers = [ctx.Process(target=_reader, args=(str(db), 200, queue)) for _ in range(3)]
        for r in readers:
            r.start()
        for n in range(10):  # the writer keeps writing and publishing meanwhile
            replace_rows(con, SLURM_ACCOUNTS, _accounts(("ops", ""), (f"p{n}", "ops")))
            publish_snapshot(con, db)
        for r in readers:
            r.join(timeout=60)
        errors = [queue.get(timeout=5) for _ in readers]
    assert errors == [0, 0, 0]
    with read_snapshot(db) as con:
        assert con.execute("SELECT count(*) FROM slurm_accounts").fetchone() == (2,)


def test_reading_before_any_publish_says_what_to_do(tmp_path: Path):
    with pytest.raises(FileNotFoundError, match="run `gpuledger build`"), read_snapshot(
        tmp_path / "ledger.duckdb"
    ):
        pass
    assert snapshot_path(tmp_path / "x.duckdb").name == "x.serving.duckdb"



def test_large_appends_keep_every_row_in_order(tmp_path: Path):
    # appends above one row group go to DuckDB as row-group batches (its threads scan them in
    # parallel): nothing lost, nothing reordered, also across a batch edge
    n = ROW_GROUP_ROWS * 2 + 7
    wide = Table("wide", (("user", "VARCHAR"), ("n", "BIGINT"), ("note", "VARCHAR")), key=("n",))
    frame = pl.DataFrame({"n": list(range(n)), "user": [f"u{i % 977}" for i in range(n)],
                          "note": [None if i % 5 else "x" for i in range(n)]})
    batches = _row_group_batches(frame).to_batches()
    assert [b.num_rows for b in batches] == [ROW_GROUP_ROWS, ROW_GROUP_ROWS, 7]
    with connect(tmp_path / "l.duckdb") as con:
        con.execute(wide.ddl())
        con.execute("SET threads = 2")
        with transaction(con):
            assert append_rows(con, wide, frame) == n
        back = con.execute("SELECT * FROM wide").pl()
    assert back.equals(frame.select(wide.column_names))
