"""The types the connectors' frame schemas are checked against (mypy): a column's Polars type is
a data-type class (``pl.String``) or an instance (``pl.Datetime("us")``), as Polars accepts."""

from collections.abc import Mapping

import polars as pl
from polars.datatypes import DataTypeClass

PolarsDataType = DataTypeClass | pl.DataType
SchemaDict = Mapping[str, PolarsDataType]
