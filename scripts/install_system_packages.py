"""Make sure Debian packages the tests or benchmarks drive are installed.

    install_system_packages.py chromium:/usr/bin/chromium poppler-utils:pdftotext

Each argument is PACKAGE:PROGRAM (a path or a name on PATH; a path may be a data file the
package installs, such as Tesseract's language data or a font). Missing ones are
installed with apt-get when that is possible (root), else the script says what to
install. Playwright's own browser download does not work offline, so the browser
tests drive Debian's Chromium; PDF text layers are read by Poppler's pdftotext (and the
extraction benchmark compares with it); scanned pages are read by Debian's Tesseract.
"""

import os
import shutil
import subprocess
import sys


def present(program: str) -> bool:
    return os.path.exists(program) if "/" in program else shutil.which(program) is not None


def main(wanted: list[str]) -> None:
    chromium = os.environ.get("QWENWEB_CHROMIUM")
    missing = []
    for item in wanted:
        package, _, program = item.partition(":")
        if package == "chromium" and chromium:
            program = chromium
        if not present(program or package):
            missing.append(package)
    if not missing:
        return
    if os.geteuid() != 0 or not shutil.which("apt-get"):
        sys.exit(f"missing: {' '.join(missing)}; install them (apt-get install {' '.join(missing)}).")
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    subprocess.run(["apt-get", "update", "-q"], check=True, env=env)
    subprocess.run(["apt-get", "install", "-y", "-q", *missing], check=True, env=env)


if __name__ == "__main__":
    main(sys.argv[1:])
