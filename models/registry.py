"""Named grader bundles: ``"default"`` and any bundle a user registers, resolved to a directory."""

from __future__ import annotations

import difflib
from pathlib import Path

from models.errors import BundleError

__all__ = ["BUNDLES_DIR", "MODEL_OPTION_HELP", "available_bundles", "register_bundle", "resolve_bundle"]

BUNDLES_DIR = Path(__file__).resolve().parent / "bundles"
#: ``--model`` help of the commands that grade: what the shipped names are and what each trades
MODEL_OPTION_HELP = ("grader bundle: a name or a bundle directory. Shipped: 'default' (cross-encoder fused with "
                     "the bi-encoder cosine) and 'fast' (the calibrated cosine alone: no cross-encoder pass, about "
                     "10x faster in the pipeline, lower AUROC) (default: %(default)s)")
_registered: dict[str, Path] = {}


def available_bundles() -> list[str]:
    """Names of shipped and registered bundles, sorted."""
    shipped = [p.name for p in BUNDLES_DIR.iterdir() if (p / "manifest.json").is_file()] if BUNDLES_DIR.is_dir() else []
    return sorted(set(shipped) | set(_registered))


def register_bundle(name: str, path: str | Path) -> None:
    """Make ``name`` resolve to ``path`` for this process."""
    if not name or "/" in name:
        raise BundleError(f"bundle name must be a non-empty word without '/', got {name!r}")
    _registered[name] = Path(path)


def resolve_bundle(name_or_path: str | Path) -> Path:
    """Return the bundle directory for a registered name or an existing path."""
    key = str(name_or_path)
    if key in _registered:
        return _registered[key]
    shipped = BUNDLES_DIR / key
    if "/" not in key and (shipped / "manifest.json").is_file():
        return shipped
    path = Path(name_or_path).expanduser()
    if path.exists():
        return path
    names = available_bundles()
    close = difflib.get_close_matches(key, names, n=1)
    hint = f"; did you mean {close[0]!r}?" if close else "."
    raise BundleError(f"no grader bundle named or at {key!r}{hint} Known names: {', '.join(names) or 'none'}; "
                      "or pass the path of a bundle directory.")
