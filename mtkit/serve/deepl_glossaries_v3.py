"""DeepL's /v3/glossaries (multilingual glossaries) on mtkit serve, as DeepL's SDKs call them: create with one
dictionary per language pair, list, get, a dictionary's entries, rename and merge entries in (PATCH), replace a
dictionary (PUT), delete a glossary or one dictionary; each the request's key's. A dictionary is kept as a v2
GlossaryRecord of the StateStore under the owner's v3 name (V3_OWNER), so /v2/glossaries never lists it; DeepL's
text and document requests take either kind (V3Glossaries.terms, which the app hands to DeepLApi). No HTTP framework
but the routes.
"""

# No `from __future__ import annotations`: FastAPI reads the routes' annotations (Request) as objects.

import time
import uuid
from datetime import UTC, datetime
from typing import Any

from mtkit.serve.deepl_api import DeepLApi, request_fields
from mtkit.serve.deepl_request import (
    MAX_GLOSSARY_ENTRIES,
    entries_tsv,
    glossary_entries,
    language,
    string_field,
)
from mtkit.serve.http_body import BodyReader
from mtkit.serve.request import RequestError
from mtkit.serve.state import GlossaryRecord, owner_of
from mtkit.text.glossary import Glossary

MAX_DICTIONARIES = 20  # language pairs per glossary; each dictionary is one stored glossary
SEPARATOR = "~"  # a dictionary's stored id: GLOSSARY_ID~src-tgt (a uuid holds no "~")


def v3_owner(key: str | None) -> str:
    """Whom a v3 glossary's dictionaries are stored under: the key's owner, marked, so /v2/glossaries (which lists
    the owner's own) never shows them."""
    return "v3:" + owner_of(key)


def dictionary_id(glossary_id: str, source: str, target: str) -> str:
    return f"{glossary_id}{SEPARATOR}{source}-{target}"


def multilingual_info(glossary_id: str, dictionaries: list[GlossaryRecord]) -> dict[str, Any]:
    """A glossary as DeepL's MultilingualGlossaryInfo reads it."""
    first = dictionaries[0]
    created = datetime.fromtimestamp(first.created, UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    listed = [{"source_lang": d.source_lang, "target_lang": d.target_lang, "entry_count": d.entry_count}
              for d in dictionaries]  # fmt: skip
    return {"glossary_id": glossary_id, "name": first.name, "creation_time": created, "dictionaries": listed}


def pair_fields(fields: dict[str, Any]) -> tuple[str, str]:
    """source_lang and target_lang, both needed (400 naming the one missing)."""
    for name in ("source_lang", "target_lang"):
        if not string_field(fields, name):
            raise RequestError(400, f"Parameter '{name}' not specified.")
    return language(string_field(fields, "source_lang"), "source_lang"), language(
        string_field(fields, "target_lang"), "target_lang"
    )


def dictionaries_field(fields: dict[str, Any]) -> list[dict[str, Any]]:
    """`dictionaries`, a list of objects (JSON, or a form's dictionaries[N].field), at most MAX_DICTIONARIES; [] when
    the request has none."""
    given = fields.get("dictionaries", [])
    if not isinstance(given, list) or not all(isinstance(d, dict) for d in given):
        raise RequestError(400, "Missing or invalid argument: dictionaries, a list of objects")
    if len(given) > MAX_DICTIONARIES:
        raise RequestError(400, f"Too many dictionaries: {len(given)}, at most {MAX_DICTIONARIES}")
    return given


def merged(old: tuple[tuple[str, str], ...], new: list[tuple[str, str]]) -> list[tuple[str, str]]:
    """DeepL's PATCH of a dictionary: a given source term's target replaces the one kept, new terms come after."""
    entries = dict(old) | dict(new)
    if len(entries) > MAX_GLOSSARY_ENTRIES:
        raise RequestError(400, f"Invalid glossary entries: {len(entries)}, at most {MAX_GLOSSARY_ENTRIES}")
    return list(entries.items())


def dictionary_info(record: GlossaryRecord) -> dict[str, Any]:
    return {"source_lang": record.source_lang, "target_lang": record.target_lang, "entry_count": record.entry_count}


class V3Glossaries:
    """The v3 glossaries of a DeepLApi's store and keys; `terms` is what its translations call for an id that no v2
    glossary has."""

    def __init__(self, deepl: DeepLApi) -> None:
        self.deepl = deepl
        self.service, self.cfg, self.stored = deepl.service, deepl.cfg, deepl.stored

    async def terms(self, key: str | None, glossary_id: str, source: str | None, target: str) -> Glossary:
        """The glossary's dictionary of the request's pair (404: no such glossary; 400: none of that pair)."""
        if not await self.v3_dictionaries(key, glossary_id):
            raise RequestError(404, "Glossary not found")
        stored = dictionary_id(glossary_id, source or "", target)
        found = await self.stored("glossary", v3_owner(key), stored, True)
        if found is None:
            raise RequestError(400, f"The glossary has no dictionary for {(source or '?').upper()}->{target.upper()}")
        return Glossary(found.entries)

    async def v3_dictionaries(self, key: str | None, glossary_id: str) -> list[GlossaryRecord]:
        """The key's glossary's dictionaries, in the order they were given (none: no such glossary)."""
        prefix = glossary_id + SEPARATOR
        return [r for r in await self.stored("glossaries", v3_owner(key)) if r.glossary_id.startswith(prefix)]

    async def v3_glossaries(self, key: str | None) -> list[tuple[str, list[GlossaryRecord]]]:
        """The key's glossaries, each with its dictionaries, oldest first."""
        grouped: dict[str, list[GlossaryRecord]] = {}
        for record in await self.stored("glossaries", v3_owner(key)):
            grouped.setdefault(record.glossary_id.split(SEPARATOR)[0], []).append(record)
        return list(grouped.items())

    async def create_v3_glossary(self, fields: dict[str, Any], key: str | None) -> dict[str, Any]:
        """POST /v3/glossaries: name, dictionaries [{source_lang, target_lang, entries, entries_format}], each a
        pair the server translates, once; every dictionary checked before any is kept."""
        name = string_field(fields, "name")
        if not name.strip():
            raise RequestError(400, "Missing or invalid argument: name")
        given = dictionaries_field(fields)
        if not given:
            raise RequestError(400, "Missing or invalid argument: dictionaries, a list of objects")
        glossary_id, now = str(uuid.uuid4()), time.time()
        checked: list[tuple[GlossaryRecord, list[tuple[str, str]]]] = []
        for number, dictionary in enumerate(given):
            source, target, entries = self.served_dictionary(dictionary)
            if any((r.source_lang, r.target_lang) == (source, target) for r, _ in checked):
                raise RequestError(400, f"dictionaries[{number}]: a second dictionary for {source}->{target}")
            stored = dictionary_id(glossary_id, source, target)
            # Each dictionary a little later: the store lists by creation time, so they come back in order.
            created = now + number * 1e-3
            record = GlossaryRecord(stored, v3_owner(key), name, source, target, created, len(entries))
            checked.append((record, entries))
        for record, entries in checked:
            await self.stored("create_glossary", record, entries)
        return multilingual_info(glossary_id, [record for record, _ in checked])

    async def v3_glossary(self, key: str | None, glossary_id: str) -> list[GlossaryRecord]:
        found = await self.v3_dictionaries(key, glossary_id)
        if not found:
            raise RequestError(404, "Glossary not found")
        return found

    def served_dictionary(self, dictionary: dict[str, Any]) -> tuple[str, str, list[tuple[str, str]]]:
        """A dictionary's pair, which the server must translate, and its entries (400 naming what is wrong)."""
        source, target = pair_fields(dictionary)
        if (source, target) not in self.service.router.by_pair:
            raise RequestError(400, f"Unsupported glossary language pair: {source.upper()}->{target.upper()}")
        entries = glossary_entries(
            string_field(dictionary, "entries"), string_field(dictionary, "entries_format", "tsv")
        )
        return source, target, entries

    async def update_v3(self, key: str | None, glossary_id: str, fields: dict[str, Any]) -> dict[str, Any]:
        """PATCH /v3/glossaries/{id}: a new name and/or dictionaries, each merged into the glossary's of its pair (or
        added); everything checked before anything is kept."""
        found = await self.v3_glossary(key, glossary_id)
        name = string_field(fields, "name", found[0].name)
        given = dictionaries_field(fields)
        if not name.strip() or ("name" not in fields and not given):
            raise RequestError(400, "Missing or invalid argument: name or dictionaries")
        kept = {(r.source_lang, r.target_lang): r for r in found}
        changed: dict[tuple[str, str], list[tuple[str, str]]] = {}
        for dictionary in given:
            source, target, entries = self.served_dictionary(dictionary)
            old = kept.get((source, target))
            changed[source, target] = merged(
                await self.v3_entries_of(key, old) if old is not None else (),
                changed.get((source, target), []) + entries,
            )
        if len(kept.keys() | changed.keys()) > MAX_DICTIONARIES:
            raise RequestError(400, f"Too many dictionaries: at most {MAX_DICTIONARIES}")
        for pair in kept.keys() - changed.keys():
            if name != kept[pair].name:  # a rename rewrites every dictionary: the name is kept with each
                changed[pair] = list(await self.v3_entries_of(key, kept[pair]))
        for (source, target), entries in changed.items():
            await self.keep(key, glossary_id, name, source, target, entries, kept.get((source, target)))
        return multilingual_info(glossary_id, await self.v3_glossary(key, glossary_id))

    async def replace_v3_dictionary(self, key: str | None, glossary_id: str, fields: dict[str, Any]) -> dict[str, Any]:
        """PUT /v3/glossaries/{id}/dictionaries: the dictionary of the pair given replaced by these entries (or
        added); its MultilingualGlossaryDictionaryInfo."""
        found = await self.v3_glossary(key, glossary_id)
        source, target, entries = self.served_dictionary(fields)
        old = next((r for r in found if (r.source_lang, r.target_lang) == (source, target)), None)
        if old is None and len(found) >= MAX_DICTIONARIES:
            raise RequestError(400, f"Too many dictionaries: at most {MAX_DICTIONARIES}")
        return dictionary_info(await self.keep(key, glossary_id, found[0].name, source, target, entries, old))

    async def v3_entries_of(self, key: str | None, record: GlossaryRecord) -> tuple[tuple[str, str], ...]:
        found = await self.stored("glossary", v3_owner(key), record.glossary_id, True)
        return found.entries if found is not None else ()

    async def keep(
        self,
        key: str | None,
        glossary_id: str,
        name: str,
        source: str,
        target: str,
        entries: list[tuple[str, str]],
        old: GlossaryRecord | None,
    ) -> GlossaryRecord:
        """A dictionary written anew, in the old one's place in the list; the StateStore has no update, so the old
        record goes first (a translation between the two reads no dictionary of this pair, a 400)."""
        created = old.created if old is not None else time.time()
        record = GlossaryRecord(
            dictionary_id(glossary_id, source, target), v3_owner(key), name, source, target, created, len(entries)
        )
        if old is not None:
            await self.stored("delete_glossary", old.owner, old.glossary_id)
        await self.stored("create_glossary", record, entries)
        return record

    async def v3_entries(self, key: str | None, glossary_id: str, fields: dict[str, Any]) -> dict[str, Any]:
        """GET /v3/glossaries/{id}/entries?source_lang=&target_lang=: that dictionary's entries as TSV."""
        source, target = pair_fields(fields)
        await self.v3_glossary(key, glossary_id)
        found = await self.stored("glossary", v3_owner(key), dictionary_id(glossary_id, source, target), True)
        if found is None:
            raise RequestError(404, f"The glossary has no dictionary for {source.upper()}->{target.upper()}")
        dictionary = {"source_lang": source, "target_lang": target, "entries": entries_tsv(found.entries)}
        return {"dictionaries": [dictionary | {"entries_format": "tsv"}]}

    async def delete_v3(self, key: str | None, glossary_id: str, pair: tuple[str, str] | None = None) -> None:
        """The glossary, or its dictionary of `pair`; 404 when there is none."""
        found = await self.v3_glossary(key, glossary_id)
        doomed = [r for r in found if pair is None or (r.source_lang, r.target_lang) == pair]
        if not doomed:
            raise RequestError(404, "The glossary has no dictionary for this language pair")
        for record in doomed:
            await self.stored("delete_glossary", record.owner, record.glossary_id)


def add_v3_glossary_routes(app: Any, glossaries: V3Glossaries, reader: BodyReader) -> None:
    """/v3/glossaries on the FastAPI app, each request's body read by `reader` within its limits."""
    from fastapi import Request
    from fastapi.responses import JSONResponse, Response

    async def fields_of(request: Request, max_bytes: int | None = None) -> tuple[dict[str, Any], str | None]:
        return await request_fields(glossaries.deepl, reader, request, max_bytes)

    @app.post("/v3/glossaries")
    async def deepl_v3_create(request: Request) -> JSONResponse:
        fields, key = await fields_of(request, glossaries.cfg.max_file_bytes)
        return JSONResponse(await glossaries.create_v3_glossary(fields, key), status_code=201)

    @app.get("/v3/glossaries")
    async def deepl_v3_list(request: Request) -> JSONResponse:
        _, key = await fields_of(request)
        found = await glossaries.v3_glossaries(key)
        return JSONResponse({"glossaries": [multilingual_info(gid, dictionaries) for gid, dictionaries in found]})

    @app.get("/v3/glossaries/{glossary_id}")
    async def deepl_v3_glossary(glossary_id: str, request: Request) -> JSONResponse:
        _, key = await fields_of(request)
        return JSONResponse(multilingual_info(glossary_id, await glossaries.v3_glossary(key, glossary_id)))

    @app.get("/v3/glossaries/{glossary_id}/entries")
    async def deepl_v3_entries(glossary_id: str, request: Request) -> JSONResponse:
        fields, key = await fields_of(request)
        return JSONResponse(await glossaries.v3_entries(key, glossary_id, fields))

    @app.patch("/v3/glossaries/{glossary_id}")
    async def deepl_v3_update(glossary_id: str, request: Request) -> JSONResponse:
        fields, key = await fields_of(request, glossaries.cfg.max_file_bytes)
        return JSONResponse(await glossaries.update_v3(key, glossary_id, fields))

    @app.put("/v3/glossaries/{glossary_id}/dictionaries")
    async def deepl_v3_replace_dictionary(glossary_id: str, request: Request) -> JSONResponse:
        fields, key = await fields_of(request, glossaries.cfg.max_file_bytes)
        return JSONResponse(await glossaries.replace_v3_dictionary(key, glossary_id, fields))

    @app.delete("/v3/glossaries/{glossary_id}")
    async def deepl_v3_delete(glossary_id: str, request: Request) -> Response:
        _, key = await fields_of(request)
        await glossaries.delete_v3(key, glossary_id)
        return Response(status_code=204)

    @app.delete("/v3/glossaries/{glossary_id}/dictionaries")
    async def deepl_v3_delete_dictionary(glossary_id: str, request: Request) -> Response:
        fields, key = await fields_of(request)
        await glossaries.delete_v3(key, glossary_id, pair_fields(fields))
        return Response(status_code=204)
