"""The one ``MetaData`` every table of the schema registers in."""

from __future__ import annotations

from sqlalchemy import MetaData

metadata = MetaData()
