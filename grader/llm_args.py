"""Command-line options for the LLM grader, shared by every ``crag`` command that can call an LLM."""

from __future__ import annotations

import argparse
import os

from grader.llm import MODES, LLMConfig, LLMGrader
from grader.resilience import RetryPolicy
from models.errors import ConfigError

__all__ = ["add_llm_arguments", "llm_config_from_args", "llm_from_args"]


def add_llm_arguments(parser: argparse.ArgumentParser, *, required: bool = False) -> None:
    """``--llm-model`` and friends; without ``--llm-model`` (and CRAG_LLM_MODEL) no LLM is used."""
    group = parser.add_argument_group("LLM grader (any OpenAI-compatible server)")
    group.add_argument("--llm-model", required=required, default=None,
                       help="model name (default: $CRAG_LLM_MODEL); leave unset to run without an LLM")
    group.add_argument("--llm-base-url", default=None, help="e.g. http://127.0.0.1:8080/v1 (default: $OPENAI_BASE_URL)")
    group.add_argument("--llm-api-key-env", default="OPENAI_API_KEY",
                       help="name of the environment variable holding the API key (keys never go on the command line)")
    group.add_argument("--llm-mode", default="json_object", choices=list(MODES))
    group.add_argument("--llm-chunks-per-call", type=int, default=1)
    group.add_argument("--llm-concurrency", type=int, default=4)
    group.add_argument("--llm-timeout", type=float, default=30.0, help="seconds per call")
    group.add_argument("--llm-retries", type=int, default=3, help="attempts per call")
    group.add_argument("--llm-max-tokens", type=int, default=512, help="completion tokens per call")
    group.add_argument("--llm-cache", default=None, help="directory for the on-disk answer cache")
    group.add_argument("--llm-breaker-failures", type=int, default=5, help="consecutive failures that open the circuit")
    group.add_argument("--llm-breaker-reset", type=float, default=30.0,
                       help="seconds before an open circuit lets a trial call through")


def llm_from_args(args: argparse.Namespace) -> LLMGrader | None:
    """An LLMGrader from the parsed options, or None when no model is configured."""
    config = llm_config_from_args(args)
    return LLMGrader(config) if config is not None else None


def llm_config_from_args(args: argparse.Namespace) -> LLMConfig | None:
    """The LLMConfig the options describe, or None when no model is configured."""
    model = args.llm_model or os.environ.get("CRAG_LLM_MODEL")
    if not model:
        return None
    if args.llm_retries < 1:
        raise ConfigError(f"--llm-retries must be >= 1, got {args.llm_retries}")
    return LLMConfig(
        model=model, base_url=args.llm_base_url, api_key=os.environ.get(args.llm_api_key_env),
        mode=args.llm_mode, chunks_per_call=args.llm_chunks_per_call, concurrency=args.llm_concurrency,
        timeout_s=args.llm_timeout, retry=RetryPolicy(attempts=args.llm_retries), cache_dir=args.llm_cache,
        breaker_failures=args.llm_breaker_failures, breaker_reset_s=args.llm_breaker_reset,
        max_tokens=args.llm_max_tokens,
    )
