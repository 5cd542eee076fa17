"""``rdfmem.checkpoint``: the public import path of ``rdfmem.domain.checkpoint``."""

from rdfmem.domain.checkpoint import *  # noqa: F403
from rdfmem.domain.checkpoint import __all__ as __all__
