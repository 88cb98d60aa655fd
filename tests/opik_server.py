"""A fake Opik server on loopback that records every REST call, for the Opik tracking tests.

Opik's own server (Java, ClickHouse, MySQL, Redis, MinIO) cannot run on the test machines, so this fake speaks the
part of its REST API (``/api/v1/private/...``) tracking uses, with the checks the real one makes that matter here:
ids must be UUID version 7, an experiment item must name an experiment, a dataset item and a trace that exist, a
feedback score a trace that exists; re-sent ids upsert (datasets items, traces, scores, experiment items) and an
experiment id sent twice is 409, as in Opik. Attachments are taken the way a local Opik takes them (upload-start
answers ``BEMinIO`` and a URL of this server).

Misbehaviour, switchable per test: ``fail`` ("METHOD /path" -> statuses answered first, one per call, consumed),
``hang`` (paths that never answer), ``bad_body`` (paths answered 200 with a body that is not JSON), ``api_key``
(other ``Authorization`` values get 401).
"""

from __future__ import annotations

import json
import threading

import uuid
from http.server import BaseHTTPRequestHandler
from typing import Any
from urllib.parse import parse_qs, urlsplit
from tests.loopback import Loopback

__all__ = ["OpikServer"]

PREFIX = "/api/v1/private/"


class OpikServer(Loopback):
    def __init__(self, *, api_key: str | None = None) -> None:
        self.api_key = api_key
        self.calls: list[dict[str, Any]] = []
        self.fail: dict[str, list[int]] = {}
        self.hang: set[str] = set()
        self.bad_body: set[str] = set()
        self.datasets: dict[str, dict[str, Any]] = {}  # name -> {id, name, description}
        self.items: dict[str, dict[str, dict[str, Any]]] = {}  # dataset name -> item id -> item
        self.experiments: dict[str, dict[str, Any]] = {}
        self.traces: dict[str, dict[str, Any]] = {}
        self.scores: dict[tuple[str, str], dict[str, Any]] = {}  # (trace id, name) -> score
        self.experiment_items: dict[str, dict[str, Any]] = {}
        self.attachments: dict[tuple[str, str], bytes] = {}  # (trace id, file name) -> bytes
        self._lock = threading.Lock()
        self._stop = threading.Event()
        super().__init__(self._handler())

    @property
    def url(self) -> str:
        return f"{self.origin}/api"

    def __exit__(self, *exc: object) -> None:
        self._stop.set()  # releases the handlers held by ``hang``
        super().__exit__(*exc)

    def paths(self) -> list[str]:
        return [f"{call['method']} {call['path']}" for call in self.calls]

    # -- the API ------------------------------------------------------------------------------------------------

    def handle(self, method: str, path: str, query: dict[str, list[str]], headers: dict[str, str],
               body: Any) -> tuple[int, Any]:
        if self.api_key is not None and headers.get("authorization") != self.api_key:
            return 401, {"errors": ["unauthorized"]}
        route = f"{method} {path}"
        if route == "POST datasets/retrieve":
            found = self.datasets.get(body["dataset_name"])
            return (200, found) if found else (404, {"errors": ["Dataset not found"]})
        if route == "POST datasets":
            if body["name"] in self.datasets:
                return 409, {"errors": ["Dataset already exists"]}
            _v7(body["id"])
            self.datasets[body["name"]] = {"id": body["id"], "name": body["name"],
                                           "description": body.get("description")}
            return 201, None
        if route == "PUT datasets/items":
            if body["dataset_name"] not in self.datasets:
                return 404, {"errors": ["Dataset not found"]}
            for item in body["items"]:
                _v7(item["id"])
                assert item["source"] in ("manual", "trace", "span", "sdk") and isinstance(item["data"], dict)
                self.items.setdefault(body["dataset_name"], {})[item["id"]] = item
            return 204, None
        if route == "POST experiments":
            _v7(body["id"])
            if body["id"] in self.experiments:
                return 409, {"errors": ["Experiment already exists"]}
            if body["dataset_name"] not in self.datasets:
                return 404, {"errors": ["Dataset not found"]}
            self.experiments[body["id"]] = dict(body)
            return 201, None
        if method == "PATCH" and path.startswith("experiments/"):
            experiment = self.experiments.get(path.split("/")[1])
            if experiment is None:
                return 404, {"errors": ["Experiment not found"]}
            experiment.update(body)
            return 204, None
        if route == "POST traces/batch":
            for trace in body["traces"]:
                _v7(trace["id"])
                assert trace["start_time"] and trace["project_name"]
                self.traces[trace["id"]] = trace
            return 204, None
        if route == "PUT traces/feedback-scores":
            for score in body["scores"]:
                if score["id"] not in self.traces:
                    return 404, {"errors": [f"trace {score['id']} not found"]}
                assert isinstance(score["value"], float | int) and score["source"] == "sdk" and score["name"]
                self.scores[(score["id"], score["name"])] = score
            return 204, None
        if route == "POST experiments/items":
            known = {item_id for items in self.items.values() for item_id in items}
            for item in body["experiment_items"]:
                _v7(item["id"])
                if (item["experiment_id"] not in self.experiments or item["trace_id"] not in self.traces
                        or item["dataset_item_id"] not in known):
                    return 404, {"errors": ["experiment, trace or dataset item not found"]}
                self.experiment_items[item["id"]] = item
            return 204, None
        if route == "POST attachment/upload-start":
            where = {name: body[name] for name in ("file_name", "entity_type", "entity_id", "project_name")}
            query_string = "&".join(f"{name}={value}" for name, value in where.items())
            return 200, {"upload_id": "BEMinIO", "pre_sign_urls": [f"{self.url}/v1/private/attachment/upload?"
                                                                   f"{query_string}"]}
        if route == "PUT attachment/upload":
            if query.get("entity_id", [""])[0] not in self.traces:
                return 404, {"errors": ["trace not found"]}
            self.attachments[(query["entity_id"][0], query["file_name"][0])] = body
            return 204, None
        return 404, {"errors": [f"no route {route}"]}

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        fake = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                self._serve("POST")

            def do_PUT(self) -> None:
                self._serve("PUT")

            def do_PATCH(self) -> None:
                self._serve("PATCH")

            def _serve(self, method: str) -> None:
                parts = urlsplit(self.path)
                raw = self.rfile.read(int(self.headers.get("content-length") or 0))
                path = parts.path[len(PREFIX):] if parts.path.startswith(PREFIX) else parts.path
                headers = {name.lower(): value for name, value in self.headers.items()}
                try:
                    body: Any = json.loads(raw) if "json" in headers.get("content-type", "") else raw
                except ValueError:
                    body = raw
                route = f"{method} /{path}"
                with fake._lock:
                    fake.calls.append({"method": method, "path": f"/{path}", "query": parts.query,
                                       "headers": headers, "body": body})
                    failing = fake.fail.get(route)
                    status = failing.pop(0) if failing else None
                if route.split("?")[0] in fake.hang:
                    fake._stop.wait(30)
                    return
                if status is not None:
                    return self._send(status, {"errors": ["simulated failure"]})
                if route in fake.bad_body:
                    return self._send(200, b"<html>not json</html>")
                try:
                    with fake._lock:
                        status, reply = fake.handle(method, path, parse_qs(parts.query), headers, body)
                except (AssertionError, KeyError, TypeError, ValueError) as error:
                    status, reply = 400, {"errors": [f"bad request: {error!r}"]}
                self._send(status, reply)

            def _send(self, status: int, reply: Any) -> None:
                data = reply if isinstance(reply, bytes) else b"" if reply is None else json.dumps(reply).encode()
                self.send_response(status)
                if data:
                    self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        return Handler


def _v7(value: str) -> None:
    if uuid.UUID(value).version != 7:
        raise ValueError(f"id must be a version 7 UUID: {value}")


