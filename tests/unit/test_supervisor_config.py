"""The supervisord configuration `make run` writes: every part restarted and logged with rotation, argv intact."""

from __future__ import annotations

import configparser
import shlex
from pathlib import Path

from scripts.leftovers import recorded
from scripts.supervisor_config import programs, render

ENV = {
    "QWENWEB_VAR_DIR": "/srv/q w/var",
    "REDIS_SERVER_BIN": "/usr/bin/redis-server",
    "QWENWEB_REDIS_PORT": "6390",
    "QWENWEB_BIND": "0.0.0.0",
    "QWENWEB_PORT": "8000",
    "QWENWEB_NODE_NAME": "box-a",
}


def parsed() -> configparser.RawConfigParser:
    config = configparser.RawConfigParser()
    config.read_string(render(ENV, with_redis=True, var_dir=Path(ENV["QWENWEB_VAR_DIR"])))
    return config


def test_every_long_lived_part_restarts_and_logs_with_rotation():
    config = parsed()
    names = [p.name for p in programs(ENV, with_redis=True)]
    assert names == ["redis", "llama", "web", "worker", "documents", "beat", "sampler", "ready"]
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
    # Long document work has its own worker: the default one takes the default queue and this box's
    # jobs as a node (its profile loads, downloads, self-tests), never documents.
    assert "--queues documents" in config["program:documents"]["command"]
    assert "--queues celery,node.box-a " in config["program:worker"]["command"]


def test_the_private_redis_wants_its_password_and_listens_where_it_is_told():
    """Its users (the default one's password as a hash, the nodes') in its ACL file; no password on argv."""
    argv = {p.name: p.argv for p in programs({**ENV, "QWENWEB_REDIS_BIND": "127.0.0.1,192.168.1.5"}, with_redis=True)}
    redis = argv["redis"]
    assert redis[redis.index("--bind") + 1 : redis.index("--port")] == ["127.0.0.1", "192.168.1.5"]
    assert redis[redis.index("--aclfile") + 1] == "/srv/q w/var/redis/users.acl"
    assert redis[redis.index("--protected-mode") + 1] == "yes"
    default = {p.name: p.argv for p in programs(ENV, with_redis=True)}["redis"]
    assert default[default.index("--bind") + 1 : default.index("--port")] == ["127.0.0.1"]


def test_a_node_runs_its_router_its_own_worker_and_its_sampler_only():
    """`make node`: no Redis, web server, beat or documents worker of its own (the main box has them);
    its worker takes only its own queue, under a name of its own."""
    listed = programs(ENV, with_redis=False, node=True)
    assert [p.name for p in listed] == ["llama", "worker", "sampler"]
    worker = {p.name: p.argv for p in listed}["worker"]
    assert worker[worker.index("--queues") + 1] == "node.box-a"
    assert worker[worker.index("--hostname") + 1] == "node-box-a@%h"
    config = configparser.RawConfigParser()
    config.read_string(render(ENV, with_redis=False, var_dir=Path(ENV["QWENWEB_VAR_DIR"]), node=True))
    assert {section for section in config.sections() if section.startswith("program:")} == {
        "program:llama", "program:worker", "program:sampler"
    }  # fmt: skip
    assert "supervisor_events" in config["eventlistener:events"]["command"]


def test_background_programs_run_niced_below_llama_server_and_the_web_process():
    argv = {p.name: p.argv for p in programs(ENV, with_redis=True)}
    for name in ("worker", "documents", "beat", "sampler"):
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
