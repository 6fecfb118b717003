import os

# numpy's OpenBLAS starts a thread per core that spins after each product (a knowledge base's vectors
# ranked), taking the cores llama-server runs on (docs/knowledge.md, "Measured"): one thread. Read when numpy
# loads; every process of the product imports this package first.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

from .celery import app as celery_app  # noqa: E402

__all__ = ["celery_app"]
