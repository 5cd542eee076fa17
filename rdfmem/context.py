"""``rdfmem.context``: the public import path of ``rdfmem.domain.context``."""

from rdfmem.domain.context import *  # noqa: F403
from rdfmem.domain.context import __all__ as __all__
