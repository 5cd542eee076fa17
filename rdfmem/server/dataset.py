"""The SPARQL 1.1 Protocol's ``using-graph-uri`` / ``using-named-graph-uri`` for updates.

The engines take the update as text only, so the parameters become the ``USING`` / ``USING
NAMED`` clauses they stand for (Protocol §2.2.3), placed before the ``WHERE`` of every
``DELETE``/``INSERT`` operation. The places are found by ``sparql_guard.code_tokens``, the
guard's own tokenizer, over the text with ``\\u`` escapes expanded (the text the engine parses):
strings, IRIs and comments are never mistaken for code, and nothing the caller wrote is moved.
Only well-formed IRIs (pyoxigraph ``NamedNode``) are written in.
"""

from __future__ import annotations

from collections.abc import Sequence

from pyoxigraph import NamedNode

from rdfmem.core.errors import HttpError
from rdfmem.core.guard import code_tokens, expand_escapes

__all__ = ["with_using"]


def with_using(update: str, default: Sequence[NamedNode], named: Sequence[NamedNode]) -> str:
    """``update`` with ``USING <g>`` for each of ``default`` and ``USING NAMED <g>`` for each
    of ``named`` before the ``WHERE`` of each of its DELETE/INSERT operations.

    >>> with_using("INSERT { <urn:a> <urn:b> ?o } WHERE { ?s ?p ?o }", [NamedNode("urn:g")], [])
    'INSERT { <urn:a> <urn:b> ?o } USING <urn:g> WHERE { ?s ?p ?o }'

    Raises:
        HttpError: 400 when the update names its own dataset (``USING``, ``WITH``), which the
            protocol forbids together with the parameters, or uses ``DELETE WHERE``.
    """
    if not default and not named:
        return update
    text, _ = expand_escapes(update)
    clause = "".join(f"USING {g} " for g in default) + "".join(f"USING NAMED {g} " for g in named)
    depth = 0
    previous = ""
    cuts: list[int] = []
    for token in code_tokens(text):
        word = text[token.start : token.end]
        if token.kind == "punct":
            if word == "{":
                depth += 1
            elif word == "}":
                depth -= 1
        elif depth == 0 and token.kind == "word":
            upper = word.upper()
            if upper in ("USING", "WITH"):
                raise HttpError(
                    400,
                    f"the update has {upper} and the request using-graph-uri or "
                    "using-named-graph-uri: give the dataset one way only",
                )
            if upper == "WHERE":
                if previous == "DELETE":
                    raise HttpError(
                        400,
                        "using-graph-uri cannot apply to DELETE WHERE; write "
                        "DELETE { … } WHERE { … } instead",
                    )
                if previous == "}":
                    cuts.append(token.start)
        if depth == 0:
            previous = word.upper()
    parts = []
    last = 0
    for cut in cuts:
        parts.append(text[last:cut])
        parts.append(clause)
        last = cut
    parts.append(text[last:])
    return "".join(parts)
