"""Report files of every run kind: JSON, CSV, Markdown tables and PNG plots, all written atomically
(:func:`nas.core.atomic_files.write_bytes_atomic`), so a killed run never leaves half a report."""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from nas.core.atomic_files import write_bytes_atomic, write_text_atomic


def write_json(path: str | Path, data: Any) -> Path:
    """``data`` as indented JSON at ``path``."""
    write_text_atomic(path, json.dumps(data, indent=1) + "\n")
    return Path(path)


def csv_text(rows: Iterable[dict[str, Any]], fields: Sequence[str]) -> str:
    """``rows`` as CSV with the columns ``fields`` (other keys ignored)."""
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=list(fields), extrasaction="ignore", lineterminator="\n")
    writer.writeheader()
    writer.writerows(rows)
    return buffer.getvalue()


def write_csv(path: str | Path, rows: Iterable[dict[str, Any]], fields: Sequence[str]) -> Path:
    """``rows`` as CSV at ``path`` (:func:`csv_text`)."""
    write_text_atomic(path, csv_text(rows, fields))
    return Path(path)


def markdown_table(header: Sequence[str], rows: Iterable[Sequence[Any]]) -> list[str]:
    """A Markdown table, one line per row (cells already formatted)."""
    return [
        "| " + " | ".join(header) + " |",
        "|" + "---|" * len(header),
        *("| " + " | ".join(str(c) for c in row) + " |" for row in rows),
    ]


def pyplot():
    """matplotlib's pyplot on the Agg backend (no display needed)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def save_figure(fig, path: str | Path, dpi: int = 120) -> Path:
    """Save ``fig`` as PNG at ``path`` and close it."""
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=dpi)
    pyplot().close(fig)
    write_bytes_atomic(path, buffer.getvalue())
    return Path(path)
