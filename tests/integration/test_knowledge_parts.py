"""The pieces of knowledge retrieval that need no service: passages cut by (estimated) tokens within a
page and overlapping, CJK counted by character, reciprocal rank fusion, the FTS5 query quoted."""

from __future__ import annotations

from chat.knowledge.passages import cut_page, unit_tokens
from chat.knowledge.search import fuse
from chat.knowledge.vectors import fts_query


def test_a_page_is_cut_into_overlapping_passages_of_about_the_size_asked():
    words = [f"word{n:03d}" for n in range(200)]  # 7 characters: 2 estimated tokens each
    cuts = cut_page(4, " ".join(words), size=60, overlap=10)
    assert {cut.page for cut in cuts} == {4}
    pieces = [cut.text.split() for cut in cuts]
    assert all(len(piece) <= 30 for piece in pieces)  # 60 tokens at 2 a word
    assert pieces[0][0] == "word000" and pieces[-1][-1] == "word199"  # nothing lost at either end
    for before, after in zip(pieces, pieces[1:], strict=False):
        assert before[-5:] == after[:5]  # 10 tokens of overlap: the last 5 words again
    assert len(cuts) == 8


def test_cjk_costs_a_token_a_character_and_a_short_page_is_one_passage():
    assert unit_tokens("合") == 1 and unit_tokens("internationalization") == 5
    cuts = cut_page(1, "合同" * 100, size=50, overlap=0)
    assert [len(cut.text) for cut in cuts] == [50, 50, 50, 50]
    assert [cut.text for cut in cut_page(2, "Short page.", size=300, overlap=50)] == ["Short page."]


def test_reciprocal_rank_fusion_rewards_what_both_lists_rank():
    fused = fuse([1, 2, 3], [3, 4])
    assert [item for item, _score in fused] == [3, 1, 2, 4]
    assert fused[0][1] == 1 / 63 + 1 / 61


def test_the_fts_query_quotes_every_word():
    assert fts_query('cat" OR x NEAR(') == '"cat" OR "or" OR "x" OR "near"'
    assert fts_query("  ") == ""
