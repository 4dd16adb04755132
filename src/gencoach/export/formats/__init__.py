"""The built-in export formats: `full-history`, `chat` and `preference`."""
