"""1. SIGKILL of the worker at 5 %, 15 %, … 95 % of the clean run's duration, each in a fresh database and
followed by a normal run, which must complete the interrupted run: rows = the clean run's."""

import time

from common import Context, detail, now_s, say, wait_status


def sigkill_at_ten_instants(ctx: Context) -> None:
    say(f"1. SIGKILL of the worker at 5%, 15%, … 95% of the clean run's {ctx.clean_dur}s, each followed by a normal run")
    t = now_s()
    held, killed = True, 0
    for pct in range(5, 100, 10):
        db = f"fault_s1_{pct}"
        ctx.clone("fault_world", db)
        delay = f"{float(ctx.clean_dur) * pct / 100:.2f}"
        worker = ctx.m_bg(f"s1-{pct}", db, *ctx.cfg.run_args)
        time.sleep(float(delay))
        if worker.poll() is None:
            worker.kill()
            how = f"killed at {delay}s"
            killed += 1
        else:
            how = f"finished before {delay}s"
        st = wait_status(worker)
        where = ctx.checks.progress(db)
        after, ok, text = ctx.next_run(f"s1-{pct}-after", db)
        if not (after.rc == 0 and ok):
            held = False
        detail(f"{pct:>3}%: {how} (exit {st}): {where}; next run exit {after.rc} in {after.dur}s → {text}")
    ctx.record("1 SIGKILL x10", f"{killed}/10 killed mid-run; each next run completed the work", held, t)


SCENARIOS = {"1": sigkill_at_ten_instants}
