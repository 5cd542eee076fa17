"""Quads as an Oxigraph store keeps them: two routes of writing one history (quads made
in Python, or the text of a request) are compared through a store, so that equal terms
written two ways compare equal."""

from __future__ import annotations

from pyoxigraph import Quad, Store


def stored(quads: list[Quad]) -> set[Quad]:
    """``quads`` after a round trip through a fresh store."""
    store = Store()
    store.extend(quads)
    return set(store)


def stored_text(block: str) -> set[Quad]:
    """The quads of ``INSERT DATA { block }`` in a fresh store (none for an empty block)."""
    store = Store()
    if block:
        store.update(f"INSERT DATA {{ {block} }}")
    return set(store)
