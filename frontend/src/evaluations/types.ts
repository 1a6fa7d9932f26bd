// The evaluation API's shapes (backend/dagwright/api/routes/evaluations.py, docs/evaluation.md).

export interface DatasetSummary {
  id: string;
  name: string;
  kind: string;
  metric: string;
  source: string | null;
  splits: Record<string, number>;
}

export interface Progress {
  total: number;
  done: number;
  errors: number;
  tokens: number;
  cost: number;
  elapsed: number;
  rate: number;
  eta: number | null;
}

export interface EvaluationRecord {
  id: string;
  app_id: string | null;
  version_id: string | null;
  label: string;
  dataset_id: string;
  split: string;
  metric: string;
  status: string; // running | interrupted | completed | failed
  error: { code: string; message: string } | null; // why a failed one failed
  total: number;
  aggregate: Record<string, number | string> | null;
  created_at: string;
  finished_at: string | null;
  done?: number;
  running_here?: boolean;
  progress?: Progress | null;
}

export interface Group {
  value: string;
  count: number;
  mean: number;
}

export interface Failure {
  id: string;
  question: string;
  prediction: unknown;
  gold: Record<string, unknown>;
  score: number | null;
  error: { code?: string; message?: string } | null;
  run_id: string | null;
  trace: string | null;
}

export interface Bin {
  from: number;
  to: number;
  count: number;
}

export interface Report {
  evaluation: EvaluationRecord;
  metric: string;
  primary: string;
  value: number | null;
  aggregate: Record<string, number>;
  examples: number;
  mean_example_score: number;
  ci: { low: number; high: number; confidence: number };
  breakdowns: Record<string, Group[]>;
  cost: { tokens: number; cost: number; tokens_per_example: number; cost_per_example: number };
  latency: { mean: number | null; p50: number | null; p95: number | null };
  errors: number;
  failures: Failure[];
  charts: { latency_histogram: Bin[]; score_histogram: Bin[] };
}

export interface Comparison {
  a: EvaluationRecord;
  b: EvaluationRecord;
  metric: string;
  examples: number;
  mean_a: number;
  mean_b: number;
  difference: number;
  ci: { low: number; high: number; confidence: number };
  test: { name: string; p_value: number };
  gained: string[];
  lost: string[];
}

export interface StartBody {
  app: string;
  version?: string;
  dataset: string;
  split: string;
  limit?: number;
  concurrency: number;
}
