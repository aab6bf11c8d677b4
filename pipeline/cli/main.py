"""The ``crag`` command line: one entry point whose sub-commands come from the ``crag.commands`` entry points.

Each package registers its own commands (the pipeline registers ``grade``, ``bench``; training registers
``train``, ``eval``, ``export``...), so this module never imports ``training``. Errors from crag-grader
print one clear line and exit 2, never a traceback.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import logging
import sys
import warnings
from collections.abc import Callable, Sequence

from models.errors import CragError, DataShiftWarning

__all__ = ["build_parser", "main"]

ENTRY_POINT_GROUP = "crag.commands"
BUILTIN = (
    "pipeline.cli.grade_commands:register_grade",
    "pipeline.cli.grade_commands:register_bench",
    "pipeline.cli.ask_commands:register_index",
    "pipeline.cli.ask_commands:register_ask",
    "pipeline.cli.ask_commands:register_eval_pipeline",
    "pipeline.cli.batch_grade:register_grade_file",
    "pipeline.cli.serve_commands:register_serve",
    "pipeline.cli.serve_commands:register_keys",
)


def _load(spec: str) -> Callable[[argparse._SubParsersAction], None]:
    module_name, func = spec.split(":")
    module = importlib.import_module(module_name)
    register: Callable[[argparse._SubParsersAction], None] = getattr(module, func)
    return register


class _DefaultsFormatter(argparse.ArgumentDefaultsHelpFormatter):
    """Appends "(default: ...)" unless the help text already says what the default is."""

    def _get_help_string(self, action: argparse.Action) -> str | None:
        if action.help and "default" in action.help.lower():
            return action.help
        return super()._get_help_string(action)


class _CommandParser(argparse.ArgumentParser):
    """Sub-command parsers show each option's default in ``--help``."""

    def __init__(self, *args: object, **kwargs: object) -> None:
        kwargs.setdefault("formatter_class", _DefaultsFormatter)
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]

    def add_argument(self, *args: object, **kwargs: object) -> argparse.Action:
        if kwargs.get("help") is None and kwargs.get("default") not in (None, False, argparse.SUPPRESS):
            kwargs["help"] = "(default: %(default)s)"  # an option without help text still shows its default
        return super().add_argument(*args, **kwargs)  # type: ignore[arg-type]


def build_parser() -> argparse.ArgumentParser:
    """The parser with every registered sub-command."""
    parser = argparse.ArgumentParser(prog="crag", description="Corrective-RAG relevance grading toolkit")
    parser.add_argument("-v", "--verbose", action="count", default=0, help="more log output (-vv for debug)")
    parser.add_argument("--version", action="version", version=f"%(prog)s {_version()}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_CommandParser)
    specs = list(BUILTIN)
    for entry in importlib.metadata.entry_points(group=ENTRY_POINT_GROUP):
        if entry.value not in specs:
            specs.append(entry.value)
    for spec in specs:
        _load(spec)(sub)
    return parser


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("crag-grader")
    except PackageNotFoundError:
        return "unknown (not installed)"


def main(argv: Sequence[str] | None = None) -> int:
    """Run the CLI; returns the process exit code."""
    parser = build_parser()
    args = parser.parse_args(argv)
    level = logging.WARNING - 10 * min(args.verbose, 2)
    logging.basicConfig(level=level, format="%(levelname)s %(name)s: %(message)s")
    for handler in logging.getLogger().handlers:  # bm25s sets its own logger to DEBUG on import
        handler.addFilter(lambda record: not (record.name.startswith("bm25s") and record.levelno < logging.WARNING))
    if not getattr(args, "handler", None):
        parser.print_help()
        return 2
    try:
        with warnings.catch_warnings():  # for this command only, not for a program that calls main()
            # a data shift is logged with its fix by the grader; the same text as a Python warning says it twice
            warnings.simplefilter("ignore", DataShiftWarning)
            code: int = args.handler(args)
        return code
    except CragError as exc:
        sys.stderr.write(f"error: {exc}\n")
        return 2
    except OSError as exc:  # the file system said no: name the file and the reason, not a traceback
        if exc.filename is None:  # not about a file (a socket, say): not this handler's to explain
            raise
        logging.getLogger(__name__).debug("file system error", exc_info=True)
        where = " -> ".join(str(f) for f in (exc.filename, exc.filename2) if f is not None)
        sys.stderr.write(f"error: cannot use {where}: {exc.strerror or exc}; check the path and its permissions "
                         "(-vv shows where it happened)\n")
        return 2
    except KeyboardInterrupt:
        sys.stderr.write("interrupted\n")
        return 130


if __name__ == "__main__":
    raise SystemExit(main())
