"""A small Kubernetes API client over aiohttp: kubeconfig, list, watch, bind, delete, status patches, events.

Only what the resource manager uses, in plain JSON. The kubeconfig's current context gives the
server, its CA (``certificate-authority`` or ``-data``, or ``insecure-skip-tls-verify``) and the
user's credentials (``token``, ``tokenFile``, or a client certificate and key, as files or data).
"""

from __future__ import annotations

import base64
import json
import ssl
import tempfile
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
import yaml

Json = dict[str, Any]
MAX_WATCH_LINE = 16 * 1024 * 1024  # one watch event; a pod or node is far smaller (etcd's limit is 1.5 MiB)


class KubeconfigError(ValueError):
    """The kubeconfig cannot be used: missing, unreadable, or without a usable context."""


class ApiError(Exception):
    """The API server answered with an error status."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(f"{status}: {message}")
        self.status = status


@dataclass(frozen=True)
class Connection:
    """Where the API server is and how to authenticate to it."""

    server: str
    ssl_context: ssl.SSLContext | bool
    token: str | None


def _data_file(data: str, suffix: str) -> str:
    """A base64 ``*-data`` field of a kubeconfig written to a private temporary file (ssl loads files)."""
    handle = tempfile.NamedTemporaryFile(prefix="evsched-kube-", suffix=suffix, delete=False)  # noqa: SIM115
    with handle:
        handle.write(base64.b64decode(data))
    return handle.name


def _named(items: Any, name: str, what: str, path: Path) -> Json:
    for item in items or []:
        if isinstance(item, dict) and item.get("name") == name and isinstance(item.get(what), dict):
            return dict(item[what])
    raise KubeconfigError(f"{path}: no {what} named {name!r}")


def load_kubeconfig(path: str | Path, context: str | None = None) -> Connection:
    """The connection of ``context`` (default: the current context) of the kubeconfig at ``path``."""
    path = Path(path)
    try:
        config = yaml.safe_load(path.read_text())
    except (OSError, yaml.YAMLError) as exc:
        raise KubeconfigError(f"cannot read kubeconfig {path}: {exc}") from exc
    if not isinstance(config, dict):
        raise KubeconfigError(f"{path}: not a kubeconfig")
    name = context or config.get("current-context")
    if not name:
        raise KubeconfigError(f"{path}: no current-context (name one with --context)")
    ctx = _named(config.get("contexts"), name, "context", path)
    cluster = _named(config.get("clusters"), str(ctx.get("cluster")), "cluster", path)
    user = _named(config.get("users"), str(ctx.get("user")), "user", path) if ctx.get("user") else {}
    server = cluster.get("server")
    if not isinstance(server, str) or not server:
        raise KubeconfigError(f"{path}: cluster {ctx.get('cluster')!r} has no server")
    base = path.parent

    def file_of(key: str, suffix: str, where: Json) -> str | None:
        if where.get(f"{key}-data"):
            return _data_file(str(where[f"{key}-data"]), suffix)
        if where.get(key):
            return str(base / str(where[key]))
        return None

    context_ssl: ssl.SSLContext | bool = True
    if server.startswith("https"):
        if cluster.get("insecure-skip-tls-verify"):
            context_ssl = False
        else:
            ca = file_of("certificate-authority", ".crt", cluster)
            tls = ssl.create_default_context(cafile=ca)
            cert, key = file_of("client-certificate", ".crt", user), file_of("client-key", ".key", user)
            if cert:
                tls.load_cert_chain(cert, key)
            context_ssl = tls
    token = user.get("token")
    if not token and user.get("tokenFile"):
        token = (base / str(user["tokenFile"])).read_text().strip()
    return Connection(server=server.rstrip("/"), ssl_context=context_ssl, token=str(token) if token else None)


class KubeApi:
    """One aiohttp session to the API server."""

    def __init__(self, connection: Connection, *, max_connections: int = 64) -> None:
        self.connection = connection
        headers = {"Accept": "application/json"}
        if connection.token:
            headers["Authorization"] = f"Bearer {connection.token}"
        self._session = aiohttp.ClientSession(
            headers=headers, connector=aiohttp.TCPConnector(ssl=connection.ssl_context, limit=max_connections),
            timeout=aiohttp.ClientTimeout(total=None, sock_connect=30),
        )

    async def close(self) -> None:
        await self._session.close()

    async def request(self, method: str, path: str, body: Any = None, *, params: Mapping[str, str] | None = None,
                      content_type: str = "application/json", timeout_s: float = 60.0) -> Json:
        data = None if body is None else json.dumps(body)
        async with self._session.request(
            method, self.connection.server + path, data=data, params=params,
            headers={"Content-Type": content_type}, timeout=aiohttp.ClientTimeout(total=timeout_s),
        ) as reply:
            text = await reply.text()
            if reply.status >= 400:
                raise ApiError(reply.status, _message(text))
            parsed = json.loads(text) if text else {}
            return parsed if isinstance(parsed, dict) else {}

    async def list(self, path: str, params: Mapping[str, str] | None = None) -> Json:
        """A whole collection (pages of 500 joined); its ``metadata.resourceVersion`` is where a watch starts."""
        items: list[Json] = []
        query = dict(params or {}, limit="500")
        while True:
            page = await self.request("GET", path, params=query)
            items.extend(page.get("items") or [])
            cont = (page.get("metadata") or {}).get("continue")
            if not cont:
                return {"items": items, "resourceVersion": (page.get("metadata") or {}).get("resourceVersion", "")}
            query["continue"] = cont

    async def watch(self, path: str, resource_version: str, params: Mapping[str, str] | None = None,
                    timeout_s: int = 300) -> AsyncIterator[Json]:
        """The watch events of a collection after ``resource_version`` (ends when the server closes it);
        ``ApiError(410)`` when that version is too old: list again."""
        query = dict(params or {}, watch="true", resourceVersion=resource_version, allowWatchBookmarks="true",
                     timeoutSeconds=str(timeout_s))
        async with self._session.get(self.connection.server + path, params=query,
                                     timeout=aiohttp.ClientTimeout(total=timeout_s + 30, sock_read=timeout_s + 30),
                                     read_bufsize=1 << 20, max_line_size=MAX_WATCH_LINE) as reply:
            if reply.status >= 400:
                raise ApiError(reply.status, _message(await reply.text()))
            async for line in reply.content:
                if not line.strip():
                    continue
                event = json.loads(line)
                if event.get("type") == "ERROR":
                    status = event.get("object") or {}
                    raise ApiError(int(status.get("code", 500)), str(status.get("message", "watch error")))
                yield event

    async def bind(self, namespace: str, name: str, uid: str, node: str) -> None:
        """Bind a pod to a node (the Binding subresource; the uid guards against a pod re-created under its name)."""
        body = {"apiVersion": "v1", "kind": "Binding", "metadata": {"name": name, "namespace": namespace, "uid": uid},
                "target": {"apiVersion": "v1", "kind": "Node", "name": node}}
        await self.request("POST", f"/api/v1/namespaces/{namespace}/pods/{name}/binding", body)

    async def delete_pod(self, namespace: str, name: str, uid: str) -> None:
        body = {"apiVersion": "v1", "kind": "DeleteOptions", "preconditions": {"uid": uid}}
        await self.request("DELETE", f"/api/v1/namespaces/{namespace}/pods/{name}", body)

    async def patch_pod_status(self, namespace: str, name: str, patch: Json) -> None:
        await self.request("PATCH", f"/api/v1/namespaces/{namespace}/pods/{name}/status", patch,
                           content_type="application/strategic-merge-patch+json")

    async def create_event(self, namespace: str, event: Json) -> None:
        await self.request("POST", f"/api/v1/namespaces/{namespace}/events", event)


def _message(text: str) -> str:
    try:
        status = json.loads(text)
    except ValueError:
        return text[:500]
    return str(status.get("message", text))[:500] if isinstance(status, dict) else text[:500]
