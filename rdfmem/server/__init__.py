"""``rdfmem serve``: one store over the SPARQL 1.1 Protocol, for external tools.

``create_app(store, …)`` is the Starlette (ASGI) app; ``serve(store, …)`` runs it in the
foreground with uvicorn; ``BackgroundServer(store, …)`` runs it on a thread of the process that
owns the store (an on-disk Oxigraph store cannot be opened by a second process), so SPARQL
clients can read an agent's memory while the agent runs. See ``rdfmem.server.app`` for the
routes and status codes.
"""

from rdfmem.server.app import ServerConfigError, ServerSettings, create_app
from rdfmem.server.running import BackgroundServer, serve

__all__ = ["BackgroundServer", "ServerConfigError", "ServerSettings", "create_app", "serve"]
