"""SubRip and WebVTT as Jobs: numbers, identifiers, timing lines (with cue settings), the header and NOTE/STYLE/REGION
blocks byte for byte. Cue texts are one flow cut into sentences (a cue boundary is no sentence end; a dialogue "-"
and a cue without words are), each sentence translated whole and spread back over its cues by their characters,
between words, then wrapped to 42-character lines, two balanced ones where they fit. Tags before a cue's first word
and after its last (<i>..</i>, <v Name>, {\\an8}) stay around it when they pair up; tags among its words (<b> on a
word, <c.x>, <00:01.000>) are dropped: no word-level place survives the spreading. WebVTT entities are decoded."""

from __future__ import annotations

import html
import re
import unicodedata
from bisect import bisect_right
from dataclasses import dataclass, field

from mtkit.documents.job import DocumentError, Job
from mtkit.documents.plain import decode_text, encode_text, one_line
from mtkit.text.sentences import split_sentences, wordy

WIDTH = 42  # characters a subtitle line holds (the common broadcast and streaming limit)
_LINE = re.compile(r"[^\r\n]*(?:\r\n|\r|\n)|[^\r\n]+$")
_SRT_TIME = re.compile(r"\d+:\d{1,2}:\d{1,2}[,.]\d{1,3}[ \t]*-->[ \t]*\d+:\d{1,2}:\d{1,2}[,.]\d{1,3}(?:[ \t].*)?")
_VTT_STAMP = r"(?:\d{2,}:)?\d{2}:\d{2}\.\d{3}"
_VTT_TIME = re.compile(rf"{_VTT_STAMP}[ \t]+-->[ \t]+{_VTT_STAMP}(?:[ \t].*)?")
_VTT_BLOCK = re.compile(r"(?:NOTE|STYLE|REGION)(?:[ \t].*)?")
_TAG = re.compile(r"<[^>\n]*>|\{\\[^}\n]*\}")  # HTML-like tags, and SSA overrides SRT files carry ({\an8})
_LEAD = re.compile(rf"(?:\s|{_TAG.pattern})*(?:-\s*(?:{_TAG.pattern}\s*)*)?")
_TRAIL = re.compile(rf"(?:\s|{_TAG.pattern})*$")
_DASH = re.compile(rf"(?:{_TAG.pattern}|\s)*-")
_NAME = re.compile(r"</?([A-Za-z]+)")
_SPLIT = re.compile(f"({_TAG.pattern})")


@dataclass
class _Part:
    """A cue's text, or one dialogue line of it: the text the flow holds, and the markup kept around it."""

    lead: str
    text: str
    trail: str
    dash: bool  # a dialogue line: starts a sentence
    out: list[str] = field(default_factory=list)  # its share of each sentence's translation, in order


@dataclass
class _Cue:
    first: int  # its text's lines: first, and one past the last
    end: int
    parts: list[_Part]


def srt_job(data: bytes, name: str, language: str) -> Job:
    """A SubRip file's cue text as sentences; numbers and timing lines as written."""
    return _job(data, name, language, vtt=False)


def vtt_job(data: bytes, name: str, language: str) -> Job:
    """A WebVTT file's cue text as sentences; the header, identifiers, timing lines with their settings and
    NOTE/STYLE/REGION blocks as written."""
    return _job(data, name, language, vtt=True)


def _job(data: bytes, name: str, language: str, vtt: bool) -> Job:
    bom, text = decode_text(data, name)
    lines = _LINE.findall(text)
    cues = [_cue(lines, first, end, vtt) for first, end in _cue_texts(lines, name, vtt)]
    parts = [part for cue in cues for part in cue.parts]
    flow, spans = "", []
    for before, part in zip([None, *parts], parts):  # a dialogue line, and music or sound marks, end a sentence
        stop = part.dash or not wordy(part.text) or before is not None and not wordy(before.text)
        flow += ("\n" if stop else " ") if flow else ""
        spans.append((len(flow), len(flow) + len(part.text)))
        flow += part.text
    segmented = split_sentences(flow, language)
    sentences, at = [], len(segmented.lead)
    for source, gap in zip(segmented.sources, segmented.gaps):
        sentences.append((source, at))
        at += len(source) + len(gap)
    texts = [source for source, _ in sentences if wordy(source)]

    owner = [i for i, cue in enumerate(cues) for _ in cue.parts]  # each part's cue

    def finish(translations: list[str]) -> bytes:
        found = iter(map(one_line, translations))
        touched = set()
        for part in parts:
            part.out = []
        for source, start in sentences:
            reached = _reached(start, len(source), spans)
            translation = next(found) if wordy(source) else source
            for (j, _), share in zip(reached, shares(translation, [held for _, held in reached])):
                parts[j].out.append(share)
            touched |= {owner[j] for j, _ in reached} if wordy(source) else set()
        out = list(lines)
        for i in sorted(touched, reverse=True):
            out[cues[i].first : cues[i].end] = _render(cues[i], lines, vtt)
        return encode_text(bom, "".join(out))

    spanning = sum(len(_reached(start, len(s), spans)) > 1 for s, start in sentences if wordy(s))
    return Job(texts, finish, {"cues": len(cues), "sentences": len(texts), "spanning": spanning})


def _cue_texts(lines: list[str], name: str, vtt: bool) -> list[tuple[int, int]]:
    """Each cue's text lines (first, one past the last); a block without a timing line where one belongs is a
    DocumentError naming its line."""
    blocks, start = [], None
    for i, line in enumerate([*lines, ""]):
        if line.strip() and start is None:
            start = i
        elif not line.strip() and start is not None:
            blocks.append((start, i))
            start = None
    if vtt and not (blocks and re.fullmatch(r"WEBVTT(?:[ \t].*)?", lines[0].rstrip("\r\n"))):
        raise DocumentError(f"{name} line 1: not a WebVTT file (it must start with WEBVTT)")
    timing = _VTT_TIME if vtt else _SRT_TIME
    cues = []
    for first, end in blocks[1:] if vtt else blocks:
        head = lines[first].strip()
        if vtt and _VTT_BLOCK.fullmatch(head):
            continue
        at = first if (vtt and "-->" in head) or (not vtt and not head.isdigit()) else first + 1
        if at >= len(lines) or not timing.fullmatch(lines[at].strip()):
            raise DocumentError(f"{name} line {at + 1}: not a timing line")
        cues.append((at + 1, end))
    return cues


def _cue(lines: list[str], first: int, end: int, vtt: bool) -> _Cue:
    """A cue's text as parts: one, or one per dialogue line (a line that starts with "-")."""
    groups: list[list[str]] = []
    for line in lines[first:end]:
        if not groups or _DASH.match(line):
            groups.append([])
        groups[-1].append(line.strip())
    return _Cue(first, end, [_part(" ".join(group), vtt) for group in groups])


def _part(written: str, vtt: bool) -> _Part:
    lead = _LEAD.match(written).group()
    trail = _TRAIL.search(written, len(lead)).group()
    middle = _TAG.sub("", written[len(lead) : len(written) - len(trail)])  # tags among the words: dropped
    kept = _paired(_TAG.findall(lead), _TAG.findall(trail))
    lead = "".join(piece for piece in _SPLIT.split(lead) if not _TAG.fullmatch(piece) or piece in kept)
    trail = "".join(piece for piece in _SPLIT.split(trail) if not _TAG.fullmatch(piece) or piece in kept)
    text = " ".join((html.unescape(middle) if vtt else middle).split())
    return _Part(lead, text, trail.strip(), _DASH.match(written) is not None)


def _paired(opening: list[str], closing: list[str]) -> set[str]:
    """The tags kept around a part: a start tag whose end tag is among the closing ones (and that end tag), a voice
    <v> (its end tag is optional), and SSA overrides."""
    ends = {_name(tag) for tag in closing if tag.startswith("</")}
    starts = [tag for tag in opening if tag[1:2].isalpha() and _name(tag) in ends | {"v"}]
    names = {_name(tag) for tag in starts}
    closes = [tag for tag in closing if tag.startswith("</") and _name(tag) in names]
    return {tag for tag in opening + closing if tag.startswith("{")} | set(starts) | set(closes)


def _name(tag: str) -> str:
    name = _NAME.match(tag)
    return name.group(1).lower() if name else ""


def _reached(start: int, size: int, spans: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """(part, how many of the sentence's characters it holds) for each part the sentence reaches into."""
    reached = []
    for j in range(max(bisect_right(spans, (start, start)) - 1, 0), len(spans)):
        low, high = spans[j]
        if low >= start + size:
            break
        if high > start:
            reached.append((j, min(high, start + size) - max(low, start)))
    return reached


def shares(translation: str, weights: list[int]) -> list[str]:
    """The translation cut into len(weights) pieces in proportion to the weights, between words (each piece at least
    one word while there are enough), or between characters when it has no spaces and letters of a script written
    without them."""
    if len(weights) == 1:
        return [translation]
    words = translation.split()
    glue = " "
    if len(words) < len(weights) and len(words) == 1 and any(unicodedata.category(c) == "Lo" for c in translation):
        words, glue = list(translation), ""
    total, cuts, running = sum(weights) or 1, [], 0
    for weight in weights[:-1]:
        running += weight
        cuts.append(round(running * len(words) / total))
    if len(words) >= len(weights):  # every piece a word: push cuts apart, from the left, then from the right
        for k in range(len(cuts)):
            cuts[k] = max(cuts[k], cuts[k - 1] + 1 if k else 1)
        for k in reversed(range(len(cuts))):
            cuts[k] = min(cuts[k], (cuts[k + 1] if k + 1 < len(cuts) else len(words)) - 1)
    bounds = [0, *cuts, len(words)]
    return [glue.join(words[bounds[k] : bounds[k + 1]]) for k in range(len(weights))]


def wrap(text: str, width: int = WIDTH) -> list[str]:
    """A cue's text as lines of at most `width` characters (a longer word alone on its line): as few lines as
    greedy filling needs, as even as that many lines allow."""
    words = text.split()
    if not words:
        return []
    lines = _greedy(words, width)
    longest = max(map(len, words))
    for narrower in range(max(longest, -(-len(" ".join(words)) // len(lines))), width):
        even = _greedy(words, narrower)
        if len(even) <= len(lines):
            return even
    return lines


def _greedy(words: list[str], width: int) -> list[str]:
    lines: list[str] = []
    for word in words:
        if lines and len(lines[-1]) + 1 + len(word) <= width:
            lines[-1] += " " + word
        else:
            lines.append(word)
    return lines


def _render(cue: _Cue, lines: list[str], vtt: bool) -> list[str]:
    """The cue's new text lines, each ending as its first text line did, the last as its last did."""
    eol = lines[cue.first][len(lines[cue.first].rstrip("\r\n")) :] or "\n"
    new = []
    for part in cue.parts:
        text = " ".join(piece for piece in part.out if piece)
        wrapped = wrap(text, WIDTH - len(_TAG.sub("", part.lead)))
        wrapped = [html.escape(line, quote=False) for line in wrapped] if vtt else wrapped
        if wrapped or part.lead.strip() or part.trail:
            wrapped = wrapped or [""]
            wrapped[0] = part.lead + wrapped[0]
            wrapped[-1] += part.trail
            new += wrapped
    last = lines[cue.end - 1][len(lines[cue.end - 1].rstrip("\r\n")) :]
    return [line + eol for line in new[:-1]] + [new[-1] + last] if new else []
