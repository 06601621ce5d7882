"""Secrets out of everything dbdiag writes or prints: the one place that knows the forms a password takes.

Every text that leaves the process (run.json and its recorded command line, events, series, artifacts,
findings, results, the report, terminal lines, error messages) passes :func:`redact_text`, directly or
through :class:`diag.core.bundle.BundleWriter` and :class:`RedactingStream`. It hides:

- URL userinfo: ``postgresql://user:pw@host``, ``http://user:pw@host:9100/metrics``; the password runs to
  the last ``@`` of the authority, as :func:`urllib.parse.urlsplit` reads it, so ``user:p@ss@host`` loses all
  of ``p@ss``;
- query parameters that carry a password (``?password=``, ``passwd``, ``pwd``, libpq's ``sslpassword``),
  whatever their encoding (``p%40ss``, ``a+b``) and length;
- key=value connection strings (libpq conninfo ``password=secret`` or ``password='it''s'``);
- each password the run knows (:class:`diag.core.targets.Target` parsed it), in the spellings it can take once
  written: as given, percent-encoded (with ``%20`` or ``+``), JSON-escaped and HTML-escaped. Secrets shorter
  than :data:`MIN_BLIND` characters are left to the patterns above: replaced blindly, "ab" would mangle
  every word that holds it.

A passfile or option-file reference (``passfile=~/.pgpass``) names a file, not a secret: it stays, and the
file is never read by dbdiag (libpq reads it).
"""

from __future__ import annotations

import functools
import html
import json
import re
import urllib.parse
from collections.abc import Iterable, Iterator
from typing import TextIO

MASK = "***"
MIN_BLIND = 4  # characters: shorter known secrets are hidden by the patterns only (see the module docstring)
SECRET_KEYS = ("password", "passwd", "pwd", "sslpassword")

_KEYS = "|".join(SECRET_KEYS)
# Characters that end a password in free text: whitespace, and the quotes and angle brackets around a URL
# in JSON, HTML and messages; a password that holds one of them is still caught as a known secret.
_STOP = r"\s\"'<>"
# scheme://[user]:PASSWORD@ ; the password is greedy up to the authority's last "@" (before / ? #). The pattern
# starts at the literal "://" (the scheme is not needed to hide the password): a scan, not a try at every word.
_USERINFO = re.compile(rf"(://[^{_STOP}:/?#@]*:)[^{_STOP}/?#]*(?=@)")
# ?password=VALUE / &password=VALUE in a URL's query.
_QUERY = re.compile(rf"([?&;](?:{_KEYS})=)[^&#{_STOP}]*", re.IGNORECASE)
# password=VALUE / password = 'quoted \' value' in a key=value connection string (not after ? or &).
_CONNINFO = re.compile(rf"(?<![?&;\w.-])((?:{_KEYS})\s*=\s*)('(?:[^'\\]|\\.)*'?|[^\s'&#]+)", re.IGNORECASE)
# user:PASSWORD@host without a scheme (an ssh spec); only where a value is known to be one.
_BARE_USERINFO = re.compile(r"^([^:@\s]*:).*(?=@[^@]*$)")


def spellings(secret: str) -> Iterator[str]:
    """The forms ``secret`` can take in written text: as is, percent-encoded, JSON- and HTML-escaped."""
    seen: set[str] = set()
    for s in (secret, urllib.parse.quote(secret, safe=""), urllib.parse.quote(secret),
              urllib.parse.quote_plus(secret), json.dumps(secret, ensure_ascii=False)[1:-1],
              json.dumps(secret)[1:-1], html.escape(secret), html.escape(secret, quote=False)):
        if s and s not in seen:
            seen.add(s)
            yield s


@functools.lru_cache(maxsize=64)  # a run has one set of secrets; its every line is redacted with it
def _blind(secrets: tuple[str, ...]) -> re.Pattern[str] | None:
    """One pattern of every spelling of the known secrets long enough to replace blindly, longest first (so a
    longer spelling is not cut by a shorter one inside it); None when there is none."""
    out = {sp for s in secrets if s and len(s) >= MIN_BLIND for sp in spellings(s)}
    return re.compile("|".join(re.escape(sp) for sp in sorted(out, key=len, reverse=True))) if out else None


def redact_text(text: str, secrets: Iterable[str] = ()) -> str:
    """``text`` with every password in it replaced by ``***`` (the forms of the module docstring)."""
    if not text:
        return text
    # Every series line passes here: the patterns run only where their marker is (a tenth of the time).
    if "://" in text:
        text = _USERINFO.sub(rf"\1{MASK}", text)
    low = text.lower()
    # Both patterns need an "=" too: "pass" alone is in many words (Sort_merge_passes is in every MariaDB status
    # record, a JSON line with no "=", where _CONNINFO's scan cost ~0.5 ms a 20 KB line).
    if ("pass" in low or "pwd" in low) and "=" in text:
        text = _QUERY.sub(rf"\1{MASK}", text)
        text = _CONNINFO.sub(rf"\1{MASK}", text)
    blind = _blind(tuple(secrets))
    return blind.sub(MASK, text) if blind is not None else text


def redact_url(url: str) -> str:
    """A URL without its password (``http://user:***@host:9100/metrics``): safe to store and print."""
    return redact_text(url)


def redact_userinfo(spec: str) -> str:
    """``user:pw@host`` (an ssh spec, no scheme) as ``user:***@host``; other text through :func:`redact_text`."""
    return redact_text(_BARE_USERINFO.sub(rf"\1{MASK}", spec) if "://" not in spec else spec)


def url_credentials(url: str) -> tuple[str, str | None, str | None]:
    """``url`` without its userinfo, and the user and password it held (percent-decoded; None when absent)."""
    parts = urllib.parse.urlsplit(url)
    if "@" not in parts.netloc:
        return url, None, None
    userinfo, _, hostport = parts.netloc.rpartition("@")
    user, colon, pw = userinfo.partition(":")
    bare = urllib.parse.urlunsplit(parts._replace(netloc=hostport))
    return bare, urllib.parse.unquote(user), (urllib.parse.unquote(pw) if colon else None)


# Options whose value is user:pw@host without a scheme.
USERINFO_OPTIONS = ("--ssh",)


def redact_argv(argv: list[str], secrets: Iterable[str] = ()) -> list[str]:
    """The command line with every password replaced by ``***`` (DSNs, URLs, ``--ssh LABEL=user:pw@host``)."""
    known = tuple(secrets)
    out: list[str] = []
    for i, a in enumerate(argv):
        opt = next((o for o in USERINFO_OPTIONS if a.startswith(o + "=")), None)
        if opt or (i and argv[i - 1] in USERINFO_OPTIONS):
            head, value = (a[:len(opt) + 1], a[len(opt) + 1:]) if opt else ("", a)
            label, eq, spec = value.partition("=")
            a = head + (label + eq + redact_userinfo(spec) if eq else redact_userinfo(value))
        out.append(redact_text(a, known))
    return out


class RedactingStream:
    """A text stream that writes through :func:`redact_text` (terminal lines of a run; forked collector
    processes inherit it). Everything else is the wrapped stream's."""

    def __init__(self, stream: TextIO, secrets: Iterable[str] = ()) -> None:
        self._stream = stream
        self._secrets = tuple(secrets)

    def write(self, text: str) -> int:
        self._stream.write(redact_text(text, self._secrets))
        return len(text)

    def __getattr__(self, name: str) -> object:
        return getattr(self._stream, name)
