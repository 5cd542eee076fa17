"""``rdfmem.embeddings``: the public import path of ``rdfmem.domain.embeddings``."""

from rdfmem.domain.embeddings import *  # noqa: F403
from rdfmem.domain.embeddings import __all__ as __all__
