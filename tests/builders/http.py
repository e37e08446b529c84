"""A scrape of makeroom's `/metrics` as a client sees it: the HTTP status, for the tests of who may
read it (on the adapter and on the real control plane)."""

from __future__ import annotations

import urllib.error
import urllib.request


def scrape(port: int, token: str | None, timeout: float = 10.0) -> int:
    """The status of GET /metrics on 127.0.0.1:``port`` with ``token`` as the bearer (none: no header);
    0 when nothing answers (the server not listening yet, or the connection cut)."""
    request = urllib.request.Request(f"http://127.0.0.1:{port}/metrics")
    if token is not None:
        request.add_header("Authorization", f"Bearer {token}")
    try:
        with urllib.request.urlopen(request, timeout=timeout) as answer:
            return int(answer.status)
    except urllib.error.HTTPError as exc:
        return exc.code
    except OSError:
        return 0
