"""docs/configuration.md is written from the setting rows; the committed page must be current."""

from __future__ import annotations

from pathlib import Path

import pytest

from zonegate.broker.settings import SETTINGS
from zonegate.broker.settings_doc import render

pytestmark = pytest.mark.unit
PAGE = Path(__file__).resolve().parents[2] / "docs" / "configuration.md"


def test_the_committed_page_is_current() -> None:
    assert PAGE.read_text() == render(), (
        "docs/configuration.md is stale: run `python scripts/gen_configuration_doc.py`"
    )


def test_the_page_names_every_flag_key_and_variable() -> None:
    text = render()
    for s in SETTINGS:
        assert f"`{s.flag}`" in text and f"`{s.key}`" in text and f"`{s.env}`" in text, s.flag
