"""TQA datasets (AutoTQA's profiles) with their SOP versions and hints (one aggregate: both
go with their dataset), in the store's repository style (see store/apps.py)."""

from __future__ import annotations

from sqlalchemy import func
from sqlmodel import Session, col, select

from dagwright.errors import ConflictError, NotFoundError
from dagwright.store.models import TqaDataset, TqaDatasetSop, TqaHint


class DatasetRepository:
    def __init__(self, db: Session) -> None:
        self._db = db

    def all(self) -> list[TqaDataset]:
        """By name."""
        return list(self._db.exec(select(TqaDataset).order_by(col(TqaDataset.name))).all())

    def get(self, name: str) -> TqaDataset | None:
        return self._db.get(TqaDataset, name)

    def find(self, name: str) -> TqaDataset:
        """The dataset (NotFoundError `tqa_dataset_not_found`)."""
        dataset = self.get(name)
        if dataset is None:
            raise NotFoundError(f"no TQA dataset {name!r}", code="tqa_dataset_not_found")
        return dataset

    def add(self, dataset: TqaDataset) -> None:
        """A taken name is a ConflictError (`tqa_dataset_exists`)."""
        if self.get(dataset.name) is not None:
            raise ConflictError(f"TQA dataset {dataset.name!r} exists", code="tqa_dataset_exists")
        self._db.add(dataset)

    def sop(self, dataset: TqaDataset) -> TqaDatasetSop | None:
        """The dataset's current SOP version (None: it has none yet)."""
        if not dataset.sop_version:
            return None
        return self._db.get(TqaDatasetSop, (dataset.name, dataset.sop_version))

    def last_sop_version(self, dataset: TqaDataset) -> int:
        query = select(func.max(TqaDatasetSop.version)).where(
            col(TqaDatasetSop.dataset) == dataset.name
        )
        return int(self._db.exec(query).one() or 0)

    def add_sop(self, sop: TqaDatasetSop) -> None:
        self._db.add(sop)

    def sops(self, dataset: TqaDataset) -> list[TqaDatasetSop]:
        """Every SOP version, newest first."""
        query = (
            select(TqaDatasetSop)
            .where(col(TqaDatasetSop.dataset) == dataset.name)
            .order_by(col(TqaDatasetSop.version).desc())
        )
        return list(self._db.exec(query).all())

    def delete(self, dataset: TqaDataset) -> None:
        """The dataset, its SOP versions and its hints."""
        for sop in self.sops(dataset):
            self._db.delete(sop)
        for hint in self._db.exec(select(TqaHint).where(col(TqaHint.dataset) == dataset.name)):
            self._db.delete(hint)
        self._db.flush()
        self._db.delete(dataset)
