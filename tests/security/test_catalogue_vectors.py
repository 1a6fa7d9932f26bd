"""The catalogue's stored vectors (docs/security/catalogue.md): a `.npy` planted or swapped
in the catalogue folder is never unpickled, and a matrix the JSON did not record is not
used to rank tables."""

from __future__ import annotations

import pickle
from pathlib import Path

import numpy as np

from dagwright.data.catalog import Catalog
from dagwright.data.connectors import FilesConnector
from dagwright.data.table_catalogue import CatalogueOptions, TableCatalogue
from dagwright.embedding.lexical import HashingEmbedder
from dagwright.secrets import MappingSecrets
from dagwright.tabular import sync_embed
from support.source_paths import TEMPORARY_FOLDERS

RAN: list[str] = []


class Payload:
    """What a pickle-loading reader would run."""

    def __reduce__(self) -> tuple[object, tuple[str]]:
        return (RAN.append, ("pwned",))


def catalogue(folder: Path, stored: Path) -> TableCatalogue:
    connector = FilesConnector.from_config(
        "shop", {"path": str(folder)}, MappingSecrets({}), paths=TEMPORARY_FOLDERS
    )
    options = CatalogueOptions(folder=stored, check_s=3600, embedder="hashing:32")
    return TableCatalogue(
        Catalog({"shop": connector}), options, embed=sync_embed(HashingEmbedder(32))
    )


def test_a_planted_pickle_is_never_loaded(tmp_path: Path) -> None:
    folder, stored = tmp_path / "shop", tmp_path / "catalogue"
    folder.mkdir()
    (folder / "orders.csv").write_text("id,amount\n1,2\n")
    catalogue(folder, stored).refresh("shop")
    assert np.load(stored / "shop.npy").shape == (1, 32)

    # An object array (pickled) where the float32 matrix was.
    with (stored / "shop.npy").open("wb") as out:
        np.save(out, np.array([Payload()], dtype=object), allow_pickle=True)
    assert b"append" in (stored / "shop.npy").read_bytes()
    later = catalogue(folder, stored)
    assert [e.name for e in later.search("orders", 3)] == ["shop.main.orders"]  # by words
    assert RAN == []
    assert pickle.dumps(Payload())  # (the payload is real: loading it would have run)


def test_a_matrix_of_the_right_shape_but_not_recorded_is_not_used(tmp_path: Path) -> None:
    folder, stored = tmp_path / "shop", tmp_path / "catalogue"
    folder.mkdir()
    for name in ("orders", "volcanoes"):
        (folder / f"{name}.csv").write_text("id,amount\n1,2\n")
    catalogue(folder, stored).refresh("shop")
    # Rows that would put any question next to the attacker's chosen table.
    np.save(stored / "shop.npy", np.ones((2, 32), dtype=np.float32))
    later = catalogue(folder, stored)
    assert [e.name for e in later.search("weather", 5)] == []  # no word, no trusted vector
