"""Cohorts, members, and what felab holds about each (export and deletion)."""
