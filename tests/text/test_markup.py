"""mtkit.text.markup: HTML translated by fake translators, every output's markup checked against its input's.

The fakes: upper-casing (every tag finds its place), reversing word order (tags move with their words), bracketing
(an element's translation is never inside its sentence's, so tags are placed by position), a dictionary, and a
recorder of calls. A sentence is the unit of translation: no test expects a piece of a sentence translated alone.
"""

from __future__ import annotations

import re
from html.parser import HTMLParser

import pytest

from mtkit.text import markup
from mtkit.text.html_tree import VOID
from mtkit.text.markup import HtmlTranslation, find_places
from mtkit.text.sentences import Segmented, split_sentences
from tests.text.html_translation import translate_html

MASTODON = (
    '<p>Hello <span class="h-card" translate="no"><a href="https://mastodon.social/@alice" '
    'class="u-url mention">@<span>alice</span></a></span> look at '
    '<a href="https://example.com/page?a=1&amp;b=2" target="_blank" rel="nofollow noopener" translate="no">'
    '<span class="invisible">https://</span><span class="">example.com/page?a=1&amp;b=2</span>'
    '<span class="invisible"></span></a> 😀</p><p>Second paragraph with '
    '<a href="https://mastodon.social/tags/rust" class="mention hashtag" rel="tag">#<span>rust</span></a> '
    "&amp; more.</p>"
)  # as Mastodon renders a status
DOCUMENTS = [
    MASTODON,
    "<p>The <b>big</b> dog.</p>",
    '<p>See <a href="/x"><span>the docs</span></a> now</p>',
    "<p>A <b>very <i>bold</i> move</b> here</p>",
    '<p>Line one<br>line two<br/>end <img src="a.png" alt="A &amp; B"> tail</p>',
    "<p>Hello <!-- note --> world</p><!DOCTYPE html><?pi x?>",
    "<p>open <b>bold</p> stray</i> tail",
    "<div>\n  <p>  Hello\n  world  </p>\n</div>",
    '<p>Run <code>ls -la</code> now.</p><pre>keep  this</pre><p translate="no">Not this</p>',
    "a < b &amp; c",
    "",
]
PARAGRAPH = (
    '<p>Our shop opens at nine. Read <a href="/faq">the answers</a> or call <b>our team</b> today. '
    "We close at six.</p>"
)  # as apps send it: several sentences in one block, tags inside one of them
SPANNING = "<p>One <b>two. Three</b> four.</p>"  # an element across a sentence boundary
DOCUMENTS += [PARAGRAPH, SPANNING, "<p>First. <b>Second</b> one.\nThird <i>one</i>.</p>", "One. Two.\n\nThree four"]
GERMAN = {
    "Our shop opens at nine.": "Unser Laden öffnet um neun.",
    "Read the answers or call our team today.": "Lies die Antworten oder ruf heute unser Team an.",
    "We close at six.": "Wir schließen um sechs.",
    "the answers": "die Antworten",
    "our team": "unser Team",
}


def upper(texts: list[str]) -> list[str]:
    return [text.upper() for text in texts]


def reverse_words(texts: list[str]) -> list[str]:
    return [" ".join(reversed(text.split())) for text in texts]


def bracket(texts: list[str]) -> list[str]:
    return [f"[{text}]" for text in texts]


def dictionary(pairs: dict[str, str]):
    return lambda texts: [pairs[text] for text in texts]


class Recorder:
    """Upper-cases, and keeps each call's texts."""

    def __init__(self) -> None:
        self.calls: list[list[str]] = []

    def __call__(self, texts: list[str]) -> list[str]:
        self.calls.append(list(texts))
        return upper(texts)


class Markup(HTMLParser):
    """A document's markup as html.parser reads it: tags with their attributes, comments and declarations."""

    def __init__(self, document: str) -> None:
        super().__init__()
        self.events: list[tuple] = []
        self.feed(document)
        self.close()

    def handle_starttag(self, tag: str, attrs: list) -> None:
        self.events.append(("start", tag, attrs))

    def handle_startendtag(self, tag: str, attrs: list) -> None:
        self.events.append(("startend", tag, attrs))

    def handle_endtag(self, tag: str) -> None:
        self.events.append(("end", tag))

    def handle_comment(self, data: str) -> None:
        self.events.append(("comment", data))

    def handle_decl(self, decl: str) -> None:
        self.events.append(("decl", decl))

    def handle_pi(self, data: str) -> None:
        self.events.append(("pi", data))


def open_tags(events: list[tuple]) -> tuple[list[str], list[str]]:
    """The tag stack after the events: the elements left open, and the end tags that closed nothing."""
    stack: list[str] = []
    stray: list[str] = []
    for event in events:
        if event[0] == "start" and event[1] not in VOID:
            stack.append(event[1])
        elif event[0] == "end" and event[1] in stack:
            del stack[len(stack) - 1 - stack[::-1].index(event[1]) :]
        elif event[0] == "end":
            stray.append(event[1])
    return stack, stray


def tags_only(document: str) -> str:
    """The document with the text between its tags taken out: its markup, byte for byte, in order."""
    return re.sub(r"(?:^|(?<=>))[^<]*", "", document)


def assert_same_markup(source: str, translated: str) -> None:
    events = Markup(translated).events
    assert events == Markup(source).events
    assert open_tags(events) == open_tags(Markup(source).events)


def test_a_mastodon_post_keeps_its_mention_link_hashtag_emoji_and_entities() -> None:
    job = HtmlTranslation(MASTODON)
    assert job.first == ["Hello", "look at", "Second paragraph with", "& more."]  # a paragraph never joins the next
    assert job.second(upper(job.first)) == []
    translated = job.result([])
    assert translated == MASTODON.replace("Hello", "HELLO").replace("look at", "LOOK AT").replace(
        "Second paragraph with", "SECOND PARAGRAPH WITH"
    ).replace("&amp; more.", "&amp; MORE.")
    assert_same_markup(MASTODON, translated)


def test_names_emoji_and_urls_never_reach_the_translator() -> None:
    recorder = Recorder()
    translate_html(MASTODON, recorder)
    assert len(recorder.calls) == 1  # nothing was left for a second pass
    assert not any(mark in text for text in recorder.calls[0] for mark in ("@", "#", "http", "example", "😀"))


@pytest.mark.parametrize("document", DOCUMENTS)
@pytest.mark.parametrize("translate", [upper, bracket], ids=["upper", "bracket"])
def test_every_output_has_its_input_markup(document: str, translate) -> None:
    assert_same_markup(document, translate_html(document, translate))


@pytest.mark.parametrize("document", DOCUMENTS)
def test_words_moved_by_the_translator_keep_the_tags_balanced(document: str) -> None:
    translated = translate_html(document, reverse_words)
    source, events = Markup(document).events, Markup(translated).events
    assert sorted(map(repr, events)) == sorted(map(repr, source))
    assert open_tags(events) == open_tags(source)


@pytest.mark.parametrize("split", [True, False])
def test_translating_to_itself_gives_the_document_back(split: bool) -> None:
    """Every document but those whose text the model gets otherwise: "Hello\\n  world" inside a sentence is
    "Hello world", a bare "<" comes back as "&lt;", and without split a whole run with a line break is one line."""
    for document in DOCUMENTS:
        if document not in (DOCUMENTS[7], "a < b &amp; c") and (split or "\n" not in document):
            assert translate_html(document, lambda texts: texts, split=split) == document


def test_bold_goes_around_its_word_in_the_whole_sentence_translation() -> None:
    job = HtmlTranslation("<p>The <b>big</b> dog.</p>")
    assert job.first == ["The big dog.", "big"]
    assert job.second(["Der große Hund.", "große"]) == []
    assert job.result([]) == "<p>Der <b>große</b> Hund.</p>"


def test_tags_move_with_their_words() -> None:
    assert translate_html("<p>one <b>two</b> three</p>", reverse_words) == "<p>three <b>two</b> one</p>"
    # "red" then "blue" are not found left to right in "blue and red": placed in any order
    assert translate_html("<p><b>red</b> and <i>blue</i></p>", reverse_words) == "<p><i>blue</i> and <b>red</b></p>"


def test_a_part_not_found_places_its_tags_by_position_in_the_whole_translation() -> None:
    """Changed: the sentence is no longer translated piece by piece; its tags go where its words' share puts them."""
    job = HtmlTranslation("<p>The <b>big</b> dog.</p>")
    assert job.second(bracket(job.first)) == []
    assert job.result([]) == "<p>[The <b>big</b> dog.]</p>"
    assert job.placements == {"tags": 1, "outside": 0, "matched": 0, "positional": 1, "protected": 0, "sentences": 1}
    wrong = dictionary({"The big dog.": "Der große Hund.", "big": "dicke"})  # "dicke": nowhere in the sentence
    assert translate_html("<p>The <b>big</b> dog.</p>", wrong) == "<p>Der <b>große</b> Hund.</p>"


def test_nested_inline_tags_around_one_text_move_as_one() -> None:
    job = HtmlTranslation('<p>See <a href="/x"><span>the docs</span></a> now</p>')
    assert job.first == ["See the docs now", "the docs"]
    assert (
        translate_html('<p>See <a href="/x"><span>the docs</span></a> now</p>', upper)
        == '<p>SEE <a href="/x"><span>THE DOCS</span></a> NOW</p>'
    )


def test_an_element_inside_another_is_placed_inside_its_parent() -> None:
    """Changed: mixed content no longer cuts the sentence; each element's own text is found in the sentence's."""
    recorder = Recorder()
    assert (
        translate_html("<p>A <b>very <i>bold</i> move</b> here</p>", recorder)
        == "<p>A <b>VERY <i>BOLD</i> MOVE</b> HERE</p>"
    )
    assert recorder.calls == [["A very bold move here", "very bold move", "bold"]]
    moved = translate_html("<p>A <b>very <i>bold</i> move</b> here</p>", reverse_words)
    assert moved == "<p>here <b>move <i>bold</i> very</b> A</p>"


def test_code_pre_and_translate_no_are_left_as_written() -> None:
    document = (
        "<p>Run <code>ls -la &amp;</code> now.</p><pre>keep  this\n &lt;b&gt;</pre>"
        '<div>Yes <span translate="no">no <b>never</b></span> yes</div><p translate="no">Not this</p>'
        '<script>if (a < b && c) x = "<p>";</script><style>p { color: red }</style>'
    )
    assert translate_html(document, upper) == document.replace("Run", "RUN").replace("now.", "NOW.").replace(
        "Yes", "YES"
    ).replace("> yes<", "> YES<")


def test_entities_decoded_for_the_model_and_escaped_in_its_translation() -> None:
    document = '<p title="x&amp;y">Fish &amp; chips &lt;3</p><p>&copy;&nbsp;&#169;</p>'
    job = HtmlTranslation(document)
    assert job.first == ["Fish & chips <3"]
    assert job.second(["Fisch & Pommes <3"]) == []
    assert job.result([]) == '<p title="x&amp;y">Fisch &amp; Pommes &lt;3</p><p>&copy;&nbsp;&#169;</p>'


def test_white_space_around_a_translated_text_is_kept() -> None:
    document = "<div>\n  <p>  Hello\n  world  </p>\n</div><p>&nbsp;Hi&nbsp;</p>"
    assert HtmlTranslation(document).first == ["Hello world", "Hi"]  # as a reader sees it: one line
    assert (
        translate_html(document, lambda texts: [f"  {text.upper()} " for text in texts])
        == "<div>\n  <p>  HELLO WORLD  </p>\n</div><p>&nbsp;HI&nbsp;</p>"
    )
    assert translate_html("Hello<b> world</b>", upper) == "HELLO<b> WORLD</b>"  # its space stays inside the tags


def test_void_tags_and_comments_keep_their_place_and_split_the_text() -> None:
    assert HtmlTranslation(DOCUMENTS[4]).first == ["Line one", "line two", "end", "tail"]
    assert (
        translate_html(DOCUMENTS[4], upper)
        == '<p>LINE ONE<br>LINE TWO<br/>END <img src="a.png" alt="A &amp; B"> TAIL</p>'
    )
    assert translate_html(DOCUMENTS[5], upper) == "<p>HELLO <!-- note --> WORLD</p><!DOCTYPE html><?pi x?>"


def test_emoji_split_the_text_and_stay_as_written() -> None:
    assert HtmlTranslation("<p>I ❤️ you 👍🏽</p>").first == ["I", "you"]
    assert translate_html("<p>I ❤️ you 👍🏽</p>", upper) == "<p>I ❤️ YOU 👍🏽</p>"


def test_a_plain_string_is_cut_into_sentences_and_lines() -> None:
    """Changed: a document without markup is cut into sentences, and its line breaks end them, as with format
    "text"; the white space between them comes back as written."""
    assert HtmlTranslation("  Hello world 😀 ").first == ["Hello world 😀"]  # emoji do not cut plain text
    assert translate_html("  Hello world 😀 ", upper) == "  HELLO WORLD 😀 "
    assert translate_html("a < b &amp; c", upper) == "A &lt; B &amp; C"
    document = " One. Two  too.\n\n\tThree\r\nfour "
    assert HtmlTranslation(document).first == ["One.", "Two too.", "Three", "four"]
    assert translate_html(document, upper) == " ONE. TWO TOO.\n\n\tTHREE\r\nFOUR "
    assert HtmlTranslation(document, split=False).first == ["One. Two too. Three four"]  # one line, as before


def test_a_document_without_text_comes_back_unchanged_untranslated() -> None:
    for document in ("", "   ", '<p> </p><!-- x --><br><img src="a.png">', "<p>😀 &nbsp; !</p>"):
        recorder = Recorder()
        assert translate_html(document, recorder) == document
        assert recorder.calls == []


def test_unclosed_and_stray_tags_do_not_crash_and_stay_as_they_were() -> None:
    """Changed: an element left open is placed by position (it ends where its parent does, so it never moves as a
    pair): its start tag stays before the last word, whichever word the translation puts there."""
    assert translate_html("<p>open <b>bold</p> stray</i> tail", upper) == "<p>OPEN <b>BOLD</p> STRAY</i> TAIL"
    assert translate_html("<p>unclosed <b>bold", reverse_words) == "<p>bold <b>unclosed"
    deep = "<span>" * 3000 + "deep" + "</span>" * 3000
    assert translate_html(deep, upper) == deep.replace("deep", "DEEP")


def test_the_same_text_is_asked_once_and_counts_are_checked() -> None:
    job = HtmlTranslation("<p>Yes</p><p>Yes</p>")
    assert job.first == ["Yes"]
    with pytest.raises(ValueError, match="1 translations expected, got 2"):
        job.second(["Ja", "Ja"])
    assert job.second(["Ja"]) == [] and job.result([]) == "<p>Ja</p><p>Ja</p>"


def test_find_places_left_to_right_then_in_any_order() -> None:
    assert find_places("a b a", ["a", "a"]) == [0, 4]
    assert find_places("b a", ["a", "b"]) == [2, 0]  # not left to right: any order without overlaps
    assert find_places("blue and red", ["red", "blue"]) == [9, 0]
    assert find_places("banana a", ["a"]) == [7]  # a place that cuts no word preferred
    assert find_places("ab", ["ab", "b"]) is None  # "b" only inside "ab"'s place
    assert find_places("x y", ["x", "z"]) is None
    assert find_places("x y", [""]) is None
    assert find_places("a b a", ["a"], near=[3.0]) == [4]  # of several free places, the nearest to where it was
    assert find_places("xab ab", ["ab"]) == [4]
    assert find_places("xab ab", ["ab"], whole_words=[False]) == [1]  # its source cut a word: so may its place


def test_a_repeated_word_keeps_its_tags_on_the_same_occurrence() -> None:
    document = "<p>Hello world, and <b>world</b> again.</p>"
    assert translate_html(document, lambda texts: texts) == document
    assert translate_html(document, upper) == "<p>HELLO WORLD, AND <b>WORLD</b> AGAIN.</p>"


def test_a_paragraph_is_translated_sentence_by_sentence_with_its_tags_around_their_words() -> None:
    job = HtmlTranslation(PARAGRAPH)
    sentences = ["Our shop opens at nine.", "Read the answers or call our team today.", "We close at six."]
    assert job.first == sentences + ["the answers", "our team"]  # the elements' own texts, to find their places
    assert job.second([GERMAN[text] for text in job.first]) == []
    translated = job.result([])
    assert translated == (
        '<p>Unser Laden öffnet um neun. Lies <a href="/faq">die Antworten</a> oder ruf heute <b>unser Team</b> an. '
        "Wir schließen um sechs.</p>"
    )
    assert tags_only(translated) == tags_only(PARAGRAPH)  # every tag once, in its order, byte for byte
    assert job.placements == {"tags": 2, "outside": 0, "matched": 2, "positional": 0, "protected": 0, "sentences": 3}
    assert tags_only(translate_html(PARAGRAPH, upper)) == tags_only(PARAGRAPH)


def test_a_tag_whose_words_the_translation_changed_stays_in_its_sentence_by_position() -> None:
    inflected = GERMAN | {"Read the answers or call our team today.": "Lies die Antworten oder ruf unserem Team an."}
    job = HtmlTranslation(PARAGRAPH)
    job.second([inflected[text] for text in job.first])
    translated = job.result([])
    assert translated == (
        '<p>Unser Laden öffnet um neun. Lies <a href="/faq">die Antworten</a> oder ruf <b>unserem Team</b> an. '
        "Wir schließen um sechs.</p>"
    )  # "unser Team" is not in the sentence: all its tags go by their share of its words (eight either side)
    assert job.placements["positional"] == 2 and job.placements["matched"] == 0


def test_without_split_a_run_is_one_text() -> None:
    job = HtmlTranslation(PARAGRAPH, split=False)
    assert job.first == [
        "Our shop opens at nine. Read the answers or call our team today. We close at six.",
        "the answers",
        "our team",
    ]
    assert translate_html(PARAGRAPH, upper, split=False) == translate_html(PARAGRAPH, upper)


def test_a_newline_inside_a_paragraph_is_a_space() -> None:
    document = "<p>Hello\nworld. Next\n  <b>line</b>\there.</p>"
    assert HtmlTranslation(document).first == ["Hello world.", "Next line here.", "line"]
    assert translate_html(document, upper) == "<p>HELLO WORLD. NEXT <b>LINE</b> HERE.</p>"


def test_a_tag_spanning_two_sentences_is_kept_and_neither_sentence_is_cut() -> None:
    job = HtmlTranslation(SPANNING)
    assert job.first == ["One two.", "Three four."]
    job.second(upper(job.first))
    assert job.result([]) == "<p>ONE <b>TWO. THREE</b> FOUR.</p>"
    assert job.placements["positional"] == 1
    moved = translate_html(SPANNING, reverse_words)
    assert tags_only(moved) == tags_only(SPANNING)
    assert moved == "<p>two. <b>One four</b>. Three</p>"


def test_elements_around_whole_sentences_stay_where_they_are() -> None:
    document = "<p><b>Stop.</b> Read <i>this</i> now. <em>All of it. Twice.</em></p>"
    job = HtmlTranslation(document)
    assert job.first == ["Stop.", "Read this now.", "All of it.", "Twice.", "this"]
    job.second(reverse_words(job.first))
    assert job.result([]) == "<p><b>Stop.</b> now. <i>this</i> Read <em>it. of All Twice.</em></p>"
    assert job.placements == {"tags": 3, "outside": 2, "matched": 1, "positional": 0, "protected": 0, "sentences": 4}


def test_code_and_translate_no_inside_a_sentence_come_back_byte_for_byte() -> None:
    """A protected element cuts its sentence: the model never sees it, so nothing can change it."""
    document = (
        '<p>Type <code>rm -rf &lt;dir&gt;</code> to clean up. Keep <span translate="no">Foo&amp;Bar <b>x</b></span>'
        " as it is.</p>"
    )
    recorder = Recorder()
    translated = translate_html(document, recorder)
    assert recorder.calls == [["Type", "to clean up.", "Keep", "as it is."]]
    assert translated == (
        '<p>TYPE <code>rm -rf &lt;dir&gt;</code> TO CLEAN UP. KEEP <span translate="no">Foo&amp;Bar <b>x</b></span>'
        " AS IT IS.</p>"
    )
    job = HtmlTranslation(document)
    job.second(upper(job.first))
    job.result([])
    assert job.placements["protected"] == 2 and job.placements["tags"] == 0


@pytest.mark.parametrize("document", DOCUMENTS)
@pytest.mark.parametrize("split", [True, False])
def test_reversed_words_keep_every_tag_once(document: str, split: bool) -> None:
    translated = translate_html(document, reverse_words, split=split)
    assert sorted(re.findall(r"<[^>]*>", translated)) == sorted(re.findall(r"<[^>]*>", document))


def test_a_translation_without_spaces_places_tags_by_characters() -> None:
    chinese = dictionary({"I love you.": "我爱你。", "love": "喜欢"})  # "喜欢" is not in the sentence's translation
    assert translate_html("<p>I <b>love</b> you.</p>", chinese) == "<p>我<b>爱</b>你。</p>"


def test_the_language_reaches_the_sentence_splitter(monkeypatch: pytest.MonkeyPatch) -> None:
    languages: list[str] = []

    def split(text: str, language: str) -> Segmented:
        languages.append(language)
        return split_sentences(text, language)

    monkeypatch.setattr(markup, "split_sentences", split)
    assert HtmlTranslation("<p>Hallo. Welt.</p><p>Noch.</p>", "de").first == ["Hallo.", "Welt.", "Noch."]
    assert languages == ["de", "de"]
