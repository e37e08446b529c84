"""Converters from published cluster traces to scenario files (spec v1); see docs/traces.md."""
