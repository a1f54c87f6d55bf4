"""Validate a JUnit XML document against the common schema (tests/reporting/junit-10.xsd)."""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

XSD = Path(__file__).parent / "reporting" / "junit-10.xsd"


@lru_cache(maxsize=1)
def _schema():
    import xmlschema

    return xmlschema.XMLSchema(str(XSD))


def problems(xml_text: str) -> list[str]:
    """One line per schema violation (empty when the document is valid)."""
    return [f"{e.path}: {e.reason}" for e in _schema().iter_errors(xml_text)]
