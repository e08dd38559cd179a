"""tests/java_peer.py without a JVM: a missing install fails loudly, naming the fix."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests import java_peer

pytestmark = pytest.mark.unit


def test_missing_jars_fail_and_say_scripts_test_installs_them(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(java_peer, "CACHE", tmp_path / "java")
    with pytest.raises(pytest.fail.Exception, match="scripts/test installs them"):
        java_peer.classpath()
