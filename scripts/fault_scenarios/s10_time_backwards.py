"""10. Time going backwards (a restore): progress recorded a million transactions ahead of the server's. The
day-2 run refuses (exit 78, one line naming `matcher progress reset`) and writes nothing; after
`matcher progress reset --shard 0/1 --to T` the next run's rows equal a copy that was never restored."""

from common import Context, detail, now_s, say


def edit_day2(ctx: Context, db: str) -> None:
    """The same day-2 edits in both copies: residence flipped on every 97th profile."""
    ctx.q(db, f"""UPDATE profiles SET residence = CASE WHEN residence = 13 THEN 14 ELSE 13 END, updated_at = timestamptz '{ctx.cfg.day2}'
             WHERE id % 97 = 0""")


def time_backwards(ctx: Context) -> None:
    say("10. time going backwards: progress recorded ahead of the database (a restore); refused, progress reset, next run")
    cfg, q, w = ctx.cfg, ctx.q, ctx.worker
    day2 = cfg.run_at(cfg.day2)
    t = now_s()
    db, ref = "fault_s10", "fault_s10_ref"
    ctx.clone("fault_world", db)
    ctx.clone("fault_world", ref)
    st1 = ctx.m("s10-day1", db, *cfg.run_args).rc
    ctx.m("s10-ref-day1", ref, *cfg.run_args)
    # The time the data is current: after day 1's run, before day 2's edits (changes at or after it are new).
    current = q(db, """SELECT to_char(clock_timestamp() AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"')""")
    edit_day2(ctx, db)
    edit_day2(ctx, ref)
    # The restore: the recorded snapshot is a million transactions ahead of this server's.
    q(db, """UPDATE matcher_shard_progress SET snapshot = format('%1$s:%1$s:',
                pg_snapshot_xmax(pg_current_snapshot())::text::bigint + 1000000)::pg_snapshot""")
    st2 = ctx.m("s10-refused", db, *day2).rc
    detail(f"day-2 run with progress ahead: exit {st2}: {w.errline('s10-refused')[:160]}")
    st3 = ctx.m("s10-reset", db, "progress", "reset", "--shard", "0/1", "--to", current).rc
    detail(f"matcher progress reset --shard 0/1 --to {current}: exit {st3}: "
           f"{(w.out_text('s10-reset').splitlines() or [''])[0][:120]}")
    after = ctx.m("s10-day2", db, *day2)
    ctx.m("s10-ref-day2", ref, *day2)
    want = ctx.checks.sig(ref)
    ok, text = ctx.checks.compare(db, want)
    detail(f"next day-2 run exit {after.rc} in {after.dur}s → {text} (the copy that was never restored: {want})")
    held = (st1 == 0 and st2 == 78 and w.errlines("s10-refused") == 1
            and "matcher progress reset --shard 0/1 --to" in w.errline("s10-refused") and st3 == 0 and after.rc == 0
            and ok)
    ctx.record("10 time going backwards",
               "exit 78 with the reset advice; progress reset; next run equals the never-restored copy", held, t)


SCENARIOS = {"10": time_backwards}
