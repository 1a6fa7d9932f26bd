"""A source's own catalogue TTL: stored with its registration (API and settings-file sources),
shown with it, and what the catalogue re-reads by; a source without one takes the global
DAGWRIGHT_CATALOGUE_TTL_S."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from cryptography.fernet import Fernet
from sqlalchemy import Engine

from dagwright.data.catalog import Catalog
from dagwright.data.connector import TableInfo
from dagwright.data.connectors import FilesConnector
from dagwright.data.connectors.common import SourcePaths
from dagwright.data.table_catalogue import CatalogueOptions, TableCatalogue
from dagwright.errors import DataError
from dagwright.secrets import MappingSecrets
from dagwright.services.data_sources import DataSourceService, fixed_sources
from dagwright.services.secret_store import DatabaseSecrets
from support.database import migrated_engine
from support.source_paths import TEMPORARY_FOLDERS


class Unstamped(FilesConnector):
    """A files connector read as a database is: no change stamp, so the TTL decides."""

    infos: list[str]

    def table_info(self, schema: str, table: str) -> TableInfo:
        self.infos.append(table)
        return super().table_info(schema, table)

    def table_stamp(self, schema: str, table: str) -> str | None:
        return None


def unstamped(name: str, folder: Path, tables: int) -> Unstamped:
    folder.mkdir(parents=True, exist_ok=True)
    for index in range(tables):
        (folder / f"t{index}.csv").write_text(f"id,amount\n{index},1\n")
    connector = Unstamped.from_config(
        name, {"path": str(folder)}, MappingSecrets({}), paths=TEMPORARY_FOLDERS
    )
    connector.infos = []
    return connector


def test_only_the_source_past_its_own_ttl_is_read_again(tmp_path: Path) -> None:
    now = [1000.0]
    fast = unstamped("fast", tmp_path / "fast", 3)
    slow = unstamped("slow", tmp_path / "slow", 4)
    own = {"fast": 60.0}  # slow has none: the global 3600 s
    catalogue = TableCatalogue(
        Catalog({"fast": fast, "slow": slow}),
        CatalogueOptions(ttl_s=3600),
        clock=lambda: now[0],
        ttls=own.get,
    )
    assert (catalogue.ttl_of("fast"), catalogue.ttl_of("slow")) == (60.0, 3600)
    assert catalogue.refresh("fast").read == 3
    assert catalogue.refresh("slow").read == 4

    now[0] += 61  # past fast's TTL, far from slow's
    fast.infos.clear()
    slow.infos.clear()
    assert (catalogue.refresh("fast").read, catalogue.refresh("slow").read) == (3, 0)
    assert set(fast.infos) == {"t0", "t1", "t2"}  # (its splits ask the connector again)
    assert slow.infos == []

    now[0] += 3600  # past both
    assert (catalogue.refresh("fast").read, catalogue.refresh("slow").read) == (3, 4)


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Engine]:
    yield from migrated_engine("sqlite", tmp_path_factory)


def test_a_registered_sources_ttl_is_stored_shown_and_used(store: Engine, tmp_path: Path) -> None:
    folder = tmp_path / "sources" / "shop"
    folder.mkdir(parents=True)
    (folder / "orders.csv").write_text("id,amount\n1,2\n")
    secrets = DatabaseSecrets(store, Fernet.generate_key())
    data = DataSourceService(store, secrets, paths=lambda: SourcePaths.for_data_dir(tmp_path))
    try:
        entry = data.put("shop", "files", {"path": str(folder)}, "", catalogue_ttl_s=30)
        assert entry.to_dict()["catalogue_ttl_s"] == 30
        assert data.get("shop").catalogue_ttl_s == 30
        assert data.catalogue().ttl_of("shop") == 30
        data.put("plain", "files", {"path": str(folder)})
        assert data.get("plain").to_dict()["catalogue_ttl_s"] is None
        assert data.catalogue().ttl_of("plain") == data.catalogue().options.ttl_s

        # A change of the TTL alone keeps what the catalogue read; a new configuration not.
        assert data.refresh("shop").read == 1
        data.put("shop", "files", {"path": str(folder)}, "", catalogue_ttl_s=5)
        assert data.catalogue().ttl_of("shop") == 5
        assert data.catalogue().size(["shop"]) == 1
        data.put("shop", "files", {"path": str(folder), "format": "csv"}, "", catalogue_ttl_s=5)
        assert data.catalogue().size(["shop"]) == 0

        with pytest.raises(DataError, match="catalogue_ttl_s") as refused:
            data.put("shop", "files", {"path": str(folder)}, "", catalogue_ttl_s=-1)
        assert refused.value.code == "source_config"
        assert data.get("shop").catalogue_ttl_s == 5  # nothing stored
    finally:
        for name in ("shop", "plain"):
            data.delete(name)
        data.close()


def test_a_settings_file_source_carries_its_ttl_beside_its_settings(tmp_path: Path) -> None:
    given = {"shop": {"kind": "files", "path": str(tmp_path), "catalogue_ttl_s": 120}}
    entry = fixed_sources(given, None)["shop"]
    assert entry.catalogue_ttl_s == 120.0
    assert "catalogue_ttl_s" not in entry.config  # the connector refuses keys it does not use
    with pytest.raises(DataError, match="catalogue_ttl_s"):
        fixed_sources({"shop": {**given["shop"], "catalogue_ttl_s": "soon"}}, None)
    with pytest.raises(DataError, match="catalogue_ttl_s"):
        fixed_sources({"shop": {**given["shop"], "catalogue_ttl_s": -5}}, None)
