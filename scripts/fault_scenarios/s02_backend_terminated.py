"""2. The worker's connection terminated (pg_terminate_backend) while a unit writes: exit 1 with exactly one
`matcher:` line; committed units kept; the next run completes the work."""

import re

from common import Context, detail, now_s, say, wait_status

# One session polls pg_stat_activity every few ms and, once the run is about a third through its filters
# (so that committed units exist), terminates the worker's backend the first time it is seen running one
# of a unit's writes. {db} and {maxf} are filled in.
KILLER_SQL = r"""SET application_name = 'fault-killer';
DO $$
DECLARE r record;
BEGIN
  FOR i IN 1..24000 LOOP
    PERFORM pg_stat_clear_snapshot();
    SELECT pid, state, left(regexp_replace(query, '\s+', ' ', 'g'), 60) AS q INTO r FROM pg_stat_activity
    WHERE datname = '{db}' AND application_name LIKE 'matcher %' AND state = 'active'
      AND (query ~* '^\s*(INSERT INTO filter_matches|COPY filter_matches|COPY notifications|UPDATE filter_matches)')
      AND (SELECT max(resume_after_filter) FROM matcher_runs) >= {maxf} / 3 LIMIT 1;
    IF r.pid IS NOT NULL THEN
      PERFORM pg_terminate_backend(r.pid);
      RAISE NOTICE 'terminated backend % while % "%"', r.pid, r.state, r.q;
      RETURN;
    END IF;
    PERFORM pg_sleep(0.005);
  END LOOP;
  RAISE NOTICE 'no write seen';
END
$$;
"""


def backend_terminated(ctx: Context) -> None:
    say("2. pg_terminate_backend on the worker's backend while a unit writes")
    t = now_s()
    db = "fault_s2"
    ctx.clone("fault_world", db)
    worker = ctx.m_bg("s2", db, *ctx.cfg.run_args)
    sql = KILLER_SQL.replace("{db}", db).replace("{maxf}", ctx.maxf)
    killer = ctx.server.script(db, sql, log=None).stdout  # stdout and stderr (the notices)
    st = wait_status(worker)
    said = re.search(r"terminated.*|no write seen", killer)
    detail(f"killer: {said.group(0) if said else ''}")
    w = ctx.worker
    detail(f"run exit {st}; {w.errlines('s2')} line(s) from the worker: {w.errline('s2')}")
    detail(f"left: {ctx.checks.progress(db)}")
    after, ok, text = ctx.next_run("s2-after", db)
    detail(f"next run exit {after.rc} in {after.dur}s → {text}")
    held = "terminated" in killer and st == 1 and w.errlines("s2") == 1 and after.rc == 0 and ok
    line = w.errline("s2").removeprefix("matcher: run failed: ")[:40]
    ctx.record("2 backend terminated", f"exit {st}, one line: '{line}…'; next run ok", held, t)


SCENARIOS = {"2": backend_terminated}
