"""Keep secrets out of the access log: query strings that carry credentials are redacted.

uvicorn logs every request line with its query string; a client that sends ``?api_key=...`` (wrong, but
it happens) would otherwise leave a working key in the log files.
"""

from __future__ import annotations

import logging
import re

__all__ = ["SECRET_PARAMS", "RedactSecrets", "install"]

SECRET_PARAMS = re.compile(r"(?i)([?&](?:api[_-]?key|key|token|access[_-]?token|secret|password|auth)=)[^&\s]*")


class RedactSecrets(logging.Filter):
    """Rewrites the path argument of uvicorn's access records (and any message) with secrets blanked."""

    def filter(self, record: logging.LogRecord) -> bool:
        if isinstance(record.args, tuple):
            record.args = tuple(SECRET_PARAMS.sub(r"\1[redacted]", a) if isinstance(a, str) else a
                                for a in record.args)
        if isinstance(record.msg, str):
            record.msg = SECRET_PARAMS.sub(r"\1[redacted]", record.msg)
        return True


def install() -> None:
    """Attach the filter to uvicorn's access and error loggers (idempotent)."""
    for name in ("uvicorn.access", "uvicorn.error"):
        logger = logging.getLogger(name)
        if not any(isinstance(f, RedactSecrets) for f in logger.filters):
            logger.addFilter(RedactSecrets())
