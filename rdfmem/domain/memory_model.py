"""A memory as a value: its scope, title rules and slug, and the ``Memory`` model.

``rdfmem.domain.memories`` stores them (and re-exports every name here).
"""

from __future__ import annotations

import unicodedata
from datetime import datetime, timezone
from typing import Any, Literal, get_args

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from rdfmem.core.errors import InvalidValue

__all__ = [
    "SCOPES",
    "Memory",
    "Scope",
    "is_valid_title",
    "slug_to_title",
    "title_problems",
    "title_to_slug",
]

Scope = Literal["global", "project", "session"]
#: The scopes, in the order ``list`` and ``search`` visit them.
SCOPES: tuple[Scope, ...] = get_args(Scope)


# -- titles and slugs ---------------------------------------------------------------------


def _nfc(text: str) -> str:
    return unicodedata.normalize("NFC", text)


def _is_alnum(char: str) -> bool:
    """A letter (any script) or digit; a combining mark belongs to the letter it marks."""
    return char.isalnum() or unicodedata.category(char).startswith("M")


def title_problems(title: str) -> list[str]:
    """Every title rule ``title`` breaks (empty when it is valid).

    >>> for problem in title_problems("-Foo  Bar"):
    ...     print(problem)
    starts with '-', not a letter or digit
    has 2 non-alphanumeric characters in a row: '  '
    """
    if not isinstance(title, str):
        return [f"a title is text, not {type(title).__name__}"]
    text = _nfc(title)
    if not text:
        return ["is empty"]
    problems = []
    if not _is_alnum(text[0]):
        problems.append(f"starts with {text[0]!r}, not a letter or digit")
    if not _is_alnum(text[-1]):
        problems.append(f"ends with {text[-1]!r}, not a letter or digit")
    runs = []
    start = None
    for i, char in enumerate(text + "a"):
        if not _is_alnum(char):
            start = i if start is None else start
            continue
        if start is not None and i - start > 1:
            runs.append(text[start:i])
        start = None
    for run in runs:
        problems.append(f"has {len(run)} non-alphanumeric characters in a row: {run!r}")
    return problems


def is_valid_title(title: str) -> bool:
    """A title is non-empty, starts and ends with a letter or digit, and never has two
    non-alphanumeric characters in a row. Letters include non-ASCII ones.

    >>> [is_valid_title(t) for t in ["API v2.0", "don't panic", "Café", "Foo  Bar", "Foo."]]
    [True, True, True, False, False]
    """
    return not title_problems(title)


def title_to_slug(title: str) -> str:
    """Lowercase, each run of non-alphanumerics a ``-``, no ``-`` at either end.

    >>> title_to_slug("API v2.0"), title_to_slug("foo_bar"), title_to_slug("Café Central")
    ('api-v2-0', 'foo-bar', 'café-central')
    """
    out: list[str] = []
    for char in _nfc(title):
        if _is_alnum(char):
            out.append(char.lower())
        elif out and out[-1] != "-":
            out.append("-")
    return _nfc("".join(out).strip("-"))


def slug_to_title(slug: str) -> str:
    """Each ``-`` a space, each word capitalised.

    >>> slug_to_title("api-v2-0")
    'Api V2 0'
    """
    return " ".join(word.capitalize() for word in slug.split("-"))


# -- the model ----------------------------------------------------------------------------


class Memory(BaseModel):
    """One memory. ``slug`` comes from the title and the times are now when omitted.

    Fields may also be given by position, in the order ``scope, title, content, topics,
    embeddings, slug, inserted_at, updated_at, valid_from, valid_until``.

    ``valid_from`` and ``valid_until`` are optional world time: when what the memory says
    holds (from, and up to but not including), whatever time it was written at;
    ``Memories.search(..., valid_at=t)`` keeps the memories holding at ``t``. A naive
    datetime means UTC.

    >>> m = Memory("global", "API v2.0", "Use /v2 for new clients.", ["api"])
    >>> (m.slug, m.topics, m.embeddings)
    ('api-v2-0', ['api'], None)
    """

    model_config = ConfigDict(extra="forbid", validate_assignment=True)

    scope: Scope
    title: str
    content: str
    topics: list[str] = Field(default_factory=list)
    #: Left out of ``repr``: hundreds of floats that say nothing to a reader.
    embeddings: list[float] | None = Field(default=None, repr=False)
    slug: str = ""
    inserted_at: datetime = Field(default_factory=lambda: datetime.now(timezone.utc))
    updated_at: datetime = Field(default_factory=lambda: datetime.now(timezone.utc))
    valid_from: datetime | None = None
    valid_until: datetime | None = None

    def __init__(self, *args: Any, **data: Any) -> None:
        names = list(type(self).model_fields)
        if len(args) > len(names):
            raise TypeError(f"Memory takes at most {len(names)} positional fields")
        for name, value in zip(names, args, strict=False):
            if name in data:
                raise TypeError(f"Memory got {name!r} twice")
            data[name] = value
        super().__init__(**data)

    @model_validator(mode="before")
    @classmethod
    def _fill(cls, data: Any) -> Any:
        if isinstance(data, dict):
            data = {k: v for k, v in data.items() if v is not None or k == "embeddings"}
            if not data.get("slug") and isinstance(data.get("title"), str):
                data["slug"] = title_to_slug(data["title"])
            if isinstance(data.get("topics"), (list, tuple)):
                data["topics"] = list(dict.fromkeys(data["topics"]))
        return data

    @field_validator("valid_from", "valid_until")
    @classmethod
    def _utc(cls, value: datetime | None) -> datetime | None:
        if value is not None and value.tzinfo is None:
            return value.replace(tzinfo=timezone.utc)
        return value

    @model_validator(mode="after")
    def _ordered(self) -> Memory:
        start, end = self.valid_from, self.valid_until
        if start is not None and end is not None and end <= start:
            raise ValueError(
                f"valid_until ({end.isoformat()}) must be later than valid_from "
                f"({start.isoformat()}): the memory holds from valid_from up to valid_until"
            )
        return self

    def valid_at(self, moment: datetime) -> bool:
        """Whether the memory holds at ``moment`` (world time; a naive datetime is UTC):
        ``valid_from <= moment < valid_until``, an unset end being open.

        >>> from datetime import datetime
        >>> m = Memory("global", "Office", "In Ghent", valid_from=datetime(2024, 1, 1))
        >>> m.valid_at(datetime(2023, 6, 1)), m.valid_at(datetime(2025, 6, 1))
        (False, True)
        """
        if not isinstance(moment, datetime):
            raise InvalidValue(f"valid_at takes a datetime, not {moment!r}")
        if moment.tzinfo is None:
            moment = moment.replace(tzinfo=timezone.utc)
        if self.valid_from is not None and moment < self.valid_from:
            return False
        return self.valid_until is None or moment < self.valid_until
