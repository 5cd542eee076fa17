"""Where rdfmem's vocabulary, shapes and named queries live, installed or in a checkout."""

from __future__ import annotations

from functools import cache
from importlib import resources
from pathlib import Path

__all__ = ["PREFIXES", "RDFMEM", "named_query", "ontology_path"]

#: The rdfmem vocabulary namespace (see ``ontologies/rdfmem.ttl``).
RDFMEM = "https://w3id.org/rdfmem#"

#: Prefixes used in exports and shipped queries.
PREFIXES: dict[str, str] = {
    "rm": RDFMEM,
    "rdf": "http://www.w3.org/1999/02/22-rdf-syntax-ns#",
    "rdfs": "http://www.w3.org/2000/01/rdf-schema#",
    "xsd": "http://www.w3.org/2001/XMLSchema#",
    "owl": "http://www.w3.org/2002/07/owl#",
    "prov": "http://www.w3.org/ns/prov#",
    "dcterms": "http://purl.org/dc/terms/",
    "skos": "http://www.w3.org/2004/02/skos/core#",
}


@cache
def ontology_path() -> Path:
    """The folder holding ``rdfmem.ttl``, ``shapes.ttl`` and ``queries/``.

    Inside an installed wheel it is ``rdfmem/ontologies``; in an editable checkout it is the
    repository's ``ontologies/`` folder.

    >>> (ontology_path() / "rdfmem.ttl").is_file()
    True
    """
    packaged = Path(str(resources.files("rdfmem"))) / "ontologies"
    if (packaged / "rdfmem.ttl").is_file():
        return packaged
    return Path(__file__).resolve().parents[2] / "ontologies"


def named_query(name: str) -> str:
    """The text of ``queries/<name>.rq``.

    Raises:
        KeyError: no such named query (the message lists the known ones).
    """
    folder = ontology_path() / "queries"
    path = folder / f"{name}.rq"
    if not name.replace("_", "").isalnum() or not path.is_file():
        known = sorted(p.stem for p in folder.glob("*.rq"))
        raise KeyError(f"no named query {name!r}; known: {', '.join(known)}")
    return path.read_text(encoding="utf-8")
