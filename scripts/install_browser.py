"""Make sure Debian's Chromium is at /usr/bin/chromium for the browser tests.

Playwright's own browser download does not work offline, so the tests drive the
system Chromium. Installs it with apt-get when missing and possible (root).
"""

import os
import shutil
import subprocess
import sys

CHROMIUM = os.environ.get("QWENWEB_CHROMIUM", "/usr/bin/chromium")

if os.access(CHROMIUM, os.X_OK):
    sys.exit(0)
if os.geteuid() != 0 or not shutil.which("apt-get"):
    sys.exit(f"{CHROMIUM} is missing; install Debian's chromium package (apt-get install chromium).")
env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
subprocess.run(["apt-get", "update", "-q"], check=True, env=env)
subprocess.run(["apt-get", "install", "-y", "-q", "chromium"], check=True, env=env)
