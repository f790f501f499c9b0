"""What a reader did to the records it read: the accounting that makes silent loss impossible.

Every reader counts the records it read (a line, a ``log_history`` entry, a TensorBoard event,
a table row). Each record is either kept (it contributed at least one value to the runs table)
or dropped with a reason. Repairs that keep a record (a string converted to a number, steps
sorted, an infinite value blanked) are listed too. The invariant checked by the test suite:

    records_read == records_kept + sum(issue.count for dropped issues)
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

Action = Literal["dropped", "repaired", "info"]

MAX_LOCATIONS = 5


@dataclass(frozen=True)
class ReadIssue:
    """One kind of problem met in one source, with how many records it touched and where.

    Attributes
    ----------
    source : str
        The file (or file and run name, for files holding several runs).
    kind : str
        A short machine-readable name: ``"duplicate_step"``, ``"non_numeric"``, ``"truncated"``...
    action : {"dropped", "repaired", "info"}
        ``dropped``: ``count`` records were not kept. ``repaired``: values were changed but the
        records kept. ``info``: nothing was changed, but the user should know.
    count : int
        How many records (for ``dropped``) or values (for ``repaired``/``info``) it concerns.
    locations : tuple of str
        The first few places it happened (``"line 12"``, ``"step 40"``, ``"byte 1024"``).
    detail : str
        One sentence a person can act on.
    """

    source: str
    kind: str
    action: Action
    count: int
    locations: tuple[str, ...] = ()
    detail: str = ""

    def __str__(self) -> str:
        where = ""
        if self.locations:
            shown = ", ".join(self.locations[:MAX_LOCATIONS])
            more = ", ..." if self.count > len(self.locations[:MAX_LOCATIONS]) else ""
            where = f" at {shown}{more}"
        return f"{self.source}: {self.action} {self.count} ({self.kind}){where}: {self.detail}"

    def to_dict(self) -> dict[str, object]:
        """Plain dict for JSON output."""
        return {
            "source": self.source,
            "kind": self.kind,
            "action": self.action,
            "count": self.count,
            "locations": list(self.locations),
            "detail": self.detail,
        }


@dataclass
class SourceAccount:
    """The accounting of one source (one file, or one run within a multi-run file)."""

    source: str
    format: str
    run_ids: list[str]
    records_read: int
    records_kept: int
    issues: list[ReadIssue] = field(default_factory=list)

    @property
    def records_dropped(self) -> int:
        """Records not kept, summed over the ``dropped`` issues."""
        return sum(issue.count for issue in self.issues if issue.action == "dropped")

    @property
    def balanced(self) -> bool:
        """True when every record read is either kept or reported dropped."""
        return self.records_read == self.records_kept + self.records_dropped

    def to_dict(self) -> dict[str, object]:
        """Plain dict for JSON output."""
        return {
            "source": self.source,
            "format": self.format,
            "run_ids": list(self.run_ids),
            "records_read": self.records_read,
            "records_kept": self.records_kept,
            "records_dropped": self.records_dropped,
            "issues": [issue.to_dict() for issue in self.issues],
        }


@dataclass
class ReadReport:
    """The accounting of one ``load_runs`` call: one ``SourceAccount`` per source read."""

    sources: list[SourceAccount] = field(default_factory=list)
    notes: list[ReadIssue] = field(default_factory=list)

    @property
    def issues(self) -> list[ReadIssue]:
        """Every issue of every source, then the call-level notes."""
        return [issue for account in self.sources for issue in account.issues] + list(self.notes)

    @property
    def records_read(self) -> int:
        """Records read from every source."""
        return sum(a.records_read for a in self.sources)

    @property
    def records_kept(self) -> int:
        """Records kept from every source."""
        return sum(a.records_kept for a in self.sources)

    @property
    def records_dropped(self) -> int:
        """Records dropped from every source."""
        return sum(a.records_dropped for a in self.sources)

    @property
    def balanced(self) -> bool:
        """True when every source accounts for every record it read."""
        return all(a.balanced for a in self.sources)

    @property
    def has_changes(self) -> bool:
        """True when anything was dropped or repaired (worth a warning)."""
        return any(issue.action != "info" for issue in self.issues)

    def extend(self, other: ReadReport) -> None:
        """Append another report's sources and notes to this one."""
        self.sources.extend(other.sources)
        self.notes.extend(other.notes)

    def repair_line(self) -> str | None:
        """What was repaired or dropped, in one line (``2 no_values dropped, 1 non_numeric
        repaired; kept 27 of 29``), or None when nothing was.
        """
        counts: dict[str, int] = {}
        for issue in self.issues:
            if issue.action != "info":
                name = f"{issue.kind} {issue.action}"
                counts[name] = counts.get(name, 0) + issue.count
        if not counts:
            return None
        shown = ", ".join(f"{count} {name}" for name, count in sorted(counts.items()))
        return f"{shown}; kept {self.records_kept} of {self.records_read}"

    def summary(self) -> str:
        """A short multi-line text: totals, then one line per issue."""
        lines = [
            f"read {self.records_read} records from {len(self.sources)} source(s): "
            f"kept {self.records_kept}, dropped {self.records_dropped}"
        ]
        lines.extend("  " + str(issue) for issue in self.issues)
        return "\n".join(lines)

    def to_dict(self) -> dict[str, object]:
        """Plain dict for JSON output."""
        return {
            "records_read": self.records_read,
            "records_kept": self.records_kept,
            "records_dropped": self.records_dropped,
            "sources": [a.to_dict() for a in self.sources],
            "notes": [n.to_dict() for n in self.notes],
        }

    def __str__(self) -> str:
        return self.summary()
