"""9. Hostile rows (issue 14): the app drops NOT NULL on some columns and writes NULL array elements, a 2-D
array, a 50000-element array, infinite dates and logins, NULLs, status 7, and filters with huge or negative
intervals, an owner with no profile, NULL or 70 KiB conditions, NULL notify. Runs on days 1, 2 and 3 all exit
0; day 1's world rows equal the clean run's; NULL and 70 KiB conditions are recorded invalid."""

import re
import sys

from common import Context, Fatal, detail, now_s, say

# Profiles MAXP + k: NOT NULL dropped by "the app", then odd values. Their last login is -infinity or NULL
# (the oldest under the cap), so they can never displace a world profile; the signature takes them out of
# digests.
HOSTILE_ROWS_SQL = r"""ALTER TABLE profiles ALTER COLUMN languages DROP NOT NULL, ALTER COLUMN gender DROP NOT NULL,
    ALTER COLUMN last_login_at DROP NOT NULL, ALTER COLUMN status DROP NOT NULL;
ALTER TABLE saved_filters ALTER COLUMN conditions DROP NOT NULL, ALTER COLUMN notify DROP NOT NULL;
INSERT INTO profiles (id, status, gender, last_login_at, languages, personality, birth_date, residence) VALUES
 (:p + 1, 1, 1, '-infinity', '{1,NULL,2}', '{}', NULL, 13),
 (:p + 2, 1, 2, '-infinity', '{{1,2},{3,NULL}}', '{NULL}', 'infinity', 13),
 (:p + 3, 1, NULL, NULL, NULL, array_fill(3::smallint, ARRAY[50000]), '-infinity', 99),
 (:p + 4, NULL, 1, '-infinity', '{1}', '{}', NULL, 13),
 (:p + 5, 7, 2, 'infinity', '{1}', '{}', NULL, 13);
INSERT INTO saved_filters (id, owner_id, name, conditions, notify, notify_every, created_at, updated_at) VALUES
 (:f + 1, :o, 'every 2147483647 days', '{"residence": {"anyOf": [13]}}', true, '2147483647 days', now(), now()),
 (:f + 2, :o, 'every -2147483648 months', '{"residence": {"anyOf": [13]}}', true, '-2147483648 months', now(), now()),
 (:f + 3, :o, 'every 2147483647 months', '{"residence": {"anyOf": [13]}}', true, '2147483647 months', now(), now()),
 (:f + 4, 999999999, 'owner without a profile', '{"residence": {"anyOf": [13]}}', true, '1 day', now(), now()),
 (:f + 5, :o, 'NULL conditions', NULL, true, '1 day', now(), now()),
 (:f + 6, :o, '70 KiB', jsonb_build_object('residence', jsonb_build_object('anyOf',
      (SELECT jsonb_agg(13) FROM generate_series(1, 20000)))), true, '1 day', now(), now()),
 (:f + 7, :o, 'notify NULL', '{"residence": {"anyOf": [13]}}', NULL, '1 day', now(), now());
"""


def hostile_rows(ctx: Context) -> None:
    say("9. hostile rows: NULL array elements, infinite dates, NULL where NOT NULL was assumed, huge intervals")
    cfg, q, maxf, maxp = ctx.cfg, ctx.q, ctx.maxf, ctx.maxp
    t = now_s()
    db = "fault_s9"
    ctx.clone("fault_world", db)
    owner = q(db, "SELECT min(id) FROM profiles WHERE status = 1")
    written = ctx.server.script(db, HOSTILE_ROWS_SQL, {"p": maxp, "f": maxf, "o": owner},
                                log=ctx.logs / "s9-insert.out")
    if written.returncode != 0:
        sys.stderr.write((ctx.logs / "s9-insert.out").read_text(errors="replace"))
        raise Fatal("could not write the hostile rows")
    st1 = ctx.m("s9-day1", db, *cfg.run_args).rc
    restricted = ctx.checks.sig(db, maxf, maxp)
    odd = re.findall(r"odd_values=[0-9]*", ctx.worker.err_text("s9-day1"))
    summary = odd[-1] if odd else ""
    st2 = ctx.m("s9-day2", db, *cfg.run_at(cfg.day(1))).rc
    st3 = ctx.m("s9-day3", db, *cfg.run_at(cfg.day(2))).rc
    bad, unf = ctx.checks.bad_digests(db), ctx.checks.unfinished(db)
    invalid = q(db, f"SELECT string_agg(filter_id - {maxf} || ': ' || left(reason, 60), '; ' ORDER BY filter_id) "
                f"FROM matcher_invalid_filters WHERE filter_id > {maxf}")
    digests = q(db, f"SELECT string_agg(filter_id - {maxf} || ':' || n, ' ' ORDER BY filter_id) FROM (SELECT filter_id, "
                f"count(*) n FROM notifications WHERE filter_id > {maxf} GROUP BY filter_id) d")
    detail(f"runs of day 1, 2, 3: exit {st1}, {st2}, {st3}; day 1 {summary}")
    detail(f"world filters × world profiles on day 1: {restricted}")
    detail(f"clean run of the world without hostile rows: {ctx.ref_sig}")
    detail(f"hostile filters recorded invalid: {invalid}")
    detail(f"digests of the hostile filters (filter:count): {digests}; inconsistent digests: {bad}; unfinished runs: "
           f"{unf}")
    held = (st1 == 0 and st2 == 0 and st3 == 0 and restricted == ctx.ref_sig and bad == "0" and unf == "0"
            and "5: conditions: not a JSON object" in invalid and "6: conditions: too large" in invalid)
    ctx.record("9 hostile rows", f"three days exit 0; world rows unchanged; {summary}", held, t)


SCENARIOS = {"9": hostile_rows}
