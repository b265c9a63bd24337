"""What may be shown of a URL: a hook's address is named in messages,
result.json and logs, and its credentials, query and fragment never are.
"""

from __future__ import annotations

from urllib.parse import urlsplit


def url_without_secrets(url: str) -> str:
    """``url`` as it may be shown: scheme, host, port and path, without the
    credentials, the query or the fragment, any of which may carry a secret
    (``https://user:token@host/hook?key=...``)."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    if ":" in host:  # an IPv6 address keeps its brackets
        host = f"[{host}]"
    try:
        port = f":{parts.port}" if parts.port is not None else ""
    except ValueError:  # a port that is not a number is no secret, only wrong
        port = ":" + parts.netloc.rpartition(":")[2]
    if not parts.scheme and not parts.netloc:
        return parts.path
    return f"{parts.scheme}://{host}{port}{parts.path}"
