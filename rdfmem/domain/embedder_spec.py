"""The form of an embedder spec (``rdfmem mcp --embedder SPEC``), checked without loading
anything: this module imports no model, no numpy, not the spec's module, so a server checks
its options before it answers ``initialize`` and loads the embedder on first use
(``rdfmem.domain.embedders.embedder_from_spec``).

>>> split("sentence-transformers:/models/minilm")
('sentence-transformers', '/models/minilm')
>>> split("my_pkg.embed:Factory.make")
('my_pkg.embed', 'Factory.make')
>>> check_spec("hashing:256")
"""

from __future__ import annotations

import importlib.util

from rdfmem.core.errors import InvalidValue

__all__ = ["DEFAULT_SPEC", "SPEC_FORMS", "ST", "bad", "check_spec", "dimension_of", "split"]

#: The embedder of a server given no ``--embedder``.
DEFAULT_SPEC = "hashing"
#: What a spec may be, as error messages and help say it.
SPEC_FORMS = "hashing[:DIMENSION], sentence-transformers[:MODEL_FOLDER] or module:attribute"
#: The spec kind of ``SentenceTransformerEmbedder``.
ST = "sentence-transformers"
ST_HINT = "pip install torch==2.13.0 && pip install 'rdfmem[embeddings]'"


def bad(spec: str, why: str) -> InvalidValue:
    """The error of a spec that names no usable embedder, saying what to pass."""
    return InvalidValue(f"embedder {spec!r}: {why}; pass {SPEC_FORMS}")


def split(spec: str) -> tuple[str, str | None]:
    """``(kind, rest)``: ``hashing``/``sentence-transformers`` with their argument (None
    when there is none), or the module and attribute of ``module:attribute``.

    Raises:
        InvalidValue: the spec has none of these forms.
    """
    text = spec.strip()
    kind, sep, rest = text.partition(":")
    if kind in ("hashing", ST):
        return kind, rest if sep else None
    if not sep or not kind or not rest:
        raise bad(spec, "not a known embedder and not module:attribute")
    names = [*kind.split("."), *rest.split(".")]
    if not all(n.isidentifier() for n in names):
        raise bad(spec, "module and attribute must be dotted Python names")
    return kind, rest


def dimension_of(spec: str, rest: str | None) -> int:
    """The dimension of ``hashing[:DIMENSION]`` (512 when not given).

    Raises:
        InvalidValue: DIMENSION is not a whole number of at least 2.
    """
    if rest is None:
        return 512
    if not rest.isdigit() or int(rest) < 2:
        raise bad(spec, f"hashing:DIMENSION takes a whole number of at least 2, not {rest!r}")
    return int(rest)


def check_spec(spec: str) -> None:
    """Raise the error loading the spec would raise for its form, an unknown module or a
    missing extra, without loading any model or importing the module (its parent packages
    are imported to find it).

    Raises:
        InvalidValue: the spec is malformed, its module cannot be found, or the
            sentence-transformers extra is not installed (the message says what to pass).
    """
    kind, rest = split(spec)
    if kind == "hashing":
        dimension_of(spec, rest)
    elif kind == ST:
        for module in ("sentence_transformers", "torch"):
            if importlib.util.find_spec(module) is None:
                raise bad(spec, f"{module} is not installed ({ST_HINT})")
    else:
        try:
            found = importlib.util.find_spec(kind)
        except (ImportError, ValueError) as exc:
            raise bad(spec, f"module {kind} cannot be found ({exc})") from exc
        if found is None:
            raise bad(spec, f"no module named {kind} (on PYTHONPATH or installed?)")
