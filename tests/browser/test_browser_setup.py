"""The browser tier's own setup: without a browser it skips loudly, naming the missing binary and the fix."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.browser.pages import chromium_or_skip

pytestmark = pytest.mark.browser


def test_no_browser_skips_with_a_loud_reason(tmp_path: Path) -> None:
    missing = tmp_path / "no-chromium"
    with pytest.raises(pytest.skip.Exception) as skipped:
        chromium_or_skip({"ASYA_CHROMIUM": str(missing)})
    reason = str(skipped.value)
    assert reason.startswith("BROWSER TESTS SKIPPED")
    assert str(missing) in reason
    assert "apt-get install chromium" in reason


def test_asya_chromium_names_the_binary(tmp_path: Path) -> None:
    binary = tmp_path / "chromium"
    binary.write_text("#!/bin/sh\n", encoding="utf-8")
    assert chromium_or_skip({"ASYA_CHROMIUM": str(binary)}) == str(binary)
