"""A small client of Opik's REST API (``/v1/private/...``): only the calls tracking needs.

We speak Opik's documented REST API ourselves instead of using its Python SDK, which pulls LiteLLM's dependency
tree and starts background threads (docs/tracking.md). Every request goes through the
bounded transport (``open_rag_eval.transport``: a total deadline, a bounded reply, no redirects followed), with the
API key -- read from an environment variable -- in the ``Authorization`` header and the workspace in
``Comet-Workspace``, as Opik's own clients send them. 429, 5xx and connection failures are retried a few times;
anything else that is not 2xx is an ``OpikError`` naming the call and the status (the reply's text is cut and any
secret removed).
"""

from __future__ import annotations

import asyncio
import base64
import json
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx2

from open_rag_eval.core.redaction import cut, safe_url
from open_rag_eval.transport import ReplyRefused, bounded_client

__all__ = ["LOCAL_UPLOAD", "OpikClient", "OpikError"]

LOCAL_UPLOAD = "BEMinIO"  # upload-start's upload_id when the server takes the file itself (no S3)
_MAX_REPLY = 20_000_000
_RETRIED = {429, 500, 502, 503, 504}


class OpikError(Exception):
    """A call to Opik failed: ``status`` the HTTP status (None: no reply)."""

    def __init__(self, message: str, status: int | None = None) -> None:
        super().__init__(message)
        self.status = status


class OpikClient:
    def __init__(self, base_url: str, *, workspace: str, api_key: str | None, timeout_s: float,
                 retries: int, backoff_s: float = 0.5) -> None:
        self.base_url = base_url.rstrip("/") + "/"
        self.retries, self.backoff_s = retries, backoff_s
        headers = {"Comet-Workspace": workspace, "Accept": "application/json"}
        if api_key:
            headers["Authorization"] = api_key
        self._auth = headers
        self._http = bounded_client(timeout_s=timeout_s, max_bytes=_MAX_REPLY)

    async def __aenter__(self) -> OpikClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self._http.aclose()

    # -- the calls --------------------------------------------------------------------------------------------

    async def dataset_id(self, name: str, new_id: str, description: str) -> str:
        """The id of the dataset ``name``, created (with ``new_id``) when it does not exist."""
        found = await self._dataset(name)
        if found is None:
            created = await self.call("POST", "v1/private/datasets", {"id": new_id, "name": name,
                                                                      "description": description}, ok=(409,))
            found = new_id if created != 409 else await self._dataset(name)
            if found is None:
                raise OpikError(f"dataset {name!r} was neither found nor created")
        return found

    async def _dataset(self, name: str) -> str | None:
        reply = await self.call("POST", "v1/private/datasets/retrieve", {"dataset_name": name}, ok=(404,),
                                reply=True)
        if reply == 404:
            return None
        if not isinstance(reply, dict) or not isinstance(reply.get("id"), str):
            raise OpikError("POST v1/private/datasets/retrieve: the reply has no dataset id")
        return reply["id"]

    async def call(self, method: str, path: str, body: Any = None, *, ok: tuple[int, ...] = (),
                   reply: bool = False, params: dict[str, str] | None = None, content: bytes | None = None) -> Any:
        """One request with retries. A status in ``ok`` is returned as the int; else the parsed JSON reply
        (``reply``) or None."""
        absolute = path.startswith(("http://", "https://"))
        url = path if absolute else self.base_url + path
        what = f"{method} {safe_url(path) if absolute else path}"
        for attempt in range(self.retries + 1):
            try:
                response = await self._http.request(method, url, json=body if content is None else None,
                                                     content=content, params=params, headers=self._auth)
            except ReplyRefused as error:
                raise OpikError(f"{what}: {error.reason}") from None
            except httpx2.TransportError as error:
                if attempt < self.retries:
                    await asyncio.sleep(self.backoff_s * 2**attempt)
                    continue
                raise OpikError(f"{what}: no reply from {safe_url(self.base_url)} "
                                f"({type(error).__name__}: {error or 'timed out'})") from None
            if response.status_code in _RETRIED and attempt < self.retries:
                await asyncio.sleep(self.backoff_s * 2**attempt)
                continue
            break
        status = response.status_code
        if status in ok:
            return status
        if not 200 <= status < 300:
            raise OpikError(f"{what}: HTTP {status}: {cut(response.text, 200)}", status)
        if not reply:
            return None
        try:
            return json.loads(response.content)
        except ValueError:
            raise OpikError(f"{what}: the reply is not JSON: {cut(response.text, 120)!r}", status) from None

    async def attach(self, path: Path, *, trace_id: str, project: str, mime_type: str, name: str | None = None) -> None:
        """Upload a file as an attachment of a trace, named ``name`` (default: the file's name): upload-start, then
        either a PUT to the server itself (a local Opik) or to the pre-signed URL it gave (S3; without our headers)
        and upload-complete."""
        data = path.read_bytes()
        where = {"file_name": name or path.name, "entity_type": "trace", "entity_id": trace_id, "project_name": project,
                 "mime_type": mime_type}
        started = await self.call("POST", "v1/private/attachment/upload-start", {
            **where, "num_of_file_parts": 1, "path": base64.b64encode(self.base_url.encode()).decode()}, reply=True)
        upload_id, urls = _upload(started)
        if upload_id == LOCAL_UPLOAD:
            if _origin(urls[0]) != _origin(self.base_url):
                raise OpikError(f"upload-start named another host for a local upload: {safe_url(urls[0])}")
            await self.call("PUT", urls[0], content=data)
            return
        try:
            put = await self._http.put(urls[0], content=data)  # a pre-signed URL: no Authorization header
        except (httpx2.TransportError, ReplyRefused) as error:
            raise OpikError(f"uploading {path.name} to the pre-signed URL failed: {error}") from None
        if not 200 <= put.status_code < 300:
            raise OpikError(f"uploading {path.name} to the pre-signed URL: HTTP {put.status_code}", put.status_code)
        await self.call("POST", "v1/private/attachment/upload-complete", {
            **where, "file_size": len(data), "upload_id": upload_id,
            "uploaded_file_parts": [{"e_tag": put.headers.get("etag", ""), "part_number": 1}]})


def _upload(started: Any) -> tuple[str, list[str]]:
    if (not isinstance(started, dict) or not isinstance(started.get("upload_id"), str)
            or not isinstance(started.get("pre_sign_urls"), list) or not started["pre_sign_urls"]
            or not all(isinstance(url, str) for url in started["pre_sign_urls"])):
        raise OpikError("POST v1/private/attachment/upload-start: the reply has no upload_id and pre_sign_urls")
    return started["upload_id"], started["pre_sign_urls"]


def _origin(url: str) -> tuple[str, str]:
    parts = urlsplit(url)
    return parts.scheme, parts.netloc
