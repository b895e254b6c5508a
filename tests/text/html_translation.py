"""An HTML document translated by a synchronous `translate`, through mtkit.text.markup.HtmlTranslation's two passes as
the server drives them: the tests' shorthand (test_markup, test_protected_translation), no caller of mtkit needs it."""

from __future__ import annotations

from collections.abc import Callable

from mtkit.text.markup import HtmlTranslation


def translate_html(
    document: str, translate: Callable[[list[str]], list[str]], language: str = "en", split: bool = True
) -> str:
    """Both passes with a synchronous `translate` (a list of texts to their translations, in order)."""
    job = HtmlTranslation(document, language, split)
    needed = job.second(translate(job.first) if job.first else [])
    return job.result(translate(needed) if needed else [])
