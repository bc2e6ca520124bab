"""Build `examples/basic/`, knowbench's self-checking example benchmark.

Every task is written here in Python, so the benchmark can be rebuilt and audited: running
this script again writes byte-identical `benchmark.json` and `tasks.jsonl`.

    python examples/make_basic.py [OUT_DIR]      # OUT_DIR defaults to examples/basic

Each function task is authored as its full source (`source`, the reference solution in
place); the script masks the target's body to make `prompt_code` (docstring kept, body
`...`) and cuts the target's definition out as `reference`. The tests use only the standard
library and call the target by its bare name, as they run in the program's namespace.
"""

from __future__ import annotations

import ast
import sys
import textwrap
from pathlib import Path

from knowbench.benchmark.load import write_benchmark
from knowbench.benchmark.schema import (
    ChoiceTask,
    FunctionTask,
    Manifest,
    Provenance,
    TestSpec,
    find_definition,
)
from knowbench.parsing import parse_python

DOMAINS = ["text", "datetime", "data", "algorithms"]


def code(text: str) -> str:
    """Source written indented inside this file, as the code it stands for."""
    return textwrap.dedent(text).strip("\n")


def instruction(functionality: str, inputs: str, outputs: str) -> str:
    """The Functionality / Inputs / Outputs paragraphs DomainEval's instructions use.

    Each paragraph is written wrapped in this file and stored as one line.
    """
    def paragraph(text: str) -> str:
        return " ".join(text.split())

    return (f"Functionality: {paragraph(functionality)}\n\n"
            f"Inputs: {paragraph(inputs)}\n\n"
            f"Outputs: {paragraph(outputs)}")


def mask(source: str, entry_point: str) -> tuple[str, str]:
    """(prompt_code, reference) for the target `entry_point` defined in `source`.

    prompt_code is `source` with the target's body after its docstring replaced by `...`;
    reference is the target's own definition, dedented so that it parses on its own.
    """
    target = find_definition(parse_python(source), entry_point)
    if target is None:
        raise ValueError(f"source defines no '{entry_point}'")
    first = target.body[0]
    if not (isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant)
            and isinstance(first.value.value, str)) or len(target.body) < 2:
        raise ValueError(f"'{entry_point}' needs a docstring and a body after it")
    lines = source.splitlines()
    indent = " " * target.body[1].col_offset
    assert first.end_lineno is not None and target.end_lineno is not None
    prompt = [*lines[:first.end_lineno], indent + "...", *lines[target.end_lineno:]]
    start = min([target.lineno, *(d.lineno for d in target.decorator_list)])
    reference = textwrap.dedent("\n".join(lines[start - 1:target.end_lineno]))
    return "\n".join(prompt), reference


def function_task(*, task_id: str, domain: str, framework: str, difficulty: str,
                  target_api: str, entry_point: str, context: str, source: str,
                  instruction: str, tests: dict[str, str]) -> FunctionTask:
    prompt_code, reference = mask(code(source), entry_point)
    return FunctionTask(
        task_id=task_id, domain=domain, framework=framework, difficulty=difficulty,
        instruction=instruction, prompt_code=prompt_code, entry_point=entry_point,
        context=code(context), reference=reference,
        tests=[TestSpec(name=name, code=code(body)) for name, body in tests.items()],
        target_api=target_api,
    )


# --- text ---------------------------------------------------------------------------------

SLUGIFY = function_task(
    task_id="text/slugify", domain="text", framework="re", difficulty="easy",
    target_api="re.sub", entry_point="slugify",
    context=r'''
        import re
        import unicodedata
    ''',
    source=r'''
        def slugify(text: str, separator: str = "-") -> str:
            """Turn a title into a URL slug.

            Accents are stripped (NFKD normalisation, then ASCII only), the text is lower-cased,
            every run of characters other than ASCII letters and digits becomes one `separator`,
            and separators at either end are removed.
            """
            ascii_text = unicodedata.normalize("NFKD", text).encode("ascii", "ignore").decode("ascii")
            slug = re.sub(r"[^a-z0-9]+", separator, ascii_text.lower())
            return slug.strip(separator)
    ''',
    instruction=instruction(
        """
        The function 'slugify' turns a human-readable title into a URL slug. It removes
        accents from letters, lower-cases the text, collapses every run of characters that are
        not ASCII letters or digits into a single separator, and trims separators from both ends.
        """,
        """
        'text' (str), the title to convert; 'separator' (str, default '-'), the string placed
        between words.
        """,
        """
        A str holding only lower-case ASCII letters, digits and single separators, with no
        separator at the start or the end.
        """),
    tests={"tests": r'''
        def test_basic_title():
            assert slugify("Hello, World!") == "hello-world"


        def test_accents_are_stripped():
            assert slugify("Crème Brûlée à la carte") == "creme-brulee-a-la-carte"


        def test_custom_separator_and_edges():
            title = "  --Python 3.11 -- release notes--  "
            assert slugify(title, separator="_") == "python_3_11_release_notes"
    '''},
)

WRAP_PARAGRAPHS = function_task(
    task_id="text/wrap_paragraphs", domain="text", framework="textwrap", difficulty="medium",
    target_api="textwrap.fill", entry_point="wrap_paragraphs",
    context=r'''
        import re
        import textwrap
    ''',
    source=r'''
        def wrap_paragraphs(text: str, width: int = 40) -> str:
            """Re-flow every paragraph of `text` into lines of at most `width` characters.

            Paragraphs are separated by one or more blank lines. Inside a paragraph, line breaks
            and runs of whitespace count as single spaces. The wrapped paragraphs are joined with
            exactly one blank line, and the result has no leading or trailing newline.
            """
            paragraphs = [p for p in re.split(r"\n\s*\n", text.strip()) if p.strip()]
            return "\n\n".join(textwrap.fill(" ".join(p.split()), width=width) for p in paragraphs)
    ''',
    instruction=instruction(
        """
        The function 'wrap_paragraphs' re-flows plain text paragraph by paragraph so that no
        line is longer than a given width. Paragraph breaks (blank lines) are kept; line breaks
        and repeated whitespace inside a paragraph are not.
        """,
        """
        'text' (str), paragraphs separated by one or more blank lines; 'width' (int, default
        40), the maximum line length.
        """,
        """
        A str: each paragraph wrapped to at most 'width' characters per line (words are not
        split), paragraphs separated by exactly one blank line, no leading or trailing newline.
        """),
    tests={"tests": r'''
        import unittest


        class TestWrapParagraphs(unittest.TestCase):
            def test_single_paragraph_is_wrapped(self):
                text = "The quick brown fox jumps over the lazy dog near the river bank."
                self.assertEqual(
                    wrap_paragraphs(text, width=20),
                    "The quick brown fox\njumps over the lazy\ndog near the river\nbank.",
                )

            def test_paragraphs_are_kept_apart(self):
                text = "first  line\ncontinues here\n\n\n   second paragraph  \n"
                self.assertEqual(wrap_paragraphs(text, width=20),
                                 "first line continues\nhere\n\nsecond paragraph")

            def test_every_line_fits_and_no_word_is_lost(self):
                text = ("Lorem ipsum dolor sit amet, consectetur adipiscing elit. " * 5
                        + "\n\n" + "Sed do eiusmod tempor incididunt ut labore. " * 3)
                result = wrap_paragraphs(text, width=30)
                self.assertTrue(all(len(line) <= 30 for line in result.splitlines()))
                self.assertEqual(result.split(), text.split())
                self.assertEqual(result.count("\n\n"), 1)
    '''},
)

TEMPLATE_RENDER = function_task(
    task_id="text/TemplateRenderer.render", domain="text", framework="string",
    difficulty="medium", target_api="string.Template.safe_substitute",
    entry_point="TemplateRenderer.render",
    context=r'''
        import string
    ''',
    source=r'''
        class TemplateRenderer:
            """Renders `$name` templates with defaults that a single call can override."""

            def __init__(self, **defaults: str) -> None:
                self.defaults = dict(defaults)

            def set_default(self, name: str, value: str) -> None:
                """Use `value` for `$name` whenever a call does not give one."""
                self.defaults[name] = value

            def render(self, template: str, **values: str) -> str:
                """Fill `template`, written in `string.Template` syntax (`$name`, `${name}`, `$$`).

                Values passed to this call override the defaults. A placeholder that has no value
                is left in the output unchanged instead of raising an error.
                """
                return string.Template(template).safe_substitute({**self.defaults, **values})
    ''',
    instruction=instruction(
        """
        The method 'TemplateRenderer.render' fills a template written in the standard
        library's '$'-placeholder syntax ('$name', '${name}', and '$$' for a literal dollar
        sign), using the renderer's default values overridden by the values given to the call.
        Placeholders for which no value exists stay in the text as they are.
        """,
        """
        'template' (str), the template text; '**values' (str keyword arguments), values for
        this call only. The defaults are in 'self.defaults' (a dict), set by the constructor and
        by 'set_default'.
        """,
        """
        The filled-in str. It never raises for a missing placeholder.
        """),
    tests={
        "overrides_and_defaults": r'''
            renderer = TemplateRenderer(greeting="Hello", name="world")
            assert renderer.render("$greeting, ${name}!") == "Hello, world!"
            assert renderer.render("$greeting, ${name}!", name="Ada") == "Hello, Ada!"
            renderer.set_default("greeting", "Hi")
            assert renderer.render("$greeting $name") == "Hi world"
        ''',
        "missing_and_escaped": r'''
            renderer = TemplateRenderer(item="tea")
            assert renderer.render("$item costs $$3 for $who") == "tea costs $3 for $who"
            assert renderer.render("${item}pot") == "teapot"
        ''',
    },
)

# --- datetime -----------------------------------------------------------------------------

TO_UTC = function_task(
    task_id="datetime/to_utc", domain="datetime", framework="datetime", difficulty="medium",
    target_api="datetime.datetime.astimezone", entry_point="to_utc",
    context=r'''
        from datetime import datetime, timedelta, timezone
    ''',
    source=r'''
        def to_utc(stamp: str, offset_minutes: int | None = None) -> str:
            """Convert an ISO-8601 timestamp to UTC, written in ISO format with a trailing 'Z'.

            A stamp that carries its own UTC offset keeps it. A naive stamp is taken to be
            `offset_minutes` east of UTC; without `offset_minutes` it is rejected with ValueError.
            """
            moment = datetime.fromisoformat(stamp)
            if moment.tzinfo is None:
                if offset_minutes is None:
                    raise ValueError(f"naive timestamp {stamp!r} needs offset_minutes")
                moment = moment.replace(tzinfo=timezone(timedelta(minutes=offset_minutes)))
            return moment.astimezone(timezone.utc).replace(tzinfo=None).isoformat() + "Z"
    ''',
    instruction=instruction(
        """
        The function 'to_utc' converts an ISO-8601 timestamp to the same instant in UTC. A
        timestamp with an explicit offset (such as '+02:00') is interpreted with that offset; a
        timestamp without one is interpreted with the offset given in minutes east of UTC.
        """,
        """
        'stamp' (str), an ISO-8601 date and time, with or without a UTC offset;
        'offset_minutes' (int or None, default None), the offset to assume for a stamp that has
        none (e.g. -300 for UTC-5).
        """,
        """
        A str in ISO format ('YYYY-MM-DDTHH:MM:SS', with fractional seconds only when present)
        followed by 'Z'. Raises ValueError for a stamp without offset when 'offset_minutes' is
        None.
        """),
    tests={"tests": r'''
        def test_aware_stamp_keeps_its_offset():
            assert to_utc("2024-03-10T08:30:00+02:00") == "2024-03-10T06:30:00Z"


        def test_naive_stamp_uses_offset_and_crosses_midnight():
            assert to_utc("2024-12-31T20:15:00", offset_minutes=-300) == "2025-01-01T01:15:00Z"


        def test_naive_stamp_without_offset_is_rejected():
            try:
                to_utc("2024-01-01T00:00:00")
            except ValueError:
                pass
            else:
                raise AssertionError("a naive stamp with no offset must raise ValueError")
    '''},
)

ADD_BUSINESS_DAYS = function_task(
    task_id="datetime/add_business_days", domain="datetime", framework="datetime",
    difficulty="medium", target_api="datetime.timedelta", entry_point="add_business_days",
    context=r'''
        from collections.abc import Iterable
        from datetime import date, timedelta


        def is_business_day(day: date, holidays: frozenset[date] = frozenset()) -> bool:
            """True from Monday to Friday, unless `day` is one of `holidays`."""
            return day.weekday() < 5 and day not in holidays
    ''',
    source=r'''
        def add_business_days(start: date, days: int, holidays: Iterable[date] = ()) -> date:
            """The date `days` business days after `start` (before it when `days` is negative).

            Business days are those for which `is_business_day` holds. `start` itself is not
            counted and need not be a business day; `days == 0` returns `start` unchanged.
            """
            closed = frozenset(holidays)
            step = timedelta(days=1 if days >= 0 else -1)
            current, remaining = start, abs(days)
            while remaining:
                current += step
                if is_business_day(current, closed):
                    remaining -= 1
            return current
    ''',
    instruction=instruction(
        """
        The function 'add_business_days' moves a date forward (or backward) by a number of
        business days, skipping weekends and the given holidays. It uses the helper
        'is_business_day' to decide which days count.
        """,
        """
        'start' (datetime.date), the day to count from, which itself is not counted; 'days'
        (int), how many business days to move, negative to move backward; 'holidays' (iterable
        of datetime.date, default empty), days that are never business days.
        """,
        """
        A datetime.date: the business day reached after moving 'days' business days, or
        'start' itself when 'days' is 0.
        """),
    tests={"tests": r'''
        import unittest
        from datetime import date


        class TestAddBusinessDays(unittest.TestCase):
            def test_skips_the_weekend(self):
                # Friday + 1 business day is the next Monday.
                self.assertEqual(add_business_days(date(2024, 5, 10), 1), date(2024, 5, 13))

            def test_skips_holidays_in_both_directions(self):
                holidays = [date(2024, 12, 25), date(2024, 12, 26)]
                self.assertEqual(add_business_days(date(2024, 12, 24), 1, holidays),
                                 date(2024, 12, 27))
                self.assertEqual(add_business_days(date(2024, 12, 27), -2, holidays),
                                 date(2024, 12, 23))

            def test_zero_days_returns_start(self):
                self.assertEqual(add_business_days(date(2024, 6, 1), 0), date(2024, 6, 1))
    '''},
)

LAST_WEEKDAY = function_task(
    task_id="datetime/last_weekday_of_month", domain="datetime", framework="calendar",
    difficulty="easy", target_api="calendar.monthrange", entry_point="last_weekday_of_month",
    context=r'''
        import calendar
        from datetime import date
    ''',
    source=r'''
        def last_weekday_of_month(year: int, month: int, weekday: int) -> date:
            """The date of the last `weekday` in the given month.

            `weekday` counts from Monday = 0 to Sunday = 6, as `calendar` and `date.weekday()` do;
            weekday=0 in May 2024 gives the last Monday of May 2024. Raises ValueError for a
            weekday outside 0..6.
            """
            if not 0 <= weekday <= 6:
                raise ValueError(f"weekday must be in 0..6, got {weekday}")
            _, last_day = calendar.monthrange(year, month)
            last = date(year, month, last_day)
            return date(year, month, last_day - (last.weekday() - weekday) % 7)
    ''',
    instruction=instruction(
        """
        The function 'last_weekday_of_month' finds the last occurrence of a given day of the
        week in a month, for example the last Monday of May, taking month lengths and leap
        years into account.
        """,
        """
        'year' (int) and 'month' (int, 1-12) select the month; 'weekday' (int) is the day of
        the week, Monday = 0 to Sunday = 6.
        """,
        """
        A datetime.date in that month which falls on 'weekday' and has no later such day in the
        month. Raises ValueError when 'weekday' is not in 0..6.
        """),
    tests={
        "known_dates": r'''
            from datetime import date

            assert last_weekday_of_month(2024, 5, 0) == date(2024, 5, 27)
            assert last_weekday_of_month(2024, 2, 3) == date(2024, 2, 29)
            assert last_weekday_of_month(2023, 12, 6) == date(2023, 12, 31)
        ''',
        "every_month_and_weekday": r'''
            from datetime import timedelta

            for month in range(1, 13):
                for weekday in range(7):
                    found = last_weekday_of_month(2025, month, weekday)
                    assert (found.year, found.month, found.weekday()) == (2025, month, weekday)
                    assert (found + timedelta(days=7)).month != month
        ''',
        "bad_weekday": r'''
            try:
                last_weekday_of_month(2024, 1, 7)
            except ValueError:
                pass
            else:
                raise AssertionError("weekday 7 must raise ValueError")
        ''',
    },
)

# --- data ---------------------------------------------------------------------------------

READ_CSV = function_task(
    task_id="data/read_csv_records", domain="data", framework="csv", difficulty="medium",
    target_api="csv.DictReader", entry_point="read_csv_records",
    context=r'''
        import csv
        from pathlib import Path


        def parse_cell(value: str) -> int | float | str | None:
            """'' -> None, '12' -> 12, '1.5' -> 1.5; any other text is returned unchanged."""
            if value == "":
                return None
            for kind in (int, float):
                try:
                    return kind(value)
                except ValueError:
                    pass
            return value
    ''',
    source=r'''
        def read_csv_records(path: str | Path) -> list[dict[str, int | float | str | None]]:
            """Read a UTF-8 CSV file with a header row into one dict per data row.

            Every cell is converted with `parse_cell`; a row shorter than the header gets None for
            the missing cells. Quoted fields may hold commas and line breaks, and blank lines are
            skipped.
            """
            with open(path, newline="", encoding="utf-8") as handle:
                reader = csv.DictReader(handle, restval="")
                return [{key: parse_cell(value) for key, value in row.items()} for row in reader]
    ''',
    instruction=instruction(
        """
        The function 'read_csv_records' loads a CSV file whose first row names the columns and
        returns its rows as dictionaries, converting each cell with the helper 'parse_cell'
        (numbers become int or float, empty cells become None). Quoted fields follow the usual
        CSV rules, so they may contain commas and line breaks.
        """,
        """
        'path' (str or pathlib.Path), the CSV file, encoded in UTF-8.
        """,
        """
        A list with one dict per data row, in file order, mapping each header name to the
        converted cell value; cells missing from a short row are None. Blank lines produce no
        record.
        """),
    tests={"tests": r'''
        def test_cells_are_converted(tmp_path):
            path = tmp_path / "scores.csv"
            path.write_text("name,age,score\nada,36,9.5\ngrace,,7\nlinus\n", encoding="utf-8")
            assert read_csv_records(path) == [
                {"name": "ada", "age": 36, "score": 9.5},
                {"name": "grace", "age": None, "score": 7},
                {"name": "linus", "age": None, "score": None},
            ]


        def test_quoted_fields_and_blank_lines(tmp_path):
            path = tmp_path / "notes.csv"
            path.write_text('id,note\n1,"hello, world"\n\n2,"two\nlines"\n', encoding="utf-8")
            assert read_csv_records(str(path)) == [
                {"id": 1, "note": "hello, world"},
                {"id": 2, "note": "two\nlines"},
            ]
    '''},
)

SETTINGS_TO_JSON = function_task(
    task_id="data/Settings.to_json", domain="data", framework="json", difficulty="easy",
    target_api="json.dumps", entry_point="Settings.to_json",
    context=r'''
        import json
    ''',
    source=r'''
        class Settings:
            """Nested application settings addressed by dotted keys such as 'db.port'."""

            def __init__(self, data: dict | None = None) -> None:
                self.data = dict(data or {})

            def set(self, key: str, value: object) -> None:
                """Set a dotted key, creating the sections on the way as needed."""
                *sections, last = key.split(".")
                node = self.data
                for section in sections:
                    node = node.setdefault(section, {})
                node[last] = value

            def get(self, key: str, default: object = None) -> object:
                """The value at a dotted key, or `default` when any part of the key is missing."""
                node: object = self.data
                for part in key.split("."):
                    if not isinstance(node, dict) or part not in node:
                        return default
                    node = node[part]
                return node

            def to_json(self) -> str:
                """The settings as canonical JSON text.

                Keys are sorted at every level, items are separated by ',' and ':' with no spaces,
                and non-ASCII characters are written as themselves rather than escaped, so equal
                settings always give identical text.
                """
                return json.dumps(self.data, sort_keys=True, separators=(",", ":"),
                                  ensure_ascii=False)
    ''',
    instruction=instruction(
        """
        The method 'Settings.to_json' serialises the settings held in 'self.data' (nested
        dicts of JSON-compatible values) to a canonical JSON string, so that equal settings
        always produce the same text.
        """,
        """
        No arguments besides 'self'; the settings are in 'self.data', filled by the
        constructor and by 'set'.
        """,
        """
        A str of compact JSON: object keys sorted at every level, no whitespace after ',' or
        ':', and non-ASCII characters written directly instead of as escape sequences.
        """),
    tests={"tests": r'''
        import json
        import unittest


        class TestToJson(unittest.TestCase):
            def test_canonical_form(self):
                settings = Settings({"b": 1, "a": {"z": True, "y": None}})
                self.assertEqual(settings.to_json(), '{"a":{"y":null,"z":true},"b":1}')

            def test_round_trip_keeps_unicode(self):
                settings = Settings()
                settings.set("user.name", "Zoë")
                settings.set("user.langs", ["fr", "de"])
                text = settings.to_json()
                self.assertIn("Zoë", text)
                self.assertEqual(json.loads(text), {"user": {"langs": ["fr", "de"], "name": "Zoë"}})
    '''},
)

INVENTORY_TOP = function_task(
    task_id="data/Inventory.top", domain="data", framework="collections", difficulty="medium",
    target_api="collections.Counter.most_common", entry_point="Inventory.top",
    context=r'''
        from collections import Counter
    ''',
    source=r'''
        class Inventory:
            """How many units of each item are in stock."""

            def __init__(self) -> None:
                self._counts: Counter[str] = Counter()

            def add(self, item: str, count: int = 1) -> None:
                """Add `count` units of `item`; a negative count raises ValueError."""
                if count < 0:
                    raise ValueError("count must not be negative")
                self._counts[item] += count

            def remove(self, item: str, count: int = 1) -> None:
                """Take `count` units of `item` out; raise ValueError when there are not enough."""
                if self._counts[item] < count:
                    raise ValueError(f"only {self._counts[item]} of {item!r} in stock")
                self._counts[item] -= count
                if not self._counts[item]:
                    del self._counts[item]

            def top(self, n: int) -> list[tuple[str, int]]:
                """The `n` items with the most units, as (item, count) pairs.

                Larger counts come first and equal counts are ordered by item name. Items with no
                units are never listed; fewer than `n` pairs come back when fewer items are in
                stock.
                """
                ranked = sorted(self._counts.most_common(), key=lambda pair: (-pair[1], pair[0]))
                return [(item, count) for item, count in ranked if count > 0][:n]
    ''',
    instruction=instruction(
        """
        The method 'Inventory.top' ranks the items in stock by how many units of each there
        are and returns the first 'n' of that ranking. The counts live in 'self._counts', a
        collections.Counter kept up to date by 'add' and 'remove'.
        """,
        """
        'n' (int), the largest number of items to return.
        """,
        """
        A list of at most 'n' (item, count) tuples, sorted by count from high to low and, for
        equal counts, by item name; items whose count is 0 are left out.
        """),
    tests={
        "ranking": r'''
            inventory = Inventory()
            for item, count in [("pear", 3), ("apple", 5), ("fig", 3), ("kiwi", 1)]:
                inventory.add(item, count)
            assert inventory.top(3) == [("apple", 5), ("fig", 3), ("pear", 3)]
        ''',
        "after_removal": r'''
            inventory = Inventory()
            inventory.add("tea", 4)
            inventory.add("coffee", 2)
            inventory.remove("tea", 3)
            assert inventory.top(5) == [("coffee", 2), ("tea", 1)]
            inventory.remove("coffee", 2)
            assert inventory.top(5) == [("tea", 1)]
        ''',
        "empty_items_hidden": r'''
            inventory = Inventory()
            inventory.add("salt", 0)
            inventory.add("sugar", 2)
            assert inventory.top(2) == [("sugar", 2)]
        ''',
    },
)

# --- algorithms ---------------------------------------------------------------------------

GRADE = function_task(
    task_id="algorithms/grade", domain="algorithms", framework="bisect", difficulty="easy",
    target_api="bisect.bisect_right", entry_point="grade",
    context=r'''
        import bisect
        from collections.abc import Sequence
    ''',
    source=r'''
        def grade(score: float, breakpoints: Sequence[float] = (60, 70, 80, 90),
                  grades: str = "FDCBA") -> str:
            """Map a numeric score to a letter grade.

            `breakpoints` are sorted ascending and `grades` has one more letter than there are
            breakpoints (ValueError otherwise). A score below the first breakpoint gets
            grades[0]; a score equal to a breakpoint gets the higher grade.
            """
            if len(grades) != len(breakpoints) + 1:
                raise ValueError("grades needs exactly one more letter than breakpoints")
            return grades[bisect.bisect_right(breakpoints, score)]
    ''',
    instruction=instruction(
        """
        The function 'grade' converts a numeric score into a letter grade using a table of
        ascending breakpoints, found by binary search. A score exactly on a breakpoint belongs
        to the grade above it.
        """,
        """
        'score' (int or float); 'breakpoints' (sorted sequence of numbers, default
        (60, 70, 80, 90)); 'grades' (str, default 'FDCBA'), one letter per band from lowest to
        highest, so one letter more than there are breakpoints.
        """,
        """
        A one-letter str: grades[i], where i is the number of breakpoints less than or equal
        to 'score'. Raises ValueError when 'grades' does not have len(breakpoints) + 1 letters.
        """),
    tests={"tests": r'''
        import unittest


        class TestGrade(unittest.TestCase):
            def test_default_scale(self):
                scores = (33, 59.9, 60, 77, 89, 90, 100)
                self.assertEqual([grade(s) for s in scores], ["F", "F", "D", "C", "B", "A", "A"])

            def test_custom_scale(self):
                self.assertEqual(grade(50, breakpoints=[50], grades="-+"), "+")
                self.assertEqual(grade(49, breakpoints=[50], grades="-+"), "-")

            def test_mismatched_grades_are_rejected(self):
                with self.assertRaises(ValueError):
                    grade(75, breakpoints=[50, 75], grades="AB")
    '''},
)

CHUNKED = function_task(
    task_id="algorithms/chunked", domain="algorithms", framework="itertools",
    difficulty="medium", target_api="itertools.islice", entry_point="chunked",
    context=r'''
        import itertools
        from collections.abc import Iterable, Iterator
        from typing import TypeVar

        T = TypeVar("T")
    ''',
    source=r'''
        def chunked(iterable: Iterable[T], size: int) -> Iterator[list[T]]:
            """Split `iterable` into lists of `size` items; the last list may be shorter.

            Works lazily on any iterable, infinite ones included: only the chunks asked for are
            read. A `size` below 1 raises ValueError when chunked() is called, not later.
            """
            if size < 1:
                raise ValueError("size must be at least 1")
            iterator = iter(iterable)
            return iter(lambda: list(itertools.islice(iterator, size)), [])
    ''',
    instruction=instruction(
        """
        The function 'chunked' splits any iterable into consecutive lists of a fixed size,
        lazily: it returns an iterator that reads from the input only as chunks are requested,
        so it also works on infinite iterators. An invalid size is reported immediately when
        the function is called.
        """,
        """
        'iterable' (any iterable), the items to split; 'size' (int), the number of items per
        chunk, at least 1.
        """,
        """
        An iterator of lists, each holding 'size' consecutive items except possibly the last,
        which holds the remainder; no empty list is produced. Raises ValueError at call time
        when 'size' is less than 1.
        """),
    tests={"tests": r'''
        import itertools


        def test_even_and_ragged_chunks():
            assert list(chunked(range(6), 3)) == [[0, 1, 2], [3, 4, 5]]
            assert list(chunked("abcde", 2)) == [["a", "b"], ["c", "d"], ["e"]]
            assert list(chunked([], 4)) == []


        def test_lazy_on_infinite_input():
            chunks = chunked(itertools.count(), 2)
            assert next(chunks) == [0, 1]
            assert next(chunks) == [2, 3]


        def test_bad_size_raises_at_call():
            try:
                chunked([1, 2], 0)
            except ValueError:
                pass
            else:
                raise AssertionError("size 0 must raise ValueError when chunked() is called")
    '''},
)

SHORTEST_PATH = function_task(
    task_id="algorithms/shortest_path", domain="algorithms", framework="heapq",
    difficulty="hard", target_api="heapq.heappush", entry_point="shortest_path",
    context=r'''
        import heapq
        from collections import defaultdict


        def build_graph(edges: list[tuple[str, str, float]]) -> dict[str, list[tuple[str, float]]]:
            """Adjacency lists of an undirected weighted graph: node -> [(neighbour, weight)]."""
            graph: dict[str, list[tuple[str, float]]] = defaultdict(list)
            for a, b, weight in edges:
                graph[a].append((b, weight))
                graph[b].append((a, weight))
            return dict(graph)
    ''',
    source=r'''
        def shortest_path(edges: list[tuple[str, str, float]], start: str,
                          goal: str) -> tuple[float, list[str]] | None:
            """A cheapest path between two nodes of an undirected graph with non-negative weights.

            The graph is made from `edges` with `build_graph`. Returns (total cost, [start, ...,
            goal]), or None when `goal` cannot be reached; from a node to itself the answer is
            (0, [start]).
            """
            graph = build_graph(edges)
            queue: list[tuple[float, str, list[str]]] = [(0, start, [start])]
            done: set[str] = set()
            while queue:
                cost, node, path = heapq.heappop(queue)
                if node == goal:
                    return cost, path
                if node in done:
                    continue
                done.add(node)
                for neighbour, weight in graph.get(node, []):
                    if neighbour not in done:
                        heapq.heappush(queue, (cost + weight, neighbour, path + [neighbour]))
            return None
    ''',
    instruction=instruction(
        """
        The function 'shortest_path' finds a cheapest route between two nodes of an undirected
        graph whose edges have non-negative weights (Dijkstra's algorithm with a priority
        queue). The graph is built from the edge list with the helper 'build_graph'.
        """,
        """
        'edges' (list of (node, node, weight) tuples, nodes are str and weights non-negative
        numbers); 'start' (str), the node to leave from; 'goal' (str), the node to reach.
        """,
        """
        A tuple (total cost, path) where path is the list of nodes from 'start' to 'goal'
        inclusive, or None when 'goal' is unreachable. When 'start' equals 'goal' the result
        is (0, [start]).
        """),
    tests={
        "small_graph": r'''
            edges = [("a", "b", 1), ("b", "c", 2), ("a", "c", 5), ("c", "d", 1)]
            assert shortest_path(edges, "a", "d") == (4, ["a", "b", "c", "d"])
            assert shortest_path(edges, "d", "a") == (4, ["d", "c", "b", "a"])
        ''',
        "tests": r'''
            def test_trivial_and_unreachable():
                edges = [("a", "b", 2), ("x", "y", 1)]
                assert shortest_path(edges, "a", "a") == (0, ["a"])
                assert shortest_path(edges, "a", "y") is None


            def test_prefers_a_cheaper_detour():
                edges = [("s", "t", 10), ("s", "m", 3), ("m", "n", 3), ("n", "t", 3)]
                assert shortest_path(edges, "s", "t") == (9, ["s", "m", "n", "t"])
        ''',
    },
)

# --- knowledge questions ------------------------------------------------------------------

CHOICES = [
    ChoiceTask(
        task_id="text/re-match-vs-search", domain="text", framework="re", difficulty="easy",
        instruction="Choose ONE option.",
        question="In Python's `re` module, how does `re.match(pattern, s)` differ from "
                 "`re.search(pattern, s)`?",
        options={
            "A": "`re.match` only finds a match that starts at the beginning of `s`; "
                 "`re.search` looks for a match anywhere in `s`.",
            "B": "`re.match` requires the whole of `s` to match; `re.search` accepts a match "
                 "of part of it.",
            "C": "`re.match` returns a list of every match; `re.search` returns only the first.",
            "D": "There is no difference: they are two names for the same function.",
        },
        answer=["A"],
    ),
    ChoiceTask(
        task_id="datetime/aware-datetimes", domain="datetime", framework="datetime",
        difficulty="medium", multiple=True, instruction="Choose ALL correct options.",
        question="With `from datetime import datetime, timezone`, which of these expressions "
                 "evaluate to a timezone-aware datetime (one whose `tzinfo` is not None)?",
        options={
            "A": "`datetime.now(timezone.utc)`",
            "B": "`datetime.utcnow()`",
            "C": "`datetime.fromisoformat(\"2024-05-01T12:00:00+02:00\")`",
            "D": "`datetime.fromtimestamp(0)`",
        },
        answer=["A", "C"],
    ),
    ChoiceTask(
        task_id="data/json-int-keys", domain="data", framework="json", difficulty="medium",
        instruction="Choose ONE option.",
        question="What does `json.dumps({1: 'a', 'b': None})` return?",
        options={
            "A": "`'{1: \"a\", \"b\": null}'`",
            "B": "`'{\"1\": \"a\", \"b\": null}'`",
            "C": "Nothing: it raises TypeError because JSON object keys must be strings.",
            "D": "`'{\"1\": \"a\", \"b\": None}'`",
        },
        answer=["B"],
    ),
    ChoiceTask(
        task_id="algorithms/heapq-functions", domain="algorithms", framework="heapq",
        difficulty="easy", multiple=True, instruction="Choose ALL correct options.",
        question="Which of these are functions of the standard library's `heapq` module?",
        options={
            "A": "`heapq.heappushpop`",
            "B": "`heapq.nlargest`",
            "C": "`heapq.heapsort`",
            "D": "`heapq.merge`",
            "E": "`heapq.decrease_key`",
        },
        answer=["A", "B", "D"],
    ),
]

FUNCTION_TASKS = [
    SLUGIFY, WRAP_PARAGRAPHS, TEMPLATE_RENDER,
    TO_UTC, ADD_BUSINESS_DAYS, LAST_WEEKDAY,
    READ_CSV, SETTINGS_TO_JSON, INVENTORY_TOP,
    GRADE, CHUNKED, SHORTEST_PATH,
]

MANIFEST = Manifest(
    name="basic",
    version="1",
    description=(
        "knowbench's self-checking example benchmark: 12 function tasks and 4 knowledge "
        "questions on the Python standard library (text, datetime, data, algorithms). "
        "Every reference solution passes its tests and the masked stubs fail them, so running "
        "it with the reference and null backends checks a knowbench installation end to end."
    ),
    domains=DOMAINS,
    requirements=[],
    provenance=Provenance(
        source="examples/make_basic.py",
        created=None,  # left out so that a rebuild is byte-identical
        tool="examples/make_basic.py",
        versions={"python": "3.11"},
    ),
)


def main(argv: list[str]) -> int:
    out = Path(argv[1]) if len(argv) > 1 else Path(__file__).resolve().parent / "basic"
    tasks = [*FUNCTION_TASKS, *CHOICES]
    tasks.sort(key=lambda task: (DOMAINS.index(task.domain), task.kind != "function"))
    benchmark = write_benchmark(out, MANIFEST, tasks)
    print(f"wrote {len(benchmark.tasks)} tasks to {out} ({benchmark.content_hash})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv))
