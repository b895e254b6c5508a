"""Forms as mtkit serve's APIs receive them: multipart/form-data parsed in one place (`form_parts`: its text fields
and its file parts, for every API and every upload), a form's text fields (urlencoded or multipart), and an upload's
file with its fields. Pure functions of bytes: no HTTP framework.
"""

from __future__ import annotations

import email.parser
import email.policy
from dataclasses import dataclass
from urllib.parse import parse_qsl

from mtkit.serve.request import RequestError

MALFORMED = "malformed multipart/form-data body (no boundary or no parts)"


@dataclass(frozen=True)
class FormPart:
    """One part of a multipart/form-data body: its field name (None: a part without one), its file name (None: a
    text field), its bytes and the charset it declares (None: none)."""

    name: str | None
    filename: str | None
    data: bytes
    charset: str | None = None

    def text(self, charset: bool = True) -> str:
        """The part as text: in its declared charset (with `charset`, else UTF-8), a 400 naming the field if not."""
        try:
            return self.data.decode((self.charset if charset else None) or "utf-8")
        except (UnicodeDecodeError, LookupError):
            raise RequestError(400, f"{self.name}: not valid UTF-8 text") from None


def form_parts(body: bytes, content_type: str) -> list[FormPart]:
    """A multipart/form-data body's parts in order, read by the standard library's MIME parser; a body without a
    boundary or parts is a 400."""
    message = email.parser.BytesParser(policy=email.policy.HTTP).parsebytes(
        b"Content-Type: " + content_type.encode("latin-1", "replace") + b"\r\n\r\n" + body
    )
    if not message.is_multipart():
        raise RequestError(400, MALFORMED)
    parts = []
    for part in message.iter_parts():
        name = part.get_param("name", header="content-disposition")
        filename = part.get_filename()
        parts.append(
            FormPart(
                name if isinstance(name, str) else None,
                None if filename is None else str(filename),
                part.get_payload(decode=True) or b"",
                part.get_content_charset(),
            )
        )
    return parts


def form_fields(body: bytes, content_type: str) -> dict[str, str]:
    """A urlencoded or multipart/form-data body's text fields (the first of a repeated name); file parts refused."""
    if not body.strip():
        return {}
    fields: dict[str, str] = {}
    if content_type.lower().startswith("multipart/form-data"):
        for part in form_parts(body, content_type):
            if part.name is None:
                raise RequestError(400, "malformed multipart/form-data body: a part without a name")
            if part.filename is not None:
                raise RequestError(400, f"{part.name}: files are not accepted here; send text fields")
            fields.setdefault(part.name, part.text())
        return fields
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise RequestError(400, f"request body is not valid UTF-8 (byte {exc.start})") from None
    for name, value in parse_qsl(text, keep_blank_values=True):
        fields.setdefault(name, value)
    return fields


def file_upload(body: bytes, content_type: str) -> tuple[dict[str, str], str, bytes]:
    """An upload's text fields (the first of a repeated name), and its `file` part's name and bytes (400 without
    one)."""
    if not content_type.lower().startswith("multipart/form-data"):
        raise RequestError(400, "Invalid request: send the file as multipart/form-data with a file field")
    fields: dict[str, str] = {}
    upload: tuple[str, bytes] | None = None
    for part in form_parts(body, content_type):
        if part.name == "file" and part.filename is not None:
            upload = (part.filename, part.data)
        elif part.name is not None:
            fields.setdefault(part.name, part.data.decode("utf-8", "replace"))
    if upload is None:
        raise RequestError(400, "Invalid request: missing file parameter")
    return fields, *upload
