"""Knowledge bases: recall of words alone against words and meaning fused, indexing speed, query time.

A corpus of 200 one-page notes is built from 20 facts told in 10 towns ("In Lund, invoices must be paid
within thirty days..."), each with two questions: one sharing many words with its note, one told in
other words (sharing little more than the town). Every note is read (the documents' pipeline) and
indexed by the default embedder (embed-2k: the default model, mean-pooled), as the documents worker
does; then the questions of every other note are asked both ways and counted found when its note is in the top 5.

Prints `kb_embedder=`, `kb_recall_at_5_lexical=` and `kb_recall_at_5_hybrid=` (over 200 questions,
and `_paraphrase` / `_shared_words` apart), `kb_read_pages_per_s=` (reading alone: 20 of the same notes
read again without indexing), `kb_index_pages_per_s=` (read, cut, words and vectors), and `kb_query_p95_ms=`
(retrieval only, the question's embedding included, no generation) over a collection of 50,000 passages:
their vectors are random unit vectors and their words random draws from a vocabulary, inserted directly
(embedding 50,000 passages on two cores would take hours), with `kb_query_lexical_p95_ms=` (words alone) and
`kb_vectors_read_ms=` (a collection's vectors read into the process, once) beside it.
"""

from __future__ import annotations

import asyncio
import random
import statistics
import sys
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.support import stack  # noqa: E402

TOWNS = ["Lund", "Turku", "Ghent", "Bergen", "Aarhus", "Tartu", "Porto", "Graz", "Brno", "Cork"]
# (the note, a question sharing many words, a question in other words)
FACTS = [
    ("our cat sleeps on a windowsill each afternoon, curled up in the sun.",
     "Where does our cat sleep each afternoon?", "Where does the kitten nap?"),
    ("quarterly revenue grew eleven percent, led by software licences.",
     "How much did quarterly revenue grow?", "How much did sales increase?"),
    ("contract renewal requires signatures from both parties before March.",
     "What does contract renewal require?", "Who needs to sign to extend the agreement?"),
    ("staff holidays are booked through the personnel office two weeks ahead.",
     "How are staff holidays booked?", "How do I request vacation?"),
    ("the server room is cooled by two redundant air conditioning units.",
     "How is the server room cooled?", "What keeps the computers from overheating?"),
    ("invoices must be paid within thirty days of receipt.",
     "When must invoices be paid?", "When must bills be settled?"),
    ("the library lends books for three weeks and charges a small fine for late returns.",
     "How long does the library lend books?", "For how many days can I borrow a novel?"),
    ("the canteen serves vegetarian lunch every Tuesday at noon.",
     "When does the canteen serve vegetarian lunch?", "Which day is there a meatless midday meal?"),
    ("visitors must wear a badge and be escorted by an employee at all times.",
     "What must visitors wear?", "What are the rules for guests in the building?"),
    ("the fire alarm is tested on the first Monday of every month.",
     "When is the fire alarm tested?", "How often is the smoke siren checked?"),
    ("parking spaces are assigned by seniority and renewed each January.",
     "How are parking spaces assigned?", "Who gets a place for their car?"),
    ("laptops are replaced every four years by the IT department.",
     "How often are laptops replaced?", "When do I get a new computer?"),
    ("the board of directors meets quarterly to approve the budget.",
     "When does the board of directors meet?", "How often do the executives gather to agree on spending?"),
    ("new employees attend a two-day orientation in their first week.",
     "What do new employees attend?", "How are recent hires introduced to the firm?"),
    ("the warehouse ships orders placed before two o'clock on the same day.",
     "When does the warehouse ship orders?", "How fast are purchases dispatched?"),
    ("passwords must be changed every ninety days and contain a digit.",
     "How often must passwords be changed?", "What are the login secret rules?"),
    ("the bicycle shed is locked at eight in the evening.",
     "When is the bicycle shed locked?", "Until what time can I leave my bike?"),
    ("expense claims over five hundred euros need a manager's approval.",
     "Which expense claims need a manager's approval?", "Who must sign off on large reimbursements?"),
    ("the printer on the second floor jams when the paper tray is overfilled.",
     "Why does the printer on the second floor jam?", "What makes the copier get stuck?"),
    ("rainwater from the roof is collected to water the garden.",
     "What is rainwater from the roof collected for?", "How are the plants irrigated?"),
]  # fmt: skip
FILLER = [
    "This note was filed by the office manager.",
    "Questions about it go to the front desk.",
    "It was last reviewed in the spring.",
    "Earlier versions are kept in the archive.",
]
SYNTHETIC_PASSAGES = 50_000
QUERIES = 60
DIMENSIONS = 640  # embed-2k's vectors
# Every other note's questions are asked (each hybrid search embeds its question: seconds on a loaded box).
QUESTION_STEP = 2
READ_SAMPLE = 20  # notes read alone: each is a child process's start, seconds on a loaded box


def corpus() -> list[tuple[str, str, str, str]]:
    """(file name, text, question sharing many words, question in other words), one per note."""
    rng = random.Random(7)
    notes = []
    for town in TOWNS:
        for number, (fact, shared, other) in enumerate(FACTS):
            text = f"In {town}, {fact} " + " ".join(rng.sample(FILLER, 2))
            notes.append(
                (f"{town.lower()}-{number}.txt", text, f"{shared[:-1]} in {town}?", f"{other[:-1]} in {town}?")
            )
    return notes


def recall(user, collection, questions: list[tuple[str, str]], hybrid: bool) -> float:
    from chat.knowledge.search import search

    found = 0
    for name, question in questions:
        results = asyncio.run(search(user, [collection.pk], question, 5, hybrid=hybrid))
        found += name in [item.document for item in results]
    return found / len(questions)


def filled(user, slug: str, notes) -> tuple[object, list]:
    from chat.knowledge.services import add_document, create_collection

    collection = create_collection(user, slug, slug)
    return collection, [add_document(user, collection.pk, name, text.encode()).id for name, text, *_ in notes]


def synthetic_collection(user, dimensions: int):
    """50,000 passages with random words and random unit vectors, written straight into the tables."""
    import numpy as np  # after the product's settings: numpy loads as the product's processes load it

    from chat.knowledge.embedder import embedder
    from chat.knowledge.models import Collection, KnowledgePassage, KnowledgeVector
    from chat.knowledge.services import create_collection
    from chat.knowledge.vectors import add_terms, pack
    from chat.models import Document

    rng = np.random.default_rng(3)
    words = [f"{a}{b}" for a in ("ka", "lo", "mi", "ne", "su", "ta", "ve", "ro") for b in range(400)]
    collection = create_collection(user, "synthetic", "synthetic")
    for start in range(0, SYNTHETIC_PASSAGES, 5000):
        document = Document.objects.create(
            id=uuid.uuid4(), owner=user, name=f"s{start}.txt", kind="txt", status="ready"
        )
        texts = [" ".join(rng.choice(words, 60)) for _ in range(5000)]
        passages = KnowledgePassage.objects.bulk_create(
            KnowledgePassage(collection=collection, document=document, index=i, page=1, text=text)
            for i, text in enumerate(texts)
        )
        add_terms([(passage.pk, passage.text) for passage in passages])
        vectors = rng.standard_normal((len(passages), dimensions)).astype(np.float32)
        KnowledgeVector.objects.bulk_create(
            KnowledgeVector(passage_id=passage.pk, vector=pack(vector))
            for passage, vector in zip(passages, vectors, strict=True)
        )
    model = embedder()
    Collection.objects.filter(pk=collection.pk).update(
        embed_model_file=model.model_file, embed_model_sha256=model.sha256, embed_dimensions=dimensions
    )
    collection.refresh_from_db()
    return collection, words


def query_p95(user, collection, questions: list[str], hybrid: bool) -> float:
    from chat.knowledge.search import search

    async def run() -> list[float]:
        times = []
        for question in questions:
            started = time.perf_counter()
            await search(user, [collection.pk], question, 5, hybrid=hybrid)
            times.append((time.perf_counter() - started) * 1000)
        return times

    times = asyncio.run(run())
    return statistics.quantiles(times, n=20)[-1]


def parts_p95(user, collection, questions: list[str]) -> tuple[float, float]:
    """The 95th percentiles of the question's embedding (through the fair queue) and of the vectors'
    ranking alone."""
    from chat.knowledge.embedder import embed, embedder
    from chat.knowledge.vectors import nearest, unit
    from monitor.public import close_loop_clients, serving_pool

    profile = embedder().profile

    async def run() -> tuple[list[float], list[float]]:
        pool = await serving_pool(profile)
        embeds, ranks = [], []
        try:
            for question in questions:
                started = time.perf_counter()
                vector = unit((await embed(pool, str(user.pk), [question], "person"))[0])
                embeds.append((time.perf_counter() - started) * 1000)
                started = time.perf_counter()
                await asyncio.to_thread(nearest, [collection.pk], vector, 50)
                ranks.append((time.perf_counter() - started) * 1000)
        finally:
            await close_loop_clients()
        return embeds, ranks

    embeds, ranks = asyncio.run(run())
    print(f"kb_question_embed_p50_ms={statistics.median(embeds):.0f} (min {min(embeds):.0f})", flush=True)
    return statistics.quantiles(embeds, n=20)[-1], statistics.quantiles(ranks, n=20)[-1]


def corpus_figures(user) -> None:
    """Recall both ways and indexing speed on the 200 notes."""
    from chat.documents.ingest import ingest
    from chat.knowledge.indexing import index_document
    from chat.knowledge.models import Collection

    notes = corpus()
    _reading, read_ids = filled(user, "reading", notes[:READ_SAMPLE])
    started = time.perf_counter()
    for document_id in read_ids:
        ingest(document_id)
    read_rate = len(read_ids) / (time.perf_counter() - started)
    print(f"kb_read_pages_per_s={read_rate:.1f}", flush=True)

    collection, ids = filled(user, "notes", notes)
    index_document(ids[0])  # loads the embeddings profile: not counted
    started = time.perf_counter()
    for document_id in ids[1:]:
        index_document(document_id)
    index_rate = (len(ids) - 1) / (time.perf_counter() - started)
    print(f"kb_index_pages_per_s={index_rate:.1f} (reading alone {read_rate:.1f})", flush=True)

    collection = Collection.objects.get(pk=collection.pk)
    asked = notes[::QUESTION_STEP]
    shared = [(name, question) for name, _text, question, _other in asked]
    other = [(name, question) for name, _text, _shared, question in asked]
    figures = {}
    for way, hybrid in (("lexical", False), ("hybrid", True)):
        figures[f"{way}_shared_words"] = recall(user, collection, shared, hybrid)
        figures[f"{way}_paraphrase"] = recall(user, collection, other, hybrid)
        figures[way] = (figures[f"{way}_shared_words"] + figures[f"{way}_paraphrase"]) / 2
    for name, value in figures.items():
        print(f"kb_recall_at_5_{name}={value:.3f}", flush=True)


def main() -> None:
    run_dir = stack.django_run_dir("qwenweb-bench-")
    services = [stack.start_redis(run_dir)]
    services.append(stack.start_llama(run_dir))
    try:
        from chat.knowledge.embedder import embedder
        from chat.knowledge.search import search
        from chat.knowledge.vectors import collection_matrix
        from tests.support.client import make_user

        user = make_user()
        model = embedder()
        print(f"kb_embedder={model.profile.name}:{model.model_file} sha256={model.sha256 or 'unknown'}", flush=True)
        if "--queries-only" not in sys.argv:
            corpus_figures(user)

        synthetic, words = synthetic_collection(user, DIMENSIONS)
        rng = random.Random(5)
        questions = [" ".join(rng.sample(words, 6)) for _ in range(QUERIES)]
        asyncio.run(search(user, [synthetic.pk], questions[0], 5, hybrid=False))
        started = time.perf_counter()
        collection_matrix(synthetic.pk, DIMENSIONS)  # read once per process, then kept while it does not change
        print(f"kb_vectors_read_ms={(time.perf_counter() - started) * 1000:.0f}", flush=True)
        asyncio.run(search(user, [synthetic.pk], questions[0], 5))  # the embeddings profile loaded
        p95 = query_p95(user, synthetic, questions, hybrid=True)
        print(f"kb_query_p95_ms={p95:.0f}")
        print(f"kb_query_lexical_p95_ms={query_p95(user, synthetic, questions, hybrid=False):.0f}")
        embed_ms, rank_ms = parts_p95(user, synthetic, questions)
        print(f"kb_question_embed_p95_ms={embed_ms:.0f} kb_vector_rank_p95_ms={rank_ms:.0f}")
    finally:
        for service in reversed(services):
            service.stop()


if __name__ == "__main__":
    main()
