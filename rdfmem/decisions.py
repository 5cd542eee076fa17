"""``rdfmem.decisions``: the public import path of ``rdfmem.domain.decisions``."""

from rdfmem.domain.decisions import *  # noqa: F403
from rdfmem.domain.decisions import __all__ as __all__
