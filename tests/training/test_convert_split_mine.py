import pytest

from models import ConfigError, DataError, Verdict
from training.convert import squad_pairs, wikiqa_pairs
from training.negatives import mine_hard_negatives
from training.splits import group_split


def test_squad_converter_labels(fixtures):
    pairs = squad_pairs(fixtures / "squad_mini.json", same_article_negatives=1, other_article_negatives=1, seed=1)
    kinds = {}
    for p in pairs:
        kinds.setdefault(p.metadata["kind"], set()).add(p.label)
    assert kinds["answerable"] == {Verdict.RELEVANT}
    assert kinds["unanswerable"] == {Verdict.IRRELEVANT}
    assert kinds["same_article"] == kinds["other_article"] == {Verdict.IRRELEVANT}
    own = {p.query_id: p.chunk_id for p in pairs if p.metadata["kind"] in ("answerable", "unanswerable")}
    for p in pairs:
        if p.metadata["kind"] == "same_article":
            assert p.chunk_id != own[p.query_id] and p.chunk_id.split("#")[0] == p.source
        if p.metadata["kind"] == "other_article":
            assert p.chunk_id.split("#")[0] != p.source
    assert squad_pairs(fixtures / "squad_mini.json", seed=1) == squad_pairs(fixtures / "squad_mini.json", seed=1)


@pytest.mark.parametrize(("content", "named"), [
    ('{"version": 1}', "top-level 'data'"),
    ("{", "not a readable SQuAD"),
    ('{"data": []}', "no SQuAD questions could be read"),
    ('{"data": [{"title": "t"}]}', r"data\[0\] is not a SQuAD article"),
    ('{"data": [{"title": "t", "paragraphs": [{"context": "c", "qas": [{"id": "1", "question": "q?"}, '
     '{"question": "no id?"}]}]}]}', r"data\[0\]\.paragraphs\[0\]\.qas\[1\] must be an object"),  # was a KeyError
])
def test_squad_converter_errors(tmp_path, content, named):
    (tmp_path / "x.json").write_text(content, encoding="utf-8")
    with pytest.raises(DataError, match=named):
        squad_pairs(tmp_path / "x.json")


def test_wikiqa_converter_groups_by_text_and_skips_broken_rows(fixtures):
    pairs = wikiqa_pairs(fixtures / "wikiqa_format.tsv")
    assert len(pairs) == 3  # the row labelled 'broken' is skipped with a warning
    assert pairs[0].query_id == pairs[1].query_id != pairs[2].query_id
    assert pairs[2].text == 'The play was written by William Shakespeare, "probably" around 1600.'
    assert pairs[1].label is Verdict.RELEVANT and pairs[1].source == "Eiffel Tower"


def test_wikiqa_converter_names_the_format_for_json_and_huge_fields(tmp_path):
    (tmp_path / "squad.json").write_text('{"data": []}', encoding="utf-8")
    with pytest.raises(DataError, match=r"looks like JSON.*crag convert squad"):
        wikiqa_pairs(tmp_path / "squad.json")
    huge = "Question\tSentence\tLabel\nq\t" + "x" * 200_000 + "\t1\n"
    (tmp_path / "huge.tsv").write_text(huge, encoding="utf-8")
    with pytest.raises(DataError, match=r"not a WikiQA TSV.*field larger"):
        wikiqa_pairs(tmp_path / "huge.tsv")


def test_group_split_keeps_queries_apart(squad_pairs_file):
    from training.data import load_pairs

    pairs = load_pairs(squad_pairs_file).pairs
    for by, key in (("query", lambda p: p.query_id), ("source", lambda p: p.source)):
        train, test = group_split(pairs, test_size=0.34, by=by, seed=5)
        assert train and test and len(train) + len(test) == len(pairs)
        assert not {key(p) for p in train} & {key(p) for p in test}
    with pytest.raises(ConfigError, match="unknown split key"):
        group_split(pairs, by="article")
    with pytest.raises(ConfigError, match="test_size"):
        group_split(pairs, test_size=1.5)


def test_bm25_mining_respects_margin_and_known_pairs():
    from training.data import LabelledPair

    q = "when was the eiffel tower built"
    pos = LabelledPair(query=q, text="The Eiffel Tower was built from 1887 to 1889 in Paris.", label=Verdict.RELEVANT,
                       query_id="q1")
    corpus = [
        pos.text,
        "The Eiffel Tower in Paris was built between 1887 and 1889 for the World's Fair.",  # near-duplicate
        "The tower was named after Gustave Eiffel, whose company built the tower.",
        "Paris is the capital of France.",
        "Bananas are rich in potassium.",
    ]
    mined = mine_hard_negatives([pos], corpus=corpus, per_query=2, margin=0.9)
    texts = [m.text for m in mined]
    assert pos.text not in texts
    assert corpus[4] not in texts  # no lexical overlap: not a hard negative
    assert all(m.label is Verdict.IRRELEVANT and m.query_id == "q1" for m in mined)
    strict = mine_hard_negatives([pos], corpus=corpus, per_query=5, margin=0.3)
    assert len(strict) < len(mine_hard_negatives([pos], corpus=corpus, per_query=5, margin=1.0))
    with pytest.raises(ConfigError, match="margin"):
        mine_hard_negatives([pos], margin=0)
    with pytest.raises(ConfigError, match="unknown mining method"):
        mine_hard_negatives([pos], method="dense")
    with pytest.raises(ConfigError, match="holds no text"):
        mine_hard_negatives([pos], corpus=["", "  "])
    with pytest.raises(ConfigError, match="list of texts"):
        mine_hard_negatives([pos], corpus="one passage")
    # a corpus of stop words only cannot score: nothing mined, no failure inside BM25
    assert mine_hard_negatives([pos], corpus=["the and of", "is a"]) == []
