"""`dagwright eval score` on prediction files in the official formats (fixtures), and on the
whole shared packs when they are beside the repository."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from dagwright.cli.eval import eval_app

from .conftest import FIXTURES

PACKS = Path(__file__).resolve().parents[3] / "shared" / "datasets"
runner = CliRunner()


@pytest.fixture(autouse=True)
def data_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DAGWRIGHT_DATA_DIR", str(tmp_path / "data"))


def _score(*args: str) -> tuple[int, str]:
    result = runner.invoke(eval_app, ["score", *args])
    return result.exit_code, result.output


def _wikitq_predictions(dataset: Path, target: Path, wrong: int = 0) -> int:
    lines = dataset.read_text(encoding="utf-8").splitlines()
    header = lines[0].split("\t")
    out = []
    for number, line in enumerate(lines[1:]):
        row = dict(zip(header, line.split("\t"), strict=False))
        items = row["targetValue"].split("|")
        out.append("\t".join([row["id"], *(["wrong"] if number < wrong else items)]))
    target.write_text("\n".join(out) + "\n", encoding="utf-8")
    return len(out)


def test_wikitq_per_example_and_accuracy(tmp_path: Path) -> None:
    dataset = FIXTURES / "wikitq" / "seen_tagged.tsv"
    predictions = tmp_path / "pred.tsv"
    count = _wikitq_predictions(dataset, predictions, wrong=2)
    code, output = _score(
        "--metric",
        "wikitq",
        "--dataset",
        str(dataset),
        "--predictions",
        str(predictions),
        "--per-example",
    )
    assert code == 0, output
    lines = output.splitlines()
    assert lines[0].endswith("\tFalse")
    assert lines[1].endswith("\tFalse")
    assert lines[2].endswith("\tTrue")
    assert f"Accuracy: {(count - 2) / count:.4f}" in output
    code, output = _score(
        "--metric",
        "wikitq",
        "--dataset",
        str(dataset),
        "--predictions",
        str(predictions),
        "--json",
    )
    assert json.loads(output)["value"] == pytest.approx((count - 2) / count)


def test_tabfact_and_fetaqa_files(tmp_path: Path) -> None:
    records = [json.loads(x) for x in (FIXTURES / "tabfact" / "dev.jsonl").read_text().splitlines()]
    (tmp_path / "tf.tsv").write_text(
        "".join(f"{i}\t{1 - r['label'] if i == 0 else r['label']}\n" for i, r in enumerate(records))
    )
    code, output = _score(
        "--metric",
        "tabfact",
        "--dataset",
        str(FIXTURES / "tabfact" / "dev.jsonl"),
        "--predictions",
        str(tmp_path / "tf.tsv"),
        "--json",
    )
    assert code == 0, output
    assert json.loads(output)["value"] == pytest.approx((len(records) - 1) / len(records))

    feta = [json.loads(x) for x in (FIXTURES / "fetaqa" / "dev.jsonl").read_text().splitlines()]
    (tmp_path / "preds.txt").write_text("\n".join(r["answer"] for r in feta))
    code, output = _score(
        "--metric",
        "fetaqa",
        "--dataset",
        str(FIXTURES / "fetaqa" / "dev.jsonl"),
        "--predictions",
        str(tmp_path / "preds.txt"),
        "--json",
    )
    assert code == 0, output
    aggregate = json.loads(output)["aggregate"]
    assert aggregate["sacrebleu"] == pytest.approx(100.0)
    assert aggregate["rougeL"] == pytest.approx(1.0)
    (tmp_path / "short.txt").write_text("one line")
    code, output = _score(
        "--metric",
        "fetaqa",
        "--dataset",
        str(FIXTURES / "fetaqa" / "dev.jsonl"),
        "--predictions",
        str(tmp_path / "short.txt"),
    )
    assert code == 2
    assert "invalid_score_input" in output


def test_spider_and_bird_official_formats(tmp_path: Path) -> None:
    gold_csv = FIXTURES / "spider" / "train_queries.csv"
    with gold_csv.open(encoding="utf-8", newline="") as handle:
        rows = list(csv.DictReader(handle))
    predictions = [r["sql"] for r in rows]
    predictions[0] = "SELECT COUNT(*) FROM Student"  # wrong
    (tmp_path / "pred.sql").write_text("\n".join(predictions) + "\n")
    code, output = _score(
        "--metric",
        "spider",
        "--dataset",
        str(gold_csv),
        "--predictions",
        str(tmp_path / "pred.sql"),
        "--dialect",
        "mysql",
        "--per-example",
    )
    assert code == 0, output
    assert output.splitlines()[0] == "0\tFalse"
    assert f"Accuracy: {(len(rows) - 1) / len(rows):.4f}" in output

    (tmp_path / "dev_gold.sql").write_text("".join(f"{r['sql']}\t{r['database']}\n" for r in rows))
    bird = {
        str(i): f"{sql}\t----- bird -----\t{r['database']}"
        for i, (sql, r) in enumerate(zip(predictions, rows, strict=True))
    }
    (tmp_path / "predict_dev.json").write_text(json.dumps(bird))
    code, output = _score(
        "--metric",
        "bird",
        "--dataset",
        str(tmp_path / "dev_gold.sql"),
        "--predictions",
        str(tmp_path / "predict_dev.json"),
        "--db-root",
        str(FIXTURES / "spider" / "databases"),
        "--dialect",
        "mysql",
        "--ves",
        "2",
        "--json",
    )
    assert code == 0, output
    result = json.loads(output)
    assert result["value"] == pytest.approx((len(rows) - 1) / len(rows))
    assert result["aggregate"]["ves"] > 0


@pytest.mark.skipif(not PACKS.is_dir(), reason=f"no shared packs at {PACKS}")
def test_gold_answers_score_full_marks_on_every_wikitq_pack(tmp_path: Path) -> None:
    for name in ("dev.tsv", "seen_tagged.tsv", "train_pool.tsv"):
        predictions = tmp_path / f"{name}.pred"
        count = _wikitq_predictions(PACKS / "wikitq" / name, predictions)
        code, output = _score(
            "--metric",
            "wikitq",
            "--dataset",
            str(PACKS / "wikitq" / name),
            "--predictions",
            str(predictions),
            "--json",
        )
        assert code == 0, output
        result = json.loads(output)
        assert result["count"] == count
        assert result["value"] == 1.0, name
