"""The --columns hint a "missing field" error gives: the file's own names where they are plain."""

from models.columns import COLUMNS_HINT, columns_hint, missing_fields_hint


def test_the_hint_maps_the_files_own_plain_names():
    assert columns_hint(["question", "passage", "relevance"], ["query", "text", "label"]) == \
        "--columns 'query=question,text=passage,label=relevance'"
    assert columns_hint(["Query", "CONTEXT"], ["query", "text"]) == "--columns 'query=Query,text=CONTEXT'"
    assert columns_hint(["query", "doc"], ["query", "text"]) == "--columns 'text=doc'"  # only what is missing


def test_the_generic_example_when_a_field_has_no_plausible_column_or_two_fields_would_share_one():
    assert columns_hint(["a", "b"], ["query", "text"]) == COLUMNS_HINT
    assert columns_hint(["question", "notes"], ["query", "text"]) == COLUMNS_HINT
    assert columns_hint(["question"], ["query", "text"]) == COLUMNS_HINT


def test_a_record_that_was_mapped_is_told_what_the_mapping_was():
    hint = missing_fields_hint(["q", "t"], {"query": "question"})
    assert "--columns maps {'query': 'question'}" in hint and "['q', 't']" in hint
