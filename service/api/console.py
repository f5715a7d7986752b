"""The audit console (console.md): `GET /ui` and everything under `/ui/`, served from the files of
the package `service.console` (its static/): one HTML shell for every view's URL, and the ES modules and styles it
loads from `/ui/assets/`. The pages hold no data: the scripts read the HTTP API with the access
rules of http.md (the shell says whether tokens are configured, so a page asks for one at once).
Nothing is fetched from any other host: the Content-Security-Policy allows this origin only.
docs/console.md says why a shell and plain ES modules (no build step, no framework)."""
from __future__ import annotations

import hashlib
from importlib import resources
from typing import Annotated, Any

from litestar import Request, Response, get
from litestar.params import PathParameter

from service.api import auth
from service.api.responses import AUTHORIZER_KEY, problem_response
from service.schemas import problems
from service.schemas.problems import problem

PATH = "/ui"
ASSETS = "/assets/"
_TYPES = {".js": "text/javascript", ".css": "text/css",
          ".svg": "image/svg+xml", ".png": "image/png", ".ico": "image/x-icon", ".html": "text/html"}
HEADERS = {
    "Content-Security-Policy": "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
                               "connect-src 'self'; font-src 'self'; object-src 'none'; base-uri 'none'; "
                               "form-action 'self'; frame-ancestors 'none'",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-cache",
}


def _assets() -> dict[str, bytes]:
    """Every file under static/ by its path there ("views/state.js"), read once."""
    root = resources.files("service.console") / "static"
    out: dict[str, bytes] = {}

    def walk(folder: Any, prefix: str) -> None:
        for entry in folder.iterdir():
            if entry.is_dir():
                walk(entry, f"{prefix}{entry.name}/")
            elif entry.name.rsplit(".", 1)[-1] in {"js", "css", "svg", "png", "ico", "html"}:
                out[prefix + entry.name] = entry.read_bytes()

    walk(root, "")
    return out


def console_handlers() -> list[Any]:
    """Fresh handlers over the package's files (read once per app)."""
    files = _assets()
    shell = files.pop("shell.html").decode("utf-8")
    version = hashlib.sha256(b"".join(files[k] for k in sorted(files))).hexdigest()[:12]

    def page(request: Request[Any, Any, Any]) -> Response[Any]:
        authorizer = request.app.state.get(AUTHORIZER_KEY)
        mode = "none" if authorizer is None or authorizer.open else "bearer"
        body = shell.replace("{{auth}}", mode).replace("{{version}}", version)
        return Response(content=body.encode("utf-8"), media_type="text/html", headers=HEADERS)

    async def console(request: Request[Any, Any, Any]) -> Response[Any]:
        return page(request)

    async def console_path(request: Request[Any, Any, Any], rest: Annotated[str, PathParameter()]) -> Response[Any]:
        if not rest.startswith(ASSETS):
            return page(request)  # every view's URL is the shell; the scripts draw the view
        name = rest[len(ASSETS):]
        content = files.get(name)
        suffix = "." + name.rsplit(".", 1)[-1] if "." in name else ""
        if content is None or suffix not in _TYPES:
            return problem_response(problem(404, f"the console has no file {name!r}", type=problems.NOT_FOUND))
        return Response(content=content, media_type=_TYPES[suffix], headers=HEADERS)

    opt = {"access": auth.PUBLIC}
    return [get(PATH, include_in_schema=False, opt=opt, name="console")(console),
            get(PATH + "/{rest:path}", include_in_schema=False, opt=opt, name="console-path")(console_path)]
