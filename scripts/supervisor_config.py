"""The process list `make run` starts, as a supervisord configuration (scripts and tests only).

Every long-lived part is one supervisord program: restarted when it exits (with
supervisord's growing back-off while it keeps dying at start), logging to
``var/log/<name>.log`` with rotation, and stopped together by Ctrl-C or ``make stop``.
An event listener (``manage.py supervisor_events``) puts exits, restarts and crash
loops on the dashboard's timeline. Commands are argv lists; supervisord splits them
back with ``shlex``, no shell in between.
"""

from __future__ import annotations

import os
import shlex
import shutil
import sys
from dataclasses import dataclass, field
from pathlib import Path

from qwenweb.network import node_name_from_host
from scripts.leftovers import recorded
from scripts.local_services import redis_server_argv

ROOT = Path(__file__).resolve().parent.parent
LOG_MAX_BYTES = "20MB"
LOG_BACKUPS = 5
# How long a program has to stop after SIGTERM before SIGKILL (supervisord, and `make stop` without it).
STOP_WAIT_S = 15
EVENTS = "PROCESS_STATE_EXITED,PROCESS_STATE_BACKOFF,PROCESS_STATE_FATAL,PROCESS_STATE_RUNNING"


@dataclass
class Program:
    name: str
    argv: list[str]
    priority: int = 50
    startsecs: int = 3
    # A one-shot program (the ready announcement) runs once and is never restarted.
    once: bool = False
    extra: dict[str, str] = field(default_factory=dict)


def programs(env: dict, *, with_redis: bool, node: bool = False) -> list[Program]:
    """The product's processes, in start order; ``env`` holds the ports and paths `stack.py` chose.
    ``node``: a joined inference node's (`make node`): its llama-server, its worker, its sampler."""
    python = sys.executable
    manage = [python, str(ROOT / "manage.py")]
    celery = [python, "-m", "celery", "-A", "qwenweb"]
    var_dir = env["QWENWEB_VAR_DIR"]
    # llama-server and the web process keep the default CPU priority (generation and delivery);
    # the background work yields the CPU to both (`nice`, inherited by every child it forks).
    background = niced(env)
    llama = Program("llama", [*manage, "run_llama_server"], priority=20)
    sampler = Program("sampler", [*background, *manage, "run_sampler"], priority=50)
    worker = [*background, *celery, "worker", "--loglevel", "INFO", "--concurrency", "2", *node_queues(env, node=node)]
    if node:
        return [llama, Program("worker", [*worker, *QUIET], priority=40), sampler]
    listed = []
    if with_redis:
        redis_argv = redis_server_argv(
            env["REDIS_SERVER_BIN"],
            Path(var_dir),
            env["QWENWEB_REDIS_PORT"],
            env.get("QWENWEB_REDIS_BIND", "127.0.0.1"),
        )
        # Its housekeeping twice a second, not ten times: an idle box stays idle (expired keys still read as gone).
        redis_argv += ["--save", "300", "1", "--hz", "2"]
        listed.append(Program("redis", redis_argv, priority=10, startsecs=1))
    # Daphne through qwenweb.serve: the WebSocket frame size and the request-body cap come from the settings.
    web = [python, "-m", "qwenweb.serve", "--bind", env["QWENWEB_BIND"], "--port", env["QWENWEB_PORT"]]
    listed += [
        llama,
        Program("web", web, priority=30),
        Program("worker", [*worker, *QUIET], priority=40),
        Program(
            "documents", [*background, *celery, "worker", "--loglevel", "INFO", *DOCUMENTS_QUEUE, *QUIET], priority=40
        ),
        Program(
            "beat", [*background, *celery, "beat", "--loglevel", "INFO", "--schedule", f"{var_dir}/celerybeat-schedule"]
        ),
        sampler,
        Program("ready", [*manage, "announce"], priority=90, startsecs=0, once=True),
    ]
    return listed


def niced(env: dict) -> list[str]:
    """The argv prefix that runs a background program at QWENWEB_BACKGROUND_NICE (default 10; 0: none)."""
    level = int(env.get("QWENWEB_BACKGROUND_NICE", BACKGROUND_NICE))
    if level <= 0:
        return []
    return [shutil.which("nice") or "/usr/bin/nice", "-n", str(min(level, 19))]


def node_queues(env: dict, *, node: bool = False) -> list[str]:
    """The default worker also takes this box's jobs as a node (its profile loads, downloads, self-tests);
    a joined node's worker takes only those, under a name of its own."""
    name = env.get("QWENWEB_NODE_NAME") or node_name_from_host()
    if node:
        return ["--queues", f"node.{name}", "--hostname", f"node-{name}@%h"]
    return ["--queues", f"celery,node.{name}"]


BACKGROUND_NICE = 10
QUIET = ["--without-gossip", "--without-mingle", "--without-heartbeat"]
# Document reading and summaries (settings.CELERY_TASK_ROUTES): two at once, beside the default worker's two.
DOCUMENTS_QUEUE = ["--queues", "documents", "--concurrency", "2", "--hostname", "documents@%h"]


def argv_line(argv: list[str]) -> str:
    """One argv as supervisord's ``command=``: shell-quoted, and ``%`` doubled (it expands ``%(...)s``)."""
    return shlex.join(argv).replace("%", "%%")


def program_section(program: Program, var_dir: Path) -> list[str]:
    log_dir = var_dir / "log"
    lines = [
        f"[program:{program.name}]",
        # Through the recorder: a later run finds the program's group even when supervisord was killed.
        f"command={argv_line(recorded(var_dir, program.name, program.argv))}",
        f"directory={ROOT}",
        f"priority={program.priority}",
        f"startsecs={program.startsecs}",
        "stopasgroup=true",
        "killasgroup=true",
        f"stopwaitsecs={STOP_WAIT_S}",
        "redirect_stderr=true",
    ]
    if program.once:
        lines += ["autorestart=false", "exitcodes=0", "startretries=0"]
    else:
        lines += ["autorestart=true", "startretries=10"]
    if program.once and os.isatty(1):
        # The announcement goes to the terminal `make run` was typed in (a file or the journal: its log).
        lines += ["stdout_logfile=/dev/stdout", "stdout_logfile_maxbytes=0"]
    else:
        lines += [f"stdout_logfile={log_dir / program.name}.log", f"stdout_logfile_maxbytes={LOG_MAX_BYTES}"]
        lines.append(f"stdout_logfile_backups={LOG_BACKUPS}")
    lines += [f"{key}={value}" for key, value in program.extra.items()]
    return lines


def render(env: dict, *, with_redis: bool, var_dir: Path, only: set[str] | None = None, node: bool = False) -> str:
    """The whole supervisord.conf. Children inherit supervisord's environment, so no value
    (and no secret) from ``env`` other than ports and paths is written into the file."""
    run_dir, log_dir = var_dir / "run", var_dir / "log"
    socket = run_dir / "supervisor.sock"
    lines = [
        "[unix_http_server]",
        f"file={socket}",
        "chmod=0700",
        "",
        "[supervisord]",
        "nodaemon=true",
        f"logfile={log_dir / 'supervisord.log'}",
        f"logfile_maxbytes={LOG_MAX_BYTES}",
        f"logfile_backups={LOG_BACKUPS}",
        f"pidfile={run_dir / 'supervisord.pid'}",
        f"childlogdir={log_dir}",
        f"directory={ROOT}",
        "identifier=qwenweb",
        "",
        "[rpcinterface:supervisor]",
        "supervisor.rpcinterface_factory = supervisor.rpcinterface:make_main_rpcinterface",
        "",
        "[supervisorctl]",
        f"serverurl=unix://{socket}",
        "",
        "[eventlistener:events]",
        f"command={argv_line(recorded(var_dir, 'events', [sys.executable, str(ROOT / 'manage.py'), 'supervisor_events']))}",
        f"directory={ROOT}",
        f"events={EVENTS}",
        "priority=1",
        "autorestart=true",
        "stdout_logfile=NONE",  # its stdout is the protocol with supervisord
        f"stderr_logfile={log_dir / 'events.log'}",
        f"stderr_logfile_maxbytes={LOG_MAX_BYTES}",
        f"stderr_logfile_backups={LOG_BACKUPS}",
        "",
    ]
    for program in programs(env, with_redis=with_redis, node=node):
        if only is not None and program.name not in only:
            continue
        lines += [*program_section(program, var_dir), ""]
    return "\n".join(lines)


def write_config(
    env: dict, *, with_redis: bool, var_dir: Path, only: set[str] | None = None, node: bool = False
) -> Path:
    """Write ``var/run/supervisord.conf`` (and the folders it names); returns its path.
    ``only``: just these programs (and the event listener): the tests' small stack; ``node``: a joined node's."""
    run_dir = var_dir / "run"
    run_dir.mkdir(parents=True, exist_ok=True)
    run_dir.chmod(0o700)
    (var_dir / "log").mkdir(parents=True, exist_ok=True)
    path = run_dir / "supervisord.conf"
    path.write_text(render(env, with_redis=with_redis, var_dir=var_dir, only=only, node=node))
    return path


def supervisorctl(var_dir: Path, *args: str) -> list[str]:
    """The argv of one ``supervisorctl`` command against this box's supervisord."""
    return [sys.executable, "-m", "supervisor.supervisorctl", "-c", str(var_dir / "run" / "supervisord.conf"), *args]


def supervisord(var_dir: Path) -> list[str]:
    return [sys.executable, "-m", "supervisor.supervisord", "-c", str(var_dir / "run" / "supervisord.conf")]
