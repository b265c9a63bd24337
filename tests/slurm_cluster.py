"""A throwaway single-node Slurm cluster for tests, from Debian's packages.

``slurm_cluster()`` brings up munged, slurmctld and slurmd as child processes
of the test, everything under one temporary directory (configuration, munge
key and socket, state, spool, pid and log files), on free loopback ports, and
stops them again by pid. Their configuration comes from that directory
(``SLURM_CONF``, munged's explicit paths, ``AuthInfo=socket=``), nothing
under /etc is written, and no default socket, pid file or port is used, so a
Slurm or MUNGE set up on the machine is left alone. The whole cluster lives
at most ``budget`` seconds (3 minutes by default): a watchdog stops it then,
and the helpers never wait past it.

The ``slurm`` fixture (module scope) wraps it for pytest and skips, naming
what is missing and how to install it, where the packages are not there or
the test does not run as root. See tests/SLURM.md.

Choices, for Debian 12's Slurm 22.05 run as root without systemd:

- ``ProctrackType=proctrack/linuxproc``: tracks a job's processes by parent
  pid, so no cgroup set-up is needed; ``TaskPlugin=task/none`` likewise.
- ``AuthType=auth/munge`` and ``CredType=cred/munge`` with
  ``AuthInfo=socket=...``: Slurm 22.05 has no ``auth/slurm`` (23.11 added
  it) and munge is its usual authentication; our munged has its own key,
  socket, pid, seed and log files in the temporary directory.
- ``SelectType=select/cons_tres`` with ``CR_Core``: one job per core, like a
  real cluster; the node is declared with the machine's own CPUs and memory
  as ``slurmd -C`` reports them, so slurmd registers it as it is.
- ``MinJobAge=300``: a finished job stays visible to ``scontrol show job``
  (there is no slurmdbd, so no sacct) long enough to read its state.
"""

from __future__ import annotations

import contextlib
import os
import re
import secrets
import shutil
import signal
import socket
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import pytest

#: Debian's packages and the programs of theirs the cluster runs.
PACKAGES = ("slurmctld", "slurmd", "slurm-client", "munge")
PROGRAMS = {
    "slurmctld": "slurmctld",
    "slurmd": "slurmd",
    "sbatch": "slurm-client",
    "scontrol": "slurm-client",
    "scancel": "slurm-client",
    "sinfo": "slurm-client",
    "squeue": "slurm-client",
    "munged": "munge",
}
INSTALL_HINT = (
    "apt-get install -y --no-install-recommends " + " ".join(PACKAGES) + " (.ci/run does this)"
)

#: How long the whole cluster may live, start-up and shutdown included.
BUDGET = 180.0
#: Seconds between a job's SIGTERM and its SIGKILL.
KILL_WAIT = 5

#: Job states after which nothing of the job runs any more.
FINISHED = frozenset(
    {
        "BOOT_FAIL",
        "CANCELLED",
        "COMPLETED",
        "DEADLINE",
        "FAILED",
        "NODE_FAIL",
        "OUT_OF_MEMORY",
        "PREEMPTED",
        "TIMEOUT",
    }
)

_SEARCH = ("/usr/sbin", "/sbin", "/usr/bin", "/bin")


class SlurmUnavailable(Exception):
    """Slurm cannot be run here; the message says why and what to install."""


class SlurmError(Exception):
    """The cluster did not do what was asked; the message carries its logs."""


def find_programs() -> dict[str, str]:
    """Each program's path; ``SlurmUnavailable`` names the missing ones and
    their packages."""
    found: dict[str, str] = {}
    missing: list[str] = []
    path = os.pathsep.join([os.environ.get("PATH", ""), *_SEARCH])
    for program, package in PROGRAMS.items():
        where = shutil.which(program, path=path)
        if where is None:
            missing.append(f"{program} ({package})")
        else:
            found[program] = where
    if missing:
        raise SlurmUnavailable(
            f"SLURM IS NOT INSTALLED: {', '.join(missing)} not found; install it: {INSTALL_HINT}"
        )
    return found


def unavailable_reason() -> str | None:
    """Why a cluster cannot be brought up here, or None if it can be tried."""
    try:
        find_programs()
    except SlurmUnavailable as e:
        return str(e)
    if os.geteuid() != 0:
        return "SLURM TEST CLUSTER NEEDS ROOT: slurmd starts each job as its user; run as root"
    return None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def _node_hardware(slurmd: str, cpus: int | None) -> str:
    """The node's CPUs, boards, sockets, cores, threads and memory, as slurmd
    finds them (``slurmd -C``); with ``cpus``, that many cores on one socket
    instead."""
    out = subprocess.run(
        [slurmd, "-C"], capture_output=True, text=True, timeout=30, check=True
    ).stdout
    line = out.splitlines()[0]
    keys = ("CPUs", "Boards", "SocketsPerBoard", "CoresPerSocket", "ThreadsPerCore", "RealMemory")
    fields = dict(re.findall(r"(\w+)=(\S+)", line))
    if cpus is not None:
        fields |= {
            "CPUs": str(cpus),
            "Boards": "1",
            "SocketsPerBoard": "1",
            "CoresPerSocket": str(cpus),
            "ThreadsPerCore": "1",
        }
    return " ".join(f"{k}={fields[k]}" for k in keys if k in fields)


def _dying_with_parent(argv: list[str]) -> list[str]:
    """``argv`` under ``setpriv --pdeathsig KILL`` where util-linux has it:
    if the test process dies without its teardown (SIGKILL, a crash), the
    kernel kills the daemon too instead of leaving a cluster behind. setpriv
    execs, so the daemon keeps the pid the fixture knows."""
    setpriv = shutil.which("setpriv")
    return [setpriv, "--pdeathsig", "KILL", "--", *argv] if setpriv else argv


def _clean_env(conf: Path) -> dict[str, str]:
    """The environment with this cluster's SLURM_CONF and none of the
    caller's own Slurm settings (a test run inside a Slurm job has plenty)."""
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("SLURM_", "SBATCH_", "SALLOC_", "SRUN_", "SQUEUE_", "SINFO_"))
    }
    env["SLURM_CONF"] = str(conf)
    return env


def processes_with_conf(conf: Path) -> list[int]:
    """Pids of processes started with this cluster's SLURM_CONF: the
    daemons, slurmstepd and, through sbatch's environment, the jobs."""
    marker = f"SLURM_CONF={conf}".encode()
    me = os.getpid()
    pids = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == me:
            continue
        try:
            environ = (entry / "environ").read_bytes()
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        if stat.rsplit(")", 1)[-1].split()[0] == "Z":
            continue
        if marker in environ.split(b"\0"):
            pids.append(int(entry.name))
    return pids


def pid_alive(pid: int) -> bool:
    """Whether ``pid`` is a process that has not exited (zombies are not)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[-1].split()[0] != "Z"


@dataclass
class SlurmCluster:
    """A running cluster: its directory, environment and daemons, and the
    few commands a test needs."""

    root: Path
    conf: Path
    env: dict[str, str]
    programs: dict[str, str]
    kill_wait: int
    deadline: float
    daemons: dict[str, subprocess.Popen[bytes]] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    stopped: bool = False
    expired: bool = False

    # -- commands ---------------------------------------------------------

    def remaining(self) -> float:
        return self.deadline - time.monotonic()

    def run(
        self, args: Sequence[str], *, cwd: Path | None = None, check: bool = True
    ) -> subprocess.CompletedProcess[str]:
        """Run a Slurm command (``args[0]`` is its name) against this cluster."""
        if self.stopped or self.expired:
            raise SlurmError(
                "the cluster has stopped" + (" (its time budget ran out)" if self.expired else "")
            )
        program = self.programs.get(args[0], args[0])
        proc = subprocess.run(
            [program, *args[1:]],
            env=self.env,
            cwd=cwd or self.root,
            capture_output=True,
            text=True,
            timeout=max(1.0, min(30.0, self.remaining())),
            check=False,
        )
        if check and proc.returncode != 0:
            raise SlurmError(
                f"{' '.join(args)} exited {proc.returncode}: {proc.stderr.strip()}\n{self.logs()}"
            )
        return proc

    def sbatch(self, args: Sequence[str], *, cwd: Path | None = None) -> str:
        """Submit with ``sbatch --parsable ARGS``; the job id (of an array,
        the array's id)."""
        out = self.run(["sbatch", "--parsable", *args], cwd=cwd).stdout.strip()
        return out.split(";")[0]

    def scancel(self, *args: str) -> None:
        """``scancel ARGS``: a job id, or ``ID_TASK`` for one array task."""
        self.run(["scancel", *args])

    def job_states(self, job_id: str) -> dict[str, str]:
        """Each job record's state, keyed ``ID`` or ``ARRAYID_TASK`` (a still
        pending range of tasks keyed ``ARRAYID_[2-3]``); empty once Slurm has
        forgotten the job."""
        proc = self.run(["scontrol", "show", "job", "-o", job_id], check=False)
        if proc.returncode != 0:
            if "Invalid job id" in proc.stderr:
                return {}
            raise SlurmError(f"scontrol show job {job_id}: {proc.stderr.strip()}")
        states = {}
        for line in proc.stdout.splitlines():
            fields = dict(re.findall(r"(\w+)=(\S*)", line))
            if "JobId" not in fields:
                continue
            key = fields["JobId"]
            task = fields.get("ArrayTaskId")
            if task:
                key = f"{fields['ArrayJobId']}_{task if task.isdigit() else f'[{task}]'}"
            states[key] = fields.get("JobState", "")
        return states

    def wait_job(self, job_id: str, timeout: float = 60.0) -> dict[str, str]:
        """Wait until every record of the job (each task of an array) has
        finished; their states. ``SlurmError`` when ``timeout`` (or the
        cluster's budget) runs out first."""
        until = time.monotonic() + min(timeout, self.remaining())
        while True:
            states = self.job_states(job_id)
            if all(s in FINISHED for s in states.values()):
                return states
            if time.monotonic() > until:
                raise SlurmError(f"job {job_id} still not finished: {states}\n{self.logs()}")
            time.sleep(0.25)

    def wait_for(self, what: str, predicate: Callable[[], bool], timeout: float = 30.0) -> None:
        """Poll ``predicate()`` until true, bounded by ``timeout`` and the budget."""
        until = time.monotonic() + min(timeout, self.remaining())
        while not predicate():
            if time.monotonic() > until:
                raise SlurmError(f"timed out waiting for {what}\n{self.logs()}")
            time.sleep(0.1)

    def logs(self, lines: int = 15) -> str:
        """The tail of each daemon's log, for failure messages."""
        parts = []
        for path in sorted((self.root / "log").glob("*")):
            with contextlib.suppress(OSError):
                tail = path.read_text(errors="replace").splitlines()[-lines:]
                parts.append(f"--- {path.name}\n" + "\n".join(tail))
        return "\n".join(parts)

    def node_state(self) -> str:
        proc = self.run(["sinfo", "-h", "-N", "-o", "%T"], check=False)
        return proc.stdout.strip() if proc.returncode == 0 else ""

    # -- life cycle -------------------------------------------------------

    def start(self, name: str, args: Sequence[str]) -> None:
        log = self.root / "log" / f"{name}.out"
        with log.open("wb") as out:
            self.daemons[name] = subprocess.Popen(
                _dying_with_parent([self.programs[name], *args]),
                env=self.env,
                cwd=self.root,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )

    def check_daemons(self) -> bool:
        for name, proc in self.daemons.items():
            if proc.poll() is not None:
                raise SlurmError(f"{name} exited {proc.returncode} during start-up\n{self.logs()}")
        return True

    def stop(self, *, expired: bool = False) -> None:
        """Cancel what runs, then stop slurmd, slurmctld and munged by pid:
        SIGTERM, SIGKILL if it is still there 10 s later, then SIGKILL to
        what is left of its process group; last, SIGKILL any process still
        carrying this cluster's SLURM_CONF (a job or slurmstepd that
        outlived slurmd)."""
        with self._lock:
            if self.stopped:
                return
            # Set first: from now on the helpers refuse to talk to it.
            self.expired = expired
            try:
                if not expired and self.daemons.get("slurmctld") is not None:
                    self._cancel_all()
            finally:
                try:
                    self._stop_daemons()
                finally:
                    self.stopped = True

    def _stop_daemons(self) -> None:
        for name in ("slurmd", "slurmctld", "munged"):
            proc = self.daemons.get(name)
            if proc is None:
                continue
            with contextlib.suppress(ProcessLookupError):
                proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    proc.kill()
                proc.wait(timeout=10)
            # Helpers the daemon forked into its group (slurmctld's
            # slurmscriptd) go with it.
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(proc.pid, signal.SIGKILL)
        for pid in processes_with_conf(self.conf):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)

    def _cancel_all(self) -> None:
        # Let Slurm end the jobs itself (SIGTERM, KillWait, SIGKILL), so that
        # nothing of them outlives slurmd.
        with contextlib.suppress(SlurmError, subprocess.TimeoutExpired):
            ids = self._queued()
            if not ids:
                return
            self.run(["scancel", *ids], check=False)
            until = time.monotonic() + min(self.kill_wait + 10.0, max(1.0, self.remaining()))
            while time.monotonic() < until and self._queued():
                time.sleep(0.25)

    def _queued(self) -> list[str]:
        return self.run(["squeue", "-h", "-o", "%A"]).stdout.split()


def _write_conf(
    root: Path, programs: dict[str, str], kill_wait: int, cpus: int | None, extra: Sequence[str]
) -> Path:
    conf = root / "slurm.conf"
    plugstack = root / "plugstack.conf"
    plugstack.write_text("")
    run = root / "run"
    conf.write_text(
        "\n".join(
            [
                f"ClusterName=aw{secrets.token_hex(3)}",
                "SlurmctldHost=localhost",
                f"SlurmctldPort={_free_port()}",
                f"SlurmdPort={_free_port()}",
                "SlurmUser=root",
                "SlurmdUser=root",
                "AuthType=auth/munge",
                "CredType=cred/munge",
                f"AuthInfo=socket={run / 'munge.socket'}",
                "ProctrackType=proctrack/linuxproc",
                "TaskPlugin=task/none",
                "SelectType=select/cons_tres",
                "SelectTypeParameters=CR_Core",
                "SwitchType=switch/none",
                "MpiDefault=none",
                "JobAcctGatherType=jobacct_gather/none",
                "AccountingStorageType=accounting_storage/none",
                "JobCompType=jobcomp/none",
                "ReturnToService=2",
                f"KillWait={kill_wait}",
                "MinJobAge=300",
                "MailProg=/bin/true",
                f"PlugStackConfig={plugstack}",
                f"StateSaveLocation={root / 'state'}",
                f"SlurmdSpoolDir={root / 'spool'}",
                f"SlurmctldPidFile={run / 'slurmctld.pid'}",
                f"SlurmdPidFile={run / 'slurmd.pid'}",
                f"SlurmctldLogFile={root / 'log' / 'slurmctld.log'}",
                f"SlurmdLogFile={root / 'log' / 'slurmd.log'}",
                "NodeName=localhost NodeAddr=127.0.0.1 "
                + _node_hardware(programs["slurmd"], cpus)
                + " State=UNKNOWN",
                "PartitionName=debug Nodes=localhost Default=YES MaxTime=INFINITE State=UP",
                # Without it slurmd would refuse a node declared with more
                # CPUs than the machine has.
                *(["SlurmdParameters=config_overrides"] if cpus is not None else []),
                *extra,
                "",
            ]
        )
    )
    return conf


@contextlib.contextmanager
def slurm_cluster(
    *,
    kill_wait: int = KILL_WAIT,
    budget: float = BUDGET,
    cpus: int | None = None,
    extra_conf: Sequence[str] = (),
    keep: bool = False,
) -> Iterator[SlurmCluster]:
    """A running single-node cluster, stopped on exit. ``SlurmUnavailable``
    when it cannot be tried here; ``SlurmError`` when it does not come up.

    ``kill_wait``: seconds from a job's SIGTERM to its SIGKILL (Slurm 22.05
    waits about 5 s even when asked for less). ``budget``: seconds the whole
    cluster may live. ``cpus``: declare the node with that many CPUs whatever
    the machine has, so that jobs asking for more CPUs than it has (the
    recipe's ``--cpus-per-task=4``) still run. ``extra_conf``: more lines for
    slurm.conf. ``keep`` leaves the directory (logs, state) behind."""
    reason = unavailable_reason()
    if reason is not None:
        raise SlurmUnavailable(reason)
    programs = find_programs()
    started = time.monotonic()
    # Its own short directory under /tmp: a unix socket path has a 108-byte
    # limit, and munged wants every directory above its socket searchable.
    root = Path(tempfile.mkdtemp(prefix="aw-slurm-"))
    root.chmod(0o755)
    for sub, mode in (("munge", 0o700), ("run", 0o755), ("state", 0o700), ("spool", 0o755)):
        (root / sub).mkdir(mode=mode)
    (root / "log").mkdir()
    key = root / "munge" / "munge.key"
    key.touch(mode=0o600)
    key.write_bytes(secrets.token_bytes(1024))
    conf = _write_conf(root, programs, kill_wait, cpus, extra_conf)
    cluster = SlurmCluster(
        root=root,
        conf=conf,
        env=_clean_env(conf),
        programs=programs,
        kill_wait=kill_wait,
        deadline=started + budget,
    )
    watchdog = threading.Timer(
        max(0.0, cluster.remaining()), cluster.stop, kwargs={"expired": True}
    )
    watchdog.daemon = True
    watchdog.start()
    try:
        cluster.start(
            "munged",
            [
                "--foreground",
                f"--socket={root / 'run' / 'munge.socket'}",
                f"--key-file={key}",
                f"--pid-file={root / 'run' / 'munged.pid'}",
                f"--log-file={root / 'log' / 'munged.log'}",
                f"--seed-file={root / 'munge' / 'munged.seed'}",
                "--num-threads=4",
            ],
        )
        cluster.wait_for(
            "munged's socket",
            lambda: cluster.check_daemons() and (root / "run" / "munge.socket").exists(),
        )
        cluster.start("slurmctld", ["-D", "-i"])
        cluster.start("slurmd", ["-D", "-N", "localhost"])
        cluster.wait_for(
            "the node to be idle",
            lambda: cluster.check_daemons() and cluster.node_state() == "idle",
            timeout=60.0,
        )
        yield cluster
    finally:
        watchdog.cancel()
        try:
            cluster.stop()
        finally:
            if not keep:
                shutil.rmtree(root, ignore_errors=True)


@pytest.fixture(scope="module")
def slurm() -> Iterator[SlurmCluster]:
    """A cluster for the module's tests; skipped, saying why, where Slurm is
    not installed or the tests do not run as root."""
    reason = unavailable_reason()
    if reason is not None:
        pytest.skip(reason)
    with slurm_cluster() as cluster:
        yield cluster
