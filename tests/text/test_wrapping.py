"""mtkit.text.wrapping: a help text's soft line breaks taken out so that a sentence reaches the model whole, and its
translation wrapped again at the source's width and indent; lines ended by hand stay as written."""

from __future__ import annotations

import pytest

from mtkit.text.wrapping import unwrapped

OPTION = (
    "  -n, --mindays MIN_DAYS        set minimum number of days before password\n" + " " * 32 + "change to MIN_DAYS\n"
)
PARAGRAPH = (
    "\nThe following RISC-V-specific disassembler options are supported for use\n"
    "with the -M switch (multiple options should be separated by commas):\n"
)


def test_an_options_wrapped_description_is_one_line_then_wrapped_again_at_its_column() -> None:
    found = unwrapped(OPTION)
    assert found.text == (
        "  -n, --mindays MIN_DAYS        set minimum number of days before password change to MIN_DAYS\n"
    )
    assert found.rewrapped(found.text) == OPTION
    german = "  -n, --mindays MIN_TAGE        Minimale Anzahl der Tage vor Passwortänderung auf MIN_TAGE setzen\n"
    lines = found.rewrapped(german).splitlines()
    assert lines == [
        "  -n, --mindays MIN_TAGE        Minimale Anzahl der Tage vor",
        " " * 32 + "Passwortänderung auf MIN_TAGE setzen",
    ]
    assert max(map(len, lines)) <= max(map(len, OPTION.splitlines()))


def test_a_paragraph_wrapped_at_its_width_is_joined_and_its_breaks_kept_around_it() -> None:
    found = unwrapped(PARAGRAPH)
    assert found.text == PARAGRAPH[0] + PARAGRAPH[1:-1].replace("\n", " ") + "\n"
    assert found.rewrapped(found.text) == PARAGRAPH


@pytest.mark.parametrize(
    "text",
    [
        "%s: dimension unit changed between histogram records\n%s: from '%s'\n%s: to '%s'\n",  # short lines
        "Usage: %s [options]\n\nOptions:\n",
        "  -a, --all      do not ignore entries starting with .\n  -A, --almost-all   do not list . and ..\n",
        "A line long enough to have been wrapped at seventy-two columns, and\n\t\n",  # white space only after
        "Name\tValue\n  indented  on its own line\n",
    ],
)
def test_lines_ended_by_hand_are_kept(text: str) -> None:
    found = unwrapped(text)
    assert found.text == text and not found.wraps
    assert found.rewrapped("ANYTHING\n") == "ANYTHING\n"


def test_a_translation_whose_lines_no_longer_match_is_left_as_it_is() -> None:
    found = unwrapped(PARAGRAPH)
    changed = "\nEine Zeile.\nNoch eine.\nUnd eine dritte.\n"
    assert found.rewrapped(changed) == changed
