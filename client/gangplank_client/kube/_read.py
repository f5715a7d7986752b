"""Reading manifests as the API server reads them: the errors and warnings of one object, typed
field access at the manifest's own paths, `generateName`, and inputs (files, folders, stdin)."""
from __future__ import annotations

import hashlib
import json
import sys
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import yaml

Obj = dict[str, Any]
Manifests = str | bytes | Mapping[str, Any] | Iterable[Mapping[str, Any]]

# Kubernetes' name suffix alphabet (apimachinery's util/rand: no vowels, no confusable characters)
SUFFIX_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"
MAX_GENERATED_PREFIX = 58  # 63 minus the 5 random characters, as the API server truncates
MANIFEST_SUFFIXES = (".yaml", ".yml", ".json")


class ManifestError(ValueError):
    """Manifests that cannot be read or converted; `errors` holds one line each (object: path: why)."""

    def __init__(self, errors: list[str]) -> None:
        self.errors = list(errors)
        super().__init__("\n".join(self.errors))


class Refusals:
    """What one object's conversion finds: errors (raised together) and warnings (one line each)."""

    def __init__(self, header: str = "the manifests", *, ignore_unenforced: bool = False) -> None:
        self.header = header
        self.items: list[str] = []
        self.warnings: list[str] = []
        self.ignore_unenforced = ignore_unenforced

    def add(self, path: str, why: str) -> None:
        self.items.append(f"{path}: {why}")

    def warn(self, path: str, why: str) -> None:
        line = f"warning: {self.header}: {path}: {why}"
        if line not in self.warnings:
            self.warnings.append(line)

    def unenforced(self, path: str, why: str) -> None:
        """A field Gangplank cannot enforce: refused, or a warning under `ignore_unenforced`."""
        if self.ignore_unenforced:
            self.warn(path, f"{why} (not enforced: --ignore-unenforced)")
        else:
            self.add(path, f"{why} (pass ignore_unenforced / --ignore-unenforced to submit without it)")

    def lines(self) -> list[str]:
        return [f"{self.header}: {i}" for i in self.items]

    def raise_any(self) -> None:
        if self.items:
            raise ManifestError(self.lines())

    # -- typed access: a type error is an error at the manifest's path, never a crash later -------
    def get_map(self, obj: Any, key: str, path: str, *, required: bool = False) -> Obj:
        value = obj.get(key) if isinstance(obj, Mapping) else None
        if value is None:
            if required:
                self.add(f"{path}.{key}" if path else key, "Required value")
            return {}
        if not isinstance(value, Mapping):
            self.add(f"{path}.{key}" if path else key, f"must be an object, not {_type(value)}")
            return {}
        return dict(value)

    def get_list(self, obj: Any, key: str, path: str, *, required: bool = False) -> list[Any]:
        value = obj.get(key) if isinstance(obj, Mapping) else None
        if value is None:
            if required:
                self.add(f"{path}.{key}", "Required value")
            return []
        if not isinstance(value, list):
            self.add(f"{path}.{key}", f"must be a list, not {_type(value)}")
            return []
        return value

    def get_maps(self, obj: Any, key: str, path: str, *, required: bool = False) -> list[Obj]:
        """A list of objects; an element that is not one is an error."""
        out: list[Obj] = []
        for i, item in enumerate(self.get_list(obj, key, path, required=required)):
            if isinstance(item, Mapping):
                out.append(dict(item))
            else:
                self.add(f"{path}.{key}[{i}]", f"must be an object, not {_type(item)}")
        return out

    def get_int(self, obj: Any, key: str, path: str, default: int | None = None, *, minimum: int = 0) -> int | None:
        value = obj.get(key) if isinstance(obj, Mapping) else None
        if value is None:
            return default
        if isinstance(value, bool) or not isinstance(value, int):
            self.add(f"{path}.{key}", f"Invalid value: {json.dumps(value)}: must be of type integer, not {_type(value)}")
            return default
        if value < minimum:
            self.add(f"{path}.{key}", f"Invalid value: {value}: must be greater than or equal to {minimum}")
            return default
        return value

    def get_str(self, obj: Any, key: str, path: str, *, required: bool = False) -> str | None:
        value = obj.get(key) if isinstance(obj, Mapping) else None
        if value is None or value == "":
            if required:
                self.add(f"{path}.{key}", "Required value")
            return None
        if not isinstance(value, str):
            self.add(f"{path}.{key}", f"Invalid value: {json.dumps(value)}: must be of type string, not {_type(value)}")
            return None
        return value


# Where a part of a converted body comes from in its manifest: the converters note it on the part
# (`origin`), and `take_origins` moves the notes out of the body before anything sees it, so that an
# error located in the body (the client's checks, the server's 422) is named at the manifest's path.
ORIGIN = "_from"
BodyPath = tuple[str | int, ...]


def origin(node: Obj, path: str | None, fields: Mapping[str, str] | None = None) -> Obj:
    """Note that `node` comes from `path` of the manifest (None: as noted before), and each of
    `fields` (a body path below it, dotted: "schedulingPolicy.gang.minCount") from the path given."""
    noted = {**node.get(ORIGIN, {}), **(fields or {})}
    if path is not None:
        noted[""] = path
    node[ORIGIN] = noted
    return node


def take_origins(body: Any, at: BodyPath = (), found: dict[BodyPath, str] | None = None) -> dict[BodyPath, str]:
    """Remove every note of `origin` from the body (in place): {body path: manifest path}."""
    found = {} if found is None else found
    if isinstance(body, dict):
        for key, path in (body.pop(ORIGIN, None) or {}).items():
            found[at + (tuple(key.split(".")) if key else ())] = path
        for key, value in body.items():
            take_origins(value, (*at, key), found)
    elif isinstance(body, list):
        for i, value in enumerate(body):
            take_origins(value, (*at, i), found)
    return found


def manifest_path(origins: Mapping[BodyPath, str], loc: BodyPath) -> str | None:
    """The manifest path of a body location (without its leading "body"): the longest noted prefix,
    and the body's own path in brackets when the location goes below it; None when nothing is noted."""
    for n in range(len(loc), 0, -1):
        if (path := origins.get(tuple(loc[:n]))) is not None:
            below = ".".join(str(p) for p in loc)
            return f"{path} (the converted workload's {below})" if n < len(loc) else path
    return None


def _type(value: Any) -> str:
    return {bool: "boolean", int: "integer", float: "number", str: "string", list: "list",
            dict: "object"}.get(type(value), type(value).__name__)


def annotations_of(obj: Any) -> dict[str, str]:
    meta = obj.get("metadata") if isinstance(obj, Mapping) else None
    found = meta.get("annotations") if isinstance(meta, Mapping) else None
    return {str(k): str(v) for k, v in found.items()} if isinstance(found, Mapping) else {}


def _strip(value: Any) -> Any:
    """Without nulls: Kubernetes reads a null field as an absent one."""
    if isinstance(value, dict):
        return {str(k): _strip(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [_strip(v) for v in value]
    return value


def load(manifests: Manifests) -> list[Obj]:
    """The objects of YAML/JSON text, a mapping or a list of mappings (`List` kinds unpacked)."""
    if isinstance(manifests, bytes):
        try:
            manifests = manifests.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise ManifestError([f"the manifests are not UTF-8 text: {exc}"]) from exc
    if isinstance(manifests, str):
        try:
            docs: list[Any] = [d for d in yaml.safe_load_all(manifests) if d is not None]
        except yaml.YAMLError as exc:
            raise ManifestError([f"the manifests are not valid YAML or JSON: {' '.join(str(exc).split())}"]) from exc
    elif isinstance(manifests, Mapping):
        docs = [manifests]
    else:
        try:
            docs = list(manifests)
        except TypeError as exc:
            raise ManifestError([f"manifests must be text, a mapping or a list of mappings: {exc}"]) from exc
    out: list[Obj] = []
    for n, doc in enumerate(docs):
        if not isinstance(doc, Mapping):
            raise ManifestError([f"document {n + 1}: a manifest must be an object, not {_type(doc)}"])
        try:
            doc = _strip(json.loads(json.dumps(doc, default=str)))  # plain dicts and lists, whatever the loader built
        except ValueError as exc:
            raise ManifestError([f"document {n + 1}: {exc}"]) from exc
        kind = doc.get("kind")
        if isinstance(kind, str) and kind.endswith("List") and isinstance(doc.get("items"), list):
            out.extend(load(doc["items"]))
        else:
            out.append(doc)
    return out


def canonical(obj: Obj) -> bytes:
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()


def generated_name(prefix: str, obj: Obj) -> str:
    """`generateName` plus 5 characters of the suffix alphabet, drawn from a hash of the object's
    canonical JSON: the same object always gets the same name."""
    digest = int.from_bytes(hashlib.sha256(canonical(obj)).digest()[:8], "big")
    suffix = ""
    for _ in range(5):
        digest, i = divmod(digest, len(SUFFIX_ALPHABET))
        suffix += SUFFIX_ALPHABET[i]
    return prefix[:MAX_GENERATED_PREFIX] + suffix


def name_objects(objs: list[Obj]) -> None:
    """Give every object with `generateName` and no `name` its name (in place)."""
    for obj in objs:
        meta = obj.get("metadata")
        if isinstance(meta, dict) and not meta.get("name") and isinstance(meta.get("generateName"), str) \
                and meta["generateName"]:
            meta["name"] = generated_name(meta["generateName"], obj)


def read_sources(sources: Iterable[str], stdin: Any = None) -> list[tuple[str, str]]:
    """(origin, text) of each input in order: a file, a folder's *.yaml, *.yml and *.json files in
    name order, or `-` (stdin). ManifestError for what cannot be read."""
    out: list[tuple[str, str]] = []
    errors: list[str] = []
    for source in sources:
        if source == "-":
            out.append(("<stdin>", (stdin or sys.stdin).read()))
            continue
        path = Path(source)
        try:
            if path.is_dir():
                files = sorted(p for p in path.iterdir() if p.suffix in MANIFEST_SUFFIXES and p.is_file())
                out.extend((str(p), p.read_text(encoding="utf-8")) for p in files)
            else:
                out.append((source, path.read_text(encoding="utf-8")))
        except (OSError, UnicodeDecodeError) as exc:
            errors.append(f"{source}: cannot be read: {getattr(exc, 'strerror', None) or exc}")
    if errors:
        raise ManifestError(errors)
    return out


def as_map(value: Any) -> Obj:
    """The value as an object, or an empty one (the typed accessors report what it should have been)."""
    return dict(value) if isinstance(value, Mapping) else {}
