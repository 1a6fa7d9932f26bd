"""The catalogue's semantic index: tables found by meaning (the local MiniLM, offline) when
they share no word with the question, their vectors kept beside the catalogue and embedded
again only for the tables a refresh reads again."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from dagwright.data.catalog import Catalog
from dagwright.data.connectors import FilesConnector
from dagwright.data.table_catalogue import CatalogueOptions, TableCatalogue, Vectors
from dagwright.embedding.lexical import HashingEmbedder
from dagwright.embedding.minilm import MiniLMEmbedder
from dagwright.secrets import MappingSecrets
from dagwright.tabular import sync_embed
from support.source_paths import TEMPORARY_FOLDERS

QUESTION = "How much salary does each worker earn?"  # no word of the wages table's


def write_folder(folder: Path, ledgers: int = 40) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    for index in range(ledgers):
        (folder / f"ledger_{index:03d}.csv").write_text(f"id,amount\n{index},{index * 2}\n")
    for topic in ("volcano", "glacier", "orchard"):
        (folder / f"{topic}_sites.csv").write_text(f"id,label\n1,{topic} north\n")
    (folder / "staff_wages.csv").write_text("employee,pay\nTom,5000\nAnn,6100\n")


def shop(folder: Path) -> Catalog:
    connector = FilesConnector.from_config(
        "shop", {"path": str(folder)}, MappingSecrets({}), paths=TEMPORARY_FOLDERS
    )
    return Catalog({"shop": connector})


class Counted:
    """An embedder that counts the texts it is given."""

    def __init__(self, spec: str = "minilm") -> None:
        self.texts: list[str] = []
        model = MiniLMEmbedder() if spec == "minilm" else HashingEmbedder(64)
        self._embed = sync_embed(model)

    def __call__(self, texts: list[str]) -> Vectors:
        self.texts += texts
        return self._embed(texts)


def test_a_table_sharing_no_word_is_found_by_meaning_only(tmp_path: Path) -> None:
    write_folder(tmp_path / "shop")
    lexical = TableCatalogue(shop(tmp_path / "shop"), CatalogueOptions())
    assert "shop.main.staff_wages" not in [e.name for e in lexical.search(QUESTION, 5)]

    semantic = TableCatalogue(
        shop(tmp_path / "shop"), CatalogueOptions(embedder="minilm"), embed=Counted()
    )
    found = [entry.name for entry in semantic.search(QUESTION, 5)]
    assert "shop.main.staff_wages" in found
    assert len(found) <= 10  # the union of two top 5s
    # What the words find is still found, first.
    assert semantic.search("glacier sites", 3)[0].name == "shop.main.glacier_sites"


def test_only_the_tables_read_again_are_embedded_again(tmp_path: Path) -> None:
    folder, stored = tmp_path / "shop", tmp_path / "catalogue"
    write_folder(folder, ledgers=6)
    embed = Counted("hashing")
    options = CatalogueOptions(folder=stored, embedder="hashing:64")
    catalogue = TableCatalogue(shop(folder), options, embed=embed)
    catalogue.refresh("shop")
    assert len(embed.texts) == 10
    assert (stored / "shop.npy").stat().st_mode & 0o777 == 0o600
    assert np.load(stored / "shop.npy").shape == (10, 64)

    embed.texts.clear()
    assert catalogue.refresh("shop").kept == 10
    assert embed.texts == []
    (folder / "ledger_001.csv").write_text("id,amount,bonus\n1,2,3\n")
    (folder / "ledger_002.csv").unlink()
    catalogue.refresh("shop")
    assert embed.texts == ["ledger 001, id, amount, bonus"]
    assert np.load(stored / "shop.npy").shape == (9, 64)


def test_stored_vectors_are_used_only_when_they_are_the_ones_recorded(tmp_path: Path) -> None:
    folder, stored = tmp_path / "shop", tmp_path / "catalogue"
    write_folder(folder)
    options = CatalogueOptions(folder=stored, check_s=3600, embedder="minilm")
    TableCatalogue(shop(folder), options, embed=Counted()).refresh("shop")

    # Another process: the vectors come from the file; only the question is embedded.
    later = Counted()
    catalogue = TableCatalogue(shop(folder), options, embed=later)
    assert "shop.main.staff_wages" in [e.name for e in catalogue.search(QUESTION, 5)]
    assert later.texts == [QUESTION]

    # A matrix that is not the one the JSON recorded is not trusted: words only, until the
    # next refresh embeds every table again.
    matrix = np.load(stored / "shop.npy")
    np.save(stored / "shop.npy", matrix[::-1].copy())
    tampered = Counted()
    catalogue = TableCatalogue(shop(folder), options, embed=tampered)
    assert "shop.main.staff_wages" not in [e.name for e in catalogue.search(QUESTION, 5)]
    catalogue.refresh("shop")
    assert len(tampered.texts) == 44  # (the question was not embedded: nothing to compare)
    assert "shop.main.staff_wages" in [e.name for e in catalogue.search(QUESTION, 5)]

    # Vectors of another embedder are not compared with this one's.
    other = Counted("hashing")
    options = CatalogueOptions(folder=stored, check_s=3600, embedder="hashing:64")
    catalogue = TableCatalogue(shop(folder), options, embed=other)
    catalogue.search(QUESTION, 5)
    assert other.texts == []  # nothing embedded with the wrong model: searched by words


def test_without_an_embedder_no_vectors_are_kept(tmp_path: Path) -> None:
    write_folder(tmp_path / "shop", ledgers=2)
    stored = tmp_path / "catalogue"
    TableCatalogue(shop(tmp_path / "shop"), CatalogueOptions(folder=stored)).refresh("shop")
    assert not (stored / "shop.npy").exists()
    catalogue = TableCatalogue(shop(tmp_path / "shop"), CatalogueOptions(folder=stored))
    catalogue.forget("shop")
    assert list(stored.iterdir()) == []


@pytest.mark.parametrize("spec", ["hashing:64"])
def test_the_settings_embedder_indexes_the_service_catalogue(tmp_path: Path, spec: str) -> None:
    from dagwright.tabular import TableAccess

    write_folder(tmp_path / "shop", ledgers=2)
    catalog = shop(tmp_path / "shop")

    class Engine:
        def __init__(self) -> None:
            self.catalog = catalog

    access = TableAccess(
        lambda: Engine(),  # type: ignore[arg-type,return-value]
        catalogue=CatalogueOptions(folder=tmp_path / "c", embedder=spec),
    )
    access.catalogue().refresh("shop")
    assert np.load(tmp_path / "c" / "shop.npy").shape == (6, 64)
