"""What every fault scenario shares: the settings, the output and evidence table, the private PostgreSQL
server, running the worker, and the checks of the invariant (the rows' signature, digest consistency,
unfinished runs). docs/fault-scenarios.md explains what is compared and why.

Standard library only. Every child process reads nothing (stdin is /dev/null) unless a scenario feeds it.
"""

import datetime
import hashlib
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
T0 = time.time()


class Fatal(Exception):
    """Setup could not be done (exit status 2): not a scenario that failed to hold."""


# ---------------------------------------------------------------------------------------------- settings


def _plus_days(instant: str, days: int) -> str:
    parsed = datetime.datetime.fromisoformat(instant.replace("Z", "+00:00"))
    return (parsed + datetime.timedelta(days=days)).astimezone(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


@dataclass
class Config:
    """The environment variables documented in scripts/fault-scenarios."""

    profiles: str = field(default_factory=lambda: os.environ.get("FAULT_PROFILES") or "20000")
    filters: str = field(default_factory=lambda: os.environ.get("FAULT_FILTERS") or "2000")
    seed: str = field(default_factory=lambda: os.environ.get("FAULT_SEED") or "7")
    now: str = field(default_factory=lambda: os.environ.get("FAULT_NOW") or "2026-03-01T03:00:00Z")
    unit: str = field(default_factory=lambda: os.environ.get("FAULT_UNIT") or "50")
    bound: float = field(default_factory=lambda: float(os.environ.get("FAULT_PARTITION_BOUND") or "180"))
    netfilter: bool = field(default_factory=lambda: os.environ.get("FAULT_NETFILTER", "1") != "0")
    keep: bool = field(default_factory=lambda: os.environ.get("FAULT_KEEP", "0") == "1")
    build: str = field(default_factory=lambda: os.environ.get("FAULT_BUILD") or "release")
    matcher_bin: str = field(default_factory=lambda: os.environ.get("MATCHER_BIN", ""))
    pgdir: Path = field(
        default_factory=lambda: Path(
            os.environ.get("FAULT_PGDIR")
            or "/tmp/matcher-fault-pg-" + hashlib.md5(str(ROOT).encode()).hexdigest()[:12]
        )
    )

    @property
    def day2(self) -> str:
        return _plus_days(self.now, 1)

    def day(self, n: int) -> str:
        """The clock n days after --now (day(1) is day 2)."""
        return _plus_days(self.now, n)

    @property
    def run_args(self) -> list:
        """A normal run: `run --now NOW --unit-filters UNIT`."""
        return ["run", "--now", self.now, "--unit-filters", self.unit]

    def run_at(self, clock: str) -> list:
        return ["run", "--now", clock, "--unit-filters", self.unit]


# ------------------------------------------------------------------------------------------------ output


def now_s() -> float:
    return time.time()


def since(t: float) -> str:
    return f"{time.time() - t:.2f}"


def ts() -> str:
    return f"{time.time() - T0:7.1f}s"


def say(text: str) -> None:
    print(f"[{ts()}] {text}", flush=True)


def detail(text: str) -> None:
    print(f"           {text}", flush=True)


@dataclass
class Row:
    name: str
    outcome: str
    held: bool
    seconds: str


class Evidence:
    """The table printed at the end: one row per scenario (5 and 6 have several)."""

    def __init__(self):
        self.rows = []

    def record(self, name: str, outcome: str, held: bool, seconds: str) -> None:
        self.rows.append(Row(name, outcome, held, seconds))
        say(f"{name}: {outcome} — invariant held: {'yes' if held else 'NO'} ({seconds}s)")

    @property
    def failed(self) -> bool:
        return any(not r.held for r in self.rows)

    def table(self) -> str:
        lines = [
            f"{'scenario':<32} {'outcome':<84} {'invariant':<9} seconds",
            f"{'--------':<32} {'-------':<84} {'---------':<9} -------",
        ]
        for r in self.rows:
            lines.append(f"{r.name:<32} {r.outcome[:84]:<84} {'yes' if r.held else 'NO':<9} {r.seconds}")
        return "\n".join(lines)


# --------------------------------------------------------------------------------------- child processes


class Children:
    """Background processes this script started; the ones still alive are killed (SIGKILL) at exit."""

    procs = []

    @classmethod
    def start(cls, argv, **kwargs) -> subprocess.Popen:
        kwargs.setdefault("stdin", subprocess.DEVNULL)
        proc = subprocess.Popen(argv, **kwargs)
        cls.procs.append(proc)
        return proc

    @classmethod
    def kill_all(cls) -> None:
        for proc in cls.procs:
            if proc.poll() is None:
                try:
                    proc.kill()
                    proc.wait(timeout=10)
                except (OSError, subprocess.TimeoutExpired):
                    pass


def exit_status(returncode: int) -> int:
    """The status as a shell reports it: 128 + the signal for a process ended by one."""
    return 128 - returncode if returncode < 0 else returncode


def wait_status(proc: subprocess.Popen) -> int:
    return exit_status(proc.wait())


def install_if_missing(command: str, package: str, work: Path) -> bool:
    """apt-get install PACKAGE unless COMMAND is on the PATH (unattended; an update first if needed)."""
    if shutil.which(command):
        return True
    say(f"installing {package} (apt-get)")
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    log = work / f"apt-{package}.log"

    def apt(*args, mode="w"):
        with open(log, mode) as out:
            return subprocess.run(["apt-get", *args], stdin=subprocess.DEVNULL, stdout=out, stderr=out, env=env).returncode

    if apt("install", "-y", "-q", package) == 0:
        return True
    if apt("update", "-q", mode="a") == 0 and apt("install", "-y", "-q", package, mode="a") == 0:
        return True
    sys.stderr.write("".join(log.read_text(errors="replace").splitlines(keepends=True)[-5:]))
    return False


# ---------------------------------------------------------------------------------------- private server


def _pg_bin() -> Path:
    found = shutil.which("pg_ctl")
    if found:
        d = Path(os.path.realpath(found)).parent
        if os.access(d / "psql", os.X_OK) and os.access(d / "initdb", os.X_OK):
            return d

    def version(p: Path):
        return [int(x) if x.isdigit() else 0 for x in re.split(r"[.]", p.parent.name)]

    candidates = sorted(Path("/usr/lib/postgresql").glob("*/bin"), key=version)
    if not candidates:
        raise Fatal("no PostgreSQL server found; install the 'postgresql' package")
    return candidates[-1]


class Server:
    """A private PostgreSQL of the scenarios' own, with the settings of scripts/pg (Unix socket only,
    superuser `matcher`, trust, UTF8), in cfg.pgdir: scenario 3 stops it with `pg_ctl stop -m immediate`,
    which must not kill other people's test runs on the development server."""

    CONF = """listen_addresses = ''
unix_socket_directories = '{sock}'
max_connections = 100
shared_buffers = 256MB
work_mem = 64MB
maintenance_work_mem = 256MB
max_wal_size = 4GB
synchronous_commit = on
fsync = on
log_min_messages = warning
"""

    def __init__(self, pgdir: Path):
        self.dir = pgdir
        self.data = pgdir / "data"
        self.sock = pgdir / "socket"
        self.log = pgdir / "postgres.log"
        self.bin = _pg_bin()
        self.runas = None
        if os.getuid() == 0:
            self.runas = "postgres" if _user_exists("postgres") else "nobody"

    def _as_server(self, argv):
        return ["runuser", "-u", self.runas, "--", *argv] if self.runas else list(argv)

    def _ctl(self, *args, **kwargs):
        return subprocess.run(
            self._as_server([str(self.bin / "pg_ctl"), "-D", str(self.data), *args]),
            stdin=subprocess.DEVNULL, **kwargs
        )

    def running(self) -> bool:
        if not (self.data / "postmaster.pid").exists():
            return False
        return self._ctl("status", stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL).returncode == 0

    def start(self) -> bool:
        """The equivalent of `scripts/pg start` for this directory."""
        self.sock.mkdir(parents=True, exist_ok=True)
        if self.runas:
            for p in (self.dir, self.sock):
                shutil.chown(p, user=self.runas)
        if not (self.data / "PG_VERSION").exists():
            initdb_log = self.dir / "initdb.log"
            for locale in ("C.UTF-8", "C"):
                with open(initdb_log, "w") as out:
                    argv = [str(self.bin / "initdb"), "-D", str(self.data), "-U", "matcher", "--auth=trust", "-E",
                            "UTF8", f"--locale={locale}"]
                    ok = subprocess.run(self._as_server(argv), stdin=subprocess.DEVNULL, stdout=out,
                                        stderr=subprocess.STDOUT).returncode == 0
                if ok:
                    break
            else:
                sys.stderr.write(initdb_log.read_text(errors="replace"))
                raise Fatal("initdb failed")
            with open(self.data / "postgresql.conf", "a") as conf:
                conf.write(self.CONF.format(sock=self.sock))
        if not self.running():
            started = self._ctl("-l", str(self.log), "-w", "-t", "120", "start", stdout=subprocess.DEVNULL)
            if started.returncode != 0:
                sys.stderr.write("".join(self.log.read_text(errors="replace").splitlines(keepends=True)[-20:]))
                return False
        return True

    def stop_immediate(self) -> None:
        self._ctl("-m", "immediate", "-w", "stop", stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    def stop(self) -> None:
        if self.running():
            self._ctl("-m", "fast", "-w", "stop", stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    # ------------------------------------------------------------------------------------------ psql

    def url(self, db: str) -> str:
        return f"host={self.sock} port=5432 user=matcher dbname={db}"

    def psql_argv(self, db: str, *args) -> list:
        return [str(self.bin / "psql"), "-X", *args, "-d", self.url(db)]

    def q(self, db: str, *commands: str, quiet: bool = False, check: bool = False) -> str:
        """`psql -X -q -At -v ON_ERROR_STOP=1 -c …` (each command a -c): its output, without the final
        newline. Errors go to stderr (nowhere with quiet); with check, a failure is fatal."""
        argv = self.psql_argv(db, "-q", "-At", "-v", "ON_ERROR_STOP=1")
        for c in commands:
            argv += ["-c", c]
        done = subprocess.run(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                              stderr=subprocess.DEVNULL if quiet else None, text=True)
        if check and done.returncode != 0:
            raise Fatal(f"psql failed on {db}: {commands[-1][:200]}")
        return done.stdout.rstrip("\n")

    def script(self, db: str, sql: str, variables: dict = None, log: Path = None) -> subprocess.CompletedProcess:
        """A script on psql's stdin (`-q -v ON_ERROR_STOP=1`, psql variables with -v); output to log."""
        argv = self.psql_argv(db, "-q", "-v", "ON_ERROR_STOP=1")
        for k, v in (variables or {}).items():
            argv[1:1] = ["-v", f"{k}={v}"]
        if log is None:
            return subprocess.run(argv, input=sql, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        with open(log, "w") as out:
            return subprocess.run(argv, input=sql, stdout=out, stderr=subprocess.STDOUT, text=True)

    def clone(self, template: str, db: str) -> None:
        self.q("postgres", "SET client_min_messages = warning", f"DROP DATABASE IF EXISTS {db} WITH (FORCE)",
               f"CREATE DATABASE {db} TEMPLATE {template}")

    def drop_fault_databases(self, quiet: bool = False) -> None:
        for db in self.q("postgres", r"SELECT datname FROM pg_database WHERE datname LIKE 'fault\_%'",
                         quiet=quiet).split():
            self.q("postgres", f"DROP DATABASE IF EXISTS {db} WITH (FORCE)", quiet=quiet)

    def wait_no_matcher(self, db: str) -> None:
        """Waits until no session of the matcher is left on the database: a killed worker's backends end when
        the server notices the closed socket, and a run started before that would find the shard's lock
        still held (exit 75)."""
        for _ in range(300):
            n = self.q("postgres", "SELECT count(*) FROM pg_stat_activity WHERE datname = "
                       f"'{db}' AND application_name LIKE 'matcher %'")
            if n == "0":
                return
            time.sleep(0.1)
        detail(f"warning: matcher sessions still present on {db} after 30 s")

    def cursor(self, db: str) -> str:
        """The newest run's cursor (max resume_after_filter), "0" before a unit has committed."""
        return self.q(db, "SELECT coalesce(max(resume_after_filter), 0) FROM matcher_runs", quiet=True) or "0"

    def wait_first_unit(self, db: str, pause: float = 0.05) -> str:
        c = "0"
        for _ in range(600):
            c = self.cursor(db)
            if c != "0":
                break
            time.sleep(pause)
        return c


def _user_exists(name: str) -> bool:
    import pwd

    try:
        pwd.getpwnam(name)
        return True
    except KeyError:
        return False


# -------------------------------------------------------------------------------------------- the worker


@dataclass
class Outcome:
    rc: int
    dur: str


class Worker:
    """Runs the matcher executable with DATABASE_URL set; output in LOGS/NAME.out and LOGS/NAME.err."""

    def __init__(self, server: Server, logs: Path, work: Path):
        self.server = server
        self.logs = logs
        self.work = work
        self.matcher = None

    def build(self, cfg: Config) -> None:
        if cfg.matcher_bin:
            self.matcher = cfg.matcher_bin
            if not os.access(self.matcher, os.X_OK):
                raise Fatal(f"MATCHER_BIN={self.matcher} is not executable")
            return
        say(f"building matcher ({cfg.build}, --scratch-path .build-fault)")
        log = self.work / "build.log"
        with open(log, "w") as out:
            built = subprocess.run(
                ["swift", "build", "-c", cfg.build, "--scratch-path", ".build-fault", "--product", "matcher"],
                cwd=ROOT, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT)
        if built.returncode != 0:
            sys.stderr.write("".join(log.read_text(errors="replace").splitlines(keepends=True)[-30:]))
            raise Fatal(f"swift build failed (log: {log})")
        self.matcher = str(ROOT / ".build-fault" / cfg.build / "matcher")

    def _env(self, conninfo: str) -> dict:
        env = dict(os.environ, DATABASE_URL=conninfo)
        env.pop("MATCHER_FAULT", None)  # the faults come from outside; a debug build would also obey this
        env.pop("PGAPPNAME", None)  # the scenarios find the worker's sessions by its own name ("matcher %")
        return env

    def run(self, name: str, db: str, *args) -> Outcome:
        """Runs the worker to the end."""
        t = now_s()
        with open(self.logs / f"{name}.out", "w") as out, open(self.logs / f"{name}.err", "w") as err:
            rc = subprocess.run([self.matcher, *args], env=self._env(self.server.url(db)), stdin=subprocess.DEVNULL,
                                stdout=out, stderr=err).returncode
        return Outcome(exit_status(rc), since(t))

    def start(self, name: str, conninfo: str, *args) -> subprocess.Popen:
        """Starts the worker in the background, over CONNINFO."""
        out = open(self.logs / f"{name}.out", "w")
        err = open(self.logs / f"{name}.err", "w")
        try:
            return Children.start([self.matcher, *args], env=self._env(conninfo), stdout=out, stderr=err)
        finally:
            out.close()
            err.close()

    def start_on(self, name: str, db: str, *args) -> subprocess.Popen:
        return self.start(name, self.server.url(db), *args)

    def err_text(self, name: str) -> str:
        return (self.logs / f"{name}.err").read_text(errors="replace")

    def out_text(self, name: str) -> str:
        return (self.logs / f"{name}.out").read_text(errors="replace")

    def errline(self, name: str) -> str:
        """The one line the worker writes on failure (its logs go to stderr too, as logfmt lines)."""
        lines = [l for l in self.err_text(name).splitlines() if l.startswith("matcher: ")]
        return lines[-1][:300] if lines else ""

    def errlines(self, name: str) -> int:
        return sum(1 for l in self.err_text(name).splitlines() if l.startswith("matcher: "))

    def supports(self, command: str) -> bool:
        return subprocess.run([self.matcher, command, "--help"], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL).returncode == 0


# ------------------------------------------------------------------------------------------------ checks

# The rows' signature: counts and an md5 of the ordered rows, without generated ids. A match is
# filter/profile@matched_at plus the filter and time of the notification that notified it (or none); a
# notification is recipient, filter, match_count, profile_ids, created_at. With wf and wp (scenarios 8, 9) only
# filters <= wf and profiles <= wp count, and digests have the profiles > wp taken out (a digest left empty
# is dropped).
SIGNATURE_SQL = r"""SET TIME ZONE 'UTC';
WITH mm AS (
    SELECT m.filter_id, m.profile_id, m.matched_at, n.filter_id AS nf, n.created_at AS nc
    FROM filter_matches m LEFT JOIN notifications n ON n.id = m.notification_id
    WHERE m.filter_id <= :wf AND m.profile_id <= :wp),
extra AS (
    SELECT notification_id, count(*) AS k FROM filter_matches
    WHERE profile_id > :wp AND notification_id IS NOT NULL GROUP BY notification_id),
nn AS (
    SELECT n.recipient_id, n.filter_id, n.created_at, n.match_count - coalesce(e.k, 0) AS match_count,
           ARRAY(SELECT p FROM unnest(n.profile_ids) WITH ORDINALITY AS u(p, o) WHERE p <= :wp ORDER BY o) AS profile_ids
    FROM notifications n LEFT JOIN extra e ON e.notification_id = n.id
    WHERE n.filter_id <= :wf)
SELECT format('matches=%s notified=%s notifications=%s md5=%s/%s',
    (SELECT count(*) FROM mm), (SELECT count(*) FROM mm WHERE nf IS NOT NULL),
    (SELECT count(*) FROM nn WHERE match_count > 0),
    (SELECT left(md5(coalesce(string_agg(format('%s/%s@%s:%s@%s', filter_id, profile_id, matched_at, nf, nc), ','
                                          ORDER BY filter_id, profile_id), '')), 12) FROM mm),
    (SELECT left(md5(coalesce(string_agg(format('%s %s %s %s %s', recipient_id, filter_id, match_count, profile_ids, created_at), ','
                                          ORDER BY filter_id, created_at, recipient_id, match_count, profile_ids), '')), 12)
     FROM nn WHERE match_count > 0));
"""

# Digests that contradict their matches: match_count is not the number of matches marked with the
# notification, profile_ids not min(10, match_count) of them, a mark pointing at another filter's or a
# missing notification. 0 in every scenario.
BAD_DIGESTS_SQL = """
    WITH c AS (SELECT notification_id, count(*) AS k, array_agg(profile_id) AS ps FROM filter_matches
               WHERE notification_id IS NOT NULL GROUP BY notification_id)
    SELECT (SELECT count(*) FROM notifications n LEFT JOIN c ON c.notification_id = n.id
            WHERE c.k IS DISTINCT FROM n.match_count::bigint OR cardinality(n.profile_ids) <> least(10, n.match_count)
               OR NOT (n.profile_ids <@ coalesce(c.ps, '{}')))
         + (SELECT count(*) FROM filter_matches m LEFT JOIN notifications n ON n.id = m.notification_id
            WHERE m.notification_id IS NOT NULL AND (n.id IS NULL OR n.filter_id <> m.filter_id))"""

PROGRESS_SQL = """SELECT coalesce((SELECT format('run #%s %s, cursor after filter %s', id, status, coalesce(resume_after_filter::text, '-'))
                               FROM matcher_runs ORDER BY id DESC LIMIT 1), 'no run row')
                    || format(', %s matches and %s notifications committed',
                              (SELECT count(*) FROM filter_matches), (SELECT count(*) FROM notifications))"""

NO_LIMIT = "9223372036854775807"


class Checks:
    """The invariant's checks on a scenario database, against the clean run's signature (`ref_sig`)."""

    def __init__(self, server: Server):
        self.server = server
        self.ref_sig = None

    def sig(self, db: str, wf: str = NO_LIMIT, wp: str = NO_LIMIT) -> str:
        done = subprocess.run(
            self.server.psql_argv(db, "-q", "-At", "-v", "ON_ERROR_STOP=1", "-v", f"wf={wf}", "-v", f"wp={wp}"),
            input=SIGNATURE_SQL, stdout=subprocess.PIPE, text=True)
        return done.stdout.rstrip("\n")

    def bad_digests(self, db: str) -> str:
        return self.server.q(db, BAD_DIGESTS_SQL)

    def unfinished(self, db: str) -> str:
        """Runs not finished: an interrupted run must have been completed by the normal runs that followed."""
        return self.server.q(db, "SELECT count(*) FROM matcher_runs WHERE status <> 'succeeded'")

    def compare(self, db: str, want: str = None):
        """The scenario's rows against the clean run's (or WANT), plus the digest and run checks:
        (held, text)."""
        want = want if want is not None else self.ref_sig
        got, bad, unf = self.sig(db), self.bad_digests(db), self.unfinished(db)
        if got == want and bad == "0" and unf == "0":
            return True, "equal to the clean run"
        return False, f"DIFFERENT: {got} (want {want}), bad digests {bad}, unfinished runs {unf}"

    def progress(self, db: str) -> str:
        """Where a killed or failed run stopped: its status, cursor and the rows committed so far."""
        return self.server.q(db, PROGRESS_SQL)


# ----------------------------------------------------------------------------------------------- context


@dataclass
class Context:
    """What a scenario gets: settings, server, worker, checks, the evidence table, and the world's facts."""

    cfg: Config
    server: Server
    worker: Worker
    checks: Checks
    evidence: Evidence
    work: Path
    logs: Path
    maxf: str = ""
    maxp: str = ""
    clean_dur: str = ""
    # Cleanup state: a socat process group and an iptables port to undo at exit.
    socat_pgid: int = 0
    netfilter_port: int = 0

    # Shorthands used by every scenario.
    def q(self, db, *commands, **kwargs):
        return self.server.q(db, *commands, **kwargs)

    def clone(self, template, db):
        self.server.clone(template, db)

    def url(self, db):
        return self.server.url(db)

    def m(self, name, db, *args) -> Outcome:
        return self.worker.run(name, db, *args)

    def next_run(self, name, db):
        """Once no worker session is left on `db`, one more plain run: its outcome, and whether the rows now
        equal the clean reference (with the comparison's text)."""
        self.server.wait_no_matcher(db)
        after = self.m(name, db, *self.cfg.run_args)
        ok, text = self.checks.compare(db)
        return after, ok, text

    def m_bg(self, name, db, *args) -> subprocess.Popen:
        return self.worker.start_on(name, db, *args)

    @property
    def ref_sig(self) -> str:
        return self.checks.ref_sig

    def record(self, name, outcome, held, t) -> None:
        self.evidence.record(name, outcome, held, since(t))


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def listening(port: int) -> bool:
    """Whether something listens on 127.0.0.1:PORT (from /proc/net/tcp, state 0A)."""
    try:
        lines = Path("/proc/net/tcp").read_text().splitlines()[1:]
    except OSError:
        return False
    for line in lines:
        fields = line.split()
        if len(fields) > 3 and fields[3] == "0A" and int(fields[1].split(":")[1], 16) == port:
            return True
    return False


def signal_group(pgid: int, sig: int) -> None:
    try:
        os.killpg(pgid, sig)
    except OSError:
        pass


def cleanup(ctx: Context, server_started: bool) -> None:
    """The exit path, whatever happened: rules removed, the proxy ended, children killed, and (unless
    FAULT_KEEP=1) the fault_* databases dropped and the server stopped."""
    if ctx.netfilter_port:
        for flag in ("--dport", "--sport"):
            subprocess.run(["iptables", "-D", "OUTPUT", "-o", "lo", "-p", "tcp", flag, str(ctx.netfilter_port), "-j",
                            "DROP"], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        ctx.netfilter_port = 0
    if ctx.socat_pgid:
        signal_group(ctx.socat_pgid, signal.SIGCONT)
        signal_group(ctx.socat_pgid, signal.SIGTERM)
        ctx.socat_pgid = 0
    Children.kill_all()
    if not ctx.cfg.keep and server_started:
        try:
            ctx.server.drop_fault_databases(quiet=True)
        except OSError:
            pass
        ctx.server.stop()
