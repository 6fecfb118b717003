"""`make install` / `make uninstall`: the box as a systemd service, started at boot.

The unit runs what `make run` runs (``scripts/stack.py run``: migrate, then every part
under supervisord in the foreground) as the dedicated system user ``qwenweb``, which
owns ``var/``; systemd restarts it if supervisord itself ever exits, and the new run
first stops whatever the dead supervisord's programs left running, as `make run` does
(scripts/leftovers.py). Where systemd is not the init system (a container, a sandbox)
it says so, prints the unit it would have written, and changes nothing.
"""

from __future__ import annotations

import os
import pwd
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
UNIT_PATH = Path("/etc/systemd/system/qwenweb.service")
USER = "qwenweb"
SYSTEMD_RUNNING = Path("/run/systemd/system")  # present only when systemd is PID 1 (sd_booted)


def unit_argument(value: str) -> str:
    """One ExecStart argument, quoted the way systemd reads it."""
    if value and not any(c in value for c in " \"\\'$%;"):
        return value
    escaped = value.replace("\\", "\\\\").replace('"', '\\"').replace("$", "$$").replace("%", "%%")
    return f'"{escaped}"'


def render_unit(*, root: Path, python: str, user: str = USER) -> str:
    argv = [python, str(root / "scripts" / "stack.py"), "run"]
    var_dir = root / "var"
    cache_dir = var_dir / "cache"
    return "\n".join(
        [
            "[Unit]",
            "Description=qwenweb (llama-server web front, every part under supervisord)",
            "After=network-online.target",
            "Wants=network-online.target",
            "",
            "[Service]",
            "Type=simple",
            f"User={user}",
            f"Group={user}",
            f"WorkingDirectory={root}",
            f"Environment={unit_argument(f'QWENWEB_VAR_DIR={var_dir}')}",
            # The llama-server build is cached under var/ so that the service user finds it.
            f"Environment={unit_argument(f'QWENWEB_CACHE={cache_dir}')}",
            f"ExecStart={' '.join(unit_argument(arg) for arg in argv)}",
            # supervisord stops every part on SIGTERM; what is left after the timeout is killed.
            "KillMode=mixed",
            "TimeoutStopSec=60",
            "Restart=always",
            "RestartSec=5",
            "",
            "[Install]",
            "WantedBy=multi-user.target",
            "",
        ]
    )


def run(*argv: str) -> None:
    subprocess.run(list(argv), check=True)


def ensure_user() -> None:
    try:
        pwd.getpwnam(USER)
    except KeyError:
        shell = "/usr/sbin/nologin" if Path("/usr/sbin/nologin").exists() else "/bin/false"
        run("useradd", "--system", "--user-group", "--home-dir", str(ROOT / "var"), "--shell", shell, USER)


def copy_llama_cache(var_dir: Path) -> None:
    """The installer's cached llama-server build, so the service does not build it again at boot."""
    source = Path(os.environ.get("QWENWEB_CACHE", Path.home() / ".cache" / "qwenweb"))
    for build in source.glob("llama.cpp-*"):
        target = var_dir / "cache" / build.name
        if build.is_dir() and not target.exists():
            shutil.copytree(build, target, symlinks=True)


def cannot(reason: str, unit: str) -> None:
    print(f"Cannot install the boot service: {reason}")
    print(f"This is the unit `make install` would write to {UNIT_PATH}:\n")
    print(unit)


def install() -> int:
    unit = render_unit(root=ROOT, python=sys.executable)
    if not SYSTEMD_RUNNING.is_dir():
        cannot(f"systemd is not the init system here ({SYSTEMD_RUNNING} is missing); use `make run` instead.", unit)
        return 0
    if os.geteuid() != 0:
        cannot("it needs root: run `sudo make install`.", unit)
        return 1
    ensure_user()
    var_dir = ROOT / "var"
    var_dir.mkdir(exist_ok=True)
    copy_llama_cache(var_dir)
    run("chown", "-R", f"{USER}:{USER}", str(var_dir))
    UNIT_PATH.write_text(unit)
    run("systemctl", "daemon-reload")
    run("systemctl", "enable", "--now", UNIT_PATH.name)
    print(f"Installed and started {UNIT_PATH.name} as user {USER}; it starts at every boot.")
    print(f"Logs: var/log/ and `journalctl -u {UNIT_PATH.name}`; stop: `sudo systemctl stop {UNIT_PATH.name}`.")
    return 0


def uninstall() -> int:
    if not SYSTEMD_RUNNING.is_dir():
        print(f"Nothing to remove: systemd is not the init system here ({SYSTEMD_RUNNING} is missing).")
        return 0
    if os.geteuid() != 0:
        print("Removing the boot service needs root: run `sudo make uninstall`.")
        return 1
    if UNIT_PATH.exists():
        subprocess.run(["systemctl", "disable", "--now", UNIT_PATH.name], check=False)
        UNIT_PATH.unlink()
        run("systemctl", "daemon-reload")
        print(f"Removed {UNIT_PATH.name}; the data in var/ and the user {USER} are kept.")
    else:
        print(f"{UNIT_PATH} is not installed.")
    return 0


def main() -> None:
    command = sys.argv[1] if len(sys.argv) > 1 else ""
    if command not in ("install", "uninstall"):
        raise SystemExit("usage: boot_service.py install|uninstall")
    raise SystemExit(install() if command == "install" else uninstall())


if __name__ == "__main__":
    main()
