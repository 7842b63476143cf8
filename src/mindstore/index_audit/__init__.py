"""The index audit: every query mindstore sends, planned against the indexes it declares."""
