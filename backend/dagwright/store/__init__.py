"""Persistence: SQLModel tables, the database engine, migrations run at start-up, and one
repository per aggregate, in one style (see store/apps.py):

- a repository wraps the caller's session (`store.db.session`: the service's unit of work,
  committed by the service), speaks in table rows and `store.paging.Page`, raises the typed
  not-found and conflict errors, and holds every query of its aggregate;
- services hold no SQL: they validate, decide, call repositories and commit;
- every listing pages by `store.paging.window` (one policy, one Page).

A new aggregate: its tables in a `*_models.py` (imported below) with a migration, and a
`<aggregate>.py` here with its repository. Runs (services/runs) keep SQLAlchemy Core for the
hot write path; AutoTQA's repositories are store/tqa_*.py.
"""

# The evaluation tables live in their own module; importing it here puts them on
# SQLModel.metadata whichever store module is imported first (migrations compare against it).
from dagwright.store import draft_models as _draft_models  # noqa: F401
from dagwright.store import evaluation_models as _evaluation_models  # noqa: F401
from dagwright.store import human_models as _human_models  # noqa: F401
from dagwright.store import interface_models as _interface_models  # noqa: F401
from dagwright.store import trigger_models as _trigger_models  # noqa: F401
