"""The supervisord configuration `make run` writes: every part restarted and logged with rotation, argv intact."""

from __future__ import annotations

import configparser
import shlex
from pathlib import Path

from qwenweb.network import node_name_from_host
from scripts.leftovers import recorded
from scripts.supervisor_config import programs, render

ENV = {
    "QWENWEB_VAR_DIR": "/srv/q w/var",
    "REDIS_SERVER_BIN": "/usr/bin/redis-server",
    "QWENWEB_REDIS_PORT": "6390",
    "QWENWEB_BIND": "0.0.0.0",
    "QWENWEB_PORT": "8000",
}


def parsed() -> configparser.RawConfigParser:
    config = configparser.RawConfigParser()
    config.read_string(render(ENV, with_redis=True, var_dir=Path(ENV["QWENWEB_VAR_DIR"])))
    return config


def test_every_long_lived_part_restarts_and_logs_with_rotation():
    config = parsed()
    names = [p.name for p in programs(ENV, with_redis=True)]
    assert names == ["redis", "llama", "web", "worker", "documents", "watchdog", "beat", "sampler", "ready"]
    for name in names[:-1]:
        section = config[f"program:{name}"]
        assert section["autorestart"] == "true" and int(section["startretries"]) > 0
        assert section["stdout_logfile"] == f"/srv/q w/var/log/{name}.log"
        assert section["stdout_logfile_maxbytes"] == "20MB" and section["stdout_logfile_backups"] == "5"
    assert config["program:ready"]["autorestart"] == "false"
    assert config["supervisord"]["nodaemon"] == "true"
    assert config["unix_http_server"]["chmod"] == "0700"
    assert "PROCESS_STATE_FATAL" in config["eventlistener:events"]["events"]


def test_commands_are_the_argv_with_percent_escaped():
    config = parsed()
    var_dir = Path(ENV["QWENWEB_VAR_DIR"])
    for program in programs(ENV, with_redis=True):
        line = config[f"program:{program.name}"]["command"]
        # Each start recorded under its name first (scripts/leftovers.py), then the program's own argv.
        assert shlex.split(line.replace("%%", "%")) == recorded(var_dir, program.name, program.argv)
    listener = shlex.split(config["eventlistener:events"]["command"])
    assert listener[: listener.index("--") + 1] == recorded(var_dir, "events", [])
    assert "watchdog@%%h" in config["program:watchdog"]["command"]
    # Long document work has its own worker: the default one takes the default queue and this box's
    # jobs as a node (its profile loads, downloads, self-tests), never documents.
    assert "--queues documents" in config["program:documents"]["command"]
    assert f"--queues celery,node.{node_name_from_host()}" in config["program:worker"]["command"]


def test_background_programs_run_niced_below_llama_server_and_the_web_process():
    argv = {p.name: p.argv for p in programs(ENV, with_redis=True)}
    for name in ("worker", "documents", "watchdog", "beat", "sampler"):
        assert Path(argv[name][0]).name == "nice" and argv[name][1:3] == ["-n", "10"], argv[name]
    for name in ("redis", "llama", "web"):
        assert Path(argv[name][0]).name != "nice", argv[name]
    # Its argv after the prefix is the program itself, unchanged.
    assert argv["sampler"][3:][-1] == "run_sampler"


def test_background_priority_comes_from_the_environment():
    argv = {p.name: p.argv for p in programs({**ENV, "QWENWEB_BACKGROUND_NICE": "5"}, with_redis=True)}
    assert argv["worker"][1:3] == ["-n", "5"]
    argv = {p.name: p.argv for p in programs({**ENV, "QWENWEB_BACKGROUND_NICE": "0"}, with_redis=True)}
    assert Path(argv["worker"][0]).name != "nice"
