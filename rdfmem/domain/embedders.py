"""Embedders named by a spec (``rdfmem mcp --embedder SPEC``), and any embedder made safe.

A spec is one of:

* ``hashing`` (the default) or ``hashing:DIMENSION``: ``HashingEmbedder``, no model.
* ``sentence-transformers`` or ``sentence-transformers:MODEL_FOLDER``:
  ``SentenceTransformerEmbedder`` (the ``embeddings`` extra; nothing is downloaded).
* ``module:attribute`` (``attribute`` may be dotted): the object it names, made with no
  arguments first when it is a class or a factory. It is used when it has rdfmem's
  ``Embedder`` protocol (``dimension`` and ``embed(texts)`` returning one row per text;
  ``name`` optional), or LangChain's ``Embeddings`` one (``embed_documents(texts)``, through
  ``EmbeddingsAdapter``).

Every embedder that is not rdfmem's own is wrapped (``as_embedder``): its rows are checked
(one per text, ``dimension`` numbers, finite) and L2-normalised, so a plug-in that returns
lists, float64 or unnormalised rows still ranks by cosine, and one that breaks its promise
fails with an error saying which.

>>> embedder_from_spec("hashing:64").dimension
64
>>> class Two:  # any object with dimension and embed
...     dimension = 2
...     def embed(self, texts):
...         return [[3.0, 4.0] for _ in texts]
>>> as_embedder(Two()).embed(["x"]).tolist()
[[0.6000000238418579, 0.800000011920929]]
"""

from __future__ import annotations

import importlib
import inspect
import threading
from collections.abc import Sequence
from typing import Any

import numpy as np
from numpy.typing import NDArray

from rdfmem.core.errors import InvalidValue
from rdfmem.domain.embedder_spec import DEFAULT_SPEC, SPEC_FORMS, ST, bad, dimension_of, split
from rdfmem.domain.embeddings import Embedder, HashingEmbedder, SentenceTransformerEmbedder

__all__ = [
    "DEFAULT_SPEC",
    "SPEC_FORMS",
    "CheckedEmbedder",
    "EmbeddingsAdapter",
    "as_embedder",
    "embedder_from_spec",
]

Vector = NDArray[np.float32]


def embedder_from_spec(spec: str | None) -> Embedder:
    """The embedder a spec names (see the module docstring); ``None`` or ``""``: hashing.

    Raises:
        InvalidValue: the spec is malformed, its module or attribute is missing, the object
            is no embedder, or the sentence-transformers extra is not installed.
    """
    spec = (spec or DEFAULT_SPEC).strip()
    kind, rest = split(spec)
    if kind == "hashing":
        return HashingEmbedder(dimension_of(spec, rest))
    if kind == ST:
        try:
            return SentenceTransformerEmbedder(rest or None)
        except ImportError as exc:
            raise bad(spec, str(exc)) from exc
        except OSError as exc:  # no model files in the folder
            raise bad(spec, f"no model could be read from {rest!r}: {exc}") from exc
    return as_embedder(_made(spec, kind, rest or ""), name=spec)


def _made(spec: str, module_name: str, attribute: str) -> Any:
    """The object ``module:attribute`` names, made when it is a class or a factory."""
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        if exc.name != module_name:
            raise bad(spec, f"module {module_name} cannot be imported ({exc})") from exc
        raise bad(spec, f"no module named {module_name} (on PYTHONPATH or installed?)") from exc
    except ImportError as exc:
        raise bad(spec, f"module {module_name} cannot be imported ({exc})") from exc
    found: Any = module
    for part in attribute.split("."):
        if not hasattr(found, part):
            raise bad(spec, f"{module_name} has no attribute {attribute}")
        found = getattr(found, part)
    if inspect.isclass(found) or (callable(found) and not _is_embedder(found)):
        try:
            found = found()
        except Exception as exc:
            raise bad(spec, f"{module_name}:{attribute}() failed: {exc!r}") from exc
    return found


def _is_embedder(value: Any) -> bool:
    return hasattr(value, "embed_documents") or (
        hasattr(value, "embed") and hasattr(value, "dimension")
    )


def as_embedder(value: Any, *, name: str | None = None) -> Embedder:
    """``value`` as rdfmem's ``Embedder``: rdfmem's own as they are, any other object with
    ``dimension`` and ``embed`` in a ``CheckedEmbedder``, a LangChain-style ``Embeddings``
    (``embed_documents``) in an ``EmbeddingsAdapter``.

    Raises:
        InvalidValue: ``value`` has neither protocol.
    """
    if isinstance(value, (HashingEmbedder, SentenceTransformerEmbedder, CheckedEmbedder)):
        return value
    label = name or f"{type(value).__module__}.{type(value).__qualname__}"
    if hasattr(value, "embed") and hasattr(value, "dimension"):
        return CheckedEmbedder(value, name=getattr(value, "name", None) or label)
    if hasattr(value, "embed_documents"):
        return EmbeddingsAdapter(value, name=name)
    raise InvalidValue(
        f"{label} ({type(value).__name__}) is no embedder: pass an object with `dimension` and "
        "`embed(texts) -> one vector per text` (rdfmem's Embedder), or with "
        "`embed_documents(texts)` (LangChain's Embeddings)"
    )


def _rows(label: str, raw: Any, count: int, dimension: int | None) -> Vector:
    """``raw`` as a ``(count, dimension)`` float32 array of L2-normalised rows."""
    try:
        rows = np.asarray(raw, dtype=np.float32)
    except (TypeError, ValueError) as exc:
        raise InvalidValue(f"the embedder {label} returned no numbers: {exc}") from exc
    if count == 0 and rows.size == 0:
        return np.zeros((0, dimension or 0), dtype=np.float32)
    width = dimension if dimension is not None else (rows.shape[-1] if rows.ndim == 2 else -1)
    if rows.ndim != 2 or rows.shape != (count, width):
        raise InvalidValue(
            f"the embedder {label} returned shape {rows.shape} for {count} texts: it must "
            f"return one vector of {width if width > 0 else 'its dimension'} numbers per text"
        )
    if not np.all(np.isfinite(rows)):
        raise InvalidValue(f"the embedder {label} returned NaN or infinity")
    norms = np.linalg.norm(rows, axis=1, keepdims=True)
    unit: Vector = np.divide(rows, norms, out=np.zeros_like(rows), where=norms > 0)
    return unit


class CheckedEmbedder:
    """An embedder of someone else's (``dimension`` and ``embed``) whose rows are checked and
    L2-normalised; ``name`` says which model made the vectors.

    Raises:
        InvalidValue: (made) ``dimension`` is not a whole number above 0; (``embed``) the
            rows are not one per text of ``dimension`` finite numbers.
    """

    def __init__(self, inner: Any, *, name: str) -> None:
        dimension = inner.dimension
        if isinstance(dimension, bool) or not isinstance(dimension, (int, np.integer)):
            raise InvalidValue(f"the embedder {name} has dimension {dimension!r}, not a number")
        if dimension < 1:
            raise InvalidValue(f"the embedder {name} has dimension {dimension}, not above 0")
        self.inner = inner
        self._name = str(name)
        self._dimension = int(dimension)

    @property
    def name(self) -> str:
        return self._name

    @property
    def dimension(self) -> int:
        return self._dimension

    def embed(self, texts: Sequence[str]) -> Vector:
        texts = list(texts)
        return _rows(self._name, self.inner.embed(texts), len(texts), self._dimension)

    def __repr__(self) -> str:
        return f"CheckedEmbedder({self._name!r}, dimension={self._dimension})"


class EmbeddingsAdapter:
    """A LangChain-style ``Embeddings`` (``embed_documents(texts) -> list of vectors``) as
    rdfmem's ``Embedder``. Memories and queries are both embedded with ``embed_documents``
    (rdfmem's protocol does not tell a query from a text), so they compare like with like.
    ``dimension`` is given, or learnt from the first vectors (embedding one short text when
    it is asked for first).

    >>> class Fake:  # LangChain's FakeEmbeddings would do as well
    ...     def embed_documents(self, texts):
    ...         return [[float(len(t)), 1.0] for t in texts]
    ...     def embed_query(self, text):
    ...         return self.embed_documents([text])[0]
    >>> adapter = EmbeddingsAdapter(Fake())
    >>> adapter.dimension, [round(float(x), 3) for x in adapter.embed(["abc"])[0]]
    (2, [0.949, 0.316])
    """

    def __init__(self, embeddings: Any, *, dimension: int | None = None, name: str | None = None):
        if not callable(getattr(embeddings, "embed_documents", None)):
            raise InvalidValue(
                f"{type(embeddings).__name__} has no embed_documents(texts): pass a LangChain "
                "Embeddings, or an object with dimension and embed(texts) to as_embedder"
            )
        if dimension is not None and dimension < 1:
            raise InvalidValue(f"an embedding dimension is above 0, not {dimension}")
        self.embeddings = embeddings
        self._dimension = dimension
        self._learning = threading.Lock()
        kind = type(embeddings)
        self._name = name or f"langchain:{kind.__module__}.{kind.__qualname__}"

    @property
    def name(self) -> str:
        return self._name

    @property
    def dimension(self) -> int:
        if self._dimension is None:
            self.embed(["dimension"])
        assert self._dimension is not None
        return self._dimension

    def embed(self, texts: Sequence[str]) -> Vector:
        texts = list(texts)
        if not texts:
            return np.zeros((0, self._dimension or 0), dtype=np.float32)
        rows = _rows(self._name, self.embeddings.embed_documents(texts), len(texts), None)
        with self._learning:
            if self._dimension is None:
                self._dimension = int(rows.shape[1])
        if rows.shape[1] != self._dimension:
            raise InvalidValue(
                f"the embedder {self._name} returned {rows.shape[1]} numbers per text after "
                f"{self._dimension}: its vectors must all have one length"
            )
        return rows

    def __repr__(self) -> str:
        return f"EmbeddingsAdapter({self._name!r})"
