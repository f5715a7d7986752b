"""HTTP adapter (Litestar) of http.md.

- create_app(service: Gangplank, settings: ApiSettings | None = None) -> Litestar
- ApiSettings, TokenGrant, load_tokens, TokenFileError, is_open, resolve_bind_host
- openapi_document(app) -> dict: the served OpenAPI 3.1 document
"""
from service.api.app import create_app
from service.api.openapi import openapi_document
from service.api.settings import ApiSettings, TokenFileError, TokenGrant, is_open, load_tokens, resolve_bind_host

__all__ = ["ApiSettings", "TokenFileError", "TokenGrant", "create_app", "is_open", "load_tokens",
           "openapi_document", "resolve_bind_host"]
