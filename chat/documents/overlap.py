"""How much of a model's text is copied: shared runs of words between two texts.

Words are compared lower-cased; Chinese, Japanese and Korean characters count one
word each, since those scripts put no spaces between words.
"""

from __future__ import annotations

import re

_WORD = re.compile(r"[\u3040-\u30ff\u3400-\u9fff\uac00-\ud7af]|[^\W_]+", re.UNICODE)
# A sentence of the output that shares a run this long with the instructions is their echo.
ECHO_RUN = 5
# Runs this long shared with the source are copied text, not a summary.
COPY_RUN = 8
# Sentences end at a stop, but not at the stop of a page abbreviation ("pp. 3").
# Captured: split gives the separators too, so a kept sentence keeps its own.
_SENTENCES = re.compile(r"((?<=[.!?。！？:：])(?<!p\.)[ \t]+|\n+)")


def words(text: str) -> list[str]:
    return _WORD.findall(text.lower())


def shingles(text: str, size: int) -> set[tuple[str, ...]]:
    tokens = words(text)
    return {tuple(tokens[index : index + size]) for index in range(len(tokens) - size + 1)}


def copied_share(output: str, source: str, size: int = COPY_RUN) -> float:
    """The share of the output's word runs of ``size`` that are found in ``source``."""
    made = shingles(output, size)
    if not made:
        return 0.0
    return len(made & shingles(source, size)) / len(made)


def strip_echo(output: str, instructions: str) -> tuple[str, float]:
    """The output without the sentences that repeat the instructions, and the share of it they were."""
    given = {run for size in range(3, ECHO_RUN + 1) for run in shingles(instructions, size)}
    kept: list[str] = []
    dropped = total = 0
    pieces = _SENTENCES.split(output)  # sentence, separator, sentence, ..., sentence
    for sentence, gap in zip(pieces[::2], [*pieces[1::2], ""], strict=True):
        length = len(words(sentence))
        total += length
        size = min(ECHO_RUN, length)
        if size >= 3 and shingles(sentence, size) & given:
            dropped += length
            continue
        kept.append(sentence + gap)
    return "".join(kept).strip(), (dropped / total if total else 0.0)
