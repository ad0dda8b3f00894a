"""4. statement_timeout: another session holds ACCESS EXCLUSIVE on notifications; `run --statement-timeout 2`
exits 1 with one line naming the statement timeout; after the lock is released the next run completes."""

import subprocess
import time

from common import Children, Context, detail, now_s, say


def statement_timeout(ctx: Context) -> None:
    say("4. statement_timeout: another session holds ACCESS EXCLUSIVE on notifications; run with --statement-timeout 2")
    t = now_s()
    db = "fault_s4"
    ctx.clone("fault_world", db)
    locker_log = ctx.logs / "s4-locker.out"
    with open(locker_log, "w") as out:
        locker = Children.start(ctx.server.psql_argv(db, "-q", "-At"), stdin=subprocess.PIPE, stdout=out,
                                stderr=subprocess.STDOUT, text=True)
    locker.stdin.write("SET application_name = 'fault-locker'; BEGIN; LOCK TABLE notifications IN ACCESS EXCLUSIVE "
                       "MODE; SELECT 'locked';\n")
    locker.stdin.flush()
    for _ in range(100):
        if "locked" in locker_log.read_text(errors="replace"):
            break
        time.sleep(0.05)
    run = ctx.m("s4", db, *ctx.cfg.run_args, "--statement-timeout", "2")
    locker.stdin.write("COMMIT;\n")
    locker.stdin.close()
    locker.wait()
    w = ctx.worker
    detail(f"run exit {run.rc} after {run.dur}s: {w.errline('s4')}")
    detail(f"left: {ctx.checks.progress(db)}")
    after, ok, text = ctx.next_run("s4-after", db)
    detail(f"lock released; next run (default timeout) exit {after.rc} in {after.dur}s → {text}")
    held = (run.rc == 1 and w.errlines("s4") == 1 and "statement timeout" in w.errline("s4") and after.rc == 0
            and ok)
    ctx.record("4 statement_timeout", f"exit {run.rc} after {run.dur}s (57014, clear line); next run ok", held, t)


SCENARIOS = {"4": statement_timeout}
