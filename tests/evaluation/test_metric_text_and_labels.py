"""TabFact accuracy, FeTaQA sacreBLEU / ROUGE and numeric exact match on hand-checked cases."""

from __future__ import annotations

import pytest
import sacrebleu

from dagwright.evaluation.metrics import fetaqa, numeric, tabfact
from dagwright.evaluation.metrics.base import Item


def test_tabfact_accuracy_and_labels() -> None:
    items = [
        Item("0", {"label": 1}, "entailed"),
        Item("1", {"label": 0}, "Refuted."),
        Item("2", {"label": 1}, False),
        Item("3", {"label": 0}, "maybe"),  # not a label: wrong
    ]
    report = tabfact.score(items)
    assert [e.correct for e in report.examples] == [True, True, False, False]
    assert report.value == 0.5


def test_fetaqa_rouge_by_hand() -> None:
    report = fetaqa.score([Item("7", {"answer": "the cat sat on the mat"}, " the cat sat ")])
    detail = report.examples[0].detail
    # unigrams: 3 shared, precision 3/3, recall 3/6 -> F = 2/3; bigrams 2/2 and 2/5 -> 4/7
    assert detail["rouge1"] == pytest.approx(2 / 3)
    assert detail["rouge2"] == pytest.approx(4 / 7)
    assert detail["rougeL"] == pytest.approx(2 / 3)
    assert report.aggregate["rougeL"] == pytest.approx(2 / 3)


def test_fetaqa_sacrebleu_is_corpus_bleu_with_default_settings() -> None:
    refs = ["The team won the cup in 1998 .", "He was born in Paris ."]
    preds = ["The team won the cup in 1998.", "he was born in paris"]
    report = fetaqa.score(
        [Item(str(i), {"answer": r}, p) for i, (r, p) in enumerate(zip(refs, preds, strict=True))]
    )
    assert report.aggregate["sacrebleu"] == pytest.approx(
        sacrebleu.corpus_bleu(preds, [refs]).score
    )
    # case counts for BLEU (sacrebleu's default), not for ROUGE (rouge-score lower-cases)
    assert report.examples[1].detail["bleu"] < 100
    assert report.examples[1].detail["rouge1"] == pytest.approx(1.0)
    same = fetaqa.score([Item("0", {"answer": refs[0]}, refs[0])])
    assert same.aggregate["sacrebleu"] == pytest.approx(100.0)


@pytest.mark.parametrize(
    ("gold", "predicted", "ok"),
    [
        ("1,000,000", "1000000.0", True),
        ("3.14159", "3.1416", True),  # within 0.01 %
        ("0.5", "0.51", False),
        ("45%", "45", True),
        ("12.5", "$12.50", True),
        ("5", "five", False),
        ("Paris", " paris ", True),  # not a number: normalised text
        ("7", None, False),
    ],
)
def test_numeric_exact_match(gold: str, predicted: str | None, ok: bool) -> None:
    assert numeric.score([Item("0", {"answer": gold}, predicted)]).examples[0].correct is ok
