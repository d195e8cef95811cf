"""OpenAPI 3.0/3.1 documents as tool sources: ``OpenApiToolProvider``.

Modules: ``document`` (read and check), ``schemas`` (to JSON Schema 2020-12),
``operations`` (operations → tools), ``parameters`` (input merging and serialization),
``security`` (credentials per operation), ``http`` (bounded calls), ``provider``.
"""

from codemodekit.providers.openapi.provider import OpenApiToolProvider

__all__ = ["OpenApiToolProvider"]
