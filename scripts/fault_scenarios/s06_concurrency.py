"""6a-6d. Concurrency: the same shard twice, four shards together, and a run overlapping an uncapped backfill
(without and with --notify). docs/fault-scenarios.md, "6c/6d", says what is exact when a run overlaps a
backfill."""

from common import Context, detail, now_s, say, wait_status


def same_shard_twice(ctx: Context) -> None:
    say("6a. two runs of the same shard started together")
    t = now_s()
    db = "fault_s6a"
    ctx.clone("fault_world", db)
    p1 = ctx.m_bg("s6a-1", db, *ctx.cfg.run_args)
    p2 = ctx.m_bg("s6a-2", db, *ctx.cfg.run_args)
    st1, st2 = wait_status(p1), wait_status(p2)
    runs = ctx.q(db, "SELECT count(*) FROM matcher_runs")
    w = ctx.worker
    detail(f"exits {st1} and {st2}; matcher_runs rows: {runs}; the refused one said: "
           f"{w.errline('s6a-1')}{w.errline('s6a-2')}")
    after = ctx.m("s6a-after", db, *ctx.cfg.run_args)
    ok, text = ctx.checks.compare(db)
    detail(f"a following normal run exit {after.rc} → {text}")
    exits_ok = ({st1, st2} == {0, 75} and runs == "1") or (st1, st2) == (0, 0)
    held = exits_ok and after.rc == 0 and ok
    ctx.record("6a same shard x2", f"exits {st1}/{st2} (one refused with 75, wrote nothing)", held, t)


def four_shards_together(ctx: Context) -> None:
    say("6b. four shards started together, against the unsharded clean run")
    t = now_s()
    db = "fault_s6b"
    ctx.clone("fault_world", db)
    workers = [ctx.m_bg(f"s6b-{k}", db, *ctx.cfg.run_args, "--shard", f"{k}/4") for k in range(4)]
    sts = [wait_status(p) for p in workers]
    rerun = [ctx.m(f"s6b-{k}-after", db, *ctx.cfg.run_args, "--shard", f"{k}/4").rc for k in range(4)]
    ok, text = ctx.checks.compare(db)
    exits = " ".join(map(str, sts))
    progress_rows = ctx.q(db, "SELECT count(*) FROM matcher_shard_progress WHERE shard_count = 4")
    detail(f"exits {exits}; shard progress rows: {progress_rows}; a second run of each shard exits "
           f"{' '.join(map(str, rerun))} → {text}")
    held = sts == [0, 0, 0, 0] and rerun == [0, 0, 0, 0] and ok
    ctx.record("6b four shards together", f"exits {exits}; union equals one unsharded run", held, t)


# The pairs and the notifications' identities, exactly.
PAIRS_SQL = ("SET TIME ZONE 'UTC'; SELECT count(*) || ' ' || left(md5(string_agg(format('%s/%s@%s', filter_id, "
             "profile_id, matched_at), ',' ORDER BY filter_id, profile_id)), 12) FROM filter_matches")
NOTES_SQL = ("SET TIME ZONE 'UTC'; SELECT count(*) || ' ' || left(md5(coalesce(string_agg(format('%s %s %s', "
             "recipient_id, filter_id, created_at), ',' ORDER BY filter_id, created_at, recipient_id), '')), 12) "
             "FROM notifications")


def run_and_backfill(ctx: Context, tag: str, when: str, notify: str = "") -> None:
    """A run and a backfill of every tenth filter, uncapped (--max-per-filter 1000000), at the same clock,
    started together (WHEN = together) or once the run has committed its first unit (after-first-unit), so
    that the backfill writes filters the run has already done and filters it has not reached yet. An uncapped
    backfill records every eligible pair of its filters, so the final pairs do not depend on the interleaving:
    the run's pairs ∪ all eligible pairs of the backfill's filters, the same as the run followed by the
    backfill. Which digest counts which pair does depend on it (a digest counts every unnotified match present
    when its unit commits), so for notifications the check is: the same notifications (recipient, filter,
    created_at) as run-then-backfill, none twice, each consistent with the matches that point to it, and every
    match the clean run notified notified by its filter's notification at the run's clock. Without --notify the
    backfill's pairs are silent, so the notifications depend on who reached a pair first; see the check below."""
    cfg, q = ctx.cfg, ctx.q
    db, ref = f"fault_s6{tag}", f"fault_s6{tag}_ref"
    maxf = int(ctx.maxf)
    bf = ["backfill", "--now", cfg.now, "--unit-filters", cfg.unit, "--max-per-filter", "1000000",
          *([notify] if notify else []), "--filter", *map(str, range(10, maxf + 1, 10))]
    t = now_s()
    ctx.clone("fault_world", ref)
    ctx.clone("fault_world", db)
    r1 = ctx.m(f"s6{tag}-ref-run", ref, *cfg.run_args).rc
    r2 = ctx.m(f"s6{tag}-ref-backfill", ref, *bf).rc
    pr = ctx.m_bg(f"s6{tag}-run", db, *cfg.run_args)
    c = "0"
    if when == "after-first-unit":
        c = ctx.server.wait_first_unit(db, pause=0.02)
    pb = ctx.m_bg(f"s6{tag}-backfill", db, *bf)
    sr, sb = wait_status(pr), wait_status(pb)
    overlap = q(db, """SELECT CASE WHEN max(started_at) FILTER (WHERE kind = 'backfill') < max(finished_at) FILTER (WHERE kind = 'run')
                                  AND max(started_at) FILTER (WHERE kind = 'run') < max(finished_at) FILTER (WHERE kind = 'backfill')
                                  THEN 'overlapped' ELSE 'did NOT overlap' END FROM matcher_runs""")
    pa, pb2 = q(db, PAIRS_SQL), q(ref, PAIRS_SQL)
    na, nb = q(db, NOTES_SQL), q(ref, NOTES_SQL)
    bad = ctx.checks.bad_digests(db)
    # Every match notified by the clean run is notified here, by its filter's notification at the clock.
    notified = ctx.work / "notified.csv"
    q("fault_ref", f"\\copy (SELECT filter_id, profile_id FROM filter_matches WHERE notification_id IS NOT NULL) TO '{notified}' CSV")
    missing = q(db, "CREATE TEMP TABLE r (filter_id bigint, profile_id bigint)", f"\\copy r FROM '{notified}' CSV",
                f"""SELECT count(*) FROM r WHERE NOT EXISTS (SELECT 1 FROM filter_matches m JOIN notifications n ON n.id = m.notification_id
                           WHERE m.filter_id = r.filter_id AND m.profile_id = r.profile_id AND n.filter_id = r.filter_id
                             AND n.created_at = '{cfg.now}')""")
    started = "with the run" if when == "together" else f"with the run's cursor after filter {c}"
    detail(f"reference (run, then backfill{notify} of {maxf // 10} filters): exits {r1}/{r2}; overlapping: run exit "
           f"{sr}, backfill exit {sb} (started {started}; {overlap})")
    detail(f"pairs: {pa} vs {pb2}; notifications: {na} vs {nb}; inconsistent digests: {bad}; clean-run notified "
           f"matches not notified: {missing}")
    # How the two interleaved: the run's digests that count pairs the backfill recorded first, and digests
    # the backfill wrote (--notify) before the run reached the filter.
    mixed = q(db, """SELECT count(DISTINCT n.id) FROM notifications n JOIN matcher_runs rn ON rn.id = n.run_id AND rn.kind = 'run'
                        JOIN filter_matches m ON m.notification_id = n.id JOIN matcher_runs rm ON rm.id = m.run_id AND rm.kind = 'backfill'""")
    bfnotes = q(db, "SELECT count(*) FROM notifications n JOIN matcher_runs r ON r.id = n.run_id AND r.kind = 'backfill'")
    notified_count = "SELECT count(*) FROM filter_matches WHERE notification_id IS NOT NULL"
    unfinished = ctx.checks.unfinished(db)
    detail(f"unfinished runs: {unfinished}; matches notified: {q(db, notified_count)} (clean run "
           f"{q('fault_ref', notified_count)}, run-then-backfill {q(ref, notified_count)}); the run's digests counting "
           f"pairs the backfill recorded first: {mixed}; digests the backfill wrote: {bfnotes}")
    if notify:
        held = (r1 == 0 and r2 == 0 and sr == 0 and sb == 0 and pa == pb2 and na == nb and bad == "0"
                and missing == "0" and unfinished == "0")
    else:
        # Without --notify the backfill records its pairs silent (runs.md: never counted or shown in any digest,
        # now or later), so which of the run's matches are notified depends on who recorded the pair first: a
        # pair the backfill reached first is silent for good. Exact here: the pairs; no silent pair in a digest;
        # no filter with two digests at the clock; every match the clean run notified either notified by its
        # filter's digest at the clock or recorded silent by the backfill.
        silent_notified = q(db, "SELECT count(*) FROM filter_matches WHERE silent AND notification_id IS NOT NULL")
        twice = q(db, "SELECT count(*) FROM (SELECT filter_id FROM notifications GROUP BY filter_id, created_at "
                      "HAVING count(*) > 1) t")
        lost = q(db, "CREATE TEMP TABLE r (filter_id bigint, profile_id bigint)", f"\\copy r FROM '{notified}' CSV",
                 f"""SELECT count(*) FROM r WHERE NOT EXISTS (SELECT 1 FROM filter_matches m
                           LEFT JOIN notifications n ON n.id = m.notification_id
                           WHERE m.filter_id = r.filter_id AND m.profile_id = r.profile_id
                             AND (m.silent OR (n.filter_id = r.filter_id AND n.created_at = '{cfg.now}')))""")
        detail(f"silent pairs in a digest: {silent_notified}; filters with two digests at the clock: {twice}; "
               f"clean-run notified matches neither notified nor recorded silent by the backfill: {lost}")
        held = (r1 == 0 and r2 == 0 and sr == 0 and sb == 0 and pa == pb2 and bad == "0" and silent_notified == "0"
                and twice == "0" and lost == "0" and unfinished == "0")
    name = f"6{tag} run + backfill" + (f" {notify}" if notify else "")
    ctx.record(name, f"{overlap} ({mixed} run digests had backfill pairs, {bfnotes} backfill digests); pairs exact",
               held, t)


def run_and_backfill_together(ctx: Context) -> None:
    say("6c. a run and a backfill (no --notify) started together")
    run_and_backfill(ctx, "c", "together")


def run_and_backfill_notify_together(ctx: Context) -> None:
    say("6d. a run and a backfill --notify started together")
    run_and_backfill(ctx, "d", "together", "--notify")


SCENARIOS = {
    "6a": same_shard_twice,
    "6b": four_shards_together,
    "6c": run_and_backfill_together,
    "6d": run_and_backfill_notify_together,
}
