"""5 and 5b. A silent network partition: the run goes over TCP through a socat proxy to the server's socket,
which is cut once a unit has committed, by freezing socat (5: SIGSTOP, the peer still ACKs) or by dropping
every packet with iptables (5b). The run must fail within FAULT_PARTITION_BOUND seconds, and a normal run
afterwards completes the work."""

import os
import signal
import subprocess
import time

from common import (Children, Context, Fatal, detail, free_port, install_if_missing, listening, now_s, say, since,
                    signal_group, wait_status)


def _iptables(*args) -> int:
    return subprocess.run(["iptables", *args], stdin=subprocess.DEVNULL).returncode


def _rules(action: str, port: int) -> bool:
    return all(_iptables(action, "OUTPUT", "-o", "lo", "-p", "tcp", flag, str(port), "-j", "DROP") == 0
               for flag in ("--dport", "--sport"))


def _start_proxy(ctx: Context) -> int:
    """A loopback-only TCP proxy to the server's socket, in a process group of its own."""
    port = free_port()
    proxy = Children.start(["socat", f"TCP-LISTEN:{port},bind=127.0.0.1,reuseaddr,fork",
                            f"UNIX-CONNECT:{ctx.server.sock}/.s.PGSQL.5432"],
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    ctx.socat_pgid = proxy.pid
    for _ in range(50):
        if listening(port):
            break
        time.sleep(0.1)
    return port


def _stop_proxy(ctx: Context) -> None:
    signal_group(ctx.socat_pgid, signal.SIGCONT)
    signal_group(ctx.socat_pgid, signal.SIGTERM)
    ctx.socat_pgid = 0


def partition_run(ctx: Context, name: str, db: str, how: str):
    """Runs through the proxy, cuts it with HOW (freeze | drop) once a unit has committed, and waits up to
    the bound. (status or "hung", seconds from the cut to the end)."""
    port = _start_proxy(ctx)
    worker = ctx.worker.start(name, f"host=127.0.0.1 port={port} user=matcher dbname={db}", *ctx.cfg.run_args,
                              "--statement-timeout", "20")
    c = ctx.server.wait_first_unit(db)
    if how == "freeze":
        signal_group(ctx.socat_pgid, signal.SIGSTOP)
        detail(f"proxy 127.0.0.1:{port} frozen (SIGSTOP to socat and its connection processes) with the cursor "
               f"after filter {c}")
    else:
        ctx.netfilter_port = port
        _rules("-I", port)
        detail(f"every packet to and from 127.0.0.1:{port} dropped (iptables) with the cursor after filter {c}")
    cut = now_s()
    st, probed = "hung", False
    while now_s() - cut < ctx.cfg.bound:
        if worker.poll() is not None:
            st = wait_status(worker)
            break
        if how == "freeze" and not probed and now_s() - cut > 30:
            probed = True
            sessions = ctx.q("postgres", f"""SELECT string_agg(format('backend %s %s for %ss (%s)', pid, state,
               round(extract(epoch FROM now() - state_change)), left(regexp_replace(query, '\\s+', ' ', 'g'), 40)), '; ')
               FROM pg_stat_activity WHERE datname = '{db}' AND application_name LIKE 'matcher %'""")
            detail(f"after 30 s: {sessions}")
            probe = ctx.m(f"{name}-probe", db, *ctx.cfg.run_args)
            detail(f"a run of the same shard started now (Unix socket) exits {probe.rc}: "
                   f"{ctx.worker.errline(name + '-probe')[:120]}")
        time.sleep(0.2)
    ttf = since(cut)
    if st == "hung":
        worker.kill()
        worker.wait()
    if how == "drop":
        _rules("-D", port)
        ctx.netfilter_port = 0
    _stop_proxy(ctx)
    return st, ttf


def frozen_proxy(ctx: Context) -> None:
    if not install_if_missing("socat", "socat", ctx.work):
        raise Fatal("socat is needed for scenario 5")
    say(f"5. silent partition: run over TCP through socat, then socat frozen with SIGSTOP (bound {ctx.cfg.bound:g}s)")
    t = now_s()
    db = "fault_s5"
    ctx.clone("fault_world", db)
    st, ttf = partition_run(ctx, "s5", db, "freeze")
    if st == "hung":
        last = (ctx.worker.err_text("s5").splitlines() or [""])[-1][:150]
        detail(f"the run was still alive {ttf}s after the freeze: killed (SIGKILL); last worker line: {last}")
        outcome = f"HUNG: still waiting after {ttf}s (killed); next run ok"
    else:
        detail(f"run exit {st} {ttf}s after the freeze: {ctx.worker.errline('s5')}")
        outcome = f"exit {st} {ttf}s after the freeze; next run ok"
    after, ok, text = ctx.next_run("s5-after", db)
    detail(f"proxy resumed and ended; next run (Unix socket) exit {after.rc} in {after.dur}s → {text}")
    if not (after.rc == 0 and ok):
        outcome = f"{outcome.removesuffix('; next run ok')}; next run exit {after.rc}, rows {text}"
    held = st != "hung" and st != 0 and after.rc == 0 and ok
    ctx.record("5 partition (frozen proxy)", outcome, held, t)


def dropped_packets(ctx: Context) -> None:
    usable = (ctx.cfg.netfilter and os.getuid() == 0 and install_if_missing("iptables", "iptables", ctx.work)
              and subprocess.run(["iptables", "-L", "OUTPUT", "-n"], stdin=subprocess.DEVNULL,
                                 stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL).returncode == 0)
    if not usable:
        say("5b skipped (FAULT_NETFILTER=0, not root, or no usable iptables)")
        return
    if not install_if_missing("socat", "socat", ctx.work):
        raise Fatal("socat is needed for scenario 5b")
    say("5b. partition that drops packets: the same, with iptables DROP on the proxy's port instead of SIGSTOP")
    t = now_s()
    db = "fault_s5b"
    ctx.clone("fault_world", db)
    st, ttf = partition_run(ctx, "s5b", db, "drop")
    if st == "hung":
        outcome = f"HUNG: still waiting after {ttf}s (killed)"
    else:
        detail(f"run exit {st} {ttf}s after the cut: {ctx.worker.errline('s5b')}")
        outcome = f"exit {st} {ttf}s after the cut"
    after, ok, text = ctx.next_run("s5b-after", db)
    detail(f"rules removed; next run exit {after.rc} in {after.dur}s → {text}")
    held = st != "hung" and st != 0 and after.rc == 0 and ok
    if held:
        outcome += "; next run ok"
    ctx.record("5b partition (dropped packets)", outcome, held, t)


SCENARIOS = {"5": frozen_proxy, "5b": dropped_packets}
