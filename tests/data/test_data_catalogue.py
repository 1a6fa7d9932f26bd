"""The stored table catalogue: linear discovery of a folder of files, persistence and
incremental refresh, and retrieval of a question's tables among many, on files and on the
real PostgreSQL and MariaDB test servers."""

from __future__ import annotations

import os
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from dagwright.data.catalog import Catalog
from dagwright.data.connector import TableInfo
from dagwright.data.connectors import FilesConnector, MysqlConnector, PostgresConnector
from dagwright.data.connectors.common import SourcePaths
from dagwright.data.engine import QueryEngine
from dagwright.data.table_catalogue import CatalogueOptions, TableCatalogue
from dagwright.registry import TABLES, BlockServices, NodeContext
from dagwright.secrets import MappingSecrets
from dagwright.tabular import TableAccess
from support.data_sources import MysqlDatabase, PostgresSchema, mysql_database, postgres_schema
from support.source_paths import TEMPORARY_FOLDERS

NO_SECRETS = MappingSecrets({})
# Words no generated table shares: each "topic" table holds one in its name and values.
TOPICS = ["volcano", "glacier", "lighthouse", "orchard", "submarine", "tapestry"]


def write_tables(folder: Path, count: int) -> None:
    """``count`` small CSV tables of the same shape, plus one per topic word."""
    folder.mkdir(parents=True, exist_ok=True)
    for index in range(count):
        (folder / f"ledger_{index:05d}.csv").write_text(f"id,amount\n{index},{index * 2}\n")
    for topic in TOPICS:
        (folder / f"{topic}_sites.csv").write_text(f"id,label\n1,{topic} north\n2,{topic} south\n")


class CountingPaths:
    """Counts the path-policy checks a connector asks for (the seam of linear discovery)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.calls = 0
        allows = SourcePaths.allows

        def counting(paths: SourcePaths, resolved: Path) -> bool:
            self.calls += 1
            return allows(paths, resolved)

        monkeypatch.setattr(SourcePaths, "allows", counting)


def files_source(name: str, folder: Path) -> FilesConnector:
    return FilesConnector.from_config(
        name, {"path": str(folder)}, NO_SECRETS, paths=TEMPORARY_FOLDERS
    )


# -- discovery ---------------------------------------------------------------------------------


def test_every_table_of_a_folder_costs_one_path_check_per_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    write_tables(tmp_path / "many", 400)
    connector = files_source("many", tmp_path / "many")
    counted = CountingPaths(monkeypatch)
    tables = connector.tables("main")
    for table in tables:
        connector.table_info("main", table)
    assert len(tables) == 406
    # One check per file, plus the folder itself once per call (the listing was kept);
    # listing the folder per table made it 406 x 406 = 164,836.
    assert counted.calls <= 406 + 2 * (len(tables) + 1)


def test_a_folder_of_10000_files_is_listed_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = tmp_path / "huge"
    folder.mkdir()
    for index in range(10_000):
        (folder / f"t{index:05d}.csv").write_text("id\n1\n")
    connector = files_source("huge", folder)
    counted = CountingPaths(monkeypatch)
    assert len(connector.tables("main")) == 10_000
    listed = counted.calls
    assert listed == 10_000 + 1  # each file once, and the folder
    for index in range(0, 10_000, 200):  # 50 tables described: no file checked again
        connector.table_info("main", f"t{index:05d}")
    assert counted.calls == listed + 50  # the folder itself, once per call


def test_a_file_added_renamed_or_replaced_by_a_symlink_is_seen(tmp_path: Path) -> None:
    folder = tmp_path / "live"
    write_tables(folder, 3)
    connector = files_source("live", folder)
    assert "ledger_00003" not in connector.tables("main")
    (folder / "ledger_00003.csv").write_text("id,amount\n3,6\n")
    assert "ledger_00003" in connector.tables("main")
    os.rename(folder / "ledger_00000.csv", folder / "renamed.csv")
    assert {"renamed"} <= set(connector.tables("main"))
    assert "ledger_00000" not in connector.tables("main")
    # A sub-folder table: a file added inside it changes only the sub-folder's stamp.
    (folder / "parts").mkdir()
    (folder / "parts" / "a.csv").write_text("id\n1\n")
    assert connector.table_info("main", "parts").row_estimate is None
    (folder / "parts" / "b.csv").write_text("id\n2\n")
    assert len(connector.splits("main", "parts", ["id"])) == 2
    # A file that becomes a symlink out of the roots is refused, as before the cache.
    outside = Path("/etc/hostname")
    (folder / "renamed.csv").unlink()
    (folder / "renamed.csv").symlink_to(outside)
    with pytest.raises(Exception, match="outside the folders"):
        connector.table_info("main", "renamed")


# -- persistence and incremental refresh -------------------------------------------------------


class CountingFiles(FilesConnector):
    """A files connector that counts the tables whose metadata it reads."""

    infos: list[str]

    def table_info(self, schema: str, table: str) -> TableInfo:
        self.infos.append(table)
        return super().table_info(schema, table)


def counting_catalog(folder: Path) -> tuple[Catalog, CountingFiles]:
    connector = CountingFiles.from_config(
        "shop", {"path": str(folder)}, NO_SECRETS, paths=TEMPORARY_FOLDERS
    )
    connector.infos = []
    return Catalog({"shop": connector}), connector


def test_a_refresh_reads_only_the_tables_that_changed(tmp_path: Path) -> None:
    folder, stored = tmp_path / "shop", tmp_path / "catalogue"
    write_tables(folder, 4)
    catalog, connector = counting_catalog(folder)
    catalogue = TableCatalogue(catalog, CatalogueOptions(folder=stored))
    first = catalogue.refresh("shop")
    assert (first.read, first.kept, first.tables, first.state) == (10, 0, 10, "done")
    assert (stored / "shop.json").stat().st_mode & 0o777 == 0o600

    connector.infos.clear()
    again = catalogue.refresh("shop")
    assert (again.read, again.kept) == (0, 10)
    assert connector.infos == []  # unchanged files are not read again

    (folder / "ledger_00001.csv").write_text("id,amount,orchard_note\n1,2,pruned\n")
    (folder / "ledger_00002.csv").unlink()
    changed = catalogue.refresh("shop")
    assert (changed.read, changed.kept, changed.dropped) == (1, 8, 1)
    assert set(connector.infos) == {"ledger_00001"}  # (its splits ask the connector again)
    entry = catalogue.entry("shop.main.ledger_00001")
    assert entry is not None
    assert entry.values["orchard_note"] == ["pruned"]


def test_the_catalogue_is_kept_across_processes(tmp_path: Path) -> None:
    folder, stored = tmp_path / "shop", tmp_path / "catalogue"
    write_tables(folder, 30)
    catalog, _ = counting_catalog(folder)
    TableCatalogue(catalog, CatalogueOptions(folder=stored)).refresh("shop")

    # Another process: same folder, a new catalog. Its first question reads no table.
    catalog, connector = counting_catalog(folder)
    later = TableCatalogue(catalog, CatalogueOptions(folder=stored, check_s=3600))
    found = later.search("which glacier sites are south?", 3)
    assert found[0].name == "shop.main.glacier_sites"
    assert connector.infos == []
    # A file that does not parse is ignored: the source is read again.
    (stored / "shop.json").write_text("{not json")
    catalog, connector = counting_catalog(folder)
    assert TableCatalogue(catalog, CatalogueOptions(folder=stored)).search("glacier", 1)
    assert set(connector.infos) == {path.stem for path in folder.iterdir()}


def test_databases_are_read_again_after_the_ttl(tmp_path: Path) -> None:
    now = [1000.0]
    write_tables(tmp_path / "shop", 2)
    catalog, connector = counting_catalog(tmp_path / "shop")
    catalogue = TableCatalogue(
        catalog, CatalogueOptions(ttl_s=60, check_s=30), clock=lambda: now[0]
    )
    # Without a change stamp (as a database), the TTL decides.
    connector.table_stamp = lambda schema, table: None  # type: ignore[method-assign]
    catalogue.refresh("shop")
    now[0] += 59
    assert catalogue.refresh("shop").read == 0
    now[0] += 2
    assert catalogue.refresh("shop").read == 8
    assert catalogue.refresh("shop", force=True).read == 8


def test_a_stale_source_answers_from_what_is_stored_and_refreshes_aside(tmp_path: Path) -> None:
    now = [1000.0]
    write_tables(tmp_path / "shop", 2)
    catalog, _ = counting_catalog(tmp_path / "shop")
    catalogue = TableCatalogue(catalog, CatalogueOptions(check_s=30), clock=lambda: now[0])
    catalogue.search("orchard", 1)
    (tmp_path / "shop" / "quarry_log.csv").write_text("id,stone\n1,granite\n")
    now[0] += 31
    # The background worker is busy: the question must not wait for the refresh.
    release = threading.Event()
    busy = catalogue._background.submit(release.wait, 60)
    assert catalogue.search("granite quarry", 1) == []  # what was stored
    release.set()
    busy.result(timeout=60)
    catalogue._background.submit(lambda: None).result(timeout=60)  # the refresh queued after
    assert [e.name for e in catalogue.search("granite quarry", 1)] == ["shop.main.quarry_log"]
    catalogue.close()


# -- retrieval among many, on the real servers --------------------------------------------------


@pytest.fixture(scope="module")
def pg_many() -> Iterator[PostgresSchema]:
    with postgres_schema("dw_cat") as schema:
        statements = [
            f"CREATE TABLE {{schema}}.ledger_{i:04d} (id int PRIMARY KEY, amount int)"
            for i in range(150)
        ]
        statements += [
            "CREATE TABLE {schema}.harbour_berths (id int PRIMARY KEY, vessel text)",
            "COMMENT ON TABLE {schema}.harbour_berths IS 'where ships dock'",
            "INSERT INTO {schema}.harbour_berths VALUES (1, 'Nordlys'), (2, 'Saga')",
        ]
        schema.execute(*statements)
        yield schema


@pytest.fixture(scope="module")
def my_many() -> Iterator[MysqlDatabase]:
    with mysql_database("dw_cat") as database:
        database.execute(
            *[f"CREATE TABLE ledger_{i:04d} (id INT PRIMARY KEY, amount INT)" for i in range(100)],
            "CREATE TABLE kiln_firings (id INT PRIMARY KEY, glaze VARCHAR(20)) COMMENT='pottery'",
            "INSERT INTO kiln_firings VALUES (1, 'celadon'), (2, 'tenmoku')",
        )
        yield database


@pytest.fixture
def many_sources(
    tmp_path: Path, pg_many: PostgresSchema, my_many: MysqlDatabase
) -> Iterator[QueryEngine]:
    write_tables(tmp_path / "files", 150)
    catalog = Catalog(
        {
            "pg": PostgresConnector.from_config(
                "pg", {"url": pg_many.url, "schemas": [pg_many.name]}, NO_SECRETS
            ),
            "my": MysqlConnector.from_config("my", {"url": my_many.url}, NO_SECRETS),
            "fs": files_source("fs", tmp_path / "files"),
        }
    )
    engine = QueryEngine(catalog)
    yield engine
    catalog.close()
    engine.close()


def test_retrieval_finds_the_right_table_among_hundreds(
    many_sources: QueryEngine, tmp_path: Path
) -> None:
    catalogue = TableCatalogue(many_sources.catalog, CatalogueOptions(folder=tmp_path / "c"))
    assert catalogue.search("Which vessel is at berth 2 in the harbour?", 5)[0].name == (
        f"pg.{many_sources.catalog.schemas('pg')[0]}.harbour_berths"
    )
    assert catalogue.search("firings with a celadon glaze", 5)[0].table == "kiln_firings"
    assert catalogue.search("submarine sites", 5)[0].name == "fs.main.submarine_sites"
    assert catalogue.size() == 151 + 101 + 156
    # Only the sources asked for.
    assert catalogue.search("celadon", 5, {"pg", "fs"}) == []


@pytest.mark.asyncio
async def test_schema_lookup_samples_only_the_candidates(
    many_sources: QueryEngine, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from dagwright.blocks.tables import SchemaLookupConfig, schema_lookup

    access = TableAccess(lambda: many_sources, catalogue=CatalogueOptions(folder=tmp_path / "c"))
    access.catalogue().refresh("pg")  # (the others are read by the first question)
    sampled: list[str] = []
    sample = many_sources.sample

    def counting(qualified: str, *args: Any, **kwargs: Any) -> Any:
        sampled.append(qualified)
        return sample(qualified, *args, **kwargs)

    monkeypatch.setattr(many_sources, "sample", counting)
    ctx = NodeContext(
        "run", "node", lambda *_: None, lambda *_: None, BlockServices({TABLES: access})
    )
    out = await schema_lookup(
        SchemaLookupConfig(top_tables=2), ctx, "Which glaze did the kiln firing use?"
    )
    assert out["tables"][0].endswith(".kiln_firings")
    assert 0 < len(sampled) <= 10  # of 408 tables


# -- the command line --------------------------------------------------------------------------


def test_the_refresh_command_reads_then_keeps(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from typer.testing import CliRunner

    from dagwright.cli.main import app

    monkeypatch.setenv("DAGWRIGHT_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.delenv("DAGWRIGHT_DATABASE_URL", raising=False)
    monkeypatch.delenv("DAGWRIGHT_SETTINGS", raising=False)
    monkeypatch.chdir(tmp_path)  # no ./dagwright.toml
    runner = CliRunner()
    first = runner.invoke(app, ["data", "refresh", "hr"])
    assert first.exit_code == 0, first.output
    assert "hr: 2 tables, 2 read, 0 unchanged" in first.stdout
    assert (tmp_path / "data" / "catalogue" / "hr.json").is_file()
    every = runner.invoke(app, ["data", "refresh"])
    assert every.exit_code == 0, every.output
    assert "payroll: 1 tables, 1 read" in every.stdout
    missing = runner.invoke(app, ["data", "refresh", "nope"])
    assert missing.exit_code == 2
    assert "source_not_found" in missing.output


def test_closing_stops_a_refresh_and_stores_nothing(tmp_path: Path) -> None:
    folder, stored = tmp_path / "shop", tmp_path / "catalogue"
    write_tables(folder, 20)
    catalog, connector = counting_catalog(folder)
    catalogue = TableCatalogue(catalog, CatalogueOptions(folder=stored))
    read = connector.table_info

    def closing_on_the_third(schema: str, table: str) -> TableInfo:
        if table not in connector.infos and len(set(connector.infos)) == 2:
            catalogue.close()  # as a server's shutdown does, mid-refresh
        return read(schema, table)

    connector.table_info = closing_on_the_third  # type: ignore[method-assign]
    status = catalogue.refresh("shop")
    assert status.state == "cancelled"
    assert status.done == 3
    assert status.done < status.tables
    assert not (stored / "shop.json").exists()


def test_a_source_replaced_during_its_refresh_keeps_nothing_of_the_old(tmp_path: Path) -> None:
    folder, stored = tmp_path / "shop", tmp_path / "catalogue"
    write_tables(folder, 3)
    catalog, connector = counting_catalog(folder)
    catalogue = TableCatalogue(catalog, CatalogueOptions(folder=stored))
    read = connector.table_info
    other = tmp_path / "other"
    write_tables(other, 0)

    def replacing(schema: str, table: str) -> TableInfo:
        if not connector.infos:
            catalog.replace("shop", files_source("shop", other))  # as PUT /sources/shop does
        return read(schema, table)

    connector.table_info = replacing  # type: ignore[method-assign]
    assert catalogue.refresh("shop").state == "cancelled"
    assert not (stored / "shop.json").exists()
    assert catalogue.search("ledger", 5) == []  # the new source, read afresh: no ledgers
    assert catalogue.search("glacier", 1)[0].name == "shop.main.glacier_sites"
