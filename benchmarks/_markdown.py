"""A pandas DataFrame as a GitHub markdown table (no tabulate dependency for benchmarks)."""

from __future__ import annotations

import pandas as pd


def markdown_table(frame: pd.DataFrame, floatfmt: str = ".3f") -> str:
    """Render ``frame`` (no index) as a markdown table; floats with ``floatfmt``."""

    def cell(value: object) -> str:
        if isinstance(value, float):
            return format(value, floatfmt)
        return str(value)

    header = "| " + " | ".join(str(c) for c in frame.columns) + " |"
    rule = "|" + "|".join("---" for _ in frame.columns) + "|"
    body = ["| " + " | ".join(cell(v) for v in row) + " |" for row in frame.itertuples(index=False)]
    return "\n".join([header, rule, *body])
