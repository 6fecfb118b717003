"""A stand-in for ``chat.documents.pdf.upload_check_worker`` that never answers: tests swap it in
(``upload_check.CHECK_WORKER``) for a check's child that is surely still running when they kill it
or wait it out."""

import signal

signal.pause()
