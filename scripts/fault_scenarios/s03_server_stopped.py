"""3. The server stopped (`pg_ctl stop -m immediate`) once a unit has committed; restart (crash recovery);
the failed run exits 1 with one line and the next run completes the work."""

from common import Context, Fatal, detail, now_s, say, since, wait_status


def server_stopped(ctx: Context) -> None:
    say("3. pg_ctl stop -m immediate while the run writes; restart; run again")
    t = now_s()
    db = "fault_s3"
    ctx.clone("fault_world", db)
    worker = ctx.m_bg("s3", db, *ctx.cfg.run_args)
    c = ctx.server.wait_first_unit(db)
    stopped = now_s()
    ctx.server.stop_immediate()
    detail(f"server stopped (immediate) with the run's cursor after filter {c}")
    st = wait_status(worker)
    w = ctx.worker
    detail(f"run exit {st} after {since(stopped)}s: {w.errline('s3')}")
    if not ctx.server.start():
        raise Fatal("the private server did not restart")
    detail(f"server restarted (crash recovery) in {since(stopped)}s since the stop; left: {ctx.checks.progress(db)}")
    after, ok, text = ctx.next_run("s3-after", db)
    detail(f"next run exit {after.rc} in {after.dur}s → {text}")
    held = st == 1 and w.errlines("s3") == 1 and after.rc == 0 and ok
    line = w.errline("s3").removeprefix("matcher: run failed: ")[:40]
    ctx.record("3 server stopped", f"exit {st}, one line: '{line}…'; restart, next run ok", held, t)


SCENARIOS = {"3": server_stopped}
