"""The benchmarks' metrics, one module each: wikitq (denotation accuracy), tabfact (accuracy),
fetaqa (sacreBLEU, ROUGE), sql_exec (Spider and BIRD execution accuracy, VES), numeric (exact
match with a tolerance), finqa (FinQA execution accuracy, and its gold-gated upper bound).
`base` holds what they return."""

METRICS = ("wikitq", "tabfact", "fetaqa", "spider", "bird", "numeric", "finqa", "finqa_gold_gated")
