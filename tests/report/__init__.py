"""Tests of the HTML report (specverify.report)."""
