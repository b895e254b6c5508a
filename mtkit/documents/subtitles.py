"""SubRip and WebVTT as Jobs: numbers, identifiers, timing lines (with cue settings), the header and NOTE/STYLE/REGION
blocks byte for byte. Cue texts are one flow cut into sentences (a cue boundary is no sentence end; a dialogue "-",
a second speaker's <v Name> line and a cue without words are), each sentence translated whole and spread back over
its cues by their characters, between words (a word cut in two where a translation has fewer words than the cues
it spans), then wrapped to 42-character lines, two balanced ones where they fit. Tags before a line's first word
and after its last (<i>..</i>, <v Name>, {\\an8}) stay around it when they pair up; tags among its words (<b> on a
word, <c.x>, <lang>, <00:01.000>) stay in that line, at the same share of its words, in their order. A cue whose
source had words never comes back empty: the last resort is its own text, counted. WebVTT entities are decoded."""

from __future__ import annotations

import html
import re
import unicodedata
from bisect import bisect_left, bisect_right
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
_VOICE = re.compile(rf"(?:{_TAG.pattern}|\s)*<v[\s.>]")  # a line that gives its words to a speaker
_SPLIT = re.compile(f"({_TAG.pattern})")


@dataclass
class _Part:
    """A cue's text, or one dialogue line of it: the text the flow holds, and the markup kept around it."""

    lead: str
    text: str
    trail: str
    dash: bool  # a dialogue line or a second speaker's: starts a sentence
    out: list[str] = field(default_factory=list)  # its share of each sentence's translation, in order
    inner: list[tuple[int, str]] = field(default_factory=list)  # tags among its words: (words before it, tag)


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

    counts = {"cues": len(cues), "sentences": len(texts), "spanning": 0, "cues_kept": 0}

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
        for part in parts:  # the last resort, where a translation is too short to give every line a piece
            if wordy(part.text) and not any(piece.strip() for piece in part.out):
                part.out = [part.text]
                counts["cues_kept"] += 1
        out = list(lines)
        for i in sorted(touched, reverse=True):
            out[cues[i].first : cues[i].end] = _render(cues[i], lines, vtt)
        return encode_text(bom, "".join(out))

    counts["spanning"] = sum(len(_reached(start, len(s), spans)) > 1 for s, start in sentences if wordy(s))
    return Job(texts, finish, counts)


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
    """A cue's text as parts: one, or one per dialogue line (a line that starts with "-") and per line after the
    first that starts a speaker's voice span (<v Name>: a second speaker)."""
    groups: list[list[str]] = []
    voices: list[bool] = []
    for line in lines[first:end]:
        voice = bool(groups) and vtt and _VOICE.match(line) is not None
        if not groups or _DASH.match(line) or voice:
            groups.append([])
            voices.append(voice)
        groups[-1].append(line.strip())
    return _Cue(first, end, [_part(" ".join(group), vtt, voice) for group, voice in zip(groups, voices)])


def _part(written: str, vtt: bool, voice: bool = False) -> _Part:
    lead = _LEAD.match(written).group()
    trail = _TRAIL.search(written, len(lead)).group()
    text, inner = _words_and_tags(written[len(lead) : len(written) - len(trail)], vtt)
    kept = _paired(_TAG.findall(lead), _TAG.findall(trail))
    # A tag at the line's edge whose partner stands among its words ("<c.x>yellow</c> and") is one of them.
    inner = [(0, tag) for tag in _TAG.findall(lead) if tag not in kept] + inner
    inner += [(len(text.split()), tag) for tag in _TAG.findall(trail) if tag not in kept]
    lead = "".join(piece for piece in _SPLIT.split(lead) if not _TAG.fullmatch(piece) or piece in kept)
    trail = "".join(piece for piece in _SPLIT.split(trail) if not _TAG.fullmatch(piece) or piece in kept)
    return _Part(lead, text, trail.strip(), voice or _DASH.match(written) is not None, inner=inner)


def _words_and_tags(middle: str, vtt: bool) -> tuple[str, list[tuple[int, str]]]:
    """The words of a line's middle (entities decoded in WebVTT), one space between, and each tag among them with
    the number of words that begin before it: a start tag stands before the next word (a word it cuts, whole),
    an end tag after the word before."""
    plain, marks = "", []
    for piece in _SPLIT.split(middle):
        if _TAG.fullmatch(piece):
            marks.append((len(plain), piece))
        else:
            plain += html.unescape(piece) if vtt else piece
    words = list(re.finditer(r"\S+", plain))
    starts, ends = [w.start() for w in words], [w.end() for w in words]
    inner, count = [], 0
    for at, tag in marks:  # never before the tag before it: the tags keep their order, so their nesting
        count = max(count, bisect_left(starts, at) if tag.startswith("</") else bisect_right(ends, at))
        inner.append((count, tag))
    return " ".join(plain.split()), inner


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
    one word while there are enough, the longest words cut in two while there are not), or between characters when
    it has no spaces and letters of a script written without them."""
    if len(weights) == 1:
        return [translation]
    words = translation.split()
    glue = " "
    if len(words) < len(weights) and len(words) == 1 and any(unicodedata.category(c) == "Lo" for c in translation):
        words, glue = list(translation), ""
    tight: set[int] = set()  # words[i] and words[i + 1] are the halves of one word, joined without a space
    while len(words) < len(weights) and any(len(word) > 1 for word in words):
        k = max(range(len(words)), key=lambda i: len(words[i]))
        half = len(words[k]) // 2
        while 1 < half and unicodedata.combining(words[k][half]):  # an accent stays with its letter
            half -= 1
        words[k : k + 1] = [words[k][:half], words[k][half:]]
        tight = {i + (i >= k) for i in tight} | {k}
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
    return [
        "".join(words[i] + ("" if i + 1 == high or i in tight else glue) for i in range(low, high))
        for low, high in zip(bounds, bounds[1:])
    ]


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


def _with_tags(words: list[str], inner: list[tuple[int, str]], source_words: int) -> list[str]:
    """The words with the tags that stood among the source's words attached, each at the same share of the words
    as it stood (a start tag before its word, an end tag after the word before), in their order; one more item,
    the tags after the last word, when there are any."""
    out, after = list(words), ""
    opened_at = -1  # a start tag placed before word p: what follows it at that place goes after it, not before
    for count, tag in inner:
        p = round(count * len(words) / source_words) if source_words else len(words)
        if p >= len(words):
            after += tag
        elif tag.startswith("</") and p > 0 and opened_at != p:
            out[p - 1] += tag
        else:
            out[p] = _before(out[p], words[p], tag)
            opened_at = p
    return out + [after] if after else out


def _before(placed: str, word: str, tag: str) -> str:
    """The word as placed (tags before it, the word, tags after) with `tag` added last among those before it."""
    at = placed.rfind(word)
    return placed[:at] + tag + placed[at:]


def _render(cue: _Cue, lines: list[str], vtt: bool) -> list[str]:
    """The cue's new text lines, each ending as its first text line did, the last as its last did."""
    eol = lines[cue.first][len(lines[cue.first].rstrip("\r\n")) :] or "\n"
    new = []
    for part in cue.parts:
        text = " ".join(piece for piece in part.out if piece)
        wrapped = wrap(text, WIDTH - len(_TAG.sub("", part.lead)))
        words = [html.escape(word, quote=False) if vtt else word for word in text.split()]
        tagged = _with_tags(words, part.inner, len(part.text.split()))
        at, wrapped = 0, [line.split() for line in wrapped]
        for k, line in enumerate(wrapped):  # wrap cuts between words only: the k-th line holds the next len(line)
            wrapped[k], at = " ".join(tagged[at : at + len(line)]), at + len(line)
        if len(tagged) > len(words):  # tags after the last word (or a line without words)
            if wrapped:
                wrapped[-1] += tagged[-1]
            else:
                wrapped = [tagged[-1]]
        if wrapped or part.lead.strip() or part.trail:
            wrapped = wrapped or [""]
            wrapped[0] = part.lead + wrapped[0]
            wrapped[-1] += part.trail
            new += wrapped
    last = lines[cue.end - 1][len(lines[cue.end - 1].rstrip("\r\n")) :]
    return [line + eol for line in new[:-1]] + [new[-1] + last] if new else []
