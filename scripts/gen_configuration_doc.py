"""Rewrites docs/configuration.md from the setting rows (src/zonegate/broker/settings.py).

python scripts/gen_configuration_doc.py
"""

from __future__ import annotations

from pathlib import Path

from zonegate.broker.settings_doc import render

PAGE = Path(__file__).resolve().parents[1] / "docs" / "configuration.md"

if __name__ == "__main__":
    PAGE.write_text(render())
    print(f"wrote {PAGE}")
