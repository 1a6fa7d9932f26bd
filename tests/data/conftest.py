"""The data-layer tests read files they make under pytest's temporary folder: it is made a
source root (DAGWRIGHT_SOURCE_ROOTS) for each module, so their file and SQLite sources pass
the same path check as a server's (tests/security/test_source_paths.py tests the check)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from dagwright.data.connectors.common import SOURCE_ROOTS_ENV


@pytest.fixture(scope="module", autouse=True)
def temporary_folder_is_a_source_root(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv(SOURCE_ROOTS_ENV, str(tmp_path_factory.getbasetemp()))
        yield
