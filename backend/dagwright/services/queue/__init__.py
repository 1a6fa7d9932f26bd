"""Queue mode: runs executed by `dagwright worker` processes from a job queue, durably.

The embedded default runs everything in the server process. With DAGWRIGHT_QUEUE set, the
API processes put async published runs on a Procrastinate queue in the PostgreSQL they
already use, and any number of workers, on any machine, take them (docs/deploy.md).

- settings.py: the queue's settings (limits, worker concurrency, heartbeat, shutdown grace,
  evaluation chunks);
- jobs.py: the queue itself (the tasks, priorities, the schema, deferring in a transaction,
  an evaluation's chunks and lanes);
- submit.py: the API side: limits (429 with Retry-After), then the run and its job;
- durable.py: the worker side: execute a run, or resume one whose worker stopped or died,
  reusing the node results it recorded; plan, run and score an evaluation's examples;
- worker.py: the worker's loop, its hand-over at SIGTERM, and the sweep that gives a dead
  worker's jobs to others;
- deaths.py: how many times a job's workers died (a hand-over is no death): what gives it up.
"""
