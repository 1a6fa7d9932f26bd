"""Which tables and columns a question is about: MAC-SQL's Selector without a model.

Each table and each column becomes a small document: names split into words (snake_case,
camelCase, digits), the comment, and for columns the value examples of a sample (so "Tom"
finds Employee.Name). Scores, each scaled so the best candidate of a question gets 1:

- lexical: BM25 (k1 1.2, b 0.75) of the question's words against the documents, the idf taken
  over all tables (or all columns) given, so a word every table has ("id") counts little;
- semantic, when an embedder is given: cosine similarity of the question's vector with each
  document's vector (negative similarities count as 0).

score = 0.6 lexical + 0.4 semantic (lexical alone without an embedder): names and values are
exact evidence, embeddings find the synonyms ("cost" for a column "amount"). A table's score
is 0.6 of its own document's and 0.4 of its best column's, because one strongly matching
column ("bonus") is evidence for its table even when the table's name says nothing.

The best `top_tables` tables with a score above 0 are kept, then the tables a join needs are
added: those the kept tables reference by foreign key, and those linking two kept tables that
no foreign key joins directly (a bridge). Each table lists its best `top_columns` columns plus
its key columns, which a join needs whatever their score.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import pyarrow as pa

from dagwright.data.connector import TableInfo
from dagwright.data.serialize import table_name
from dagwright.embedding.embedder import Embedder

LEXICAL_WEIGHT = 0.6
SEMANTIC_WEIGHT = 0.4
OWN_WEIGHT = 0.6  # of a table's score: its own document; the rest: its best column
MAX_EXAMPLES = 20  # distinct sample values per column added to its document

_K1, _B = 1.2, 0.75
_PART = re.compile(r"[A-Z]+(?=[A-Z][a-z])|[A-Z]?[a-z]+|[A-Z]+|\d+")
_STOP = frozenset(
    {
        "a", "an", "and", "are", "as", "at", "be", "by", "did", "do", "does", "each", "for", "from",
        "give", "has", "have", "how", "in", "is", "it", "list", "me", "much", "many", "of", "on",
        "or", "per", "show", "tell", "than", "that", "the", "their", "there", "this", "to", "was",
        "what", "when", "where", "which", "who", "whose", "why", "with",
    }
)  # fmt: skip


@dataclass(frozen=True, slots=True)
class TableMatch:
    """A table chosen for the question, its score (0..1), its chosen columns with their
    scores, best first, and `via`: the matched table whose join pulled it in (None when it
    was matched itself)."""

    table: TableInfo
    score: float
    columns: list[tuple[str, float]] = field(default_factory=list)
    via: str | None = None


def words(text: str) -> list[str]:
    """Lower-case word stems of a text or identifier: "DepName" -> dep, name;
    "daily_billing" -> daily, billing; "bonuses" -> bonus. Stop words are dropped."""
    tokens = []
    for part in _PART.findall(text):
        token = part.lower()
        if token not in _STOP:
            tokens.append(_stem(token))
    return tokens


def _stem(token: str) -> str:
    # Plurals only: enough for names like "employees", "salaries", "bonuses".
    if len(token) > 4 and token.endswith("ies"):
        return token[:-3] + "y"
    if len(token) > 4 and token.endswith(("ses", "xes", "zes", "ches", "shes")):
        return token[:-2]
    if len(token) > 3 and token.endswith("s") and not token.endswith(("ss", "us", "is")):
        return token[:-1]
    return token


def lookup_lexical(
    question: str,
    tables: Sequence[TableInfo],
    *,
    top_tables: int = 5,
    top_columns: int = 12,
    samples: Mapping[str, pa.Table] | None = None,
    names: Sequence[str] | None = None,
) -> list[TableMatch]:
    """`lookup` with lexical scores only, without awaiting anything."""
    documents = _Documents(tables, samples, names)
    table_scores, column_scores = _lexical(question, documents)
    return _choose(documents, table_scores, column_scores, top_tables, top_columns)


async def lookup(
    question: str,
    tables: Sequence[TableInfo],
    *,
    top_tables: int = 5,
    top_columns: int = 12,
    embedder: Embedder | None = None,
    samples: Mapping[str, pa.Table] | None = None,
    names: Sequence[str] | None = None,
) -> list[TableMatch]:
    """The tables (and their columns) relevant to `question`, best first, then the tables a
    join between them needs. `samples` are keyed by `names` (one per table; by default
    ``schema.name``) and give value examples. The embedder, when given, embeds the question
    and one text per table and per column in one call (wrap it in CachedEmbedder to embed a
    schema once across questions)."""
    documents = _Documents(tables, samples, names)
    table_scores, column_scores = _lexical(question, documents)
    if embedder is not None and documents.column_texts:
        texts = [question, *documents.table_texts, *documents.column_texts]
        vectors = await embedder.embed(texts)
        query, rest = vectors[0], vectors[1:]
        n_tables = len(documents.table_texts)
        table_similarity = _scaled([_cosine(query, v) for v in rest[:n_tables]])
        column_similarity = _scaled([_cosine(query, v) for v in rest[n_tables:]])
        table_scores = _mix(table_scores, table_similarity)
        column_scores = _mix(column_scores, column_similarity)
    return _choose(documents, table_scores, column_scores, top_tables, top_columns)


class _Documents:
    """The words and texts of every table and column, in the order of the tables given;
    column document i is column `column_names[i]` of table `owner[i]`."""

    def __init__(
        self,
        tables: Sequence[TableInfo],
        samples: Mapping[str, pa.Table] | None,
        names: Sequence[str] | None,
    ) -> None:
        self.tables = list(tables)
        self.names = list(names) if names is not None else [table_name(t) for t in tables]
        if len(self.names) != len(self.tables):
            raise ValueError(f"{len(self.names)} names given for {len(self.tables)} tables")
        self.table_words: list[list[str]] = []
        self.table_texts: list[str] = []
        self.column_words: list[list[str]] = []
        self.column_texts: list[str] = []
        self.owner: list[int] = []
        self.column_names: list[str] = []
        for index, (table, name) in enumerate(zip(self.tables, self.names, strict=True)):
            sample = samples.get(name) if samples else None
            column_names = " ".join(c.name for c in table.columns)
            # The table's own name counts twice: it is the strongest hint of what it holds.
            own = f"{table.name} {table.name} {table.comment or ''}"
            self.table_words.append(words(f"{own} {column_names}"))
            self.table_texts.append(f"{table.name}: {table.comment or ''}. Columns: {column_names}")
            for column in table.columns:
                examples = _examples(sample, column.name)
                text = f"{column.name} {column.name} {column.comment or ''} {examples}"
                self.column_words.append(words(text))
                self.column_texts.append(
                    f"{table.name}.{column.name}: {column.comment or ''}. Values: {examples}"
                )
                self.owner.append(index)
                self.column_names.append(column.name)


def _examples(sample: pa.Table | None, column: str) -> str:
    if sample is None or column not in sample.column_names:
        return ""
    values: list[str] = []
    for value in sample.column(column).to_pylist():
        text = str(value)
        if value is not None and text not in values:
            values.append(text)
            if len(values) == MAX_EXAMPLES:
                break
    return " ".join(values)


def _lexical(question: str, documents: _Documents) -> tuple[list[float], list[float]]:
    query = words(question)
    return (
        _scaled(_bm25(query, documents.table_words)),
        _scaled(_bm25(query, documents.column_words)),
    )


def _bm25(query: list[str], documents: list[list[str]]) -> list[float]:
    if not documents:
        return []
    average = sum(len(d) for d in documents) / len(documents) or 1.0
    frequency = Counter(token for document in documents for token in set(document))
    scores = []
    for document in documents:
        counts = Counter(document)
        norm = _K1 * (1 - _B + _B * len(document) / average)
        score = 0.0
        for token in set(query):
            tf = counts.get(token, 0)
            if tf:
                score += _weighted(tf, frequency[token], len(documents), norm)
        scores.append(score)
    return scores


def bm25_term(tf: int, df: int, count: int, length: int, average: float) -> float:
    """One query word's BM25 score in a document of ``length`` words holding it ``tf``
    times, ``df`` of the ``count`` documents (of ``average`` length) holding it: the
    scoring `lookup` uses, for an index kept across questions (data/table_catalogue.py)."""
    return _weighted(tf, df, count, _K1 * (1 - _B + _B * length / average))


def _weighted(tf: int, df: int, count: int, norm: float) -> float:
    idf = math.log(1 + (count - df + 0.5) / (df + 0.5))
    return idf * tf * (_K1 + 1) / (tf + norm)


def _scaled(scores: list[float]) -> list[float]:
    top = max(scores, default=0.0)
    return [max(s, 0.0) / top for s in scores] if top > 0 else [0.0] * len(scores)


def _mix(lexical: list[float], semantic: list[float]) -> list[float]:
    return [
        LEXICAL_WEIGHT * a + SEMANTIC_WEIGHT * b for a, b in zip(lexical, semantic, strict=True)
    ]


def _cosine(a: list[float], b: list[float]) -> float:
    dot = sum(x * y for x, y in zip(a, b, strict=True))
    norm = math.sqrt(sum(x * x for x in a)) * math.sqrt(sum(y * y for y in b))
    return dot / norm if norm else 0.0


def _choose(
    documents: _Documents,
    table_scores: list[float],
    column_scores: list[float],
    top_tables: int,
    top_columns: int,
) -> list[TableMatch]:
    by_table: list[list[tuple[str, float]]] = [[] for _ in documents.tables]
    for owner, column, score in zip(
        documents.owner, documents.column_names, column_scores, strict=True
    ):
        by_table[owner].append((column, score))
    scores = []
    for index, own in enumerate(table_scores):
        best = max((s for _, s in by_table[index]), default=0.0)
        scores.append(OWN_WEIGHT * own + (1 - OWN_WEIGHT) * best)
    ranked = sorted(range(len(scores)), key=lambda i: -scores[i])  # stable: ties keep order
    chosen = [i for i in ranked[:top_tables] if scores[i] > 0]
    pulled = _join_partners(documents, chosen)

    def match(index: int, via: str | None) -> TableMatch:
        table = documents.tables[index]
        columns = sorted(by_table[index], key=lambda item: -item[1])[:top_columns]
        keys = [*table.primary_key, *(c for k in table.foreign_keys for c in k.columns)]
        kept = {name for name, _ in columns}
        columns += [
            (name, score) for name, score in by_table[index] if name in keys and name not in kept
        ]
        return TableMatch(table, round(scores[index], 4), columns, via)

    matches = [match(i, None) for i in chosen]
    matches += [match(i, documents.names[via]) for i, via in pulled]
    return matches


def _join_partners(documents: _Documents, chosen: list[int]) -> list[tuple[int, int]]:
    """(table, chosen table that needs it), each table once, in the order of the tables
    given: the tables a chosen one references, and the tables referencing two chosen ones
    that no foreign key joins directly (a bridge, like enrollments between students and
    courses)."""
    where = {(t.schema, t.name): i for i, t in enumerate(documents.tables)}

    def references(index: int) -> set[int]:
        keys = documents.tables[index].foreign_keys
        return {
            where[k.ref_schema, k.ref_table] for k in keys if (k.ref_schema, k.ref_table) in where
        }

    pulled: dict[int, int] = {}
    for index in chosen:
        for target in sorted(references(index)):
            if target not in chosen:
                pulled.setdefault(target, index)
    for index in range(len(documents.tables)):
        if index in chosen or index in pulled:
            continue
        linked = [i for i in chosen if i in references(index)]
        apart = [
            (a, b)
            for a in linked
            for b in linked
            if a < b and b not in references(a) and a not in references(b)
        ]
        if apart:
            pulled[index] = apart[0][0]
    return sorted(pulled.items())
