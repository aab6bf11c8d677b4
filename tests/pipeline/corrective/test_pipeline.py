"""The corrective pipeline over a real local index: permissions, outcomes, correction helpers, ingestion."""

import dataclasses
import re

import pytest

from models import ConfigError
from pipeline.corrective.correction import (
    drop_bad_chunks,
    first_search,
    identifiers,
    keep_identifiers,
    order_by_authority,
    rewrite_query,
)
from pipeline.corrective.loop import CorrectiveRAG, Outcome, RAGConfig
from pipeline.retrieval.documents import Principal
from tests.pipeline.conftest import CORPUS, LEGAL_A, TENANT_A, TENANT_B, HashEmbedder, make_chunk

_chunk = make_chunk


def test_search_never_returns_another_tenants_chunks(retriever):
    queries = ("invoice INV-2044 paid", "Paris France", "when was the invoice paid", "tenant B", "Project Falcon club",
               "bird-watching Sundays")
    for query in queries:
        for principal in (TENANT_A, LEGAL_A):
            hits = retriever.search(query, principal, k=10)
            assert hits and all(c.tenant == "a" for c, _ in hits)
        assert all(c.tenant == "b" for c, _ in retriever.search(query, TENANT_B, k=10))
    assert "b-invoice" in {c.chunk_id for c, _ in retriever.search("invoice paid", TENANT_B)}
    # hidden-match hints count only the caller's own tenant: B's Falcon club is invisible to A
    assert retriever.hidden_matches("bird-watching club Sundays", TENANT_A) == 0


def test_a_write_of_anything_but_stored_chunks_is_refused_before_anything_is_written(retriever):
    before = len(retriever.search("invoice paid", TENANT_A, k=50))
    for bad, said in ((["Paris is in France."], "chunk 0 is a str, not a StoredChunk"),
                      ([_chunk("a-new", "New text."), {"text": "x"}], "chunk 1 is a dict"),
                      ("Paris is in France.", "write takes a list of StoredChunk, got str"),
                      (_chunk("a-one", "One chunk alone."), "got StoredChunk")):
        with pytest.raises(ConfigError, match=said):
            retriever.write(bad)
    assert len(retriever.search("invoice paid", TENANT_A, k=50)) == before  # the good chunk before a bad one too



def test_a_chunk_built_by_hand_is_checked_as_ingestion_checks_it(retriever):
    for fields, said in (({"allowed_roles": "legal"}, "not one string"),  # its letters would each be a role
                         ({"tenant": "a b"}, "tenant name 'a b' is not allowed"),
                         ({"status": "live"}, "status must be one of"),
                         ({"authority": "high"}, "authority must be an int"),
                         ({"effective_date": "yesterday"}, "effective_date must be a calendar date"),
                         ({"position": "3"}, "position must be an int >= 0"),
                         ({"text": "  "}, "text must be a non-empty str"),
                         ({"metadata": ["x"]}, "metadata must be a dict")):
        with pytest.raises(ConfigError, match=f"chunk 0 .*{said}"):
            retriever.write([dataclasses.replace(_chunk("a-hand", "Written by hand."), **fields)])
    memo = dataclasses.replace(_chunk("a-hand", "Legal reads the hand-written memo."), allowed_roles={"legal"})
    retriever.write([memo])  # a set of roles is fine: stored as the frozenset it stands for
    assert "a-hand" not in {c.chunk_id for c, _ in retriever.search("hand-written memo", TENANT_A, k=20)}
    assert "a-hand" in {c.chunk_id for c, _ in retriever.search("hand-written memo", LEGAL_A, k=20)}


def test_both_indexes_refuse_a_bare_reader_a_bad_page_and_a_bad_coverage_before_reading(retriever):
    for call, said in ((lambda: retriever.search("invoice paid", "a"), "principal must be a Principal, e.g."),
                       (lambda: retriever.search("invoice paid", TENANT_A, k="5"), "k must be an int >= 1, got '5'"),
                       (lambda: retriever.hidden_matches("Falcon code", "a"), "principal must be a Principal"),
                       (lambda: retriever.hidden_matches("Falcon code", TENANT_A, min_coverage=2),
                        r"min_coverage must be a number in \(0, 1\], got 2"),
                       (lambda: retriever.documents("a", limit=0), "limit must be an int >= 1"),
                       (lambda: retriever.documents("a b"), "tenant name 'a b' is not allowed")):
        with pytest.raises(ConfigError, match=said):  # was an AttributeError, or an empty answer
            call()


def test_the_pipeline_refuses_parts_that_would_fail_in_the_middle_of_a_question(index, grader):
    class SearchOnly:  # a retriever of one's own, without the access check's hidden_matches()
        def search(self, query, principal, *, k=8, filters=None):
            return []

    for args, kwargs, said in (((None, grader), {}, "retriever must have search"),
                               ((SearchOnly(), grader), {}, "got SearchOnly without hidden_matches"),
                               ((index, None), {}, "grader must be a crag-grader Grader"),
                               ((index, grader), {"config": {"k": 3}}, "config must be a RAGConfig"),
                               ((index, grader), {"policy": (0.1, 0.9)}, "policy must be a ThresholdPolicy")):
        with pytest.raises(ConfigError, match=said):
            CorrectiveRAG(*args, **kwargs)


def test_roles_restrict_within_a_tenant(retriever):
    plain = {c.chunk_id for c, _ in retriever.search("Project Falcon code name", TENANT_A, k=10)}
    legal = {c.chunk_id for c, _ in retriever.search("Project Falcon code name", LEGAL_A)}
    assert "a-secret" not in plain and "a-secret" in legal
    assert retriever.hidden_matches("Project Falcon code name", TENANT_A) > 0
    assert retriever.hidden_matches("Project Falcon code name", LEGAL_A) == 0


def test_roles_given_as_a_list_read_as_a_set_and_one_string_is_refused(retriever, index, grader):
    as_list = Principal(tenant="a", roles=["legal"])  # used to fail inside a search with a TypeError
    assert as_list == LEGAL_A and isinstance(as_list.roles, frozenset)
    assert "a-secret" in {c.chunk_id for c, _ in retriever.search("Project Falcon code name", as_list)}
    with pytest.raises(ConfigError, match=r"not one string: write roles=frozenset\(\{'legal'\}\)"):
        Principal(tenant="a", roles="legal")  # would have been the roles l, e, g, a
    with pytest.raises(ConfigError, match=r"principal must be a Principal, e.g. .*got str: 'a'"):
        CorrectiveRAG(index, grader).run("Where is the Eiffel tower?", "a")  # type: ignore[arg-type]


def test_metadata_filters_match_fields_exactly(retriever):
    assert {c.chunk_id for c, _ in retriever.search("France", TENANT_A, filters={"title": "France"})} == {"a-paris"}
    assert retriever.search("France", TENANT_A, filters={"status": "superseded"}) == []


def test_outcomes(index, grader):
    rag = CorrectiveRAG(index, grader)
    answer = rag.run("What is the capital of France?", TENANT_A)
    assert answer.outcome in (Outcome.ANSWER, Outcome.PARTIAL_ANSWER)
    assert "Paris" in answer.answer and answer.sources[0]["chunk_id"] == "a-paris"
    assert "[a-paris]" in answer.answer  # citations to chunk ids
    denied = rag.run("What is the merger code name for Project Falcon?", TENANT_A)
    assert denied.outcome is Outcome.ACCESS_DENIED and "BLUEBIRD" not in denied.message
    assert rag.run("Falcon", TENANT_A).outcome is Outcome.CLARIFICATION
    cross = rag.run("When was invoice INV-2044 paid?", TENANT_A)
    assert cross.outcome in (Outcome.ABSTENTION, Outcome.ACCESS_DENIED)
    assert cross.outcome is Outcome.ABSTENTION  # another tenant's document must not even be hinted at
    assert "2024" not in (cross.answer or "") and all(s["chunk_id"] != "b-invoice" for s in cross.sources)
    actions = [t.action for t in answer.trace]
    assert actions[:4] == ["retrieve", "check", "grade", "decide"]
    with pytest.raises(ConfigError):
        rag.run("  ", TENANT_A)


def test_single_keywords_are_searched_when_the_deployment_allows_them(index, grader):
    from pipeline.corrective.loop import RAGConfig

    keyword = CorrectiveRAG(index, grader, config=RAGConfig(min_query_words=1)).run("Paris", TENANT_A)
    assert keyword.outcome is not Outcome.CLARIFICATION and keyword.trace[0].action == "retrieve"
    assert CorrectiveRAG(index, grader, config=RAGConfig(min_query_words=1)).run("it", TENANT_A).outcome \
        is Outcome.CLARIFICATION  # no word of 3+ letters
    with pytest.raises(ConfigError, match="min_query_words must be >= 0, got -1"):
        RAGConfig(min_query_words=-1)


def test_a_bad_rag_config_names_every_value_that_fails():
    with pytest.raises(ConfigError) as caught:
        RAGConfig(deadline_s=-1.0, answer_floor=3.0, k=2)
    message = str(caught.value)
    assert "deadline_s must be > 0 seconds, got -1.0" in message and "answer_floor must be in [0, 1] or None, got 3.0" \
        in message and "k must" not in message and "broader_k" not in message  # only what fails
    with pytest.raises(ConfigError, match="strip_relative_floor must be in \\[0, 1\\], got nan"):
        RAGConfig(strip_relative_floor=float("nan"))
    with pytest.raises(ConfigError, match=r"broader_k must be >= k \(8\), got 6"):
        RAGConfig(k=8, broader_k=6)
    with pytest.raises(ConfigError, match=r"k must be an int, got str '8'; deadline_s must be a number, got bool True; "
                                          r"answer_floor must be a number or None, got str '0.2'"):
        RAGConfig(k="8", answer_floor="0.2", deadline_s=True)  # k="8" was a TypeError from a comparison
    assert RAGConfig(deadline_s=5, answer_floor=None).deadline_s == 5  # an int is a number


def test_rewrite_keeps_identifiers():
    rewritten = rewrite_query("What is the status of invoice INV-2044 for AcmeWidget?")
    assert rewritten == "status invoice INV-2044 AcmeWidget"
    assert rewrite_query("What is the status of invoice INV-2044?", ["payment date", "status"]) == \
        "status invoice INV-2044 payment date"
    assert keep_identifiers("refund for order 2024-03-01 AcmeWidget", "refund order AcmeWidget") == \
        "refund for order 2024-03-01 AcmeWidget"  # a rewrite that drops the date falls back to the raw query
    assert {"INV-2044", "2024-03-01"} <= identifiers("Invoice INV-2044 paid 2024-03-01")
    assert rewrite_query("what is it?") == "what is it?"  # nothing left: keep the raw query


def test_heuristics_and_authority():
    chunks = [_chunk("x1", "Refund policy: 30 days.", title="Refunds", status="superseded",
                     effective_date="2022-01-01"),
              _chunk("x2", "Refund policy: 14 days.", title="Refunds", effective_date="2024-05-01"),
              _chunk("x3", "refund   policy: 14 days.", title="Refunds2"),
              _chunk("x4", "\x00\x01\x02\x03", title="bad")]
    kept, reasons = drop_bad_chunks(chunks)
    assert [c.chunk_id for c in kept] == ["x1", "x2"]
    assert any("duplicate" in r for r in reasons) and any("corrupt" in r for r in reasons)
    ordered, conflicts = order_by_authority(kept)
    assert ordered[0].chunk_id == "x2" and "preferred x2" in conflicts[0]


def test_corrupt_text_is_judged_the_same_with_or_without_the_printable_shortcut():
    import random
    import unicodedata

    from pipeline.corrective import correction

    def counted(text):  # the definition: every character looked up
        return sum(1 for ch in text if unicodedata.category(ch) in correction.BAD_CATEGORIES and ch not in "\n\t")

    rng = random.Random(5)
    alphabet = ["a", " ", "\n", "\t", "\r", "\x00", "\x7f", "\u00a0", "\u200b", "\u2028", "\ue000", "\ufffd",
                "\U000e0001", "\u0378", "\U0010fffe", "é", "漢", "\ud800"]
    for _ in range(3000):
        text = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 12)))
        assert correction._bad_characters(text) == counted(text), repr(text)
    kept, _ = drop_bad_chunks([_chunk("p", "private \ue000\ue001\ue002 use", title="p"),
                               _chunk("ok", "Tabs\tand\nbreaks are fine.", title="ok")])
    assert [c.chunk_id for c in kept] == ["ok"]


def test_qdrant_local_mode_persists_and_needs_one_location(tmp_path):
    from pipeline.retrieval.qdrant_store import QdrantRetriever

    store = QdrantRetriever("docs", path=str(tmp_path / "q"), embedder=HashEmbedder())
    assert store.search("capital of France", TENANT_A) == []  # no collection yet: empty, not an error
    assert store.add(CORPUS) == len(CORPUS)
    store.add(CORPUS[:1])  # same chunk_id replaces, never duplicates
    store.client.close()
    again = QdrantRetriever("docs", path=str(tmp_path / "q"), embedder=HashEmbedder())
    hits = again.search("capital of France", TENANT_A, k=10)
    assert hits[0][0].chunk_id == "a-paris" and len({c.chunk_id for c, _ in hits}) == len(hits)
    again.client.close()
    with pytest.raises(ConfigError, match="exactly one"):
        QdrantRetriever("docs", embedder=HashEmbedder())


def test_min_answer_probability_turns_weak_evidence_into_abstention(index, grader):
    from pipeline.corrective.loop import RAGConfig

    weak = "Which fruit has potassium?"  # the banana chunk is in the uncertain band (P ~0.55)
    loose = CorrectiveRAG(index, grader).run(weak, TENANT_A)
    strict = CorrectiveRAG(index, grader, config=RAGConfig(min_answer_probability=0.99)).run(weak, TENANT_A)
    assert loose.outcome is Outcome.PARTIAL_ANSWER and "potassium" in loose.answer  # weak strips only
    assert strict.outcome is Outcome.ABSTENTION and strict.answer is None
    with pytest.raises(ConfigError, match="min_answer_probability"):
        RAGConfig(min_answer_probability=1.5)


def test_answer_floor_turns_related_text_into_abstention_without_an_llm(index, grader):
    from pipeline.corrective.loop import RAGConfig

    query = "Which fruit has potassium?"  # related text, no sure answer (P ~0.55)
    off = CorrectiveRAG(index, grader, config=RAGConfig(answer_floor=0.0)).run(query, TENANT_A)
    best = max(s["probability"] for s in off.sources)
    assert off.outcome is Outcome.PARTIAL_ANSWER and "potassium" in off.answer
    floored = CorrectiveRAG(index, grader, config=RAGConfig(answer_floor=min(1.0, best + 0.01))).run(query, TENANT_A)
    assert floored.outcome is Outcome.ABSTENTION and floored.answer is None and not floored.sources
    assert f"best relevance {best:.2f}, below the answerability floor" in floored.message
    assert "refine" not in [t.action for t in floored.trace]  # known before refinement: no strip is graded
    close = CorrectiveRAG(index, grader, config=RAGConfig(answer_floor=best + 0.0004)).run(query, TENANT_A)
    shown = re.search(r"best relevance ([0-9.]+), below the answerability floor ([0-9.]+)", close.message)
    assert shown and float(shown.group(1)) < float(shown.group(2))  # never "0.25, below ... 0.25"
    assert "refine" in [t.action for t in off.trace]
    at_floor = CorrectiveRAG(index, grader, config=RAGConfig(answer_floor=best - 0.005)).run(query, TENANT_A)
    assert at_floor.outcome is Outcome.PARTIAL_ANSWER
    with pytest.raises(ConfigError, match="answer_floor"):
        RAGConfig(answer_floor=-0.1)


def test_answer_floor_yields_to_an_llm_graders_relevant_verdict():
    from grader.policy import ThresholdPolicy
    from models.types import Grade, Verdict
    from pipeline.corrective.answering import Answerer
    from pipeline.corrective.correction import Strip
    from pipeline.corrective.state import RAGConfig, RunState

    chunk = make_chunk("a-bananas", "Bananas are rich in potassium.")
    policy = ThresholdPolicy(lower=0.1, upper=0.9)

    def compose(grade):
        state = RunState(RAGConfig())
        answerer = Answerer(policy, None, {chunk.chunk_id: (chunk, grade)}, state, answer_floor=0.5)
        return answerer.compose("What are bananas rich in?", [Strip(chunk.chunk_id, 0, chunk.text, grade)], None, [])

    model = Grade(verdict=Verdict.IRRELEVANT, probability=0.3, uncertain=True, chunk_id=chunk.chunk_id)
    assert compose(model).outcome is Outcome.ABSTENTION
    judged = Grade(verdict=Verdict.RELEVANT, probability=0.3, decided_by="llm", chunk_id=chunk.chunk_id)
    assert compose(judged).outcome is Outcome.PARTIAL_ANSWER


def test_refine_keeps_sentences_in_order_and_drops_markdown_headings(grader):
    from pipeline.corrective.correction import refine

    chunk = make_chunk("doc", "# Refund policy\n\nRefunds are accepted within 30 days of purchase. Shipping costs "
                       "are not refunded by the shop.\n## Contact\nWrite to the support team for help.")
    strips = refine("How many days do I have to ask for a refund?", [chunk], grader, token_budget=200,
                    min_probability=0.0)
    assert [s.order for s in strips] == sorted(s.order for s in strips)
    assert strips and all(not s.text.startswith("#") and "Refund policy" not in s.text for s in strips)
    assert strips[0].text == "Refunds are accepted within 30 days of purchase."
    tight = refine("How many days do I have to ask for a refund?", [chunk], grader, token_budget=9,
                   min_probability=0.0)
    assert len(tight) == 1  # the budget keeps only the best strip


def test_a_relative_floor_keeps_only_sentences_near_the_best_one():
    from grader import load_grader
    from pipeline.corrective.correction import refine
    from pipeline.corrective.state import RAGConfig

    chunk = make_chunk("ship", "Orders ship within 2 business days. International shipping to the US takes 5-7 "
                               "business days. Our office dog is called Rex.")
    query, default = "How long does international shipping take?", load_grader("default", threads=1)
    every = refine(query, [chunk], default, min_probability=0.0)
    near = refine(query, [chunk], default, min_probability=0.0, relative_floor=0.5)
    best = max(s.grade.probability for s in every)
    assert [s.text for s in near] == [s.text for s in every if s.grade.probability >= 0.5 * best]
    assert 1 <= len(near) < len(every) and "Rex" not in " ".join(s.text for s in near)
    assert [s.text for s in refine(query, [chunk], default, min_probability=0.0, relative_floor=0.0)] == \
        [s.text for s in every]
    with pytest.raises(ConfigError, match="strip_relative_floor"):
        RAGConfig(strip_relative_floor=1.5)


def test_refine_grades_and_keeps_a_repeated_sentence_once(grader):
    from pipeline.corrective.correction import refine

    first = make_chunk("guide", 'To reset your password, open Settings and click "Reset password". A link is e-mailed.')
    copy = make_chunk("faq", "To reset your password, open settings and click Reset password! Links expire in a day.")
    strips = refine("How do I reset my password?", [first, copy], grader, token_budget=200, min_probability=0.0)
    assert [s.chunk_id for s in strips if "reset your password" in s.text.lower()] == ["guide"]
    assert sorted(s.text for s in strips) == sorted([
        'To reset your password, open Settings and click "Reset password".', "A link is e-mailed.",
        "Links expire in a day."])


def test_a_table_record_is_graded_and_quoted_whole(grader, tmp_path):
    from pipeline.corrective.correction import refine
    from pipeline.retrieval.index import LocalHybridIndex
    from pipeline.retrieval.ingest import ingest

    text = ("question: How do I delete my account?\nanswer: Write to support from the address on the account. "
            "Deletion takes 7 days.\ncategory: account")
    record = make_chunk("faq", text, metadata={"format": "csv"})
    question = "how can I get rid of my account"
    strips = refine(question, [record], grader, min_probability=0.0)
    assert [s.text for s in strips] == [text] and strips[0].record
    assert strips[0].grade.probability == grader.grade(question, [text])[0].probability  # the chunk's own grade
    as_prose = refine(question, [make_chunk("faq", text)], grader, min_probability=0.0)
    assert len(as_prose) > 1  # the same text from a prose file is cut into sentences

    (tmp_path / "faq.csv").write_text(
        "question,answer\nHow do I delete my account?,Write to support from the address on the account. "
        "Deletion takes 7 days.\nDo you ship to Canada?,We ship to the US and the EU only.\n", encoding="utf-8")
    index = LocalHybridIndex(tmp_path / "idx", embedder=HashEmbedder())
    ingest(index, [tmp_path / "faq.csv"], tenant=TENANT_A.tenant)
    result = CorrectiveRAG(index, grader).run("How do I delete my account?", TENANT_A)
    assert result.outcome in (Outcome.ANSWER, Outcome.PARTIAL_ANSWER)
    assert "Canada" not in result.answer
    # quoted as it reads: its own lines, then its chunk id
    assert result.answer.startswith("question: How do I delete my account?\nanswer: Write to support from the "
                                    "address on the account. Deletion takes 7 days. [")


def test_refine_leaves_out_a_sentence_about_the_opposite_of_the_question(swap_grader):
    from pipeline.corrective.correction import refine

    chunk = make_chunk("cardio", "Right ventricular hypertrophy is treated by addressing the pulmonary cause. "
                                 "Hypertrophy means the heart muscle has thickened.")
    strips = refine("left ventricular hypertrophy treatment", [chunk], swap_grader, min_probability=0.0)
    assert [s.text for s in strips] == ["Hypertrophy means the heart muscle has thickened."]


def test_aspects_are_content_words_not_stopwords():
    from pipeline.corrective.context_quality import aspects_of

    assert aspects_of("How many trains run per day in Paris?") == ["trains", "day", "Paris"]
    assert aspects_of("What religion were the Normans?") == ["religion", "Normans"]
    # "how long" / "how many" ask for a measure: the answer ("5-7 business days") need not say "long"
    assert aspects_of("How long does shipping to Canada take?") == ["shipping", "Canada"]
    assert aspects_of("How many moons does Mars have?") == ["moons", "Mars"]
    assert aspects_of("What is the long jump record?") == ["long", "jump", "record"]
    assert aspects_of("What happens if the error event has no listener?") == ["error", "event", "listener"]
    assert aspects_of("How do I stop a child process that takes too long?") == ["stop", "child", "process"]
    assert aspects_of("How many days do I have to ask for a refund?") == ["days", "refund"]  # "ask" was one
    assert aspects_of("Do I need a visa if I want to visit Japan?") == ["visa", "visit", "Japan"]
    story = ("I was reading about medieval Europe for a school project and got confused by all the kingdoms, dukes "
             "and invasions, my teacher said the Normans mattered and my friend said they were Vikings. ")
    assert aspects_of(story + "Anyway, what religion were the Normans?") == ["religion", "Normans"]
    assert aspects_of(story + "So my question is: how long did the Norman rule last, and who ruled after it?") == [
        "Norman", "rule", "last", "ruled"]  # the question's clauses, from the one that opens it
    assert len(aspects_of(story + "Tell me about the Normans.")) > 12  # no question mark: every term counts
    assert aspects_of("Why does the build fail, and how do I fix it?") == ["build", "fail", "fix"]  # short: whole
    assert rewrite_query(story + "Anyway, what religion were the Normans?") == "religion Normans"  # its question
    from pipeline.corrective.context_quality import question_of

    assert question_of(story + "What religion were the Normans? Can anyone help?") == \
        "What religion were the Normans?"  # a closing that asks for help is not the question (it was taken for it)
    assert question_of(story + "What religion were the Normans? I read it twice. Any ideas, what am I missing?") == \
        "What religion were the Normans?"
    stuck = story + "Now the build fails with error E1234 in the linker stage. How do I fix it?"
    assert question_of(stuck) == stuck  # what to fix was told before the question: the whole message counts
    assert rewrite_query("My invoice INV-2044 was charged twice; I called support twice, waited two weeks, and my "
                         "bank statement still shows both charges while the app shows one. How do I get a refund?"
                         ) == "refund INV-2044"  # an identifier told in the story is kept
    assert rewrite_query("How often is the backup job run?") == "backup job"
    assert rewrite_query("How long does shipping to the US take?") == "shipping US"  # an acronym, not "us"
    assert rewrite_query("WHAT IS THE STATUS OF MY ORDER?") == "STATUS ORDER"  # capitals throughout: no acronyms


def test_the_first_search_of_a_long_message_looks_for_its_question_and_the_grader_reads_it_all(index, grader):
    story = ("I have been reading about tropical fruit, the potassium in bananas and which regions grow them best, "
             "for a school project on farming, exports and diets in tropical regions around the world. ")
    assert first_search(story + "Anyway, what is the capital of France?") == "what is the capital of France?"
    assert first_search("Invoice INV-2044 was charged twice last month and the bank statement still shows both "
                        "charges while the mobile app shows only one, so the support team told me to write here "
                        "instead of calling again. How do I get a refund?") == "How do I get a refund? INV-2044"
    assert first_search("What is the capital of France?") == "What is the capital of France?"  # short: as asked
    assert first_search("We moved here in 2001 with 2 kids and 3 dogs, and since then the town has grown a lot, "
                        "the trains run later and the rent went up twice. Anyway, what is the capital of France?"
                        ) == "what is the capital of France?"  # numbers told in passing are not searched for
    assert rewrite_query("We moved here in 2001 with 2 kids and 3 dogs, and since then the town has grown a lot, "
                         "the trains run later and the rent went up twice. Anyway, what is the capital of France?"
                         ) == "capital France"  # was "capital France 2 2001 3"
    result = CorrectiveRAG(index, grader, config=RAGConfig(k=1)).run(story + "Anyway, what is the capital of France?",
                                                                      TENANT_A)
    first = next(t.detail for t in result.trace if t.action == "retrieve")
    assert first["query"] == "what is the capital of France?" and first["hits"] == ["a-paris"]  # was a-bananas
    graded = next(t.detail for t in result.trace if t.action == "grade")
    assert list(graded["grades"]) == ["a-paris"]
    holiday = ("I came back from a long holiday by the sea with my family, the weather was lovely and the trains "
               "were on time, and now my manager wants a status update on several projects by tonight. ")
    denied = CorrectiveRAG(index, grader).run(holiday + "So, what is the merger code name for Project Falcon?",
                                              TENANT_A)
    assert denied.outcome is Outcome.ACCESS_DENIED  # as for the question alone; the story's words used to count


def test_access_denied_needs_the_whole_question_not_one_rare_token(tmp_path):
    from pipeline.retrieval.index import LocalHybridIndex
    from tests.pipeline.conftest import HashEmbedder, make_chunk

    index = LocalHybridIndex(tmp_path / "idx", embedder=HashEmbedder())
    index.add([make_chunk("hr-salary", "Salary band 123456 applies to the accordion workshop staff from March.",
                          roles=("hr",)),
               make_chunk("pub", "The canteen opens at eight and serves soup on Fridays.")])
    support = TENANT_A
    for guess in ("123456", "123457"):  # guessing which numbers a hidden document holds tells nothing
        assert index.hidden_matches(f"xylophone {guess} accordion", support) == 0
        assert index.hidden_matches(f"accordion workshop staff {guess}", support) == 1
    question = "salary band for the accordion workshop staff in Paris"  # 5 of its 6 content terms are there
    assert index.hidden_matches(question, support) == 1
    assert index.hidden_matches(question, support, min_coverage=0.9) == 0


def test_the_corrective_loop_does_not_watch_its_sentence_strips():
    import numpy as np

    from grader import load_grader
    from grader.shift import ShiftMonitor, make_reference
    from pipeline.corrective.correction import refine

    grader = load_grader("default", threads=1)
    grader.shift_monitor = ShiftMonitor(make_reference(np.arange(50) * 0.01, np.full(50, 10.0)))
    chunk = make_chunk("c1", "Paris is the capital of France. It lies on the Seine river.")
    strips = refine("What is the capital of France?", [chunk], grader)
    assert strips and grader.shift_status().seen == 0


def _answer_from_one_chunk(tmp_path, grader, chunk_id, text, question):
    """A grader-only run over an index holding one chunk; the run must answer (fully or in part)."""
    from pipeline.retrieval.index import LocalHybridIndex

    index = LocalHybridIndex(tmp_path / "one-chunk-idx", embedder=HashEmbedder())
    index.add([make_chunk(chunk_id, text, title="Doc")])
    result = CorrectiveRAG(index, grader).run(question, TENANT_A)
    assert result.outcome in (Outcome.ANSWER, Outcome.PARTIAL_ANSWER)
    return result


def test_a_quoted_code_example_stays_a_code_block_in_a_grader_only_answer(tmp_path, grader):
    answer = _answer_from_one_chunk(tmp_path, grader, "a-ext", "The path.extname() method returns the extension of "
                                    "a path.\n\n```js\npath.extname('index.html');\n// Returns: '.html'\n```",
                                    "What does path.extname('index.html') return?").answer
    # the example (P 0.89) on lines of its own, line breaks kept: Markdown renders it as code
    block = "```js\npath.extname('index.html');\n// Returns: '.html'\n```\n[a-ext]"
    assert answer.startswith(block) or f"\n{block}" in answer


def test_table_rows_are_quoted_one_per_line_in_a_grader_only_answer(tmp_path, grader):
    answer = _answer_from_one_chunk(tmp_path, grader, "a-price", "Prices of the plans per month are listed below.\n\n"
                                    "| Plan | Price per month |\n| Pro | $10 per month |\n| Team | $25 per month |",
                                    "How much does the Team plan cost per month?").answer
    assert "\n| Team | $25 per month | [a-price]" in answer  # the row (P 0.56) on a line of its own
    assert "| [a-price] |" not in answer  # no row run into the next one


def test_a_quoted_strip_is_led_by_the_section_heading_that_names_what_it_describes(tmp_path, grader):
    answer = _answer_from_one_chunk(tmp_path, grader, "a-vec", "# Vec\n\n#### pub fn dedup(&mut self)\n\nRemoves "
                                    "consecutive repeated elements in the vector.",
                                    "How do I remove consecutive repeated elements from a vector?").answer
    assert answer.startswith("pub fn dedup(&mut self): Removes consecutive repeated elements in the vector.")


def test_what_a_section_heading_names_counts_as_covered(tmp_path, grader):
    result = _answer_from_one_chunk(tmp_path, grader, "a-mkdir", "# fs\n\n## fs.mkdir(path[, options])\n\nCreates "
                                    "a directory; when recursive is true, missing parent directories are created too.",
                                    "What happens with the recursive option of mkdir?")
    assert result.answer.startswith("fs.mkdir(path[, options]): Creates a directory")
    assert "do not clearly cover" not in result.message  # "mkdir" and "option" are in the heading the strip reads under


def test_a_sentence_that_announces_code_is_kept_and_answered_with_it():
    from grader import load_grader
    from grader.policy import ThresholdPolicy
    from pipeline.corrective.answering import Answerer
    from pipeline.corrective.correction import refine
    from pipeline.corrective.state import RAGConfig, RunState

    chunk = make_chunk("installs", '## Editable installs\n\nYou can install local projects in "editable" mode:\n\n'
                                   "```\n$ pip install -e path/to/SomeProject\n```\n\nOur office dog is called Rex.")
    query, default = "How do I install a local project in editable mode?", load_grader("default", threads=1)
    every = {s.text: s for s in refine(query, [chunk], default, min_probability=0.0)}
    code = "```\n$ pip install -e path/to/SomeProject\n```"
    lead_in = 'You can install local projects in "editable" mode:'
    assert every[code].grade.probability < 0.3 < every[lead_in].grade.probability
    strips = refine(query, [chunk], default, min_probability=0.3)
    assert [(s.text, s.completes) for s in strips] == [(lead_in, False), (code, True)]  # for the lead-in, not its grade
    answerer = Answerer(ThresholdPolicy(lower=0.25, upper=0.95), None, {chunk.chunk_id: (chunk, every[code].grade)},
                        RunState(RAGConfig()))
    draft = answerer.compose(query, strips, None, [])
    assert code in draft.answer and "Rex" not in draft.answer


def test_refine_skips_the_reads_of_strips_the_cosine_keeps_below_the_floor_and_keeps_the_same_strips():
    from dataclasses import replace

    from grader import load_grader
    from pipeline.corrective.correction import refine

    bounded = load_grader("default", threads=1)
    unbounded = load_grader("default", threads=1)
    unbounded.fusion = replace(unbounded.fusion, ce_range=None)  # every strip read, as before the bound

    def refined(grader, query, chunk):
        before = grader.pairs_scored
        strips = refine(query, [chunk], grader)
        return [(s.text, s.grade.probability, s.completes) for s in strips], grader.pairs_scored - before

    shipping = make_chunk("ship", "Orders ship within 2 business days. International shipping to the US takes 5-7 "
                          "business days. Our office dog is called Rex. The recipe needs two eggs and a cup of "
                          "flour. Warsaw is the capital of Poland.")
    query = "How long does international shipping take?"
    (kept, read), (kept_all, read_all) = refined(bounded, query, shipping), refined(unbounded, query, shipping)
    assert kept == kept_all and any("5-7" in text for text, _, _ in kept)
    assert read_all == 5 and read < read_all  # the dog, the recipe and Warsaw were never read

    # a kept strip that announces the next one brings it, graded, even when the cosine had ruled its read out
    install = make_chunk("inst", "To install the package, run this command in a terminal:\n\nBananas are rich in "
                         "potassium and grow in tropical regions.")
    query = "How do I install the package?"
    assert bounded.upper_bounds(query, ["Bananas are rich in potassium and grow in tropical regions."])[0] < 0.1
    (kept, _), (kept_all, _) = refined(bounded, query, install), refined(unbounded, query, install)
    assert kept == kept_all and kept[1][2] and kept[1][1] < 0.1  # the completing strip, with its real grade


def test_the_loop_settles_chunks_the_cosine_keeps_below_the_band_and_answers_the_same(index):
    from dataclasses import replace

    from grader import load_grader

    bounded = load_grader("default", threads=1)
    unbounded = load_grader("default", threads=1)
    unbounded.fusion = replace(unbounded.fusion, ce_range=None)  # the cross-encoder reads every chunk
    unbounded.settle_floor = None
    for query in ("What is the capital of France?", "What are bananas rich in?",
                  "How many moons does Jupiter have?"):
        got, want = CorrectiveRAG(index, bounded).run(query, TENANT_A), CorrectiveRAG(index, unbounded).run(query,
                                                                                                        TENANT_A)
        assert (got.outcome, got.message, got.answer, got.decision) == (want.outcome, want.message, want.answer,
                                                                        want.decision)
        verdicts = [{c: g["verdict"] for c, g in s.detail["grades"].items()} for r in (got, want)
                    for s in r.trace if s.action == "grade"]
        assert verdicts[: len(verdicts) // 2] == verdicts[len(verdicts) // 2:]
    assert bounded.pairs_scored < unbounded.pairs_scored  # the chunks far from the question were not read


def test_an_abstention_on_a_settled_chunk_says_its_relevance_was_at_most_its_bound():
    from grader.cross_encoder import SETTLED
    from grader.policy import ThresholdPolicy
    from models.types import Grade, Verdict
    from pipeline.corrective.answering import Answerer
    from pipeline.corrective.state import RAGConfig, RunState

    chunk, other = make_chunk("a-bananas", "Bananas are rich in potassium."), make_chunk("a-paris", "Paris.")
    policy = ThresholdPolicy(lower=0.1, upper=0.9)
    settled = Grade(verdict=Verdict.IRRELEVANT, probability=0.031, reason=f"{SETTLED}: at most 0.0310 ...")
    read = Grade(verdict=Verdict.IRRELEVANT, probability=0.02)

    def message(first, second):
        pool = {chunk.chunk_id: (chunk, first), other.chunk_id: (other, second)}
        return Answerer(policy, None, pool, RunState(RAGConfig()), answer_floor=0.3).floor_abstention().message

    assert "best relevance at most 0.03, below the answerability floor 0.30" in message(settled, read)
    assert "best relevance 0.03, below" in message(dataclasses.replace(settled, reason=None), read)  # read exactly
    assert "best relevance 0.03, below" in message(read, dataclasses.replace(read, probability=0.031))
