-- Which process is writing a run: a token each process sets when it starts a run or takes over an interrupted
-- one. A unit commits only while its process's token is the run's and the run is still running or failed, and
-- a run is finished or marked failed only by its owner. The run lock (a session-level advisory lock) keeps two
-- processes off a shard, but a session ended from outside (pg_terminate_backend, an idle-session killer, a
-- proxy's timeout) frees the lock while its process goes on writing: the next process that takes the lock and
-- completes the run claims it, and the first one's next unit rolls back and it stops. NULL: a run started
-- before this migration (its units, by an older binary, do not check).
ALTER TABLE matcher_runs ADD COLUMN IF NOT EXISTS owner uuid;
