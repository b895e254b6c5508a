"""DeepL's v2 API on mtkit serve: /v2/translate, /v2/languages, /v2/usage, /v2/glossary-language-pairs and the
glossaries, translated by the service every API shares (mtkit.serve.service: models, keys' limits, sentence
splitting, HTML, guard); glossaries and usage kept in a StateStore (mtkit.serve.state). Documents: deepl_documents.

Request parsing and answer shapes live in mtkit.serve.deepl_request; errors are RequestErrors, which the app
answers in DeepL's shape ({"message": ...}) under /v2/. No HTTP framework here but the routes' registration.
"""

# No `from __future__ import annotations`: FastAPI reads the routes' annotations (Request) as objects.

import asyncio
import re
import time
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any

from mtkit.engines.options import TranslateOptions
from mtkit.serve.api_keys import KeyLimiter
from mtkit.serve.config import ServeConfig
from mtkit.serve.deepl_request import (
    DeepLTranslate,
    auth_key,
    body_fields,
    entries_tsv,
    glossary_entries,
    language,
    languages_answer,
    parse_translate,
    read_character_limits,
    string_field,
    translation_answer,
)
from mtkit.serve.http_body import BodyReader
from mtkit.serve.memory_state import ServedMemories
from mtkit.serve.request import RequestError
from mtkit.serve.service import TranslationService
from mtkit.serve.state import GlossaryRecord, SqliteState, StateStore, default_state_path, is_redis, owner_of
from mtkit.text.glossary import Glossary

QUOTA_STATUS = 456  # DeepL's "Quota exceeded"; its SDKs raise QuotaExceededException for it
IGNORED = ' translate="no" data-mtkit-ignored=""'  # put into an ignore_tags element's start tag, taken out after


class DeepLApi:
    """What the DeepL endpoints share: the translation service, the keys and their limits, each key's characters,
    and the state store, opened on first use (a server whose clients never call DeepL's API never touches the disk)."""

    def __init__(
        self,
        service: TranslationService,
        cfg: ServeConfig,
        limiter: KeyLimiter | None,
        name: Callable,
        shared: StateStore | None = None,
    ) -> None:
        self.service, self.cfg, self.limiter, self.name = service, cfg, limiter, name
        # Glossaries of another kind, by id, for an id no v2 glossary has (the app gives DeepL's v3 ones').
        self.more_glossaries: Callable[[str | None, str, str | None, str], Awaitable[Glossary]] | None = None
        self.character_limits = read_character_limits(cfg.character_limits) if cfg.character_limits else {}
        path = cfg.state if cfg.state and not is_redis(cfg.state) else None
        self._state: StateStore | None = SqliteState(path) if path else None  # a bad --state fails at start
        if shared is not None:  # --state redis://...: the store the replicas share (mtkit.serve.redis_state)
            self._state = shared
        self._opening = asyncio.Lock()
        self.memories = ServedMemories(self.state)

    async def state(self) -> StateStore:
        async with self._opening:
            if self._state is None:
                self._state = await asyncio.to_thread(SqliteState, default_state_path())
        return self._state

    async def stored(self, method: str, *args: Any) -> Any:
        """A StateStore method called off the event loop (SQLite blocks)."""
        return await asyncio.to_thread(getattr(await self.state(), method), *args)

    def admit(self, headers: Any, fields: dict[str, Any]) -> str | None:
        """The request's key, checked against --api-keys when the server has keys (403 / 429)."""
        key = auth_key(headers.get("authorization", ""), fields)
        if self.limiter is not None:
            self.limiter.admit(key, time.monotonic())
        return key

    async def charge(self, key: str | None, characters: int) -> None:
        """456 when the key's --character-limits would be passed by `characters` more."""
        limit = self.character_limits.get(key or "")
        if limit is not None and await self.stored("characters", owner_of(key)) + characters > limit:
            raise RequestError(QUOTA_STATUS, "Quota exceeded: this key's character limit is reached")

    async def usage(self, key: str | None) -> dict[str, int]:
        answer = {"character_count": await self.stored("characters", owner_of(key))}
        if key in self.character_limits:
            answer["character_limit"] = self.character_limits[key or ""]
        return answer

    async def translate(self, fields: dict[str, Any], key: str | None) -> dict[str, Any]:
        """POST /v2/translate: each text by the model of its (given or detected) source language."""
        request = parse_translate(fields)
        terms = await self.glossary_terms(key, request.glossary_id, request.source, request.target)
        billed = sum(len(text) for text in request.texts)
        await self.charge(key, billed)
        languages = await self.source_languages(request)
        html = bool(request.tag_handling)
        texts = [ignoring(text, request.ignore_tags) for text in request.texts] if html else request.texts
        options = await self.memory_options(key, request.memory_id, request.memory_threshold, request.source,
                                            request.target)  # fmt: skip
        options = replace(options, glossary=terms)
        done = await self.service.translate_by_source(texts, languages, request.target, options, request.split, html)
        translations = [text.replace(IGNORED, "") for text in done.texts] if html else done.texts
        await self.stored("add_characters", owner_of(key), billed)
        if options.memory is not None:
            await self.memories.used(options.memory, done.memory_segments)  # type: ignore[arg-type]
        billed_shown = request.show_billed_characters
        return translation_answer(request.texts, translations, languages, billed_shown, request.context)

    async def memory_options(
        self, key: str | None, memory_id: str, threshold: int, source: str | None, target: str
    ) -> TranslateOptions:
        """Options with the key's translation memory (404 for another key's), of the request's languages."""
        if not memory_id:
            return TranslateOptions()
        index = await self.memories.index(owner_of(key), memory_id, source, target)
        return TranslateOptions(memory=index, memory_threshold=threshold)

    async def source_languages(self, request: DeepLTranslate) -> list[str]:
        """Each text's source: source_lang, else detected among the languages that translate into the target."""
        if request.source is not None:
            self.service.route(request.source, request.target)  # 400 naming the pairs served
            return [request.source] * len(request.texts)
        router = self.service.router
        sources = router.sources(request.target)
        if not sources:
            served = ", ".join(sorted({t.upper() for _, t in router.pairs})) or "none"
            raise RequestError(
                400,
                f"Value for 'target_lang' not supported: nothing translates into "
                f"{request.target.upper()} here (targets served: {served})",
            )
        return [found.language for found in await self.service.detectors.best(request.texts, sources)]

    async def glossary_terms(
        self, key: str | None, glossary_id: str, source: str | None, target: str
    ) -> Glossary | None:
        """The key's glossary (404 for another key's), which must be of the request's languages; applied by
        mtkit.text's glossary machinery, sentence by sentence."""
        if not glossary_id:
            return None
        found = await self.stored("glossary", owner_of(key), glossary_id, True)
        if found is None and self.more_glossaries is not None:
            return await self.more_glossaries(key, glossary_id, source, target)  # DeepL's v3 (multilingual) ones
        if found is None:
            raise RequestError(404, "Glossary not found")
        if (found.source_lang, found.target_lang) != (source, target):
            raise RequestError(
                400,
                f"The glossary is {found.source_lang.upper()}->{found.target_lang.upper()}, "
                f"the request {(source or '?').upper()}->{target.upper()}",
            )
        return Glossary(found.entries)

    def languages(self, kind: str) -> list[dict[str, Any]]:
        if kind not in ("source", "target"):
            raise RequestError(400, "Value for 'type' not supported: source or target")
        pairs = self.service.router.pairs
        codes = sorted({pair[0] if kind == "source" else pair[1] for pair in pairs})
        return languages_answer(codes, kind, self.name)

    async def create_glossary(self, fields: dict[str, Any], key: str | None) -> dict[str, Any]:
        """POST /v2/glossaries: name, source_lang, target_lang, entries, entries_format (tsv or csv)."""
        name = string_field(fields, "name")
        if not name.strip():
            raise RequestError(400, "Missing or invalid argument: name")
        source = language(string_field(fields, "source_lang"), "source_lang")
        target = language(string_field(fields, "target_lang"), "target_lang")
        if (source, target) not in self.service.router.by_pair:
            raise RequestError(400, f"Unsupported glossary language pair: {source.upper()}->{target.upper()}")
        entries = glossary_entries(string_field(fields, "entries"), string_field(fields, "entries_format", "tsv"))
        record = GlossaryRecord(str(uuid.uuid4()), owner_of(key), name, source, target, time.time(), len(entries))
        await self.stored("create_glossary", record, entries)
        return glossary_info(record)

    async def glossary(self, key: str | None, glossary_id: str, entries: bool = False) -> GlossaryRecord:
        found = await self.stored("glossary", owner_of(key), glossary_id, entries)
        if found is None:
            raise RequestError(404, "Glossary not found")
        return found


def glossary_info(record: GlossaryRecord) -> dict[str, Any]:
    """A glossary as DeepL describes it."""
    created = datetime.fromtimestamp(record.created, UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    return {
        "glossary_id": record.glossary_id,
        "name": record.name,
        "ready": True,
        "source_lang": record.source_lang,
        "target_lang": record.target_lang,
        "creation_time": created,
        "entry_count": record.entry_count,
    }


def ignoring(text: str, tags: list[str]) -> str:
    """The markup with each ignore_tags element's start tag marked translate="no" (IGNORED, taken out after), so
    the markup keeps its content as written."""
    for tag in tags:
        text = re.sub(rf"<{re.escape(tag)}(?=[\s/>])", lambda found: found.group(0) + IGNORED, text)
    return text


async def read_body(reader: BodyReader, request: Any, max_bytes: int | None = None) -> bytes:
    """A DeepL request's body within --max-bytes, or `max_bytes` (glossaries, documents: --max-file-bytes)."""
    return await reader.body(request, max_bytes, "--max-file-bytes" if max_bytes else "--max-bytes")


async def request_fields(
    deepl: DeepLApi, reader: BodyReader, request: Any, max_bytes: int | None = None
) -> tuple[dict[str, Any], str | None]:
    """A DeepL request's fields (JSON, a form, the query) and its key, admitted by the key's limits."""
    body = await read_body(reader, request, max_bytes)
    fields = body_fields(body, request.headers.get("content-type", ""), request.url.query)
    return fields, deepl.admit(request.headers, fields)


def add_deepl_routes(app: Any, deepl: DeepLApi, reader: BodyReader) -> None:
    """DeepL's routes on the FastAPI app, each request's body read by `reader` within its limits."""
    from fastapi import Request
    from fastapi.responses import JSONResponse, Response

    async def fields_of(request: Request, max_bytes: int | None = None) -> tuple[dict[str, Any], str | None]:
        return await request_fields(deepl, reader, request, max_bytes)

    @app.post("/v2/translate")
    async def deepl_translate(request: Request) -> JSONResponse:
        fields, key = await fields_of(request)
        return JSONResponse(await deepl.translate(fields, key))

    @app.api_route("/v2/languages", methods=["GET", "POST"])
    async def deepl_languages(request: Request) -> JSONResponse:
        fields, _ = await fields_of(request)
        return JSONResponse(deepl.languages(string_field(fields, "type", "source").lower()))

    @app.api_route("/v2/usage", methods=["GET", "POST"])
    async def deepl_usage(request: Request) -> JSONResponse:
        _, key = await fields_of(request)
        return JSONResponse(await deepl.usage(key))

    @app.get("/v2/glossary-language-pairs")
    async def deepl_glossary_pairs(request: Request) -> JSONResponse:
        await fields_of(request)
        pairs = [{"source_lang": source, "target_lang": target} for source, target in deepl.service.router.pairs]
        return JSONResponse({"supported_languages": pairs})

    @app.post("/v2/glossaries")
    async def deepl_create_glossary(request: Request) -> JSONResponse:
        fields, key = await fields_of(request, deepl.cfg.max_file_bytes)
        return JSONResponse(await deepl.create_glossary(fields, key), status_code=201)

    @app.get("/v2/glossaries")
    async def deepl_list_glossaries(request: Request) -> JSONResponse:
        _, key = await fields_of(request)
        found = await deepl.stored("glossaries", owner_of(key))
        return JSONResponse({"glossaries": [glossary_info(record) for record in found]})

    @app.get("/v2/glossaries/{glossary_id}")
    async def deepl_glossary(glossary_id: str, request: Request) -> JSONResponse:
        _, key = await fields_of(request)
        return JSONResponse(glossary_info(await deepl.glossary(key, glossary_id)))

    @app.get("/v2/glossaries/{glossary_id}/entries")
    async def deepl_glossary_entries(glossary_id: str, request: Request) -> Response:
        _, key = await fields_of(request)
        found = await deepl.glossary(key, glossary_id, entries=True)
        return Response(entries_tsv(found.entries), media_type="text/tab-separated-values; charset=utf-8")

    @app.delete("/v2/glossaries/{glossary_id}")
    async def deepl_delete_glossary(glossary_id: str, request: Request) -> Response:
        _, key = await fields_of(request)
        if not await deepl.stored("delete_glossary", owner_of(key), glossary_id):
            raise RequestError(404, "Glossary not found")
        return Response(status_code=204)
