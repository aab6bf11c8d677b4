"""``crag index add``, ``crag ask`` and ``crag eval-pipeline``: corrective RAG from the command line."""

from __future__ import annotations

import argparse
import hashlib
import json
import logging
import os
import statistics
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from grader.llm_args import add_llm_arguments, llm_config_from_args
from models.errors import ConfigError, DataError
from pipeline.cli.jsonl import iter_json_lines
from pipeline.cli.rag_options import add_rag_arguments, rag_config, rag_settings
from pipeline.corrective.assembly import WEB_PROVIDERS, PipelineSettings, build_rag
from pipeline.corrective.correction import first_search
from pipeline.corrective.loop import CorrectiveRAG, Outcome
from pipeline.retrieval.documents import FILTER_FIELDS, Principal, check_name
from pipeline.retrieval.embedding import default_embedder_name
from pipeline.retrieval.index import LocalHybridIndex

if TYPE_CHECKING:
    from pipeline.retrieval.qdrant_store import QdrantRetriever
from models.cli_args import int_at_least
from models.output import print_json, print_table, print_text
from models.progress import progress
from models.registry import MODEL_OPTION_HELP
from pipeline.retrieval.ingest import READABLE, STATUSES, ingest

__all__ = ["DEMO_DIR", "demo_index", "read_golden", "register_ask", "register_eval_pipeline", "register_index"]

logger = logging.getLogger(__name__)
DEMO_DIR = Path(__file__).resolve().parent.parent / "demo"
DEMO_TENANT = "demo"
TRACE_WIDTH = 160


def _principal(args: argparse.Namespace) -> Principal:
    roles = frozenset(r.strip() for r in (args.roles or "").split(",") if r.strip())
    return Principal(tenant=args.tenant, roles=roles)


def demo_index() -> Path:
    """The shipped demo corpus as an index in the cache directory (built on first use, kept in step with the
    corpus: re-indexing unchanged files costs a few lookups and no embedding). One index per installed
    copy of the corpus: documents are known by their path, so two installs sharing one index would each
    add the corpus again and every answer would cite duplicates."""
    corpus = (DEMO_DIR / "corpus").resolve()
    install = hashlib.blake2b(str(corpus).encode("utf-8"), digest_size=6).hexdigest()
    # and one per shipped embedder: an upgrade that ships another builds its own, not a refused mix of the two
    embedder = hashlib.blake2b(default_embedder_name().encode("utf-8"), digest_size=3).hexdigest()
    root = Path(os.environ.get("CRAG_CACHE", Path.home() / ".cache" / "crag")) / f"demo-index-v3-{install}-{embedder}"
    ingest(LocalHybridIndex(root, strip_vectors=True), [corpus], tenant=DEMO_TENANT)
    return root


def _index_path(args: argparse.Namespace) -> Path:
    if args.demo:
        args.tenant = DEMO_TENANT
        return demo_index()
    if not args.index:
        raise ConfigError("pass --index DIR (built with `crag index add`), --qdrant-url URL or --demo")
    return Path(args.index)


def _rag(args: argparse.Namespace) -> CorrectiveRAG:
    settings = PipelineSettings(
        model=args.model, threads=args.threads, llm=llm_config_from_args(args), web=args.web, web_url=args.web_url,
        privacy_patterns=tuple(args.privacy_pattern) if args.privacy_pattern else None,
        rag=rag_config(rag_settings(args)))
    retriever = _store(args) if args.qdrant_url else _local_index_of(args)
    return build_rag(retriever, settings)


def _local_index_of(args: argparse.Namespace) -> LocalHybridIndex:
    """The local index a reader's command opens, refused when the reader's tenant has no documents in it: every
    question would end in an abstention that reads like "your documents do not say" (``--tenant`` forgotten,
    so the demo's tenant was searched, or mistyped)."""
    root = _index_path(args)
    return _holding(LocalHybridIndex.open_existing(root), args.tenant, root)


def _holding(index: LocalHybridIndex, tenant: str, root: str | Path) -> LocalHybridIndex:
    """``index``, or a ConfigError naming the tenants it holds when ``tenant`` has no documents in it."""
    held = index.tenants()
    if tenant not in held:
        fix = (f"it holds tenant(s) {', '.join(sorted(held))}: pass --tenant NAME" if held else
               f"it is empty: add documents with `crag index add --index {root} --tenant NAME FILES`")
        raise ConfigError(f"tenant {tenant!r} has no documents in {root}; {fix}")
    return index


def _store(args: argparse.Namespace) -> LocalHybridIndex | QdrantRetriever:
    strips = getattr(args, "strip_vectors", False)
    if getattr(args, "qdrant_url", None):
        from pipeline.retrieval.qdrant_store import QdrantRetriever

        if strips:
            raise ConfigError("--strip-vectors is an option of the local index (--index DIR), not of Qdrant")
        return QdrantRetriever(args.collection, url=args.qdrant_url, api_key=os.environ.get("QDRANT_API_KEY"))
    return LocalHybridIndex(args.index, strip_vectors=strips)


def _index_add(args: argparse.Namespace) -> int:
    store = _store(args)
    report = ingest(store, args.paths, tenant=args.tenant, roles=[r for r in (args.roles or "").split(",") if r],
                    status=args.status, effective_date=args.effective_date, authority=args.authority,
                    max_chars=args.max_chars, skip_errors=args.skip_errors, encoding=args.encoding)
    if not report.files:
        reasons = "; ".join(f"{s['path']}: {s['reason']}" for s in report.skipped)
        raise DataError(f"nothing was indexed ({reasons}); the index was not changed")
    print_json({"index": args.qdrant_url or args.index, **report.to_dict(),
                **({"index_chunks": len(store)} if isinstance(store, LocalHybridIndex) else {})})
    return 0


def _index_create(args: argparse.Namespace) -> int:
    index = LocalHybridIndex.create_empty(args.index, strip_vectors=args.strip_vectors)
    print_json({"index": args.index, **index.stats()})
    return 0


def _index_remove(args: argparse.Namespace) -> int:
    if args.qdrant_url:  # Qdrant removes documents by their exact name within a tenant
        if not (args.tenant and args.document) or args.chunk_id:
            raise ConfigError("with --qdrant-url, remove takes --tenant and --document (its name as indexed)")
        from pipeline.retrieval.uploads import is_archive_name

        removed = _store(args).remove_document(args.tenant, args.document,
                                               with_members=is_archive_name(args.document))
        print_json({"index": args.qdrant_url, "chunks_removed": removed, **_nothing_matched(args, removed)})
        return 0
    index = LocalHybridIndex.open_existing(args.index)
    removed = index.remove(tenant=args.tenant, document=args.document, chunk_id=args.chunk_id)
    print_json({"index": args.index, "chunks_removed": removed, "index_chunks": len(index),
                **_nothing_matched(args, removed)})
    return 0


def _nothing_matched(args: argparse.Namespace, removed: int) -> dict[str, str]:
    """A note when a removal matched nothing (a mistyped name reads like a success otherwise)."""
    if removed:
        return {}
    where = f"--qdrant-url {args.qdrant_url}" if args.qdrant_url else f"--index {args.index}"
    return {"note": f"nothing matched; `crag index list {where} --tenant {args.tenant or 'NAME'}` shows the "
                    "documents by the names they were indexed under"}


def _index_list(args: argparse.Namespace) -> int:
    if args.limit < 1:
        raise ConfigError(f"--limit must be >= 1, got {args.limit}")
    tenant = check_name("tenant", args.tenant)
    store = _store(args) if args.qdrant_url else _holding(LocalHybridIndex.open_existing(args.index), tenant,
                                                          args.index)
    print_json(store.documents(tenant, after=args.after, limit=args.limit))
    return 0


def _index_search(args: argparse.Namespace) -> int:
    """What retrieval finds for a query, ranked, before any grading: to see why an answer missed a document. It
    searches what ``crag ask``'s first round searches (a long message: its question), unless ``--as-given``."""
    filters = parse_filters(args.filter)  # before the index is opened
    principal = _principal(args)
    store = _store(args) if args.qdrant_url else _local_index_of(args)
    searched = args.query if args.as_given else first_search(args.query)
    if searched != args.query:  # on stderr, so --json stays a list of hits
        logger.warning("searching the message's question, as crag ask's first round does: %r (--as-given searches "
                       "the whole text)", searched)
    hits = store.search(searched, principal, k=args.k, filters=filters)
    if args.json:
        print_json([{"rank": rank, "chunk_id": c.chunk_id, "document": c.document, "title": c.title,
                     "score": round(score, 4), "status": c.status, "text": c.text}
                    for rank, (c, score) in enumerate(hits, start=1)])
        return 0
    print_table(f"{len(hits)} hit(s) for: {searched}", ["rank", "chunk", "document", "score", "text"],
                [(rank, c.chunk_id, c.document, round(score, 4), _clip(" ".join(c.text.split()), 80))
                 for rank, (c, score) in enumerate(hits, start=1)])
    return 0


def _index_stats(args: argparse.Namespace) -> int:
    stats = LocalHybridIndex.open_existing(args.index).stats()
    # whether crag's searches can use it as it is, or it must be re-embedded first (`crag index reembed`)
    stats["embedder_in_use"] = default_embedder_name()
    built_with = stats.get("embedder")
    stats["embedder_matches"] = built_with == stats["embedder_in_use"] if built_with else None
    print_json(stats)
    return 0


def _index_reembed(args: argparse.Namespace) -> int:
    # a mistyped local folder is an error, not a new index
    store = LocalHybridIndex.open_existing(args.index) if args.index else _store(args)
    print_json(store.reembed())
    return 0


def _index_migrate(args: argparse.Namespace) -> int:
    from pipeline.retrieval.legacy_index import migrate_file_index

    print_json(migrate_file_index(args.index))
    return 0


def register_index(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("index", help="manage the local hybrid index (one SQLite file in a folder)")
    isub = p.add_subparsers(dest="index_command", metavar="ACTION", required=True)
    add = isub.add_parser("add", help="add or re-index documents (text, Markdown and MDX, reStructuredText, AsciiDoc, "
                                      "notebooks, HTML, PDF, Word, Rich Text, OpenDocument, PowerPoint, "
                                      "CSV/TSV/Excel/ODS tables, JSON data, e-mail and mailboxes, e-books, "
                                      "transcripts), folders or zip and tar archives of them")
    add.add_argument("paths", nargs="+", help=f"files, folders or archives ({' '.join(READABLE)})")
    _add_store(add, index_help="local index directory (created if missing)")
    add.add_argument("--tenant", required=True)
    add.add_argument("--roles", default="", help="comma-separated roles allowed to read (default: all of the tenant)")
    add.add_argument("--status", default="active", choices=list(STATUSES))
    add.add_argument("--effective-date", default="",
                     help="YYYY-MM-DD, a real day: on conflicting versions the newer one wins")
    add.add_argument("--authority", type=int, default=0,
                     help="-1000 to 1000: on conflicts of the same date the higher one wins")
    add.add_argument("--max-chars", type=int, default=900)
    add.add_argument("--encoding", default=None,
                     help="read text files that are not UTF-8 in this encoding (cp1252, latin-1, shift_jis...); an "
                          "HTML page's own <meta> charset comes first. Default: such a file is an error")
    add.add_argument("--skip-errors", action="store_true",
                     help="index the readable files and report the unreadable ones instead of stopping")
    strip_help = ("also store each sentence's vector (local index; about 4-8x the disk of the chunk vectors): a fused "
                  "grader then embeds no sentence when the loop refines, and the index keeps them from then on")
    add.add_argument("--strip-vectors", action="store_true", help=strip_help + " (chunks already in it are filled in)")
    add.set_defaults(handler=_index_add)
    create = isub.add_parser("create", help="create an empty index, for a service that writer keys fill over HTTP")
    create.add_argument("--index", required=True, help="a new local index directory")
    create.add_argument("--strip-vectors", action="store_true", help=strip_help)
    create.set_defaults(handler=_index_create)
    remove = isub.add_parser("remove", help="delete chunks by tenant, document path and/or chunk id")
    _add_store(remove, qdrant_help=" (with --tenant and --document NAME; an archive's name: all its members)")
    remove.add_argument("--tenant", help="only this tenant's chunks (alone: all of them)")
    remove.add_argument("--document", help="a document's path as indexed, or its file name")
    remove.add_argument("--chunk-id", help="one chunk")
    remove.set_defaults(handler=_index_remove)
    listing = isub.add_parser("list", help="one tenant's documents in name order: chunks, roles, format")
    _add_store(listing)
    listing.add_argument("--tenant", required=True)
    listing.add_argument("--after", default="", help="list the names after this one (the last of a previous page)")
    listing.add_argument("--limit", type=int, default=1000)
    listing.set_defaults(handler=_index_list)
    search = isub.add_parser("search", help="what retrieval finds for a query in one tenant's scope, ranked, before "
                                            "any grading (the hybrid score: lexical and dense ranks fused)")
    search.add_argument("query")
    where = search.add_mutually_exclusive_group(required=True)
    where.add_argument("--index", help="local index directory")
    where.add_argument("--qdrant-url", help="Qdrant server or cluster (API key in $QDRANT_API_KEY)")
    where.add_argument("--demo", action="store_true", help="the shipped SQuAD demo corpus (built on first use)")
    search.add_argument("--collection", default="crag", help="Qdrant collection")
    search.add_argument("--tenant", default=DEMO_TENANT)
    search.add_argument("--roles", default="", help="comma-separated roles of the reader (default: none)")
    search.add_argument("-k", "--k", type=int_at_least(1), default=8, help="hits to show")
    search.add_argument("--filter", action="append", metavar="KEY=VALUE",
                        help="exact-match filter, as `crag ask --filter` (repeatable)")
    search.add_argument("--as-given", action="store_true",
                        help="search the query's whole text; by default a long message is searched as crag ask's first "
                             "round searches it, on its question and the identifiers told around it")
    search.add_argument("--json", action="store_true", help="print JSON (with each hit's whole text)")
    search.set_defaults(handler=_index_search)
    stats = isub.add_parser("stats", help="chunks per tenant, documents, embedder, size")
    stats.add_argument("--index", required=True)
    stats.set_defaults(handler=_index_stats)
    reembed = isub.add_parser("reembed", help="replace every stored vector with the shipped embedder's (an index built "
                                              "with another one, e.g. by an earlier release; the chunks are kept)")
    _add_store(reembed)
    reembed.set_defaults(handler=_index_reembed)
    migrate = isub.add_parser("migrate", help="convert an index folder of the old file format to SQLite")
    migrate.add_argument("index", help="the old index folder (chunks.jsonl + vectors.npy; kept as *.migrated)")
    migrate.set_defaults(handler=_index_migrate)


def _add_store(p: argparse.ArgumentParser, *, index_help: str = "local index directory", qdrant_help: str = "") -> None:
    """Where an index command works: a local index folder or a Qdrant collection (one of them)."""
    where = p.add_mutually_exclusive_group(required=True)
    where.add_argument("--index", help=index_help)
    where.add_argument("--qdrant-url", help="Qdrant server or cluster (API key in $QDRANT_API_KEY)" + qdrant_help)
    p.add_argument("--collection", default="crag", help="Qdrant collection")


def _add_common(p: argparse.ArgumentParser) -> None:
    source = p.add_mutually_exclusive_group()  # one place to retrieve from: two given used to mean the demo, silently
    source.add_argument("--index", help="index directory")
    source.add_argument("--qdrant-url", help="retrieve from Qdrant instead of a local index")
    source.add_argument("--demo", action="store_true", help="use the shipped SQuAD demo corpus (built on first use)")
    p.add_argument("--collection", default="crag")
    p.add_argument("--tenant", default=DEMO_TENANT)
    p.add_argument("--roles", default="")
    p.add_argument("--model", default="default", help=MODEL_OPTION_HELP)
    p.add_argument("--threads", type=int, default=None)
    add_rag_arguments(p)
    web = p.add_argument_group("web search fallback (off unless --web is given)")
    web.add_argument("--web", choices=list(WEB_PROVIDERS), default=None)
    web.add_argument("--web-url", default=None, help="SearxNG instance URL, or a Tavily-compatible base URL")
    web.add_argument("--privacy-pattern", action="append", default=None,
                     help="regex; matching questions never go to the web (repeatable; replaces the defaults)")
    add_llm_arguments(p)


def parse_filters(items: list[str] | None) -> dict[str, str | int] | None:
    """``--filter KEY=VALUE`` options as the retrievers' exact-match filters (None without any)."""
    filters: dict[str, str | int] = {}
    for item in items or ():
        key, sep, value = item.partition("=")
        key = key.strip()
        if not sep or not key:
            raise ConfigError(f"--filter takes KEY=VALUE (e.g. status=active, document=policies/refunds.md), "
                              f"got {item!r}")
        if FILTER_FIELDS.get(key) is int:  # every other field and metadata key matches text
            try:
                filters[key] = int(value)
            except ValueError:
                raise ConfigError(f"--filter {key}= takes an integer, got {value!r}") from None
        else:
            filters[key] = value
    return filters or None


def source_line(source: dict[str, Any]) -> str:
    """Where an answer's source is from, for a reader: its URL (web), else its document and title."""
    named = [source.get("url") or source.get("document") or "", source.get("title") or ""]
    return " - ".join(dict.fromkeys(part for part in named if part)) or source.get("source") or "?"


def _ask(args: argparse.Namespace) -> int:
    filters = parse_filters(args.filter)  # before the index is opened or built
    result = _rag(args).run(args.query, _principal(args), confidential=args.confidential, filters=filters)
    if args.json:
        print_json(result.to_dict())
        return 0
    lines = [f"[{result.outcome.value}] {result.message}"]
    if result.degraded:
        lines += ["(degraded: " + "; ".join(result.degraded_reasons) + ")"]
    if result.answer:
        lines += ["", result.answer, "", f"sources (grounding: {result.grounding}):"]
        lines += [f"  {s['chunk_id']}  ({source_line(s)}, P={s['probability']})" for s in result.sources]
    if args.trace:
        lines += ["", "trace:"]
        lines += [f"  {t.action:10s} {t.ms:8.1f} ms  {_clip(json.dumps(t.detail), TRACE_WIDTH)}" for t in result.trace]
    print_text("\n".join(lines))
    return 0


def _clip(text: str, width: int) -> str:
    """``text`` cut to ``width`` characters at a word boundary, with an ellipsis when cut."""
    if len(text) <= width:
        return text
    cut = text.rfind(" ", 0, width)
    return text[: cut if cut > width // 2 else width - 1] + "…"


def register_ask(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("ask", help="run corrective RAG for one question")
    p.add_argument("query")
    _add_common(p)
    p.add_argument("--json", action="store_true")
    p.add_argument("--trace", action="store_true", help="print every step")
    p.add_argument("--confidential", action="store_true", help="never send this question to web search")
    p.add_argument("--filter", action="append", metavar="KEY=VALUE",
                   help="search only chunks whose field or metadata KEY equals VALUE (repeatable; status, source, "
                        "title, effective_date, authority, document or a metadata key); every search keeps it")
    p.set_defaults(handler=_ask)


def _eval_pipeline(args: argparse.Namespace) -> int:
    golden = read_golden(Path(args.golden) if args.golden else DEMO_DIR / "golden.jsonl")
    rag, principal = _rag(args), _principal(args)
    rows = []
    for item in progress(golden, desc="golden questions", total=len(golden), unit="question"):
        t0 = time.perf_counter()
        result = rag.run(item["query"], principal)
        ms = 1000 * (time.perf_counter() - t0)
        answered = result.outcome in (Outcome.ANSWER, Outcome.PARTIAL_ANSWER)
        corrected = answered and sum(1 for t in result.trace if t.action == "retrieve") > 1
        sources_ok = not item.get("expected_sources") or any(
            s["source"] in item["expected_sources"] for s in result.sources)
        golds = item.get("answers")  # None when the record gives no gold answers: not a miss
        contains = None if not golds else any(a.lower() in (result.answer or "").lower() for a in golds)
        expected = item.get("expected_action")
        action_ok = expected is None or expected == _ACTION.get(result.outcome, result.outcome.value)
        rows.append({"query": item["query"], "outcome": result.outcome.value, "must_abstain": item["must_abstain"],
                     "answered": answered, "recovered": corrected, "sources_ok": sources_ok,
                     "action_ok": action_ok, "answer_contains_gold": contains, "llm_calls": result.llm_calls,
                     "degraded": result.degraded, "ms": ms})
    must = [r for r in rows if r["must_abstain"]]
    can = [r for r in rows if not r["must_abstain"]]
    report = {
        "n": len(rows),
        "answer_floor": rag.answer_floor,  # the grader bundle's, or --answer-floor (0: off)
        "answer_abstain_accuracy": sum(r["answered"] != r["must_abstain"] for r in rows) / len(rows),
        "abstention_fidelity": sum(not r["answered"] for r in must) / len(must) if must else None,
        "wrong_answer_rate": sum(r["answered"] for r in must) / len(must) if must else None,
        "answer_rate_when_answerable": sum(r["answered"] for r in can) / len(can) if can else None,
        "gold_answer_in_answer": _mean([r["answer_contains_gold"] for r in can
                                        if r["answer_contains_gold"] is not None]),
        "expected_action_accuracy": sum(r["action_ok"] for r in rows) / len(rows),
        "sources_accuracy_when_answered": _mean([r["sources_ok"] for r in rows if r["answered"] and
                                                 not r["must_abstain"]]),
        "recovery_rate": sum(r["recovered"] for r in can) / len(can) if can else None,
        "llm_calls_per_query": _mean([r["llm_calls"] for r in rows]),
        "degraded_rate": _mean([r["degraded"] for r in rows]),
        "latency_ms_p50": statistics.median(r["ms"] for r in rows),
        "latency_ms_mean": _mean([r["ms"] for r in rows]),
        "latency_ms_max": max(r["ms"] for r in rows),
        "rows": rows,
    }
    if args.json:
        print_json(report)
        return 0
    print_table(f"{len(rows)} golden questions", ["question", "outcome", "expected", "sources ok", "gold in answer",
                                                  "LLM calls", "ms"],
                [[_clip(r["query"], 60), r["outcome"], "yes" if r["action_ok"] else "NO",
                  "yes" if r["sources_ok"] else "NO", "yes" if r["answer_contains_gold"] else "-", r["llm_calls"],
                  f"{r['ms']:.0f}"] for r in rows])
    print_table("summary (--json for every figure)", ["measure", "value"],
                [[k.replace("_", " "), "-" if v is None else f"{v:.3g}"] for k, v in report.items()
                 if k != "rows"])
    return 0


def read_golden(path: Path) -> list[dict]:
    """Golden records (query, expected_action, expected_sources, must_abstain[, answers]), validated per line."""
    records = []
    for number, item in iter_json_lines(path, what="golden set"):
        if not isinstance(item, dict) or not isinstance(item.get("query"), str) or not item["query"].strip():
            raise DataError(f"{path}:{number}: each record needs a non-empty string 'query'")
        if not isinstance(item.get("must_abstain"), bool):
            raise DataError(f"{path}:{number}: 'must_abstain' must be true or false, got {item.get('must_abstain')!r}")
        action = item.get("expected_action")
        if action is not None and action not in GOLDEN_ACTIONS:
            raise DataError(f"{path}:{number}: expected_action {action!r} is not one of {list(GOLDEN_ACTIONS)}")
        for key in ("expected_sources", "answers"):  # one string would be matched letter by letter
            value = item.get(key)
            if value is not None and not (isinstance(value, list) and all(isinstance(v, str) and v for v in value)):
                raise DataError(f"{path}:{number}: {key!r} must be a list of non-empty strings, e.g. "
                                f"[\"Normans.md\"], got {value!r:.80}")
        records.append(item)
    if not records:
        raise DataError(f"{path}: the golden set is empty")
    return records


GOLDEN_ACTIONS = ("answer", "abstain", "clarify", "access_denied")
_ACTION = {Outcome.ANSWER: "answer", Outcome.PARTIAL_ANSWER: "answer", Outcome.ABSTENTION: "abstain",
           Outcome.CLARIFICATION: "clarify", Outcome.ACCESS_DENIED: "access_denied"}


def _mean(values: list[float] | list[bool] | list[int]) -> float | None:
    return sum(values) / len(values) if values else None


def register_eval_pipeline(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("eval-pipeline", help="run a golden set through the pipeline and report its outcomes")
    p.add_argument("--golden", help="JSONL: query, expected_action, expected_sources, must_abstain")
    p.add_argument("--json", action="store_true", help="print the report as JSON instead of tables")
    _add_common(p)
    p.set_defaults(handler=_eval_pipeline)
