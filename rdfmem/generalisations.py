"""``rdfmem.generalisations``: the public import path of ``rdfmem.domain.generalisations``."""

from rdfmem.domain.generalisations import *  # noqa: F403
from rdfmem.domain.generalisations import __all__ as __all__
