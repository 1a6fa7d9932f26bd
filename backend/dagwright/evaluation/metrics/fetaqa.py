"""FeTaQA: sacreBLEU and ROUGE-1/2/L with the settings of the FeTaQA release
(Yale-LILY/FeTaQA end2end/train.py, through Hugging Face's `sacrebleu` and `rouge` metrics):

- predictions and references are stripped of surrounding whitespace;
- sacreBLEU is corpus BLEU with sacrebleu's defaults (13a tokenisation, exponential smoothing,
  case kept, one reference per prediction), reported 0-100;
- ROUGE is Google's rouge-score without stemming (its tokenizer lower-cases and keeps
  letters and digits); each is the mean F-measure over examples, 0-1. Hugging Face reports
  the `mid` of a bootstrap over the same per-example scores, a resampled estimate of this mean;
  the mean is given here so a score does not depend on a random seed.

Per example: sentence BLEU (the same settings) and the three ROUGE F-measures; the example's
score is its ROUGE-L.
"""

from __future__ import annotations

from typing import Any

from dagwright.evaluation.metrics.base import ExampleScore, Item, ScoreReport

ROUGE_TYPES = ("rouge1", "rouge2", "rougeL")


def _text(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, list):
        return " ".join(str(v) for v in value).strip()
    return str(value).strip()


def score(items: list[Item]) -> ScoreReport:
    from rouge_score import rouge_scorer  # type: ignore[import-untyped]
    from sacrebleu.metrics.bleu import BLEU

    predictions = [_text(item.prediction) for item in items]
    references = [_text(item.gold["answer"]) for item in items]
    scorer = rouge_scorer.RougeScorer(list(ROUGE_TYPES), use_stemmer=False)
    bleu = BLEU()
    sentence_bleu = BLEU(effective_order=True)
    examples = []
    totals = dict.fromkeys(ROUGE_TYPES, 0.0)
    for item, prediction, reference in zip(items, predictions, references, strict=True):
        rouge = scorer.score(reference, prediction)
        detail: dict[str, Any] = {k: rouge[k].fmeasure for k in ROUGE_TYPES}
        detail["bleu"] = sentence_bleu.sentence_score(prediction, [reference]).score
        for k in ROUGE_TYPES:
            totals[k] += rouge[k].fmeasure
        examples.append(ExampleScore(item.id, detail["rougeL"], None, detail))
    count = len(items)
    aggregate = {
        "sacrebleu": bleu.corpus_score(predictions, [references]).score if items else 0.0,
        **{k: (totals[k] / count if count else 0.0) for k in ROUGE_TYPES},
    }
    return ScoreReport("fetaqa", "sacrebleu", aggregate, examples, [])
