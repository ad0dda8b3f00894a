"""11. A run that cannot be completed: a guard the app might have refuses matched_at more than a day ahead,
and a run with a mistyped --now (2036) fails; the next run completes the interrupted run with its own clock
and fails the same way; `matcher status` shows the shard failing; `matcher runs abandon --shard 0/1`; the next
run's rows equal the clean run's, runs `abandoned,succeeded`."""

import re
import sys

from common import Context, Fatal, detail, now_s, say

GUARD_SQL = r"""CREATE FUNCTION fault_refuse_future_matches() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF NEW.matched_at > now() + interval '1 day' THEN
        RAISE EXCEPTION 'matched_at in the future: %', NEW.matched_at;
    END IF;
    RETURN NEW;
END $$;
CREATE TRIGGER fault_refuse_future_matches BEFORE INSERT ON filter_matches
    FOR EACH ROW EXECUTE FUNCTION fault_refuse_future_matches();
"""


def run_abandoned(ctx: Context) -> None:
    say("11. a run that cannot be completed (a mistyped --now that a database guard refuses): retry fails, abandon, run")
    cfg, q, w = ctx.cfg, ctx.q, ctx.worker
    t = now_s()
    db = "fault_s11"
    ctx.clone("fault_world", db)
    if ctx.server.script(db, GUARD_SQL, log=ctx.logs / "s11-guard.out").returncode != 0:
        sys.stderr.write((ctx.logs / "s11-guard.out").read_text(errors="replace"))
        raise Fatal("could not create the guard")
    # The worker refuses a --now more than an hour after the database's clock (exit 64, nothing written)...
    st0 = ctx.m("s11-refused", db, *cfg.run_at("2036-03-01T03:00:00Z")).rc
    refused_rows = q(db, "SELECT count(*) FROM matcher_runs")
    ctx.server.wait_no_matcher(db)
    detail(f"run --now 2036-…: exit {st0}, run rows {refused_rows}: {w.errline('s11-refused')[:140]}")
    # ...unless told it is on purpose; then a completed interrupted run keeps its own clock, so the retry meets
    # the guard again.
    st1 = ctx.m("s11-mistyped", db, *cfg.run_at("2036-03-01T03:00:00Z"), "--allow-future-now").rc
    ctx.server.wait_no_matcher(db)
    st2 = ctx.m("s11-retry", db, *cfg.run_args).rc
    detail(f"run --now 2036-…: exit {st1}; retry: exit {st2}: {w.errline('s11-retry')[:140]}")
    ctx.server.wait_no_matcher(db)
    ctx.m("s11-status", db, "status", "--format", "json")
    states = re.findall(r'"state": "[a-z_]*"', w.out_text("s11-status"))
    state = states[0] if states else ""
    st3 = ctx.m("s11-abandon", db, "runs", "abandon", "--shard", "0/1").rc
    detail(f"matcher status: {state}; matcher runs abandon --shard 0/1: exit {st3}: "
           f"{(w.out_text('s11-abandon').splitlines() or [''])[0][:120]}")
    after = ctx.m("s11-after", db, *cfg.run_args)
    statuses = q(db, "SELECT string_agg(status, ',' ORDER BY id) FROM matcher_runs")
    got, bad = ctx.checks.sig(db), ctx.checks.bad_digests(db)
    detail(f"next run exit {after.rc} in {after.dur}s; runs: {statuses}; rows: {got} (clean run: {ctx.ref_sig}); "
           f"inconsistent digests: {bad}")
    held = (st0 == 64 and refused_rows == "0" and st1 == 1 and st2 == 1 and "matched_at in the future" in w.errline("s11-retry") and "failing" in state
            and st3 == 0 and after.rc == 0 and statuses == "abandoned,succeeded" and got == ctx.ref_sig and bad == "0")
    ctx.record("11 run abandoned", "refused (64) without --allow-future-now; with it exit 1 twice; abandoned; next run "
               "equals the clean run", held, t)


SCENARIOS = {"11": run_abandoned}
