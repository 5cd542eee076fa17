"""``rdfmem.memories``: the public import path of ``rdfmem.domain.memories``."""

from rdfmem.domain.memories import *  # noqa: F403
from rdfmem.domain.memories import __all__ as __all__
