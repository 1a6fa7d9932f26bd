"""Runs: start flows and record every run, so that none is ever lost.

The crash-safety contract, in the order of the writes:

1. the run row is committed as "running" (with its inputs and the process's replica lease)
   before the executor starts, so a run that began always has a row, whatever happens to the
   process later;
2. node results are written as the nodes settle, in group commits shared with every other
   run (see writer.py): a crash keeps what finished before it;
3. the final state (status, outputs, error, usage, duration) is committed last, and
   `LiveRun.wait()` resolves only after that commit.

Each process holds a replica lease (replicas.py), a fresh id that its runs carry in
`runs.replica` and a heartbeat that says it is alive. A process that dies leaves its runs
"running" and its lease unrefreshed; `recover_interrupted()`, run at start-up and then every
`stale_after` seconds by every process, marks "interrupted" the runs whose lease is missing or
stale, whichever replica they belonged to, and never those of a live process (several
processes may share a replica name: `dagwright serve --workers 2`). Cancelling works across
replicas: any replica sets `cancel_requested_at`, and the process running the run notices
within half a second.

The modules, one job each:

- records.py: what a stored run is (RunRecord, NodeRecord) and how values are stored;
- recorder.py: a live run (LiveRun) and its recording: the one fold of run events into node
  traces (runtime/trace.py, which the CLI's `--trace` uses too) applied to rows;
- writer.py: the group-commit writer thread, the only writer of runs and node results;
- replicas.py: replica leases and the recovery of the runs of dead processes;
- service.py: RunService, which starts, reads, cancels and recovers runs.
"""
