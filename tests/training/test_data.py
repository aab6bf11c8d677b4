import json
import logging

import pytest

from models import ConfigError, DataError, Verdict
from training.data import LabelledPair, PairSet, load_pairs, model_decided, query_key, write_pairs
from training.labels import parse_label_map


def _jsonl(path, rows):
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def test_jsonl_roundtrip(tmp_path, squad_pairs_file):
    data = load_pairs(squad_pairs_file)
    assert len(data) == 90 and data.summary()["labels"]["relevant"] == 18
    out = tmp_path / "copy.jsonl"
    assert write_pairs(data.pairs, out) == 90
    assert load_pairs(out).pairs == data.pairs


def test_csv_and_tsv_with_optional_fields(tmp_path):
    (tmp_path / "a.csv").write_text(
        'query,text,label,query_id,source,metadata\n"Who?",Him.,yes,q1,doc,"{""k"": 1}"\nWho?,Her.,0,q1,,\n',
        encoding="utf-8")
    data = load_pairs(tmp_path / "a.csv")
    assert [p.label for p in data.pairs] == [Verdict.RELEVANT, Verdict.IRRELEVANT]
    assert data.pairs[0].metadata == {"k": 1} and data.pairs[0].source == "doc" and data.pairs[1].source is None
    (tmp_path / "a.tsv").write_text("query\ttext\tlabel\nq\tt\t3\n", encoding="utf-8")
    graded = load_pairs(tmp_path / "a.tsv", label_map=parse_label_map("3=relevant,0-2=irrelevant"))
    assert graded.pairs[0].label is Verdict.RELEVANT
    assert graded.pairs[0].query_id == query_key("q") == query_key("  Q ")
    (tmp_path / "excel.csv").write_text(  # as spreadsheets save CSV where the decimal mark is a comma
        'query;text;label\nWho?;Him, the one in red.;1\n"Who; really?";Her.;0\n', encoding="utf-8")
    semicolons = load_pairs(tmp_path / "excel.csv")  # used to be "header ['query;text;label'] lacks column(s)"
    assert [(p.query, p.text) for p in semicolons.pairs] == [("Who?", "Him, the one in red."), ("Who; really?", "Her.")]


def test_all_bad_lines_reported_with_file_and_line(tmp_path):
    path = _jsonl(tmp_path / "bad.jsonl", [
        {"query": "q", "text": "t", "label": "relevant"},
        {"query": "q", "text": "", "label": "relevant"},
        {"query": "q", "label": "relevant"},
        {"query": "q", "text": "t2", "label": "relevnt"},
    ])
    with path.open("a", encoding="utf-8") as handle:
        handle.write("{broken\n")
    with pytest.raises(DataError) as info:
        load_pairs(path)
    message = str(info.value)
    assert "4 invalid record(s)" in message
    assert f"{path}:2: text must be non-empty" in message
    assert f"{path}:3: missing field(s) ['text']" in message
    assert "did you mean 'relevant'" in message
    assert f"{path}:5: invalid JSON" in message


def test_duplicates_warn_and_keep_first(tmp_path, caplog):
    path = _jsonl(tmp_path / "dup.jsonl", [
        {"query": "q", "text": "t", "label": "relevant"},
        {"query": "q", "text": "t", "label": "irrelevant"},
    ])
    with caplog.at_level(logging.WARNING):
        data = load_pairs(path)
    assert len(data) == 1 and data.pairs[0].label is Verdict.RELEVANT
    assert "duplicate of the pair on line 1 with a different label" in data.warnings[0]
    assert "duplicate" in caplog.text


def test_file_level_errors(tmp_path):
    with pytest.raises(ConfigError, match=r"load_pairs reads one file of pairs \(a path\), got list"):
        load_pairs([tmp_path / "a.jsonl", tmp_path / "b.jsonl"])
    with pytest.raises(DataError, match="no such file"):
        load_pairs(tmp_path / "none.jsonl")
    (tmp_path / "empty.jsonl").write_text("  \n", encoding="utf-8")
    with pytest.raises(DataError, match="the file is empty"):
        load_pairs(tmp_path / "empty.jsonl")
    (tmp_path / "latin.jsonl").write_bytes(b'{"query": "q", "text": "t", "label": 1}\n{"query": "caf\xe9"}\n')
    with pytest.raises(DataError, match=r"latin.jsonl:2: not UTF-8"):
        load_pairs(tmp_path / "latin.jsonl")
    (tmp_path / "x.parquet").write_text("x", encoding="utf-8")
    with pytest.raises(DataError, match="unknown data format"):
        load_pairs(tmp_path / "x.parquet")
    (tmp_path / "h.csv").write_text("question,passage,label\nq,t,1\n", encoding="utf-8")
    with pytest.raises(DataError, match=r"lacks column\(s\) \['query', 'text'\]"):
        load_pairs(tmp_path / "h.csv")
    (tmp_path / "own.csv").write_text("Question,Passage Text,rel\nq,t,1\n", encoding="utf-8")
    with pytest.raises(DataError, match=r"--columns 'query=Question,text=Passage Text,label=rel'"):
        load_pairs(tmp_path / "own.csv")  # the hint names the file's own columns when they are plain
    load_pairs(tmp_path / "own.csv", columns={"query": "Question", "text": "Passage Text", "label": "rel"})
    _jsonl(tmp_path / "list.jsonl", [[1, 2]])
    with pytest.raises(DataError, match="must be a JSON object"):
        load_pairs(tmp_path / "list.jsonl")


def test_model_decided_leaves_out_rule_decided_pairs_and_warns_of_relevant_ones(caplog):
    def pair(query, text, label):
        return LabelledPair(query=query, text=text, label=label, query_id=query)

    data = PairSet([pair("hello", "hello", Verdict.IRRELEVANT), pair("What is X?", "X is a letter.", Verdict.RELEVANT),
                    pair("What is Y?", "what is y?", Verdict.RELEVANT)], path="pairs.jsonl")
    with caplog.at_level("INFO", logger="training.data"):
        kept, mask = model_decided(data)
    assert [p.text for p in kept.pairs] == ["X is a letter."] and mask.tolist() == [False, True, False]
    assert kept.path == "pairs.jsonl"
    warning = [r for r in caplog.records if r.levelname == "WARNING"]
    assert len(warning) == 1 and "2 of 3 pairs are decided by rule" in warning[0].message
    assert "1 of them labelled relevant" in warning[0].message
    assert model_decided(kept)[0] is kept  # nothing to leave out: the same set


def test_model_decided_by_domain_groups_leaves_out_echoes_and_caps(tmp_path):
    from training.recipe import model_decided_by_domain

    def pair(query, text, domain):
        return LabelledPair(query=query, text=text, label=Verdict.IRRELEVANT, query_id=query,
                            metadata={"domain": domain})

    path = tmp_path / "split.jsonl"
    write_pairs([pair("What is Z?", "Z is a letter.", "web"), pair("hello", "hello", "web"),
                 pair("What is A?", "A is a vowel.", "biomedical"),
                 pair("What is B?", "B is a consonant.", "biomedical"),
                 pair("What is C?", "C is a consonant.", "biomedical")], path)
    got = model_decided_by_domain(path)
    assert [(d, p.text) for d, p in got] == [("biomedical", "A is a vowel."), ("biomedical", "B is a consonant."),
                                             ("biomedical", "C is a consonant."), ("web", "Z is a letter.")]
    assert [d for d, _ in model_decided_by_domain(path, limit=1)] == ["biomedical", "web"]


def test_a_files_own_field_names_map_with_columns(tmp_path):
    from models import ConfigError
    from training.data import parse_columns

    rows = [{"question": "Is there an IKEA in Doha?", "passage": "Yes, in Festival City.", "relevance": "Good",
             "id": "c1"},
            {"question": "Is there an IKEA in Doha?", "passage": "So is there an IKEA there?", "relevance": "Bad"}]
    path = _jsonl(tmp_path / "forum.jsonl", rows)
    with pytest.raises(DataError, match=r"missing field\(s\) \['query', 'text', 'label'\]; the record has "
                                        r"\['id', 'passage', 'question', 'relevance'\]: map yours with --columns"):
        load_pairs(path)
    columns = parse_columns("query=question, text=passage, label=relevance, chunk_id=id")
    data = load_pairs(path, columns=columns, label_map=parse_label_map("good=relevant,bad=irrelevant"))
    assert [(p.query, p.text, p.label, p.chunk_id) for p in data.pairs] == [
        ("Is there an IKEA in Doha?", "Yes, in Festival City.", Verdict.RELEVANT, "c1"),
        ("Is there an IKEA in Doha?", "So is there an IKEA there?", Verdict.IRRELEVANT, None)]
    (tmp_path / "f.tsv").write_text("question\tpassage\tjudgement\nq\tt\t1\n", encoding="utf-8")
    with pytest.raises(DataError, match=r"lacks column\(s\) \['judgement2'\].*--columns maps"):
        load_pairs(tmp_path / "f.tsv", columns=parse_columns("query=question,text=passage,label=judgement2"))
    tsv = load_pairs(tmp_path / "f.tsv", columns=parse_columns("query=question,text=passage,label=judgement"))
    assert tsv.pairs[0].label is Verdict.RELEVANT and tsv.pairs[0].text == "t"
    for bad in ("question=query", "query", "query=a,query=b", "query=a,text=a"):
        with pytest.raises(ConfigError, match="--columns"):
            parse_columns(bad)
    assert parse_columns(None) is None and parse_columns(" ") is None


def test_fields_of_a_record_beyond_ours_are_kept_as_metadata(tmp_path):
    from training.data import groups_of

    path = _jsonl(tmp_path / "p.jsonl", [
        {"query": "q1", "text": "t1", "label": 1, "neg_kind": "", "domain": "faq", "metadata": {"domain": "mine"}},
        {"query": "q1", "text": "t2", "label": 0, "neg_kind": "bm25", "domain": "faq"}])
    data = load_pairs(path)
    assert [p.metadata for p in data.pairs] == [{"domain": "mine"}, {"neg_kind": "bm25", "domain": "faq"}]
    assert groups_of(data.pairs, "domain") == ["mine", "faq"]  # --group-by reads a plain field of the file
    (tmp_path / "p.csv").write_text("query,text,label,site\nq,t,yes,forum\n", encoding="utf-8")
    assert load_pairs(tmp_path / "p.csv").pairs[0].metadata == {"site": "forum"}
    out = tmp_path / "copy.jsonl"
    write_pairs(data.pairs, out)  # nothing of the input is lost on the way through a command
    assert [p.metadata for p in load_pairs(out).pairs] == [p.metadata for p in data.pairs]
