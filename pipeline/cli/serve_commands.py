"""``crag serve`` (uvicorn workers over the FastAPI app) and ``crag keys`` (API key store).

Workers are stateless: each loads the grader and opens the index or Qdrant collection itself from the
settings passed in ``$CRAG_SERVE_SETTINGS``, so N workers (``--workers N``) or N machines behind a load
balancer serve the same data. Shutdown is graceful: uvicorn stops accepting, finishes in-flight
requests (up to ``--graceful-timeout`` seconds), then the grading worker stops.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import logging
import os
from pathlib import Path
from typing import Any

from grader.factory import load_cross_encoder
from grader.llm import LLMConfig
from grader.llm_args import add_llm_arguments, llm_config_from_args
from grader.llm_structured import openai_client_kwargs
from grader.resilience import RetryPolicy
from models.deps import require
from models.errors import ConfigError
from models.output import print_json
from models.registry import MODEL_OPTION_HELP
from pipeline.cli.ask_commands import DEMO_TENANT
from pipeline.cli.rag_options import add_rag_arguments, rag_config, rag_settings
from pipeline.corrective.assembly import WEB_PROVIDERS, PipelineSettings, web_provider
from pipeline.corrective.loop import RAGConfig
from pipeline.retrieval.index import LocalHybridIndex, Retriever
from pipeline.service.app import ServiceConfig, create_app
from pipeline.service.keys import KeyStore
from pipeline.service.schemas import Limits

__all__ = ["app_from_env", "check_serve_options", "register_keys", "register_serve", "serve_settings", "service_limits"]

SETTINGS_ENV = "CRAG_SERVE_SETTINGS"
logger = logging.getLogger(__name__)


def _retriever(settings: dict[str, Any]) -> Retriever:
    """The store to serve, its embedder checked now: an index of another embedder fails the start, not each query."""
    if settings.get("qdrant_url"):
        from pipeline.retrieval.qdrant_store import QdrantRetriever

        qdrant = QdrantRetriever(settings.get("collection") or "crag", url=settings["qdrant_url"],
                                 api_key=os.environ.get(settings.get("qdrant_api_key_env") or "QDRANT_API_KEY"))
        qdrant.check_embedder()
        return qdrant
    index = settings.get("index")
    if not index:
        raise ConfigError("pass --index DIR (built with `crag index add --index DIR FILES`), --demo or --qdrant-url")
    local = LocalHybridIndex.open_existing(index)
    local.check_embedder()
    return local


LIMIT_FLAGS = {"max_query_chars": "--max-query-chars", "max_chunks": "--max-chunks",
               "max_chunk_chars": "--max-chunk-chars", "max_body_bytes": "--max-body-bytes",
               "max_document_bytes": "--max-document-bytes", "max_document_chunks": "--max-document-chunks",
               "rate_per_minute": "--rate-per-minute", "grade_deadline_s": "--grade-deadline"}


def service_limits(values: dict[str, Any]) -> Limits:
    """The per-request limits, or a ConfigError naming each option out of range (not pydantic's traceback)."""
    from pydantic import ValidationError

    try:
        return Limits(**values)
    except ValidationError as exc:
        bad = [f"{LIMIT_FLAGS.get(str(e['loc'][0]), e['loc'][0])} {e['msg'].replace('Input should be', 'must be')}"
               f", got {e.get('input')!r}"
               for e in exc.errors()]
        raise ConfigError(f"crag serve: {'; '.join(bad)}") from None


def check_serve_options(args: argparse.Namespace, settings: dict[str, Any]) -> None:
    """Refuse, by option, what would otherwise fail in every worker after start-up (or not at all: a negative
    --graceful-timeout used to start a server that could not shut down gracefully)."""
    bad = [message for ok, message in (
        (0 <= args.port <= 65535, f"--port must be in [0, 65535], got {args.port}"),
        (args.workers >= 1, f"--workers must be >= 1, got {args.workers}"),
        (args.threads is None or args.threads >= 1, f"--threads must be >= 1, got {args.threads}"),
        (args.graceful_timeout >= 0, f"--graceful-timeout must be >= 0 seconds, got {args.graceful_timeout}"),
        (args.micro_batch_wait_ms >= 0, f"--micro-batch-wait-ms must be >= 0, got {args.micro_batch_wait_ms}"),
    ) if not ok]
    if bad:
        raise ConfigError(f"crag serve: {'; '.join(bad)}")
    service_limits(settings["limits"])
    rag_config(settings["rag"])
    web_provider(settings["web"], settings["web_url"])  # a web URL without --web, a missing Tavily key
    llm = llm_config_from_args(args)
    if llm is not None:
        openai_client_kwargs(llm)  # no endpoint, or one without a scheme: one line here, not a traceback per worker


def app_from_env() -> Any:
    """The app for one uvicorn worker, from ``$CRAG_SERVE_SETTINGS`` (JSON written by ``crag serve``)."""
    from pipeline.service import log_redaction

    log_redaction.install()
    try:
        settings = json.loads(os.environ[SETTINGS_ENV])
    except (KeyError, json.JSONDecodeError) as exc:
        raise ConfigError(f"${SETTINGS_ENV} is missing or not JSON; start workers with `crag serve`") from exc
    grader = load_cross_encoder(settings["model"], threads=settings.get("threads"))
    llm = settings.get("llm")
    llm_config = None
    if llm:
        key_env = llm.pop("api_key_env", None) or "OPENAI_API_KEY"
        llm_config = LLMConfig(**{**llm, "retry": RetryPolicy(**llm["retry"]), "api_key": os.environ.get(key_env)})
    pipeline = PipelineSettings(model=settings["model"], llm=llm_config, web=settings.get("web"),
                                web_url=settings.get("web_url"), rag=RAGConfig(**settings.get("rag", {})))
    config = ServiceConfig(keys=KeyStore.open(settings["keys"]), retriever=_retriever(settings), grader=grader,
                           pipeline=pipeline, limits=service_limits(settings.get("limits", {})),
                           micro_batch_wait_ms=settings.get("micro_batch_wait_ms", 5.0))
    return create_app(config)


def serve_settings(args: argparse.Namespace) -> dict[str, Any]:
    """What every worker is built from (JSON in ``$CRAG_SERVE_SETTINGS``): the parsed `crag serve` options."""
    index = args.index
    if args.demo:
        from pipeline.cli.ask_commands import demo_index

        index = str(demo_index())
    llm = llm_config_from_args(args)
    llm_settings = None
    if llm is not None:
        llm_settings = {k: v for k, v in dataclasses.asdict(llm).items() if k != "api_key"}
        llm_settings["api_key_env"] = args.llm_api_key_env  # the key itself never goes into the environment dump
    return {
        "model": args.model, "threads": args.threads, "keys": str(Path(args.keys).resolve()),
        "index": str(Path(index).resolve()) if index else None, "qdrant_url": args.qdrant_url,
        "collection": args.collection, "llm": llm_settings, "web": args.web, "web_url": args.web_url,
        "rag": {**rag_settings(args), "access_denied_min_coverage": args.access_denied_coverage or None},
        "limits": {"max_query_chars": args.max_query_chars, "max_chunks": args.max_chunks,
                   "max_chunk_chars": args.max_chunk_chars, "max_body_bytes": args.max_body_bytes,
                   "max_document_bytes": args.max_document_bytes, "max_document_chunks": args.max_document_chunks,
                   "rate_per_minute": args.rate_per_minute, "grade_deadline_s": args.grade_deadline},
        "micro_batch_wait_ms": args.micro_batch_wait_ms,
    }


def _warn_tenants_without_documents(store: KeyStore, index: str | None, demo: bool) -> None:
    """A key sees only its tenant's chunks: say at start-up which keys would find nothing in the local index
    (every answer an abstention), rather than leave a user to find it out from empty traces."""
    if not index:
        return
    stats = LocalHybridIndex.open_existing(index).stats()
    indexed = stats.get("tenants") or {}
    blind = sorted({k.tenant for k in store.keys.values() if not k.revoked and k.tenant not in indexed})
    if not blind:
        return
    hint = (f"the demo corpus belongs to tenant {DEMO_TENANT!r}: `crag keys create --store {store.path} --tenant "
            f"{DEMO_TENANT}`" if demo else f"index their documents with `crag index add --index {index} --tenant "
            "NAME FILES`, or upload them with a writer key (`PUT /v1/documents/NAME`)")
    logger.warning("keys of tenant(s) %s will find no documents in %s (it holds tenant(s) %s); %s", blind, index,
                   sorted(indexed), hint)


def _serve(args: argparse.Namespace) -> int:
    uvicorn = require("uvicorn", "serve")
    store = KeyStore.open(args.keys)  # fail here, not in every worker
    settings = serve_settings(args)
    check_serve_options(args, settings)
    _warn_tenants_without_documents(store, settings["index"], bool(args.demo))
    os.environ[SETTINGS_ENV] = json.dumps(settings)
    if args.workers == 1:
        app_from_env()  # surface configuration errors before uvicorn swallows them
    uvicorn.run("pipeline.cli.serve_commands:app_from_env", factory=True, host=args.host, port=args.port,
                workers=args.workers, timeout_graceful_shutdown=args.graceful_timeout, log_level=args.log_level,
                access_log=args.access_log)
    return 0


def register_serve(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("serve", help="serve /v1/grade and /v1/query over HTTP (FastAPI + uvicorn)")
    p.add_argument("--keys", required=True, help="API key store (create keys with `crag keys create`)")
    source = p.add_mutually_exclusive_group(required=True)
    source.add_argument("--index", help="local index directory")
    source.add_argument("--demo", action="store_true", help="serve the shipped SQuAD demo corpus")
    source.add_argument("--qdrant-url", help="Qdrant server or cluster URL (key in $QDRANT_API_KEY)")
    p.add_argument("--collection", default="crag", help="Qdrant collection")
    p.add_argument("--model", default="default", help=MODEL_OPTION_HELP)
    p.add_argument("--threads", type=int, default=None, help="model threads per worker")
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=8000)
    p.add_argument("--workers", type=int, default=1, help="worker processes (each loads the model once)")
    p.add_argument("--graceful-timeout", type=float, default=30.0, help="seconds to finish in-flight requests")
    p.add_argument("--micro-batch-wait-ms", type=float, default=5.0)
    add_rag_arguments(p, per="/v1/query request")
    defaults = Limits()
    p.add_argument("--max-query-chars", type=int, default=defaults.max_query_chars)
    p.add_argument("--max-chunks", type=int, default=defaults.max_chunks)
    p.add_argument("--max-chunk-chars", type=int, default=defaults.max_chunk_chars)
    p.add_argument("--max-body-bytes", type=int, default=defaults.max_body_bytes)
    p.add_argument("--max-document-bytes", type=int, default=defaults.max_document_bytes,
                   help="largest document (or archive) a writer key may upload with PUT /v1/documents/NAME")
    p.add_argument("--max-document-chunks", type=int, default=defaults.max_document_chunks,
                   help="most chunks one upload may make (each is embedded before the upload is answered)")
    p.add_argument("--access-denied-coverage", type=float, default=RAGConfig.access_denied_min_coverage,
                   help="answer 'access denied' only when a hidden document covers this share of the question's "
                        "content terms (0 never reveals that hidden documents exist)")
    p.add_argument("--grade-deadline", type=float, default=defaults.grade_deadline_s,
                   help="seconds /v1/grade may take, LLM escalation included (a request's deadline_s is capped by it)")
    p.add_argument("--rate-per-minute", type=int, default=defaults.rate_per_minute, help="default per key")
    p.add_argument("--web", choices=list(WEB_PROVIDERS), default=None)
    p.add_argument("--web-url", default=None)
    p.add_argument("--log-level", default="info")
    p.add_argument("--access-log", action=argparse.BooleanOptionalAction, default=True)
    add_llm_arguments(p)
    p.set_defaults(handler=_serve)


def _keys(args: argparse.Namespace) -> int:
    if args.keys_command == "create":
        store = KeyStore.open(args.store, create=True)
        roles = frozenset(r.strip() for r in args.roles.split(",") if r.strip())
        token = store.create(args.tenant, roles=roles, rate_per_minute=args.rate_per_minute, label=args.label,
                             writer=args.writer)
        print_json({"api_key": token, "key_id": token.split("_")[1], "tenant": args.tenant, "roles": sorted(roles),
                    "writer": args.writer, "note": "shown once; only its SHA-256 is stored"})
    elif args.keys_command == "list":
        store = KeyStore.open(args.store)
        print_json([{k: v for k, v in key.to_dict().items() if k != "sha256"} for key in store.keys.values()])
    else:
        KeyStore.open(args.store).revoke(args.key_id)
        print_json({"revoked": args.key_id})
    return 0


def register_keys(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("keys", help="create, list and revoke API keys of the service")
    ksub = p.add_subparsers(dest="keys_command", metavar="ACTION", required=True)
    create = ksub.add_parser("create", help="create a key for a tenant (printed once)")
    store_help = "the API key store file (the one `crag serve --keys` reads; created by the first key)"
    create.add_argument("--store", "--keys", dest="store", required=True, help=store_help)
    create.add_argument("--tenant", required=True)
    create.add_argument("--roles", default="")
    create.add_argument("--rate-per-minute", type=int, default=None)
    create.add_argument("--label", default="")
    create.add_argument("--writer", action="store_true",
                        help="the key may also add, replace, list and delete its tenant's documents (/v1/documents)")
    listing = ksub.add_parser("list", help="list keys (ids, tenants, roles; never secrets or hashes)")
    listing.add_argument("--store", "--keys", dest="store", required=True, help=store_help)
    revoke = ksub.add_parser("revoke", help="revoke a key by id")
    revoke.add_argument("--store", "--keys", dest="store", required=True, help=store_help)
    revoke.add_argument("key_id")
    p.set_defaults(handler=_keys)
