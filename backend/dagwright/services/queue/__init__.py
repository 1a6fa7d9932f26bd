"""Queue mode: runs executed by `dagwright worker` processes from a job queue, durably.

The embedded default runs everything in the server process. With DAGWRIGHT_QUEUE set, the
API processes put async published runs on a Procrastinate queue in the PostgreSQL they
already use, and any number of workers, on any machine, take them (docs/deploy.md).

- settings.py: the queue's settings (limits, worker concurrency, heartbeat);
- jobs.py: the queue itself (the one task, priorities, the schema, deferring in a
  transaction);
- submit.py: the API side: limits (429 with Retry-After), then the run and its job;
- durable.py: the worker side: execute a run, or resume one whose worker died, reusing the
  node results it recorded;
- worker.py: the worker's loop, and the sweep that gives a dead worker's jobs to others.
"""
