"""7. A late commit: a transaction inserting 5 matching profiles stays open across a day-2 run, then commits.
The run during it does not wait (< 10 s) and matches none of them; the next run matches all 5, exactly as in
a database where the insert was committed before the day-2 run."""

import re
import subprocess
import time

from common import Children, Context, detail, now_s, say

PER_PROFILE_SQL = """SELECT string_agg(format('%s:%s', profile_id, k), ' ' ORDER BY profile_id) FROM
                    (SELECT profile_id, count(*) AS k FROM filter_matches WHERE profile_id > 800000 GROUP BY profile_id) s"""


def late_commit(ctx: Context) -> None:
    cfg, q = ctx.cfg, ctx.q
    day2 = cfg.day2
    say(f"7. a transaction inserting matching profiles, open across a run (--now {day2}), committed after it")
    t = now_s()
    db, ref = "fault_s7", "fault_s7_ref"
    ctx.clone("fault_ref", db)
    ctx.clone("fault_ref", ref)
    cols = q("fault_ref", """SELECT string_agg(column_name, ', ' ORDER BY ordinal_position) FROM information_schema.columns
                         WHERE table_name = 'profiles' AND column_name NOT IN ('id', 'last_login_at', 'updated_at')""")
    # Copies (ids 800000 + id) of the five smallest matched profiles, logged in an hour before day 2.
    insert = f"""INSERT INTO profiles (id, last_login_at, updated_at, {cols})
          SELECT 800000 + id, timestamptz '{day2}' - interval '1 hour', timestamptz '{day2}' - interval '1 hour', {cols} FROM profiles
          WHERE id IN (SELECT DISTINCT profile_id FROM filter_matches ORDER BY profile_id LIMIT 5);"""
    # The reference: the same insert committed before the day-2 run.
    q(ref, insert)
    rref = ctx.m("s7-ref", ref, *cfg.run_at(day2)).rc
    app_log = ctx.logs / "s7-app.out"
    with open(app_log, "w") as out:
        app = Children.start(ctx.server.psql_argv(db, "-q", "-At"), stdin=subprocess.PIPE, stdout=out,
                             stderr=subprocess.STDOUT, text=True)
    app.stdin.write(f"SET application_name = 'fault-app'; BEGIN; {insert} SELECT 'inserted', txid_current();\n")
    app.stdin.flush()
    for _ in range(100):
        if "inserted" in app_log.read_text(errors="replace"):
            break
        time.sleep(0.05)
    during_run = ctx.m("s7-during", db, *cfg.run_at(day2))
    during = q(db, "SELECT count(*) FROM filter_matches WHERE profile_id > 800000")
    app.stdin.write("COMMIT;\n")
    app.stdin.close()
    app.wait()
    r2 = ctx.m("s7-after", db, *cfg.run_at(day2)).rc
    got = q(db, PER_PROFILE_SQL)
    want = q(ref, PER_PROFILE_SQL)
    n = q(db, "SELECT count(DISTINCT profile_id) FROM filter_matches WHERE profile_id > 800000")
    ok, text = ctx.checks.compare(db, ctx.checks.sig(ref))
    inserted = re.search(r"inserted\|.*", app_log.read_text(errors="replace"))
    by = inserted.group(0).replace("|", " by transaction ", 1) if inserted else ""
    detail(f"{by} (open); run during it: exit {during_run.rc} in {during_run.dur}s, matches of the new profiles: "
           f"{during}")
    detail(f"committed; next run exit {r2}: new profiles matched (profile:matches) {got}")
    detail(f"reference (committed before the run): {want}; whole rows vs the reference: {text}")
    held = (rref == 0 and during_run.rc == 0 and r2 == 0 and during == "0" and n == "5" and got == want and ok
            and float(during_run.dur) < 10)
    ctx.record("7 late commit", f"run did not wait ({during_run.dur}s); next run matched all 5 new profiles", held, t)


SCENARIOS = {"7": late_commit}
