"""The scheduler's named queries (``sundial/scheduler/queries.sql``), loaded once."""

from sundial.core.db import Queries

queries = Queries.from_package("sundial.scheduler", shared=[("sundial.run", "cancel.sql")])
