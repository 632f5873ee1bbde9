"""A Spark session for the engine tests, on the real standalone cluster of tests/spark_cluster.py
(``spark_master``, from tests/conftest.py)."""

from collections.abc import Iterator

import pytest

from models.engines.spark_session import SparkSettings, open_spark


@pytest.fixture(scope="session")
def spark(spark_master: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[object]:
    session = open_spark(SparkSettings(master=spark_master,
                                       scratch=tmp_path_factory.mktemp("spark-scratch")))
    yield session
    session.stop()
