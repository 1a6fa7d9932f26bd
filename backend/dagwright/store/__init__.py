"""Persistence: SQLModel tables, the database engine, and migrations run at start-up."""

# The evaluation tables live in their own module; importing it here puts them on
# SQLModel.metadata whichever store module is imported first (migrations compare against it).
from dagwright.store import draft_models as _draft_models  # noqa: F401
from dagwright.store import evaluation_models as _evaluation_models  # noqa: F401
from dagwright.store import human_models as _human_models  # noqa: F401
from dagwright.store import interface_models as _interface_models  # noqa: F401
from dagwright.store import trigger_models as _trigger_models  # noqa: F401
