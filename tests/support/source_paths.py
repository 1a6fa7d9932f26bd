"""The rule the data-layer tests' file and SQLite sources read under: the system's temporary
folder, which holds pytest's (tests/security/test_source_paths*.py test the rule itself)."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from dagwright.data.connectors.common import SourcePaths

TEMPORARY_FOLDERS = SourcePaths((Path(os.path.realpath(tempfile.gettempdir())),))
