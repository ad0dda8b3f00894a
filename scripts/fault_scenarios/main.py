"""The fault scenarios' driver (run through scripts/fault-scenarios): builds the worker, starts the private
server, makes the world and the clean reference run, runs the selected scenarios and prints the evidence
table. Exit status: 0 when every scenario that ran held, 1 when one did not, 2 when setup failed, 130 when
interrupted.

    scripts/fault-scenarios            every scenario
    scripts/fault-scenarios 1 6 8      only these (5 includes 5b, 6 is 6a-6d; 5b or 6c alone also work)
"""

import re
import shutil
import signal
import sys

import common
from common import Checks, Config, Context, Evidence, Fatal, Server, Worker, detail, now_s, say, since
import s01_sigkill
import s02_backend_terminated
import s03_server_stopped
import s04_statement_timeout
import s05_partition
import s06_concurrency
import s07_late_commit
import s08_hostile_input
import s09_hostile_rows
import s10_time_backwards
import s11_run_abandoned

# In the order they run; each module's SCENARIOS maps an id ("5", "5b", "6a", …) to a function of the
# context that records its rows of the evidence table.
MODULES = [
    s01_sigkill, s02_backend_terminated, s03_server_stopped, s04_statement_timeout, s05_partition,
    s06_concurrency, s07_late_commit, s08_hostile_input, s09_hostile_rows, s10_time_backwards, s11_run_abandoned,
]


def selected(scenario_id: str, selection: list) -> bool:
    """A scenario runs when nothing is selected, or its number ("6" selects 6a-6d) or its id is."""
    if not selection:
        return True
    number = re.match(r"\d+", scenario_id).group(0)
    return scenario_id in selection or number in selection


def make_world(ctx: Context) -> None:
    """fault_world (migrated and seeded, the template of every scenario database) and fault_ref (one clean
    run); three more clean runs time the run for scenario 1."""
    cfg, server, q = ctx.cfg, ctx.server, ctx.q
    t = now_s()
    q("postgres", "CREATE DATABASE fault_world")
    if ctx.m("migrate", "fault_world", "migrate").rc != 0:
        sys.stderr.write(ctx.worker.err_text("migrate"))
        raise Fatal("matcher migrate failed")
    if ctx.worker.supports("seed"):
        seeded = ctx.m("seed", "fault_world", "seed", "--profiles", cfg.profiles, "--filters", cfg.filters, "--seed",
                       cfg.seed, "--now", cfg.now)
        if seeded.rc != 0:
            sys.stderr.write("\n".join(ctx.worker.err_text("seed").splitlines()[-3:]) + "\n")
            raise Fatal("matcher seed failed")
    else:
        synth = server.script("fault_world", open("/work/shared/bench/synth.sql").read(),
                              {"profiles": cfg.profiles, "filters": cfg.filters})
        if synth.returncode != 0:
            raise Fatal("synth.sql failed")
    ctx.maxf = q("fault_world", "SELECT max(id) FROM saved_filters")
    ctx.maxp = q("fault_world", "SELECT max(id) FROM profiles")
    counts = q("fault_world", "SELECT format('%s profiles, %s filters, %s blocks', (SELECT count(*) FROM profiles), "
               "(SELECT count(*) FROM saved_filters), (SELECT count(*) FROM blocks))")
    say(f"world written in {since(t)}s: {counts}")

    # The reference: one clean run.
    ctx.clone("fault_world", "fault_ref")
    ref = ctx.m("ref", "fault_ref", *cfg.run_args)
    if ref.rc != 0:
        sys.stderr.write("\n".join(ctx.worker.err_text("ref").splitlines()[-3:]) + "\n")
        raise Fatal("the clean reference run failed")
    ctx.checks.ref_sig = ctx.checks.sig("fault_ref")
    # The duration the kill instants of scenario 1 are taken from: the median of three more clean runs (the
    # first run of a fresh server reads a cold cache and is slower than the runs that follow).
    durs = []
    for i in (1, 2, 3):
        ctx.clone("fault_world", "fault_timing")
        durs.append(ctx.m(f"timing-{i}", "fault_timing", *cfg.run_args).dur)
    q("postgres", "DROP DATABASE fault_timing")
    ctx.clean_dur = sorted(durs, key=float)[1]
    if ctx.checks.bad_digests("fault_ref") != "0":
        raise Fatal("the clean run's digests contradict its matches")
    say(f"clean run: {ref.dur}s — {ctx.ref_sig}; three more: {' '.join(durs)} s (median {ctx.clean_dur}s)")
    phases = []
    for line in ctx.worker.err_text("ref").splitlines():
        if "run finished" in line:
            phases += re.findall(
                r"read_s=[^ ]* run_id=[^ ]* shard=[^ ]* total_s=[^ ]* write_s=[^ ]*|evaluate_s=[^ ]*", line)
    detail(" ".join(phases) + (" " if phases else ""))


def main(argv: list) -> int:
    cfg = Config()
    server = Server(cfg.pgdir)
    work = cfg.pgdir / "work"
    logs = work / "logs"
    ctx = Context(cfg=cfg, server=server, worker=Worker(server, logs, work), checks=Checks(server),
                  evidence=Evidence(), work=work, logs=logs)
    selection = list(argv)
    server_started = False

    def interrupted(signum, frame):
        raise SystemExit(130)

    signal.signal(signal.SIGINT, interrupted)
    signal.signal(signal.SIGTERM, interrupted)
    try:
        cfg.pgdir.mkdir(parents=True, exist_ok=True)
        shutil.rmtree(work, ignore_errors=True)
        logs.mkdir(parents=True)
        say(f"fault scenarios: world {cfg.profiles} profiles x {cfg.filters} filters (seed {cfg.seed}), --now "
            f"{cfg.now}, --unit-filters {cfg.unit}")
        say(f"private server in {cfg.pgdir} (logs in {logs})")
        ctx.worker.build(cfg)
        if not server.start():
            raise Fatal("could not start the private PostgreSQL")
        server_started = True
        server.drop_fault_databases()
        make_world(ctx)
        for module in MODULES:
            for scenario_id, scenario in module.SCENARIOS.items():
                if selected(scenario_id, selection):
                    scenario(ctx)
        print()
        print(ctx.evidence.table())
        print()
        say(f"total {since(common.T0)}s; clean run {ctx.clean_dur}s; logs in {logs}")
        if ctx.evidence.failed:
            say("some scenario did NOT hold")
            return 1
        say("every scenario held")
        return 0
    except Fatal as failure:
        print(f"[{common.ts()}] fault-scenarios: {failure}", file=sys.stderr, flush=True)
        return 2
    finally:
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        common.cleanup(ctx, server_started)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
