"""Names are data, never control (``bayesgrpo._text``, issue 79 part 2): escaping, CSV cells, file names."""

from __future__ import annotations

import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bayesgrpo._text import (
    CONTROL_CHARACTERS,
    bounded_file_name,
    csv_cell,
    csv_safe,
    has_control_characters,
    printable,
    printable_lines,
)

#: Run names a hostile or unlucky log holds: control characters, formulas, long CJK, plain text.
RUN_NAMES = st.one_of(
    st.text(alphabet=st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=40),
    st.text(alphabet=st.sampled_from("\x00\x07\x1b\r\n\t\x7f\x9b\u202e\u2028 [2K=+-@ab"), max_size=20),
    st.builds(lambda start, rest: start + rest, st.sampled_from("=+-@\t\r"), st.text(max_size=20)),
    st.text(alphabet=st.sampled_from("漢字中文日本語"), min_size=50, max_size=200),
)


@pytest.mark.parametrize(
    ("name", "shown"),
    [
        ("good\x1b[2K\rgood: CONTINUE", "good\\x1b[2K\\rgood: CONTINUE"),
        ("bell\x07nul\x00", "bell\\x07nul\\x00"),
        ("two\nlines\ttab", "two\\nlines\\ttab"),
        ("csi\x9b31m del\x7f", "csi\\x9b31m del\\x7f"),
        ("\u202eevil\u2028line", "\\u202eevil\\u2028line"),
        ("plain run-1 漢字 é", "plain run-1 漢字 é"),
    ],
)
def test_printable_escapes_control_characters_as_python_writes_them(name, shown):
    assert printable(name) == shown


@settings(max_examples=60, deadline=None)
@given(RUN_NAMES)
def test_a_printable_name_is_one_line_without_control_characters(name):
    shown = printable(name)
    assert not CONTROL_CHARACTERS.search(shown) and "\n" not in shown
    assert shown == name or has_control_characters(name)
    assert printable(shown) == shown  # escaping twice changes nothing more


def test_printable_lines_keeps_a_message_s_own_line_breaks():
    assert printable_lines("run 'a\x1bb':\n  no points") == "run 'a\\x1bb':\n  no points"


@pytest.mark.parametrize(
    ("value", "cell"),
    [
        ('=HYPERLINK("http://x","y")', '\'=HYPERLINK("http://x","y")'),
        ("+cmd|' /C calc'!A0", "'+cmd|' /C calc'!A0"),
        ("-2+3", "'-2+3"),
        ("@SUM(A1)", "'@SUM(A1)"),
        ("\tx", "'\tx"),
        ("\rx", "'\rx"),
        ("-0.5", "-0.5"),  # a number in text is no formula
        ("+3e-2", "+3e-2"),
        (-0.5, -0.5),
        (float("nan"), pytest.approx(float("nan"), nan_ok=True)),
        ("run-1", "run-1"),
    ],
)
def test_csv_cells_starting_as_a_formula_are_quoted(value, cell):
    assert csv_cell(value) == cell


def test_csv_safe_quotes_text_cells_and_leaves_numbers(tmp_path):
    frame = pd.DataFrame(
        {
            "run_id": pd.Series(["=1+1", "ok", None], dtype=object),
            "family": pd.Series(["@x", pd.NA, "q"], dtype="string"),
            "q50": [-0.5, 0.1, -2.0],
        }
    )
    frame.attrs["kept"] = True
    safe = csv_safe(frame)
    assert safe["run_id"].tolist()[:2] == ["'=1+1", "ok"] and safe["run_id"].isna().iloc[2]
    assert safe["family"].iloc[0] == "'@x" and pd.isna(safe["family"].iloc[1])
    assert safe["q50"].tolist() == [-0.5, 0.1, -2.0]
    assert frame["run_id"].iloc[0] == "=1+1"  # a copy: the caller's frame is untouched
    safe.to_csv(tmp_path / "f.csv", index=False)
    assert pd.read_csv(tmp_path / "f.csv")["q50"].tolist() == [-0.5, 0.1, -2.0]


@settings(max_examples=60, deadline=None)
@given(RUN_NAMES, st.sampled_from(["", ".png", ".html"]))
def test_a_file_name_is_bounded_in_bytes_and_can_be_created(tmp_path_factory, name, suffix):
    stem = "".join(c if c.isalnum() else "_" for c in name) or "run"  # as the report's anchors are
    file_name = bounded_file_name(stem, suffix=suffix)
    assert len(file_name.encode("utf-8")) <= 120 and file_name.endswith(suffix)
    if len((stem + suffix).encode("utf-8")) <= 120:
        assert file_name == stem + suffix
    (tmp_path_factory.mktemp("names") / file_name).write_bytes(b"")


def test_long_names_sharing_a_start_get_different_file_names():
    a, b = "x" * 5000 + "a", "x" * 5000 + "b"
    assert bounded_file_name(a) != bounded_file_name(b)
    assert len(bounded_file_name("漢" * 52, suffix=".png").encode()) <= 120
